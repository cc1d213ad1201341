#include "traces/proto_scan.h"

#include <algorithm>

namespace fragsim {

namespace {

constexpr size_t kMaxDepth = 100;  // protobuf's default recursion limit

// A varint at p (< end): its value, p moved past it; false when malformed or truncated.
bool varint(const unsigned char*& p, const unsigned char* end, std::uint64_t* v) {
  std::uint64_t r = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    unsigned char b = *p++;
    r |= static_cast<std::uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

}  // namespace

void count_proto_objects(std::string_view wire, const std::vector<ProtoType>& schema, std::uint32_t root,
                         LimitCounter& objects) {
  struct Frame {
    const unsigned char *p, *end;
    std::uint32_t type;
  };
  auto begin = reinterpret_cast<const unsigned char*>(wire.data());
  std::vector<Frame> stack{{begin, begin + wire.size(), root}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.p >= f.end) {
      stack.pop_back();
      continue;
    }
    const ProtoType& t = schema[f.type];
    std::uint64_t tag = 0, len = 0;
    if (!varint(f.p, f.end, &tag)) {
      stack.pop_back();
      continue;
    }
    auto field = static_cast<std::uint32_t>(tag >> 3);
    bool repeated_scalar =
        std::find(t.repeated_scalars.begin(), t.repeated_scalars.end(), field) != t.repeated_scalars.end();
    switch (tag & 7) {
      case 0:  // varint
        if (!varint(f.p, f.end, &len)) f.p = f.end;
        if (repeated_scalar) objects.spend(1);
        break;
      case 1:  // 64-bit
        f.p = static_cast<size_t>(f.end - f.p) < 8 ? f.end : f.p + 8;
        if (repeated_scalar) objects.spend(1);
        break;
      case 5:  // 32-bit
        f.p = static_cast<size_t>(f.end - f.p) < 4 ? f.end : f.p + 4;
        if (repeated_scalar) objects.spend(1);
        break;
      case 2: {  // length-delimited: a message, a packed run, or bytes
        if (!varint(f.p, f.end, &len) || len > static_cast<std::uint64_t>(f.end - f.p)) {
          f.p = f.end;
          break;
        }
        const unsigned char* body = f.p;
        f.p += len;
        if (repeated_scalar) {
          std::uint64_t n = 0;
          for (const unsigned char* q = body; q < f.p; ++q) n += !(*q & 0x80);
          objects.spend(n);
          break;
        }
        auto child =
            std::find_if(t.messages.begin(), t.messages.end(), [&](const auto& m) { return m.first == field; });
        if (child == t.messages.end()) break;
        objects.spend(1);
        if (stack.size() < kMaxDepth) stack.push_back({body, body + len, child->second});  // f may move
        break;
      }
      default:  // groups (deprecated) and invalid wire types: the parse rejects them
        stack.pop_back();
        break;
    }
  }
}

const std::vector<ProtoType>& xspace_schema() {
  // XSpace, XPlane, XLine, XEvent, XStat, event_metadata entry, stat_metadata entry,
  // XEventMetadata, XStatMetadata (traces/proto/xplane.proto).
  static const std::vector<ProtoType> kSchema = {
      {{{1, 1}}, {}},                          // 0 XSpace: planes
      {{{3, 2}, {4, 5}, {5, 6}, {6, 4}}, {}},  // 1 XPlane: lines, event_metadata, stat_metadata, stats
      {{{4, 3}}, {}},                          // 2 XLine: events
      {{{4, 4}}, {}},                          // 3 XEvent: stats
      {{}, {}},                                // 4 XStat
      {{{2, 7}}, {}},                          // 5 map entry: value XEventMetadata
      {{{2, 8}}, {}},                          // 6 map entry: value XStatMetadata
      {{{5, 4}}, {6}},                         // 7 XEventMetadata: stats; child_id
      {{}, {}},                                // 8 XStatMetadata
  };
  return kSchema;
}

const std::vector<ProtoType>& hlo_schema() {
  // traces/proto/hlo.proto
  static const std::vector<ProtoType> kSchema = {
      {{{1, 1}, {3, 7}}, {}},            // 0 HloProto: hlo_module, buffer_assignment
      {{{3, 2}}, {}},                    // 1 HloModuleProto: computations
      {{{2, 3}}, {}},                    // 2 HloComputationProto: instructions
      {{{3, 4}}, {}},                    // 3 HloInstructionProto: shape
      {{{4, 4}, {5, 5}}, {3}},           // 4 ShapeProto: tuple_shapes, layout; dimensions
      {{{6, 6}}, {1}},                   // 5 LayoutProto: tiles; minor_to_major
      {{}, {1}},                         // 6 TileProto: dimensions
      {{{1, 8}, {3, 10}, {4, 12}}, {}},  // 7 BufferAssignmentProto: logical_buffers, buffer_allocations, traces
      {{{3, 9}}, {}},                    // 8 LogicalBufferProto: defined_at
      {{}, {3}},                         // 9 Location: shape_index
      {{{9, 11}}, {}},                   // 10 BufferAllocationProto: assigned
      {{}, {}},                          // 11 Assigned
      {{{1, 13}}, {}},                   // 12 HeapSimulatorTrace: events
      {{}, {}},                          // 13 HeapSimulatorTrace.Event
  };
  return kSchema;
}

}  // namespace fragsim

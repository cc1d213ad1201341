#include "traces/xla_modules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/stubs/logging.h>

#include <filesystem>
#include <map>
#include <set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "traces/hlo_util.h"
#include "traces/xprof_capture.h"
#include "traces/xprof_space.h"

namespace fragsim {

namespace {

constexpr std::uint64_t kMaxBytes = 4ULL << 30;

struct NamedModule {
  std::string name;  // capture event name, or the module's own
  hlo::HloProto proto;
  bool gpu = false;  // from a capture with GPU device planes
  std::string tpu;   // the TPU model its device planes name ("TPU v6 Lite"), for a TPU capture
};

std::vector<NamedModule> load_modules(const std::string& path) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  google::protobuf::SetLogHandler(nullptr);
  LimitCounter objects(Limit::kObjects, path, input_bytes(path));
  std::vector<NamedModule> out;
  if (is_hlo_proto_path(path)) {
    hlo::HloProto p = parse_hlo(read_input(path, kMaxBytes), path, &objects);
    out.push_back({sanitize_utf8(p.hlo_module().name()), std::move(p), false, {}});
    return out;
  }
  for (const auto& file : xprof_capture_files(path)) {
    xprof::XSpace space = load_xspace(file, objects);
    bool gpu = false;
    std::string tpu;
    for (const auto& plane : space.planes()) {
      gpu = gpu || plane.name().rfind("/device:GPU:", 0) == 0;
      if (plane.name().rfind("/device:TPU:", 0) != 0) continue;
      for (const auto& st : plane.stats())
        if (auto it = plane.stat_metadata().find(st.metadata_id());
            it != plane.stat_metadata().end() && it->second.name() == "device_type_string" && st.has_str_value())
          tpu = sanitize_utf8(st.str_value());
    }
    for (auto& [name, proto] : capture_modules(space, file, &objects))
      out.push_back({name, std::move(proto), gpu, tpu});
  }
  return out;
}

HloModuleSummary summarize(const NamedModule& m) {
  HloModuleSummary s;
  s.name = m.name;
  s.module_name = sanitize_utf8(m.proto.hlo_module().name());
  const auto& ba = m.proto.buffer_assignment();
  s.logical_buffers = static_cast<std::uint64_t>(ba.logical_buffers_size());
  s.allocations = static_cast<std::uint64_t>(ba.buffer_allocations_size());
  s.heap_traces = static_cast<std::uint64_t>(ba.heap_simulator_traces_size());
  for (const auto& t : ba.heap_simulator_traces()) s.heap_events += static_cast<std::uint64_t>(t.events_size());
  for (const auto& a : ba.buffer_allocations())
    s.largest_allocation_bytes = std::max<std::uint64_t>(s.largest_allocation_bytes, a.size() > 0 ? a.size() : 0);
  return s;
}

// Where XLA puts buffers inside an allocation of this memory space (color): XLA:GPU aligns every
// buffer to 256 bytes (the offsets of GPU captures are multiples of it); XLA:TPU places HBM
// buffers (color 0) on 16 KiB boundaries — the v6e capture's jit_f puts its 32-byte buffers
// 16,384 B apart, its 5 GiB ones at 96 KiB + k x 5 GiB — and SMEM (color 2) buffers on 4-byte
// words (its u32 scalars at 0, 4, 8). 1 where nothing is known.
std::uint64_t buffer_alignment(const NamedModule& m, std::int64_t color) {
  if (m.gpu) return 256;
  if (!m.tpu.empty()) return color == 0 ? 16384 : color == 2 ? 4 : 1;
  return 1;
}

}  // namespace

bool is_hlo_proto_path(const std::string& path) {
  return ends_with(path, ".hlo_proto.pb") || ends_with(path, ".hlo_proto.pb.zst");
}

std::vector<HloModuleSummary> list_hlo_modules(const std::string& path) {
  std::vector<HloModuleSummary> v;
  for (const auto& m : load_modules(path)) v.push_back(summarize(m));
  return v;
}

std::unique_ptr<TraceReader> make_hlo_module_reader(const std::string& path, const std::string& module) {
  std::vector<NamedModule> all = load_modules(path);
  std::vector<const NamedModule*> hits;
  for (const auto& m : all)
    if (m.name == module) hits = {&m};
  if (hits.empty())
    for (const auto& m : all)
      if (sanitize_utf8(m.proto.hlo_module().name()) == module) hits.push_back(&m);
  if (hits.size() != 1) {
    std::vector<std::string_view> names;
    for (const auto& m : all) names.push_back(m.name);
    throw InputError(fmt::format("--module: {} '{}' in {}{} (modules: {})",
                                 hits.empty() ? "no module" : "several modules named", module, path,
                                 hits.empty() ? did_you_mean(module, names) : "", fmt::join(names, ", ")));
  }
  const hlo::HloProto& p = hits.front()->proto;
  const auto& ba = p.buffer_assignment();
  // Instructions by id, for names and shapes; logical buffers by id.
  std::map<std::int64_t, const hlo::HloInstructionProto*> instr;
  for (const auto& c : p.hlo_module().computations())
    for (const auto& i : c.instructions()) instr[i.id()] = &i;
  std::map<std::int64_t, const hlo::LogicalBufferProto*> buffers;
  for (const auto& b : ba.logical_buffers()) buffers[b.id()] = &b;
  std::vector<Event> events;
  nlohmann::json traces = nlohmann::json::array();
  std::uint64_t t = 0;
  // Where XLA put each buffer: (allocation, offset).
  std::map<std::int64_t, std::pair<int, std::int64_t>> placed;  // buffer → (allocation's position, offset)
  for (int i = 0; i < ba.buffer_allocations_size(); ++i)
    for (const auto& as : ba.buffer_allocations(i).assigned()) placed[as.logical_buffer_id()] = {i, as.offset()};
  // What this builds is bounded by the input: every event (and each pass over an allocation's
  // buffers) is an object, every name copied into one counts as strings (sim/base/limits.h).
  LimitCounter work(Limit::kObjects, path, input_bytes(path)), names(Limit::kStrings, path, input_bytes(path));
  for (int k = 0; k < ba.heap_simulator_traces_size(); ++k) {
    const auto& tr = ba.heap_simulator_traces(k);
    // The allocation this trace planned: the one holding most of its buffers (the trace's own
    // buffer_allocation_index does not always name it in real records).
    // Ties go to the first in the module's order (not to whichever object memory put first: the
    // same file must give the same trace every time it is read, as offline policies read it twice).
    std::map<int, int> votes;  // allocation's position → buffers of this trace it holds
    for (const auto& ev : tr.events())
      if (ev.kind() == hlo::HeapSimulatorTrace::Event::ALLOC)
        if (auto it = placed.find(ev.buffer_id()); it != placed.end()) ++votes[it->second.first];
    int best = -1;
    for (const auto& [pos, n] : votes)
      if (best < 0 || n > votes[best]) best = pos;
    const hlo::BufferAllocationProto* alloc = best < 0 ? nullptr : &ba.buffer_allocations(best);
    std::map<std::int64_t, std::int64_t> offset;  // buffer → XLA's offset in the allocation
    if (alloc) {
      work.spend(static_cast<std::uint64_t>(alloc->assigned_size()));
      for (const auto& as : alloc->assigned()) offset[as.logical_buffer_id()] = as.offset();
    }
    traces.push_back({{"device", k},
                      {"buffer_allocation_index", alloc ? alloc->index() : tr.buffer_allocation_index()},
                      {"allocation_bytes", alloc ? alloc->size() : 0},
                      {"color", alloc ? alloc->color() : 0},
                      {"alignment_bytes", buffer_alignment(*hits.front(), alloc ? alloc->color() : 0)},
                      {"events", tr.events_size()}});
    std::map<std::int64_t, std::int64_t> canonical;  // sharing buffer → canonical
    std::map<std::int64_t, int> holders;             // canonical → live sharers + itself
    std::set<std::int64_t> live;
    // The buffer whose memory `id` uses: the end of its SHARE_WITH chain. The walk compresses the
    // chain it took (each buffer then points at the end), so repeated walks stay short; a chain
    // longer than the buffers that share is a cycle (a malformed module: XLA's canonical buffer
    // exists before anything shares it).
    auto root_of = [&](std::int64_t id) {
      std::int64_t r = id;
      for (size_t hops = 0;; ++hops) {
        auto it = canonical.find(r);
        if (it == canonical.end()) break;
        if (hops > canonical.size())
          throw InputError(
              fmt::format("{}: module {}: SHARE_WITH of buffer {} forms a cycle", path, hits.front()->name, id));
        r = it->second;
      }
      for (std::int64_t x = id; x != r;) {
        auto it = canonical.find(x);
        x = it->second;
        it->second = r;
      }
      return r;
    };
    auto emit_free = [&](std::int64_t id) {
      work.spend(2);  // an Event: about two objects' memory
      Event e;
      e.op = Op::kFree;
      e.id = AllocId(static_cast<std::uint64_t>(id));
      e.device = static_cast<std::uint32_t>(k);
      e.t = Tick(t++);
      e.present = key::kId | key::kDevice | key::kT;
      events.push_back(std::move(e));
      live.erase(id);
    };
    std::set<std::int64_t> in_trace;
    for (const auto& ev : tr.events()) in_trace.insert(ev.buffer_id());
    std::vector<std::pair<std::int64_t, std::int64_t>> outside;  // (offset, buffer) XLA placed outside the simulation
    if (alloc)
      for (const auto& as : alloc->assigned())  // already paid for above
        if (!in_trace.count(as.logical_buffer_id())) outside.push_back({as.offset(), as.logical_buffer_id()});
    std::sort(outside.begin(), outside.end());
    auto emit_alloc = [&](std::int64_t id, const std::string& fallback_name) {
      auto bit = buffers.find(id);
      if (bit == buffers.end())
        throw InputError(fmt::format("{}: module {}: ALLOC of unknown buffer {}", path, hits.front()->name, id));
      const auto& b = *bit->second;
      work.spend(2);  // an Event: about two objects' memory
      Event e;
      e.op = Op::kAlloc;
      e.id = AllocId(static_cast<std::uint64_t>(id));
      e.size = static_cast<Bytes>(std::max<std::int64_t>(b.size(), 0));
      e.device = static_cast<std::uint32_t>(k);
      e.t = Tick(t++);
      e.present = key::kId | key::kSize | key::kDevice | key::kT;
      if (auto o = offset.find(id); o != offset.end() && o->second >= 0) {
        e.addr = Addr(static_cast<std::uint64_t>(o->second));
        e.present |= key::kAddr;
      }
      std::string name = fallback_name;
      if (auto in = instr.find(b.defined_at().instruction_id()); in != instr.end()) {
        name = sanitize_utf8(in->second->name());
        if (const hlo::ShapeProto* sh = shape_at(in->second->shape(), b.defined_at().shape_index())) {
          std::vector<std::uint64_t> dims;
          Dtype dt = array_of(*sh, &dims);
          Bytes want = 0;
          if (dt != Dtype::kNone && unpadded_bytes(dims, dt, &want) && want == e.size) {
            e.shape = dims;
            e.dtype = dt;
            e.present |= key::kShape | key::kDtype;
          }
        }
      }
      if (!b.defined_at().shape_index().empty())
        name += fmt::format("{{{}}}", fmt::join(b.defined_at().shape_index(), ","));
      names.spend(name.size());
      if (!name.empty()) e.name = name, e.present |= key::kName;
      events.push_back(std::move(e));
      live.insert(id);
      holders[id] += 1;
    };
    // Placed by XLA before it simulated the rest: pre_trace allocs at their offsets.
    for (const auto& [off, id] : outside) {
      emit_alloc(id, "(assigned outside the heap simulation)");
      events.back().present |= key::kPreTrace;
    }
    for (const auto& ev : tr.events()) {
      std::int64_t id = ev.buffer_id();
      if (id < 0) throw InputError(path + ": module " + hits.front()->name + ": a negative buffer id");
      if (ev.kind() == hlo::HeapSimulatorTrace::Event::SHARE_WITH) {
        std::int64_t c = root_of(ev.share_with_canonical_id());
        if (c == id)
          throw InputError(fmt::format("{}: module {}: buffer {} shares its memory with itself (a SHARE_WITH cycle)",
                                       path, hits.front()->name, id));
        canonical[id] = c;  // c is a chain's end: no chain ever comes back (no cycle can form)
        ++holders[c];
        continue;
      }
      if (ev.kind() == hlo::HeapSimulatorTrace::Event::FREE) {
        std::int64_t c = canonical.count(id) ? canonical[id] : id;
        if (--holders[c] <= 0 && live.count(c)) emit_free(c);
        continue;
      }
      emit_alloc(id, sanitize_utf8(ev.instruction_name()));  // ALLOC
    }
    for (auto id : std::vector<std::int64_t>(live.begin(), live.end())) emit_free(id);  // live out
  }
  nlohmann::json header = {{"fragsim_trace", 1},
                           {"source", "xla-hlo"},
                           {"module", hits.front()->name},
                           {"module_name", sanitize_utf8(p.hlo_module().name())},
                           {"heap_traces", traces},
                           {"note", "one device per heap-simulator trace; addr = XLA's offset in its allocation"}};
  // static-heap takes each heap trace's alignment_bytes as its default alignment there (above).
  if (hits.front()->gpu) header["alignment_bytes"] = 256;
  // Sizes are XLA's own on-device sizes (a TPU module's are padded already): not padded again.
  header["device_sizes"] = true;
  if (std::string preset = tpu_preset(hits.front()->tpu); !preset.empty())
    header["recorded_hardware"] = {
        {"preset", preset},
        {"basis", fmt::format("the module was compiled for the capture's '{}'", hits.front()->tpu)}};
  return make_event_reader(path + " [" + hits.front()->name + "]", std::move(events), std::move(header));
}

}  // namespace fragsim

namespace fragsim {

namespace {

// The kind of a buffer allocation, as XLA's memory viewer names them.
std::string allocation_kind(const hlo::BufferAllocationProto& a) {
  if (a.is_entry_computation_parameter()) return a.maybe_live_out() ? "parameter (aliased to an output)" : "parameter";
  if (a.maybe_live_out()) return "output";
  if (a.is_constant()) return "constant";
  if (a.is_thread_local()) return "thread-local";
  return "temporary";
}

// "(8,128)(2,1)": a layout's tiles as XLA prints them.
std::string tiles_text(const hlo::LayoutProto& l) {
  std::string s;
  for (const auto& t : l.tiles()) s += fmt::format("({})", fmt::join(t.dimensions(), ","));
  return s;
}

ModuleView describe(const NamedModule& m, size_t max_buffers) {
  ModuleView v;
  v.name = m.name;
  v.module_name = sanitize_utf8(m.proto.hlo_module().name());
  const auto& ba = m.proto.buffer_assignment();
  std::map<std::int64_t, const hlo::HloInstructionProto*> instr;
  for (const auto& c : m.proto.hlo_module().computations())
    for (const auto& i : c.instructions()) instr[i.id()] = &i;
  // Program order: each buffer's ALLOC (or SHARE_WITH) and FREE in its heap trace.
  struct Place {
    std::int64_t trace = -1, order = -1, end = -1;
    bool shares = false;
  };
  std::map<std::int64_t, Place> place;
  for (int k = 0; k < ba.heap_simulator_traces_size(); ++k) {
    const auto& tr = ba.heap_simulator_traces(k);
    v.heap_events += static_cast<std::uint64_t>(tr.events_size());
    for (int j = 0; j < tr.events_size(); ++j) {
      const auto& ev = tr.events(j);
      Place& p = place[ev.buffer_id()];
      if (ev.kind() == hlo::HeapSimulatorTrace::Event::FREE) {
        p.end = j;
        continue;
      }
      if (p.order < 0) p.trace = k, p.order = j;
      if (ev.kind() == hlo::HeapSimulatorTrace::Event::SHARE_WITH) p.shares = true;
    }
  }
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> assigned;  // buffer → (allocation index, offset)
  std::map<std::int64_t, std::map<std::int64_t, int>> votes;               // allocation → heap trace → its buffers
  for (const auto& a : ba.buffer_allocations()) {
    for (const auto& as : a.assigned()) {
      assigned[as.logical_buffer_id()] = {a.index(), as.offset()};
      if (auto p = place.find(as.logical_buffer_id()); p != place.end() && p->second.trace >= 0)
        ++votes[a.index()][p->second.trace];
    }
  }
  std::map<std::int64_t, std::int64_t> trace_of;  // allocation → the heap trace that planned it
  for (const auto& [a, by] : votes) {
    std::int64_t best = -1;
    for (const auto& [t, n] : by)
      if (best < 0 || n > by.at(best)) best = t;
    trace_of[a] = best;
  }
  std::map<std::int64_t, const hlo::BufferAllocationProto*> alloc_by_index;
  for (const auto& a : ba.buffer_allocations()) {
    alloc_by_index[a.index()] = &a;
    v.allocations.push_back({a.index(), static_cast<std::uint64_t>(std::max<std::int64_t>(a.size(), 0)),
                             allocation_kind(a), trace_of.count(a.index()) ? trace_of[a.index()] : -1});
  }
  for (const auto& b : ba.logical_buffers()) {
    if (v.buffers.size() >= max_buffers) {
      v.truncated = true;
      break;
    }
    ModuleBuffer x;
    x.id = b.id();
    x.padded = static_cast<std::uint64_t>(std::max<std::int64_t>(b.size(), 0));
    if (auto in = instr.find(b.defined_at().instruction_id()); in != instr.end()) {
      x.name = sanitize_utf8(in->second->name());
      if (const hlo::ShapeProto* sh = shape_at(in->second->shape(), b.defined_at().shape_index())) {
        std::vector<std::uint64_t> dims;
        if (Dtype dt = array_of(*sh, &dims); dt != Dtype::kNone) {
          x.shape = fmt::format("{}[{}]", dtype_name(dt), fmt::join(dims, ","));
          Bytes want = 0;
          if (unpadded_bytes(dims, dt, &want)) x.logical = want;
        }
        x.tile = tiles_text(sh->layout());
      }
    } else {
      x.name = sanitize_utf8(b.defined_at().instruction_name());
    }
    if (!b.defined_at().shape_index().empty())
      x.name += fmt::format("{{{}}}", fmt::join(b.defined_at().shape_index(), ","));
    const Place p = place.count(b.id()) ? place[b.id()] : Place();
    x.order = p.order;
    x.end = p.end;
    x.heap_trace = p.trace;
    x.kind = "temporary";
    if (auto as = assigned.find(b.id()); as != assigned.end()) {
      x.allocation = as->second.first;
      x.offset = as->second.second;
      x.kind = allocation_kind(*alloc_by_index[x.allocation]);
      if (x.heap_trace < 0 && trace_of.count(x.allocation)) x.heap_trace = trace_of[x.allocation];
    }
    if (p.shares) x.kind = "alias (shares another buffer's memory)";
    v.buffers.push_back(std::move(x));
  }
  std::stable_sort(v.buffers.begin(), v.buffers.end(), [](const ModuleBuffer& a, const ModuleBuffer& b) {
    return a.heap_trace != b.heap_trace ? a.heap_trace < b.heap_trace : a.order < b.order;
  });
  return v;
}

}  // namespace

std::vector<ModuleView> describe_hlo_modules(const std::string& path, size_t max_buffers) {
  std::vector<ModuleView> out;
  for (const auto& m : load_modules(path)) out.push_back(describe(m, max_buffers));
  return out;
}

}  // namespace fragsim

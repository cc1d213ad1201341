#include "traces/hlo_util.h"

#include <map>

#include "sim/base/error.h"
#include "sim/base/text.h"
#include "traces/proto_scan.h"
#include "xplane.pb.h"

namespace fragsim {

hlo::HloProto parse_hlo(const std::string& bytes, const std::string& where, LimitCounter* objects) {
  if (objects) count_proto_objects(bytes, hlo_schema(), 0, *objects);
  hlo::HloProto p;
  if (!p.ParseFromString(bytes))
    throw InputError(where + ": not an XLA HloProto (the protobuf does not parse; corrupt or truncated?)");
  return p;
}

std::vector<std::pair<std::string, hlo::HloProto>> capture_modules(const xprof::XSpace& space, const std::string& where,
                                                                   LimitCounter* objects) {
  std::vector<std::pair<std::string, hlo::HloProto>> out;
  for (const auto& plane : space.planes()) {
    if (plane.name() != "/host:metadata") continue;
    std::map<std::string, const xprof::XEventMetadata*> by_name;  // sorted, so the listing is stable
    for (const auto& [id, em] : plane.event_metadata()) by_name[sanitize_utf8(em.name())] = &em;
    for (const auto& [name, em] : by_name)
      for (const auto& s : em->stats()) {
        auto it = plane.stat_metadata().find(s.metadata_id());
        if (it == plane.stat_metadata().end() || it->second.name() != "Hlo Proto" || !s.has_bytes_value()) continue;
        out.emplace_back(name, parse_hlo(s.bytes_value(), where + ": module " + name, objects));
      }
  }
  return out;
}

Dtype xla_dtype(int t) {
  switch (t) {
    case 1:
      return Dtype::kPred;
    case 2:
      return Dtype::kS8;
    case 3:
      return Dtype::kS16;
    case 4:
      return Dtype::kS32;
    case 5:
      return Dtype::kS64;
    case 6:
      return Dtype::kU8;
    case 7:
      return Dtype::kU16;
    case 8:
      return Dtype::kU32;
    case 9:
      return Dtype::kU64;
    case 10:
      return Dtype::kF16;
    case 11:
      return Dtype::kF32;
    case 12:
      return Dtype::kF64;
    case 15:
      return Dtype::kC64;
    case 16:
      return Dtype::kBf16;
    case 18:
      return Dtype::kC128;
    case 19:
      return Dtype::kF8e5m2;
    case 20:
      return Dtype::kF8e4m3;
    case 21:
      return Dtype::kS4;
    case 22:
      return Dtype::kU4;
    default:
      return Dtype::kNone;
  }
}

const hlo::ShapeProto* shape_at(const hlo::ShapeProto& shape,
                                const google::protobuf::RepeatedField<std::int64_t>& index) {
  const hlo::ShapeProto* sh = &shape;
  for (auto si : index)
    sh = sh && si >= 0 && si < sh->tuple_shapes_size() ? &sh->tuple_shapes(static_cast<int>(si)) : nullptr;
  return sh;
}

Dtype array_of(const hlo::ShapeProto& shape, std::vector<std::uint64_t>* dims) {
  if (shape.tuple_shapes_size() != 0) return Dtype::kNone;
  Dtype dt = xla_dtype(shape.element_type());
  dims->clear();
  for (auto d : shape.dimensions()) {
    if (d < 0) return Dtype::kNone;
    dims->push_back(static_cast<std::uint64_t>(d));
  }
  return dt;
}

}  // namespace fragsim

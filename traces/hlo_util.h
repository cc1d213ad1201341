// What the readers of XLA's HloProto share (traces/ only: it names the generated message types).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "hlo.pb.h"
#include "sim/base/event.h"
#include "sim/base/limits.h"

namespace fragsim {
namespace xprof {
class XSpace;
}

// A serialized HloProto; counted against `objects` (when given) before protobuf parses it
// (traces/proto_scan.h). InputError naming `where` when it does not parse.
[[nodiscard]] hlo::HloProto parse_hlo(const std::string& bytes, const std::string& where,
                                      LimitCounter* objects = nullptr);
// The modules a capture embeds (the "Hlo Proto" stats of its metadata plane), named as the capture
// names them ("jit_dot(79)"), in name order. InputError (naming `where`) when one does not parse.
[[nodiscard]] std::vector<std::pair<std::string, hlo::HloProto>> capture_modules(const xprof::XSpace& space,
                                                                                 const std::string& where = "capture",
                                                                                 LimitCounter* objects = nullptr);
// XLA's PrimitiveType numbers (xla_data.proto) → fragsim dtypes (kNone for the rest).
[[nodiscard]] Dtype xla_dtype(int type);
// The shape at a tuple index, or null when the index leaves the shape.
[[nodiscard]] const hlo::ShapeProto* shape_at(const hlo::ShapeProto& shape,
                                              const google::protobuf::RepeatedField<std::int64_t>& index);
// An array shape's dtype and dims; kNone for a tuple, a token or negative dims.
[[nodiscard]] Dtype array_of(const hlo::ShapeProto& shape, std::vector<std::uint64_t>* dims);

}  // namespace fragsim

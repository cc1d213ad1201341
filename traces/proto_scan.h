// What a protobuf message will cost once parsed, counted from its wire bytes before the parse
// allocates anything: every nested message of the fields a schema names and every element of a
// repeated scalar field (a packed run counts its varints), each one object of the `objects` limit
// (sim/base/limits.h). Protobuf's own parser materialises every one of them — ten million empty
// events are 20 MB on the wire and gigabytes in memory — so the captures' readers scan first and
// refuse what exceeds the limit (exit 2), then parse.
//
// The walk is iterative (an explicit stack) and stops at protobuf's default nesting limit (100);
// malformed bytes end the walk of their message (the parse that follows rejects them).
#pragma once
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/limits.h"

namespace fragsim {

// One message type of a schema: the fields that hold messages (field number → index of the
// child's type in the schema) and the fields that are repeated scalars.
struct ProtoType {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> messages;
  std::vector<std::uint32_t> repeated_scalars;
};

// Counts the objects of a message of type schema[root] into `objects` (which throws when the
// count passes the limit).
void count_proto_objects(std::string_view wire, const std::vector<ProtoType>& schema, std::uint32_t root,
                         LimitCounter& objects);

// The schemas of traces/proto/xplane.proto (root XSpace) and traces/proto/hlo.proto (root HloProto).
const std::vector<ProtoType>& xspace_schema();
const std::vector<ProtoType>& hlo_schema();

}  // namespace fragsim

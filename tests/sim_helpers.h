// Runs a small hand-built trace through one policy and returns the result and placements.
#pragma once
#include <string>
#include <vector>

#include "policies/policy.h"
#include "sim/engine.h"
#include "test_util.h"

namespace fragsim::test {

struct SimRun {
  RunResult result;
  std::vector<nlohmann::json> placements;
  const nlohmann::json& stats() const { return result.spaces.at(0).stats; }
};

// Builds JSONL from (op, id, size) triples: op 'a' = alloc, 'f' = free.
struct TraceBuilder {
  std::string text;
  TraceBuilder& alloc(std::uint64_t id, std::uint64_t size, const char* space = nullptr, std::int64_t stream = 0) {
    text += "{\"op\":\"alloc\",\"id\":" + std::to_string(id) + ",\"size\":" + std::to_string(size);
    if (space) text += std::string(",\"space\":\"") + space + "\"";
    if (stream) text += ",\"stream\":" + std::to_string(stream);
    text += "}\n";
    return *this;
  }
  TraceBuilder& free(std::uint64_t id) {
    text += "{\"op\":\"free\",\"id\":" + std::to_string(id) + "}\n";
    return *this;
  }
  TraceBuilder& raw(const std::string& line) {
    text += line + "\n";
    return *this;
  }
};

// One hand-built run: a trace text through one policy on a device.
struct SimSpec {
  std::string name;  // names its files in the scratch folder
  std::string text;  // the trace, JSONL
  std::string policy;
  nlohmann::json config = nlohmann::json::object();
  std::string capacity = "80GiB";  // "" keeps the preset's capacity and reserve
  bool keep_going = false;
  std::string reserve = "0";
  std::string hw = "h100-80g";
};

// The built-in policies, registered once for the test process.
inline const Registry& builtin_registry() {
  static const Registry reg = [] {
    Registry r;
    register_builtin_policies(r);
    return r;
  }();
  return reg;
}

// Runs it with --check (every invariant after every event) and reads its placements back.
inline SimRun simulate(const SimSpec& spec) {
  const Registry& reg = builtin_registry();
  RunOptions o;
  o.trace = write_text(spec.name + ".jsonl", spec.text);
  o.policy.name = spec.policy;
  o.policy.config = spec.config;
  o.hw = load_hardware(spec.hw);
  if (!spec.capacity.empty()) {
    o.hw.space(Space::kHbm)->capacity = parse_size(spec.capacity, "capacity");
    o.hw.space(Space::kHbm)->reserve = parse_size(spec.reserve, "reserve");
  }
  o.check = true;
  o.keep_going = spec.keep_going;
  o.placements = tmp_path(spec.name + ".placements.jsonl");
  SimRun r{run_simulation(o, reg), {}};
  r.placements = read_jsonl(o.placements);
  return r;
}

}  // namespace fragsim::test

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

// Every built-in policy, registered once per test process.
inline const Registry& test_registry() {
  static Registry reg = [] {
    Registry r;
    register_builtin_policies(r);
    return r;
  }();
  return reg;
}

// capacity "" keeps the preset's capacity and reserve.
inline SimRun simulate(const std::string& name, const std::string& text, const std::string& policy,
                       nlohmann::json config, const std::string& capacity = "80GiB", bool keep_going = false,
                       const std::string& reserve = "0", const std::string& hw = "h100-80g") {
  const Registry& reg = test_registry();
  RunOptions o;
  o.trace = write_text(name + ".jsonl", text);
  o.policy.name = policy;
  o.policy.config = std::move(config);
  o.hw = load_hardware(hw);
  if (!capacity.empty()) {
    o.hw.space(Space::kHbm)->capacity = parse_size(capacity, "capacity");
    o.hw.space(Space::kHbm)->reserve = parse_size(reserve, "reserve");
  }
  o.check = true;
  o.keep_going = keep_going;
  o.placements = tmp_path(name + ".placements.jsonl");
  SimRun r{run_simulation(o, reg), {}};
  r.placements = read_jsonl(o.placements);
  return r;
}

}  // namespace fragsim::test

// `fragsim sweep`: the smallest memory fraction (to 0.01) or device capacity (to the device's
// allocation granularity) with which a trace completes without OOM.
//
// min-mem-fraction evaluates every fraction 0.01 … 1.00 (in parallel) and so observes whether
// the outcome is monotonic; the answer is the smallest fraction from which every larger one
// completes (the safe setting), and non-monotonic outcomes are listed.
// min-capacity bisects (k-ary, in parallel) assuming monotonicity, then checks it around the
// answer (the `verify` steps below must all fail, above must all pass) and says which it was.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine.h"

namespace fragsim {

struct SweepOptions {
  RunOptions base;          // trace, policy, hardware, lenient
  std::string find;         // "min-mem-fraction" | "min-capacity"
  unsigned threads = 0;     // 0 = hardware concurrency
  int verify = 4;           // neighbours of the answer checked on each side (capacity steps or fractions)
  bool exhaustive = false;  // min-mem-fraction: every fraction 0.01..1.00 instead of a bisection
  // Told what each pass over the trace runs (e.g. "fractions 0.01..1.00: 100 settings"); may be empty.
  std::function<void(const std::string&)> on_pass;
};

struct SweepPoint {
  double value;  // fraction, or capacity in bytes
  bool completed;
  std::uint64_t oom_count;
  std::optional<std::uint64_t> first_oom_event;
  std::string trace_digest;
};

struct SweepResult {
  std::string find;
  std::string policy;  // the policy swept, and its settings
  nlohmann::json policy_config = nlohmann::json::object();
  nlohmann::json hardware;  // the hardware model (capacity, reserve)
  std::string trace, trace_digest;
  std::optional<double> value;  // null when nothing in range completes
  std::string setting;          // what the user types
  bool monotonic = true;
  std::string monotonic_basis;    // "observed over the whole grid" / "bisection, verified ±N steps"
  std::vector<double> anomalies;  // values that break monotonicity
  std::vector<SweepPoint> runs;
};

SweepResult run_sweep(const SweepOptions& opt, const Registry& reg);
nlohmann::json sweep_json(const SweepResult& r);
std::string sweep_text(const SweepResult& r);
// ".83" for 0.83, "1.0" for 1.00: the form JAX users write.
std::string fraction_setting(double f);

}  // namespace fragsim

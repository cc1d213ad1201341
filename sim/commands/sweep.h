// `fragsim sweep`: the smallest memory fraction (to 0.01, below it to two significant digits) or device capacity (to
// the device's allocation granularity) with which a trace completes without OOM — two strategies over one k-ary search
// (k = 4 settings replayed per decode of the trace, on up to --jobs threads; k is fixed so that the settings visited,
// and so the result, do not depend on the machine):
//
// min-mem-fraction searches 0.01 … 1.00 of the policy's own fraction knob (PolicyInfo::fraction),
//   then replays `verify` fractions on each side of the answer; any failure at or above it (the
//   outcome is not monotonic) falls back to every fraction, as --exhaustive asks. The answer is
//   the smallest fraction from which every larger one completes. Where 0.01 fits, the search runs
//   again a tenth as fine below it (0.001..0.01, ...), and an answer at or below 0.01 is refined
//   between it and the failure below it, while ten steps still span one allocation granule of the
//   device; at the lowest fraction tried the answer is a bound (≤ 0.00001).
// min-capacity searches from 0 up to the reserve plus 2 GiB, doubling the range (past the run's capacity,
//   up to 64 TiB) until a capacity fits, then checks `verify` steps on each side. The
//   capacity applies to every device of the run (a recording's inferred device memory is
//   replaced, and said so).
// Both say the range they searched and print the answer as the user types it, with the command
// that replays it. Where the answer's run re-held the state before a mid-run recording, the search
// runs again in each other order of that state the recording cannot tell apart
// (SweepResult::orders), and the answer says its range and the value from which every one fits.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/commands/run_setup.h"
#include "sim/engine/engine.h"

namespace fragsim {

struct SweepOptions {
  RunRequest request;       // as the user stated it: the commands printed are built from it
  RunOptions base;          // prepare_run(request): trace, policy, hardware, lenient
  std::string find;         // "min-mem-fraction" | "min-capacity"
  unsigned threads = 0;     // 0 = hardware concurrency
  int verify = 4;           // neighbours of the answer checked on each side (capacity steps or fractions)
  bool exhaustive = false;  // min-mem-fraction: every fraction 0.01..1.00 instead of a bisection
  // A value the answer is likely near (another order's answer): that step and the one below are
  // replayed first, and bound the search when they decide it.
  std::optional<double> hint;
  // Told what each pass over the trace runs (e.g. "fractions 0.01..1.00: 100 settings"); may be empty.
  std::function<void(const std::string&)> on_pass;
};

struct SweepPoint {
  double value;  // fraction, or capacity in bytes
  bool completed;
  std::uint64_t oom_count;
  std::optional<std::uint64_t> first_oom_event;
  std::string trace_digest;
  std::optional<std::uint64_t> fatal_event;  // the allocator aborted the process here (a failure as an OOM is)
  std::string fatal;                         // …with this message
  // The state before a mid-run recording, where this run re-held it (summed over its spaces).
  bool prior_rebuilt = false;
  std::uint64_t prior_blocks = 0, prior_regions = 0;
  // The memory the recording's allocator held when recording began (its segments; with several
  // spaces, the most any one held: they are separate memories; 0: the recording began with nothing
  // held), whether re-held or held as recorded; and how many spaces held some.
  Bytes held_before = 0;
  std::uint64_t held_before_spaces = 0;
};

struct SweepResult {
  std::string find;
  std::string policy;  // the policy swept, and its settings
  nlohmann::json policy_config = nlohmann::json::object();
  nlohmann::json hardware;  // the hardware model (capacity, reserve)
  std::string trace, trace_digest;
  std::optional<double> value;  // null when nothing in range completes
  bool bound = false;           // the answer is the lowest value tried: the true one may be lower
  std::string setting;          // what the user types ("XLA_PYTHON_CLIENT_MEM_FRACTION=.83", "--capacity 16GiB")
  std::string command;          // the fragsim run that replays the answer
  std::string range;            // what was searched, in words
  bool monotonic = true;
  std::string monotonic_basis;    // "observed over the whole grid" / "bisection, verified ±N steps"
  std::vector<double> anomalies;  // values that break monotonicity
  std::vector<SweepPoint> runs;
  std::vector<std::string> notes;  // choices the sweep made (e.g. recorded device memory replaced)
  // Where the answer's run re-held the state before a mid-run recording, whose order and history
  // the recording cannot tell: the same search again in each other order and history considered
  // (prior_variants), and what they answer.
  struct Orders {
    std::uint64_t blocks = 0, regions = 0;      // the state they differ in
    std::vector<std::optional<double>> values;  // each search's answer (null: none in range fits), this one's first
    std::optional<double> every;                // the smallest value from which every one fits (null: one never does)
    std::string setting, command;               // ...as the user types it, and its replay
  };
  std::optional<Orders> orders;
};

// A setting of the policy's own (`setting`, a memory fraction in the words of the recording's
// framework; `env`: it is a variable) as that framework's users give it to get run `o` of request
// `req`: where o's policy is another than the recording's own allocator, first the setting that selects it
// (the recording's allocator declares it among its what-ifs: XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async,
// without which the fraction alone keeps the BFC), then the variables `req` gives besides, then the
// settings the run holds that the framework does not do unset (PolicyInfo::stated: a capture's growth
// on demand, XLA_PYTHON_CLIENT_PREALLOCATE=false); where no setting of the framework selects that
// policy on the platform (cudaMallocAsync on ROCm), it says so.
[[nodiscard]] std::string framework_setting(const RunOptions& o, const RunRequest& req, const Registry& reg,
                                            const std::string& setting, bool env);

// Throws InputError when the policy has no memory fraction (naming those that have one and
// min-capacity) or the hardware no hbm space.
SweepResult run_sweep(const SweepOptions& opt, const Registry& reg);
nlohmann::json sweep_json(const SweepResult& r);
std::string sweep_text(const SweepResult& r);
// "over the 2 orders ... held before recording began: 1.32 GiB-1.45 GiB; every one fits from
// 1.45 GiB (`fragsim run ...`)" — SweepResult::orders in words; empty when there is none.
std::string sweep_orders_text(const SweepResult& r);

// The smallest x in (lo, hi] with ok(x), given ok(hi) and, unless lo is the floor, !ok(lo):
// each round probes up to k points between lo and hi at once (eval returns ok per point).
std::uint64_t kary_search(std::uint64_t lo, std::uint64_t hi, unsigned k,
                          const std::function<std::vector<bool>(const std::vector<std::uint64_t>&)>& eval);

}  // namespace fragsim

// The waste split of every report: for each device and memory space, the best static plan of the
// trace's buffers (policies/planner.h) beside the allocator's peak reserved memory, which splits
// what it holds beyond the live bytes in two —
//   fragmentation this allocator added = peak reserved − plan   (a better placement recovers it)
//   what no placement avoids          = plan − live bytes        (the buffers' lifetimes cost it)
// (docs/metrics.md). The plan depends on the trace alone: it is made once per trace and kept by
// the trace's digest for every run of the process that replays it (compare, batch, diff, advice),
// and on disk for later processes (FRAGSIM_PLAN_CACHE=DIR|off, else $XDG_CACHE_HOME/fragsim/plans
// or ~/.cache/fragsim/plans): a report's plan costs several times its replay's CPU, once per trace.
//
// Cost: a report's plan reads the trace a second time, on its own thread once the replay is done
// (beside the run's other replays: both figures, the range before the recording),
// places the buffers in the greedy orders, then improves the part that sets the height by exact
// search (parts of up to 3,000 buffers) for at most report_plan_work(buffers) search nodes — the
// same plan however busy the machine (a batch's shards equal one process) — with
// report_plan_budget(buffers) seconds as a backstop; the report says when that budget cut it short (the plan is then an
// upper bound: its split overstates what no placement avoids). It is skipped — and the report says why — for a trace of
// more than kReportPlanBuffers buffers (fragsim plan TRACE takes them, with a longer budget), and for a sharding
// what-if (its allocator holds a share of each array, the plan whole ones).
#pragma once
#include <future>
#include <memory>
#include <vector>

#include "sim/engine/engine.h"

namespace fragsim {

// Every run plans beside its replay, so a report plans traces of up to 30,000 buffers (about 2 s of
// CPU for 20,000 random buffers; 200,000 took 22 s, 1,000,000 took 42 s of a run that replays in 0.2 s).
inline constexpr size_t kReportPlanBuffers = 30'000;
// A report's plan improves for at most this many search nodes per buffer, or kReportPlanVisits
// buffer visits (a node costs a visit of each buffer of its part) where that is more: a small
// trace gets the search it needs to come near its bound (llm_serving_small's 348 buffers: greedy
// +23 %, 20 nodes per buffer +20 %, 57,000 nodes +5.7 %, as 575,000 did) in under half a second of
// CPU beside its replay (every run plans: 2*10^8 visits made each run of that sample take 4 s).
// The same plan however busy the machine; the time budget is a backstop.
inline constexpr std::uint64_t kReportPlanWork = 2, kReportPlanVisits = 20'000'000;
std::uint64_t report_plan_work(size_t buffers);
// 10 s + 1 s per 20,000 buffers, at most 30 s (ten times that in a sanitized build): the backstop
// of the work bound, far enough that the work bound ends the search even on a loaded machine
// (Slurm shards must equal one process; jax_train_small's work takes 3 s of wall time at a load
// of 12 on 2 cores, and over 10 s under ASan at a load of 8).
double report_plan_budget(size_t buffers);

// The plans of one trace: per (device, space) the figures a report shows.
struct TracePlans {
  std::vector<std::pair<std::pair<std::uint32_t, Space>, PlanFigures>> spaces;
  size_t skipped_buffers = 0;  // not planned, for every space: the trace's buffers (0 = planned)
};

// Starts planning each run's trace on a thread of its own (one per distinct trace; a trace
// planned before in this process is not planned again); attach() waits and fills each result's
// SpaceResult::plan. Made after the replay, so that the plan's reading of an input never doubles
// the memory of a replay that refuses it (the input limits are measured per process).
class BestPlans {
 public:
  explicit BestPlans(const std::vector<RunOptions>& runs);
  void attach(std::vector<RunResult>& results);

 private:
  std::vector<std::shared_future<std::shared_ptr<const TracePlans>>> per_run_;
  std::vector<std::uint64_t> shard_;
  std::vector<std::string> traces_;  // each run's input, as the user named it
};

// A setting of the same allocator that, replayed, reserves less (sim/commands/advice.h).
struct WasteCredit {
  std::string setting;  // as the user types it ("" = none recovers any)
  Bytes recovered = 0;  // the baseline minus the setting's peak: the run's, or where the setting re-held a mid-run
                        // recording's state, that state re-held under the run's settings when lower (advice.cpp)
  Bytes reserved = 0;   // the setting's peak reserved
};

// The advice line of a run whose reserved memory exceeds its best plan by more than 5 %: "a perfect
// placement needs X; this allocator reserves Y: Z is fragmentation a better placement recovers",
// and, given a credit, "(SETTING recovers W of it, verified by replay)" — W at most Z: a setting
// that reserves less than the plan beats the plan's fragmentation only by reserving what a plan
// also would not (the plan holds every buffer at once, a growing pool maps pages as needed).
// A pool reserved up front (SpaceResult::pool_held_up_front) gets a line only with a credit: no
// placement lowers it, a setting that reserves less does.
std::string waste_advice(const RunResult& r, const WasteCredit& credit = {});
// The space such a line is about (the binding one, reserving over 5 % beyond its plan), or null.
const SpaceResult* wasteful_space(const RunResult& r);

}  // namespace fragsim

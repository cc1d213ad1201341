// `fragsim plan`: the best static placement of a set of buffers (policies/planner.h), from
// MiniMalloc's planning-instance CSV or from any trace fragsim reads.
//
// From a trace, each (device, memory space) is an instance of its own: a buffer is an
// allocation; its time counts that space's alloc and free events from 0 in event order, so it
// lives over [its alloc's count, its free's count) — a buffer never freed lives to one past the
// space's last event. Frees of unknown ids (--lenient) are skipped as in a replay.
//
// Outputs: the instance with an `offset` column (MiniMalloc's CSV; with `device,space` columns
// first for a trace of several spaces), JSON (fragsim_plan 1, docs/plan.md), and a text summary.
#pragma once
#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/planner.h"
#include "sim/base/units.h"

namespace fragsim {

class TraceReader;

// One instance: a (device, space) of a trace, or a CSV's whole.
struct PlanSpace {
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  std::vector<PlanBuffer> buffers;
  std::vector<std::string> ids;  // per buffer: the CSV's id (any text), or the trace's allocation id
};

struct PlanInput {
  std::string path;
  bool csv = false;               // MiniMalloc's format (else a trace)
  std::string digest;             // a trace's TraceReader::digest() ("" for a CSV)
  std::vector<PlanSpace> spaces;  // by (device, space)
};

// Routes a trace's space to the space its buffers live in (a run's hardware may hold collective
// buffers in HBM); identity when empty.
using SpaceRoute = std::function<Space(Space)>;

// Reads a MiniMalloc CSV (by its .csv name) or a trace. InputError names the file, line and column
// of bad input.
[[nodiscard]] PlanInput read_plan_input(const std::string& path, bool lenient = false, const SpaceRoute& route = {});
// A trace from a reader (one held in memory); `path` names it. Throws Cancelled when `stop` is set.
[[nodiscard]] PlanInput read_plan_input(TraceReader& reader, const std::string& path, const SpaceRoute& route = {},
                                        const std::atomic<bool>* stop = nullptr);

struct PlanRequest {
  std::string input;
  Bytes capacity = 0;     // 0: minimise
  double time_limit = 0;  // seconds for the whole input, ≤ 0: default_plan_time(buffers)
  bool lenient = false;
  std::uint64_t seed = 1;
  const std::atomic<bool>* stop = nullptr;
};

struct PlanOutcome {
  PlanInput input;
  std::vector<PlanResult> plans;  // per input space
  Bytes capacity = 0;             // the height asked for, 0 = none
  double seconds = 0;
};

// Plans every space of the input; the time limit is shared out by buffer count.
[[nodiscard]] PlanOutcome run_plan(const PlanRequest& req);

// fragsim_plan 1: per space the height, bound, optimality, time and (when `offsets`) every offset.
[[nodiscard]] nlohmann::json plan_json(const PlanOutcome& o, bool offsets = true);
// The instance with an offset column.
[[nodiscard]] std::string plan_csv(const PlanOutcome& o);
[[nodiscard]] std::string plan_text(const PlanOutcome& o);

}  // namespace fragsim

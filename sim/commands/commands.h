// What each simulating command does, as library calls: the CLI (sim/cli/main.cpp) maps its options
// onto these, and so can any other front end. Each reads what it needs, replays on up to
// `threads` threads (run_simulations' rule) and returns results; writing outputs is the caller's.
// `progress`: show the progress line on stderr (sim/engine/progress.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/commands/compare.h"
#include "sim/commands/run_setup.h"
#include "sim/commands/sweep.h"
#include "sim/report/diff.h"

namespace fragsim {

// Outputs a run writes while it replays (the others are rendered from its result).
struct RunOutputs {
  std::string placements{}, perfetto{};  // paths, "" = none
  bool keep_live_buffers = false;        // for an HTML report's address maps
  bool history = false;                  // the HTML viewer's history: buffers, allocator states (sim/engine/history.h)
  bool export_events = false;            // every change of the run, for export_snapshot (sim/report/snapshot_export.h)
  Window window{};                       // --from/--to
};

// `fragsim run`: one replay, then — after an OOM — the advice, each setting proven by a replay.
[[nodiscard]] RunResult run_request(const RunRequest& req, const Registry& reg, const RunOutputs& out = {},
                                    unsigned threads = 0, bool progress = false);

// `fragsim compare`: every entry on every trace, each trace decoded once for its entries.
// `out`: keep_live_buffers, history and window apply to every entry (placements and perfetto to none).
[[nodiscard]] std::vector<RunResult> run_compare(const CompareRequest& req, const Registry& reg,
                                                 const RunOutputs& out = {}, unsigned threads = 0,
                                                 bool progress = false);

// `fragsim diff` of runs: A and B are two traces under the same options, or one trace under two
// policies (`policies`: exactly two entries, POLICY[k=v,...]). InputError otherwise.
struct DiffRequest {
  RunRequest a, b;
  bool policies = false;  // a.policy and b.policy are the entries of --policies (messages name it)
};
[[nodiscard]] DiffRequest diff_request(const RunRequest& base, const std::string& a, const std::string& b,
                                       const std::string& policies);
// Both runs (each as `run` does it, advice left out), labelled "A: ..." and "B: ...".
[[nodiscard]] std::vector<RunResult> run_diff(const DiffRequest& req, const Registry& reg, const RunOutputs& out = {},
                                              unsigned threads = 0, bool progress = false);

// What `fragsim diff` shows: the diff (fragsim_diff 1, sim/report/diff.h) and, when asked, its HTML page.
struct DiffOutcome {
  nlohmann::json diff;
  std::string html;  // "" unless asked for
};
// Two traces (or one trace under two policies) replayed as `run` would; the page is made when
// `out.history` is set (as --html sets it).
[[nodiscard]] DiffOutcome diff_of_runs(const DiffRequest& req, const Registry& reg, const RunOutputs& out = {},
                                       unsigned threads = 0, bool progress = false);
// Whether `fragsim diff` reads a path as a report (a `.json` file that is not a PyTorch profiler
// trace) rather than as a trace to replay.
[[nodiscard]] bool is_report_path(const std::string& path);
// Checks what `fragsim diff` was given: two reports (read as they are, so no option that shapes a
// replay may come with them) or traces, never one of each. `b_given`: B was named (not --policies).
void check_diff_inputs(bool a_report, bool b_report, bool b_given, const RunRequest& base, const std::string& policies,
                       const Window& window);
// Two reports as they are (run --json, or compare --json arrays: `label` picks the run).
[[nodiscard]] DiffOutcome diff_of_reports(const DiffInput& a, const DiffInput& b, const std::string& label, bool html);

// `fragsim sweep`: the smallest fraction or capacity with no OOM (sim/commands/sweep.h).
[[nodiscard]] SweepResult sweep_request(const RunRequest& req, const std::string& find, bool exhaustive,
                                        const Registry& reg, unsigned threads = 0, bool progress = false);

// `fragsim batch`: shard `shard` ("i/N") of the manifest's runs, as batch_json (sim/commands/batch.h).
[[nodiscard]] nlohmann::json run_batch(const std::string& manifest, const std::string& shard, const Registry& reg,
                                       unsigned threads = 0, bool progress = false);

}  // namespace fragsim

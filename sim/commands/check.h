// `fragsim check`: the CI gate (contracts §5, docs/report.md). Compares a current report with a
// baseline — single runs (`run --json`) or several (`compare --json`, a `batch`/`merge` result;
// matched by label, which must be unique in each file) — and lists each figure that regressed: a new or earlier OOM, a
// changed OOM count, a gated peak or fragmentation figure (see below) that grew by more than the
// tolerance, of the run and of each (device, space). A run with no counterpart on the other side,
// a device entry on one side only and a figure the current report leaves out are regressions
// too: what cannot be compared cannot pass. Both files are checked against the report schema
// first. Reports of different traces (trace digest) are compared as two recordings of one
// workload — new code, new trace — with a note (--same-trace refuses them); different policy
// configurations are refused unless explicitly allowed. By default the figures docs/metrics.md
// recommends gate (peak allocated and reserved, fragmentation.max, fragmentation.at_peak_allocated);
// the others (peak requested, fragmentation.at_peak_reserved) are shown, not gated, unless
// gate_all. Peaks are maxima over the events a run replayed: where the current run got further
// than the baseline (which stopped at an OOM or abort), a figure it may have reached past the
// baseline's stop is shown, not gated; where the binding device changed, the run's figures (its
// binding device's) are compared per device only. Every output escapes names for its format (sim/base/text.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/base/option_names.h"

namespace fragsim {

// Every member has a default, so that options name only what they set: {.tolerance_pct = 2}.
struct CheckOptions {
  std::string baseline_path{}, current_path{};
  double tolerance_pct = 0;  // allowed growth of each figure, ≥ 0
  bool same_trace = false;   // refuse reports of different traces (exit 2)
  bool allow_different_policy = false;
  bool gate_all = false;  // gate every figure, not only those docs/metrics.md recommends
  OptionNames names{};    // how errors name these options (the Python module's keywords); results keep the flags
};

struct CheckItem {
  std::string run;     // the run's label
  std::string metric;  // "peak_reserved_bytes", "oom_count", "first_oom_event", "device 0 hbm.oom_count", ...
  double baseline = 0, current = 0;
  bool regression = false;
  bool gated = true;  // false: shown, but its growth is no regression (not a recommended figure, or past_baseline_stop)
  std::string message;              // one line, for people
  bool past_baseline_stop = false;  // the current's figure may lie past the event where the baseline stopped
};

struct CheckResult {
  bool pass = true;
  double tolerance_pct = 0;
  std::vector<CheckItem> items;  // every figure compared, regressions flagged
  std::vector<std::string> notes;
  // When it fails: the `fragsim diff` that shows what changed, one per failing run both sides
  // hold (a compare array's run named by --label), and the first of them as diff_command ("" when
  // it passes, or when only runs one side lacks fail).
  std::vector<std::string> diff_commands;
  std::string diff_command;
  // The current report's file, "" when it was given in memory (the Python module): the file
  // check_github's annotations are shown on unless the caller names another.
  std::string current_file;
};

// Throws InputError (exit 2) on malformed reports, a bad tolerance, or refused comparisons.
[[nodiscard]] CheckResult run_check(const nlohmann::json& baseline, const nlohmann::json& current,
                                    const CheckOptions& o);
std::string check_text(const CheckResult& r);
nlohmann::json check_json(const CheckResult& r);
std::string check_markdown(const CheckResult& r);  // a table for a CI job summary
std::string check_junit(const CheckResult& r);     // JUnit XML: one test case per figure
// GitHub Actions ::error annotations, one per regression, each shown on `file` ("": on the run only).
// GitHub reads them from a step's output: the CLI prints them (--github).
std::string check_github(const CheckResult& r, const std::string& file);

}  // namespace fragsim

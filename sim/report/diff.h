// `fragsim diff A B`: what changed between two runs — the peak and the first OOM — read from two
// fragsim reports (run --json, or runs of compare --json arrays picked by label; a diff of traces
// replays them first and diffs their reports, so there is one path):
//   - each run's peaks (allocated, reserved), its binding space, when the peak happened, its OOMs;
//   - per device and space: peaks, reserved but unallocated and external fragmentation at the
//     peak, the maximum, OOM counts, the peak's event — A, B and the change;
//   - the first OOM of each, and whether B's is new, gone, earlier or later;
//   - at each run's peak, the live bytes by call site (the reports' by_stack) side by side: each
//     site's bytes in A and B, sorted by the size of the change, and the same per stack frame;
//     at the first OOM likewise when both have one;
//   - the largest live buffers at each peak matched by name, shape and frame (by id within one
//     trace): added, removed, grown, shrunk.
// Rendered as text, JSON (fragsim_diff 1), Markdown (a CI job summary) and in the HTML viewer.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fragsim {

struct DiffInput {
  nlohmann::json report;  // a fragsim report v1
  std::string name;       // how outputs call it: the file, or the trace and policy
};

// Throws InputError when a report is not one (report_schema.h).
[[nodiscard]] nlohmann::json diff_reports(const DiffInput& a, const DiffInput& b);

// How a diff names two runs given as reports held in memory (the Python module's Report objects, not
// files): by their traces' file names and policies ("llm.jsonl, xla-bfc[preallocate=false]"), then
// their hardware where that is all that tells them apart, then "(a)"/"(b)".
[[nodiscard]] std::pair<std::string, std::string> report_names(const nlohmann::json& a, const nlohmann::json& b);

// One report out of a file's JSON: a single report, or the run `label` of a compare --json array
// (`label` may be empty when the array holds one run). InputError naming the labels otherwise.
[[nodiscard]] nlohmann::json pick_report(const nlohmann::json& j, const std::string& label, const std::string& file);

// A setting that differs between two configurations of one policy (a report's policy.config).
struct SettingDifference {
  std::string key;       // the config key; a resolved figure's without kResolvedPrefix
  nlohmann::json a, b;   // its values (null where a configuration lacks it)
  bool resolved{false};  // a figure the policy derived (from the hardware, the recording), not a setting
};
// What differs between two configurations of one policy, compared as they resolved, not as they
// were written: a setting whose resolved figure (kResolvedPrefix + a name it starts with, or that
// starts with it: max_split_size_mb and resolved_max_split_size) both hold, equal, is the same
// setting however it was given (--set, --env, the recording); the key that echoes the recording's
// settings (kRecordedSettingsKey) likewise, when every resolved figure both hold is equal. A
// resolved figure that differs is listed (resolved) unless a setting listed already accounts for it.
[[nodiscard]] std::vector<SettingDifference> setting_differences(const nlohmann::json& a, const nlohmann::json& b);

[[nodiscard]] std::string diff_text(const nlohmann::json& d);
[[nodiscard]] std::string diff_markdown(const nlohmann::json& d);

}  // namespace fragsim

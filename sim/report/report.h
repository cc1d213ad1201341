// Report writers: fragsim report v1 (specs/contracts.md §2) as JSON, and the text summary.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine/run_result.h"

namespace fragsim {

// map_blocks: the memory-map blocks kept per space and moment (the HTML viewer carries its own maps).
inline constexpr size_t kJsonMapBlocks = 5000;
nlohmann::json report_json(const RunResult& r, size_t map_blocks = kJsonMapBlocks);
std::string report_text(const RunResult& r);
// The comparison table of several runs of one trace.
std::string compare_table(const std::vector<RunResult>& runs);
// "f32[1024,4096]" for a shaped buffer, "" otherwise.
std::string shape_text(const BufferView& b);
// The innermost frame of a buffer's stack, "" without one.
std::string frame_of(const RunResult& r, const BufferView& b);
// How reports name a run: compare's label, else the policy.
std::string label_of(const RunResult& r);
// "event 7867, 2.730 s in": an event and its time from the trace's first event.
std::string when_text(const RunResult& r, std::uint64_t event_index, Tick t);
// An OOM of the memory live when the recording began (OomRecord::before_trace; in a report, an OOM
// with before_recording), as run, check and diff word it: "before the recording's first event: the
// 1.82 MiB live when recording began do not fit" (their bytes unknown: "the memory live ... does not fit").
std::string prior_oom_words(std::optional<Bytes> live);
// The same, read from a report's OOM entry: "" for an OOM of the recording's own events.
std::string prior_oom_words_of(const nlohmann::json& oom);
// `run --by-stack`: the live bytes by call site at the peak and at the first OOM (sim/report/by_stack.h).
std::string by_stack_report(const RunResult& r);

}  // namespace fragsim

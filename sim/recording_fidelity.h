// What a run can say about the recording it replays, beyond the replay itself (docs/report.md):
//   - nothing_to_replay: the recording holds no allocation or free to replay (a capture without
//     allocator events, a state-only snapshot, an empty trace): the run still completes (exit 0)
//     and says why in the report; `--strict` makes it an input error (exit 2);
//   - FollowTally: --follow-recording's count of the policy's predictions against the recording.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace fragsim {

// Why there is nothing to replay, or "" when there is. events: every event read; replayable:
// allocs and frees that are not pre-trace state; pre_trace: allocs placed as state before it.
[[nodiscard]] std::string nothing_to_replay(const nlohmann::json& header, std::uint64_t events,
                                            std::uint64_t replayable, std::uint64_t pre_trace);
// The advice for a capture in which no allocator logged anything (info and reports).
[[nodiscard]] std::string no_allocator_events_hint();

}  // namespace fragsim

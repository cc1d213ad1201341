// What a run can say about the recording it replays, beyond the replay itself (docs/report.md):
//   - nothing_to_replay: the recording holds no allocation or free to replay (a capture without
//     allocator events, a state-only snapshot, an empty trace): the run still completes (exit 0)
//     and says why in the report; `--strict` makes it an input error (exit 2);
//   - FollowTally: --follow-recording's count of the policy's predictions against the recording.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/policy.h"
#include "sim/engine/engine.h"

namespace fragsim {

// --follow-recording (docs/report.md): every allocation the recording placed is placed where it
// was (the simulated allocator's state corrected to the real one), every other is placed by the
// policy, and the tally counts the policy's own choice against the recording wherever the
// recording has one — the choice is made first, from the state the recording led to, and never
// reads the recorded address (except as a new region's base, which the driver chose).
//
// Correcting means: the policy's choice is released and the request is made again as seeded at
// the recorded address (AllocRequest::seeded_at, seeded_block); when the simulated state holds
// live buffers there (placed by the policy where the real allocator did not put them), they are
// displaced first (released, and their later frees ignored).
class FollowRecording {
 public:
  // Live buffers of this allocation's (device, space) whose blocks overlap the extent.
  using Overlapping = std::function<std::vector<Handle>(const Extent&)>;
  // Takes a buffer out of the simulated state (released by the caller's policy here).
  using Displace = std::function<void(Handle)>;

  // The placement the allocation ends with. predicted: what policy.allocate(req) returned.
  Placement place(AllocatorPolicy& policy, const Event& ev, const AllocRequest& req, Placement predicted,
                  const Overlapping& overlapping, const Displace& displace);
  // {"allocs_compared", "allocs_matched", "corrected", "displaced", "uncorrected", "predicted_only",
  // "first_miss"}; null when nothing was placed.
  nlohmann::json tally() const;

 private:
  std::uint64_t compared_ = 0, matched_ = 0, corrected_ = 0, displaced_ = 0, uncorrected_ = 0, predicted_only_ = 0;
  nlohmann::json first_miss_;
};

// One line for the text report: "12/14 of the policy's choices equal the recorded address, ...".
[[nodiscard]] std::string follow_recording_text(const nlohmann::json& tally);

// A device as reports name it: "3", or "3 (rank 3)" / "3 (host1:0)" when the recording names it
// (the header's device_names: a set of recordings, traces/recording_set.h, or a profile directory).
[[nodiscard]] std::string device_label(const RunResult& r, std::uint32_t device);
// The name the recording gives the device, or "".
[[nodiscard]] std::string device_name(const RunResult& r, std::uint32_t device);
// The device that ran out of memory first, and why: {"device", "name", "space", "event_index",
// "cause"}; null without an OOM.
[[nodiscard]] nlohmann::json first_oom(const RunResult& r);

// Both figures: a run of a recording that starts mid-run (state placed before the trace,
// addresses to compare), and every --follow-recording run, is replayed once more the other way,
// without outputs, and its figure joins the report — the --follow-recording tally beside a
// free-running run's fidelity, the free-running fidelity beside a --follow-recording run's tally
// (fidelity.follow_recording).
void add_both_figures(const std::vector<RunOptions>& runs, std::vector<RunResult>& results, const Registry& registry,
                      unsigned threads);

// Why there is nothing to replay, or "" when there is. events: every event read; replayable:
// allocs and frees that are not pre-trace state; pre_trace: allocs placed as state before it.
[[nodiscard]] std::string nothing_to_replay(const Recording& recording, std::uint64_t events, std::uint64_t replayable,
                                            std::uint64_t pre_trace);

}  // namespace fragsim

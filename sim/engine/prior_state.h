// PriorState: the state a mid-run recording shows from before it began, and how a run holds it
// (docs/report.md, "Before the recording"; policies/policy.h, "State held before a mid-run
// recording began").
//
// Readers put that state first in the trace: pre_trace observations (the segments and mapped
// ranges the recording's allocator held) and pre_trace allocs (the blocks live then). The engine
// keeps them here until the trace's first own event, then gives each (device, space) the state in
// one of two ways:
//   as recorded — the policy makes the recording allocator's decisions with its settings
//                 (AllocatorPolicy::seeds_recording) on memory that holds that state: the events go
//                 to it in their order, and it places everything where the recording did;
//   re-held     — any other run (another setting, allocator or limit): a history the recording
//                 implies is replayed through allocate() as any request: the requests that made the
//                 recording's allocator obtain its regions (AllocatorPolicy::prior_requests), then
//                 the live blocks in address order. Limits bind from the first byte: a request of
//                 that history the policy refuses is left out (the what-if would not have kept that
//                 cache), a live block it refuses is an OOM before the trace. Which live blocks the
//                 trace frees before it obtains memory of its own (a segment's history does not
//                 hold them: policy.h, for_each_region_piece) is read from the trace itself, once,
//                 before the history (Engine::learn_prior_frees; learn_free here).
// The order and the history are what the recording cannot tell. PriorOptions picks one;
// add_prior_range replays the others considered and reports the range of the answers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "policies/policy.h"
#include "sim/base/event.h"

namespace fragsim {

struct RunOptions;
struct RunResult;
class Registry;

// How a run holds the state before a mid-run recording (RunOptions::prior).
struct PriorOptions {
  enum class Mode : std::uint8_t {
    kAuto,      // as recorded when the policy replays the recording's allocator and the state fits, else re-held
    kRecorded,  // as recorded whatever the run's settings (the state stays where the recording placed it)
    kRebuilt,   // re-held, even with the recorded settings
  };
  Mode mode = Mode::kAuto;
  PriorHistory history = PriorHistory::kLikely;
  bool descending = false;  // live blocks in descending address order (a variant of the range)
  bool range = false;       // replay the variants considered and report the range (add_prior_range)
};
// "auto", "recorded", "rebuilt" (--pre-trace); InputError naming `what` otherwise.
PriorOptions::Mode parse_prior_mode(const std::string& s, const std::string& what);

// What a run did with the state before the recording, per (device, space) (SpaceResult::prior).
struct PriorOutcome {
  bool rebuilt = false;
  std::string reason;                   // why it was held that way, in words
  std::uint64_t blocks = 0;             // live when recording began
  Bytes live = 0;                       // their requested bytes
  std::uint64_t regions = 0;            // segments and mapped ranges the recording's allocator held then
  std::uint64_t mapped_ranges = 0;      // of which mapped ranges of reservations (expandable segments)
  Bytes region_bytes = 0;               // their bytes (the recording's reserved memory)
  std::uint64_t requests = 0;           // re-held: requests of the history replayed...
  std::uint64_t requests_dropped = 0;   // ...and left out (the policy refused them: a limit)
  Bytes request_bytes = 0;              // the replayed requests' bytes
  std::uint64_t placed_in_history = 0;  // live blocks the history placed at their turn (the rest follow)
  std::uint64_t blocks_failed = 0;      // live blocks the policy could not re-hold (an OOM before the trace)
  // The answers over every order and history considered (add_prior_range), when they were replayed.
  struct Range {
    Bytes reserved_low = 0, reserved_high = 0;    // peak reserved
    Bytes allocated_low = 0, allocated_high = 0;  // peak allocated
    std::uint64_t variants = 0;                   // runs the range covers, this one included
    std::uint64_t oom_runs = 0;                   // of which ended in an OOM on this space
  };
  std::optional<Range> range;
};

// The events of one trace up to its first own event: the pre-trace ones, with the stacks and marks
// among them, in order.
class PriorState {
 public:
  bool collecting() const { return open_; }
  // Whether `ev` is part of the state before the recording (a pre_trace alloc or observation).
  static bool belongs(const Event& ev) { return shows_before_recording(ev); }
  // Whether `ev` may lie among those events (stacks and marks an importer puts beside them); the
  // first event that may not ends the state before the recording. All are kept, in order, so that
  // a state held as recorded is replayed exactly as the trace gives it.
  static bool collected(const Event& ev) { return among_before_recording(ev); }
  void add(const Event& ev) { events_.push_back(ev); }
  // Which pre-trace allocs the trace frees before it obtains memory of its own (PriorBlock::
  // freed_unproven), fed the trace's events after the state in order: `ev` frees one (by device
  // and id: ids name live allocations, so the first free of a pre-trace alloc's id on its device is
  // its own), or obtains memory (a segment_alloc or segment_map: every block still live then was
  // in use at a moment of demand). Returns false once the answer is known for every one (the
  // trace need not be read further).
  bool learn_free(const Event& ev);
  // Whether the trace frees the pre-trace alloc events()[i] before it obtains memory (learn_free).
  bool freed_unproven(size_t i) const { return i < unproven_.size() && unproven_[i]; }
  // Ends the collection; the events stay until release().
  void close() { open_ = false; }
  void release() {
    events_ = {};
    unproven_ = {};
    unfreed_ = {};
  }
  const std::vector<Event>& events() const { return events_; }
  bool empty() const {
    return std::none_of(events_.begin(), events_.end(), [](const Event& ev) { return belongs(ev); });
  }

  // The regions the recording's allocator held on `device` (segment_alloc and segment_map
  // observations marked pre_trace, not a capture's BFC region), by address.
  std::vector<PriorRegion> regions(std::uint32_t device) const;
  // The pre-trace allocs `pick` accepts, in the order a re-held state allocates them: by
  // recorded address (those with none first), descending when asked.
  template <typename Pick>
  std::vector<const Event*> allocs(Pick pick, bool descending) const;

 private:
  bool open_ = true;
  std::vector<Event> events_;
  std::vector<bool> unproven_;  // per event of events_ (learn_free)
  // The pre-trace allocs learn_free has not seen freed: (device, id) → index in events_; built at
  // its first call (allocs that stand for several, key::kAggregate, are never freed one by one).
  std::map<std::pair<std::uint32_t, std::uint64_t>, size_t> unfreed_;
  bool unfreed_built_ = false;
};

template <typename Pick>
std::vector<const Event*> PriorState::allocs(Pick pick, bool descending) const {
  std::vector<const Event*> v;
  for (const Event& ev : events_)
    if (ev.op == Op::kAlloc && pick(ev)) v.push_back(&ev);
  auto addr = [](const Event* e) { return e->has(key::kAddr) ? e->addr.value() + 1 : 0; };  // none first
  std::stable_sort(v.begin(), v.end(),
                   [&](const Event* a, const Event* b) { return descending ? addr(a) > addr(b) : addr(a) < addr(b); });
  return v;
}

// The orders and histories a re-held state could also have had, beside the one a run takes (its
// PriorOptions): the other address order, and — where the recording's allocator held regions —
// the least and the most history. add_prior_range and sweeps replay each.
struct PriorVariant {
  PriorHistory history;
  bool descending;
};
std::vector<PriorVariant> prior_variants(bool regions);
// "the 228 blocks" or "the 228 blocks and 3 regions": the state those variants differ in, in words.
std::string prior_variants_of(std::uint64_t blocks, std::uint64_t regions);

// For every run whose state before the recording was re-held on some space: replays the other
// orders and histories considered (the other address order, the least and the most history) and
// records on each such space the range of peak reserved and allocated memory over all of them.
void add_prior_range(const std::vector<RunOptions>& runs, std::vector<RunResult>& results, const Registry& reg,
                     unsigned threads);

}  // namespace fragsim

// The history of a run, for what shows memory event by event (issue 24): the HTML viewer's
// per-buffer timeline and allocator state at any event, and the PyTorch snapshot export.
//
// Recorded by a second replay of the run (its figures known: the peaks, the OOMs, the number of
// events), so that what is kept can be chosen up front and stays bounded whatever the trace's
// length — level of detail written by fragsim, never every event shipped raw:
//   - every allocation placed (AllocationLog) and every region over time (RegionLog), which the
//     page draws and builds the allocator state from;
//   - live bytes per (device, space) at `samples` evenly spaced events (Σ block bytes of the live
//     buffers after that event), and, when `bands` asks for it, that many of the largest buffers
//     live in the window with their lifetimes, the rest summed per point ("other"); the page asks
//     for none since it draws every allocation from the log.
//   - allocator states: keyframes (every region's blocks — in use, free, unmapped — with the
//     buffer behind each block in use, and the live bytes by call site) at planned events, and
//     inside `exact` event ranges every change as a delta: a block placed, a block freed, a region
//     as it now is (obtained, resized, remapped) or gone. Between a keyframe and an event of an
//     exact range, applying the deltas in order gives the state after that event (free blocks
//     coalesce: a freed block joins its free neighbours, as every modelled allocator does). When
//     the policy's state moves without a placement or free the engine saw (a deferred release),
//     its regions are written whole. Each delta event carries the policy's own figures.
// Memory: O(live buffers + what is kept); the budgets below bound what is kept.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/engine/allocation_log.h"
#include "sim/engine/engine.h"
#include "sim/engine/live_set.h"
#include "sim/engine/region_log.h"

namespace fragsim {

// What a history pass records; plan_history chooses it from the first pass.
struct HistorySpec {
  bool viewer = false;                   // per-buffer timeline, keyframes, deltas (HTML)
  bool events = false;                   // every change of the whole run, for the snapshot export (exact everywhere)
  std::uint64_t first = 0, last = 0;     // the window's events
  std::vector<std::uint64_t> samples;    // sorted
  std::vector<std::uint64_t> keyframes;  // sorted
  std::vector<std::pair<std::uint64_t, std::uint64_t>> exact;  // sorted, disjoint, inclusive
  size_t bands = 400;                                          // buffers drawn one by one per space
  // What the page may hold (issue 24: the file stays near 20 MB with 100k+ live buffers): deltas and
  // region blocks written, blocks in keyframes, blocks of one region map (the rest marked
  // truncated). The export keeps everything up to kMaxMapBlocks per map.
  size_t delta_budget = 40000;
  size_t keyframe_budget = 100000;
  size_t map_blocks = 20000;
  // Every allocation (AllocationLog) and every region over time (RegionLog), for the page; the
  // log's bytes stop growing at allocation_budget (docs/limits.md).
  size_t allocation_budget = size_t{192} << 20;
};

inline constexpr std::uint64_t kStillLive = std::numeric_limits<std::uint64_t>::max();

struct HistoryBuffer {
  BufferView view;  // as allocated (age_events unused)
  std::uint32_t slot = 0;
  std::uint64_t free_event = kStillLive;  // the event that freed it
  Tick free_t;
};

struct HistoryBlock {
  Addr addr;
  Bytes size = 0;
  enum Kind : std::uint8_t { kFree, kInUse, kUnmapped } kind = kFree;
  std::int64_t buffer = -1;  // index into RunHistory::buffers for a block in use, -1 when unknown
};
struct HistoryRegion {
  Addr base;
  Bytes size = 0;
  int id = -1;
  std::vector<HistoryBlock> blocks;  // address order
};
struct HistoryFigures {  // the policy's own, after the event
  std::uint32_t slot = 0;
  Bytes allocated = 0, reserved = 0, largest_free = 0;
  double external = 0;
};
struct HistorySlotState {
  HistoryFigures figures;
  std::vector<HistoryRegion> regions;  // address order
  bool truncated = false;              // more than HistorySpec::map_blocks blocks: the rest left out
};
struct Keyframe {
  std::uint64_t event = 0;
  Tick t;
  std::vector<HistorySlotState> slots;  // every slot that exists then
  std::vector<SiteBytes> sites;         // live bytes by call site (sim/engine/site_grouper.h)
  SiteBytes other_sites;
};
struct Delta {
  enum Kind : std::uint8_t { kPlace, kFree, kRegion, kRegionGone } kind = kPlace;
  std::uint32_t slot = 0;
  Addr addr;  // block (place, free) or region base
  Bytes size = 0;
  std::int64_t buffer = -1;
  HistoryRegion region;  // kRegion
};
struct DeltaEvent {
  std::uint64_t event = 0;
  Tick t;
  bool pre_trace = false;  // the state before a recording (an importer's pre_trace event)
  std::vector<Delta> changes;
  std::vector<HistoryFigures> figures;  // of each slot that changed
};
struct SlotTimeline {
  std::uint32_t slot = 0;
  struct Point {
    std::uint64_t event = 0;
    Tick t;
    Bytes live = 0, other = 0;  // Σ block bytes of live buffers; of those not drawn one by one
  };
  std::vector<Point> points;         // event order
  std::vector<std::uint32_t> bands;  // indices into RunHistory::buffers, by alloc event
};

struct RunHistory {
  std::uint64_t first = 0, last = 0;                   // the window's events
  std::vector<std::pair<std::uint32_t, Space>> slots;  // slot → (device, space)
  std::vector<HistoryBuffer> buffers;
  std::vector<SlotTimeline> timelines;
  std::vector<Keyframe> keyframes;
  std::vector<DeltaEvent> deltas;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> exact;  // ranges the deltas cover (after a keyframe)
  bool budget_exceeded = false;                                // an exact range was cut short
  StackFrames stacks;                                          // frames of every stack a buffer names
  // Every allocation placed (the page's live-memory chart and entries), and every region over time.
  std::shared_ptr<const AllocationLog> allocations;
  std::vector<RegionLife> regions;
  std::uint64_t regions_cut_at = RegionLife::kHeld;  // the region log stopped there (a bound: region_log.h)
  // The run stopped replaying at its first OOM (no --keep-going): nothing after this event was
  // replayed, so nothing of the page goes past it. kStillLive when it did not stop.
  std::uint64_t stopped_at = kStillLive;
  // Per slot, where its process stopped when that came before the run's stop (a set of recordings:
  // one rank ran out, the others replayed on); kStillLive for the others. Empty when none did.
  std::vector<std::uint64_t> slot_stopped_at;
};

// Follows one replay (the engine calls it; sim/engine/engine_impl.h).
class HistoryRecorder {
 public:
  HistoryRecorder(const HistorySpec& spec, const LiveSet& live);
  void placed(const Event& ev, const Placement& p, std::uint32_t slot, const std::vector<SlotView>& slots);
  // `ev`: the free event of the buffer it frees (ev.handle).
  void freeing(const Event& ev, const std::vector<SlotView>& slots);
  // Replay stopped after event `event` (the first OOM): what comes after is not recorded.
  void stopped(std::uint64_t event) { stopped_at_ = event; }
  // Slot `slot`'s process stopped after event `event` (a set's rank ran out): the others go on.
  void stopped_slot(std::uint32_t slot, std::uint64_t event) {
    if (slot_stopped_at_.size() <= slot) slot_stopped_at_.resize(slot + 1, kStillLive);
    slot_stopped_at_[slot] = event;
  }
  // After each event of the trace, with every slot's state then.
  void after(const Event& ev, const std::vector<SlotView>& slots);
  // The time of the run's first event: the page's times are from it (RunResult::first_t).
  void set_origin(Tick t) {
    if (log_) log_->set_origin(t);
  }
  [[nodiscard]] std::shared_ptr<RunHistory> finish(const std::vector<SlotView>& slots, Tick now);

 private:
  struct SlotTrack {
    Bytes live = 0;                                   // Σ block bytes of the trace's live buffers
    Bytes mirror = 0;                                 // Σ block bytes the deltas left in use
    std::uint64_t calls = 0;                          // device calls when last seen
    Bytes reserved = 0;                               // when last seen
    std::map<Addr, std::pair<Bytes, Bytes>> regions;  // base → (size, unmapped bytes) as the viewer has them
    std::unordered_map<std::uint64_t, Handle> at;     // block address → live handle
    std::set<std::pair<Bytes, std::uint32_t>> bands;  // candidates: (block, index into cands_)
    bool seen = false;
  };
  struct Candidate {
    HistoryBuffer buf;
    Bytes live_at_alloc = 0, live_at_free = 0;
    Handle handle = kNoHandle;
    bool alive = false;
  };
  std::int64_t record(Handle h, std::uint32_t slot, const std::vector<SlotView>& slots);
  bool exact(std::uint64_t event) const;
  void offer(Handle h, std::uint32_t slot, Bytes live_after, const std::vector<SlotView>& slots);
  void enter_window(std::uint64_t event, const std::vector<SlotView>& slots);
  void keyframe(std::uint64_t event, Tick t, const std::vector<SlotView>& slots);
  HistorySlotState slot_state(std::uint32_t slot, MemoryMap map, const std::vector<SlotView>& slots);
  void follow_regions(std::uint32_t slot, const std::vector<SlotView>& slots, bool resync);
  void note_stack(std::uint64_t stack);
  SlotTrack& track(std::uint32_t slot);

  const HistorySpec& spec_;
  const LiveSet& live_;
  std::shared_ptr<RunHistory> out_ = std::make_shared<RunHistory>();
  std::vector<SlotTrack> tracks_;
  std::vector<std::vector<Extent>> pieces_;  // per live handle: the pieces of a block in several
  std::vector<std::int64_t> buffer_of_;      // per handle: its record in out_->buffers, -1
  std::vector<std::int64_t> candidate_of_;   // per handle: its entry in cands_, -1
  std::vector<Candidate> cands_;
  std::vector<std::uint32_t> free_cands_;
  std::vector<std::uint64_t> starts_;  // keyframes owed: the event before each exact range
  DeltaEvent pending_;
  size_t next_sample_ = 0, next_keyframe_ = 0;
  std::uint64_t last_after_ = 0;  // the event of the last after() (after_any_: there was one)
  bool after_any_ = false;
  size_t written_ = 0, keyframe_blocks_ = 0;
  bool in_window_ = false, cut_ = false;
  std::uint64_t cut_at_ = 0;
  std::uint64_t stopped_at_ = kStillLive;
  std::vector<std::uint64_t> slot_stopped_at_;  // stopped_slot's
  std::shared_ptr<AllocationLog> log_;          // null unless spec_.viewer
  RegionLog regions_;
};

// The history a run's figures call for: `viewer` (HTML) within `window`, and/or every change for
// the snapshot export.
[[nodiscard]] HistorySpec plan_history(const RunResult& first, bool viewer, bool events);

// Replays each run once more with a HistoryRecorder and attaches its history (RunResult::history).
void add_history(const std::vector<RunOptions>& runs, std::vector<RunResult>& results, const Registry& registry,
                 bool viewer, bool events, unsigned threads);

}  // namespace fragsim

// Engine: the discrete-event replay (architecture.md).
//
// Pops the earliest event — trace events in file order (time is non-decreasing) interleaved with
// deferred internal events (policy-scheduled, ordered by (time, sequence)) — routes it to the
// policy of its (device, space), and hands what happened to its parts: Metrics (accounting,
// peaks, timelines), LiveSet (what reports show of buffers), Fidelity (the recording's own
// decisions). One policy instance per (device, space), created on first use. Requested-byte
// accounting depends on the trace alone, so after the first OOM (without --keep-going) the rest
// of the trace is still read and validated, but not replayed.
//
// A run is begin(header, recording), feed(event)…, end(): one decoded stream can feed several
// engines (sim/engine/parallel_runs.cpp).
#pragma once
#include <memory>
#include <optional>
#include <queue>
#include <unordered_map>
#include <vector>

#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/engine/engine.h"
#include "sim/engine/fidelity.h"
#include "sim/engine/history.h"
#include "sim/engine/live_set.h"
#include "sim/engine/metrics.h"
#include "sim/engine/prior_state.h"
#include "sim/engine/recording_anchor.h"
#include "sim/engine/recording_fidelity.h"
#include "sim/engine/replay_sink.h"

namespace fragsim {

class Engine : public Scheduler {
 public:
  Engine(const RunOptions& opt, const Registry& reg);

  Tick now() const override { return now_; }
  Task schedule(Tick t, std::function<void()> fn) override;

  // The whole run, reading the trace itself.
  RunResult run();
  // The three steps of a run, for a stream that feeds several engines.
  void begin(const nlohmann::json& header, const Recording& recording);
  void feed(const Event& ev);
  // What the reader learnt of the whole trace, for end(): its digest and whether it records times.
  void set_trace_facts(std::string digest, bool timed) {
    out_.trace_digest = std::move(digest);
    out_.timed = timed;
  }
  RunResult end(std::uint64_t skipped_frees);

  bool offline() const { return info_.needs_lifetimes; }

 private:
  // One (device, space) and the policy that serves it.
  struct Slot {
    std::uint32_t device;
    Space space;
    std::unique_ptr<SpaceSpec> spec;  // the space as this device has it (a recorded size may replace the preset's)
    bool usable_inferred = false;     // spec's usable memory is the recording's inferred one
    bool host_unbounded = false;      // host memory no limit bounds (Recording::host_unbounded)
    std::unique_ptr<DeviceMemory> mem;
    std::unique_ptr<AllocatorPolicy> policy;
    SpaceMetrics metrics;
    // The space's peak of allocated memory: a snapshot owed (dirty), taken, or unaffordable (missed).
    bool peak_dirty = false, peak_missed = false;
    std::uint64_t peak_event = 0, missed_event = 0;
    Tick peak_t;
    std::optional<Moment> peak;
    // The policy's own handles, dense per slot: its per-handle state is O(its live allocations),
    // not O(live allocations of every device) (2,000 devices needed over 400 MiB).
    Handle next_local = 0;
    std::vector<Handle> free_local;
    // The state before a mid-run recording on this space and how it was held (prior_state.h);
    // unset when the recording shows none here.
    std::optional<PriorOutcome> prior;
    bool prior_rebuilt() const { return prior && prior->rebuilt; }
    // The recorded spaces (a bit each: a collective one is routed here too) whose regions the
    // recording's allocator held before it began were offered to the policy, at the first
    // allocation that takes that state as recorded (RecordingAnchor::take_regions).
    std::uint32_t anchor_spaces_taken = 0;
    size_t moves_seen = 0;  // mem->moves() taken into region_moves
    Handle take_local() {
      if (free_local.empty()) return next_local++;
      Handle h = free_local.back();
      free_local.pop_back();
      return h;
    }
  };
  struct Deferred {
    Tick t;
    std::uint64_t seq;
    std::shared_ptr<std::function<void()>> fn;  // emptied when its Task is cancelled
    bool operator>(const Deferred& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  using LifetimeKey = std::pair<std::uint32_t, Space>;
  static constexpr std::uint32_t kNoSlot = 0xffffffffu;
  static constexpr std::uint32_t kSpaces = static_cast<std::uint32_t>(Space::kCount);
  static constexpr std::uint64_t kSnapshotCredit = 4, kNoRerun = UINT64_MAX;

  std::unique_ptr<TraceReader> open() const;
  void collect_lifetimes();
  void feed_other(const Event& ev);  // feed, but for its common path
  // The state before a mid-run recording (sim/engine/prior_state.h), once the trace's own events
  // begin: each space's slot decides how it holds it, then holds it.
  void settle_prior();
  void decide_prior(std::uint32_t si);
  void rebuild_prior(std::uint32_t si, std::uint64_t held_at);
  void learn_prior_frees();
  void place_held(const Event& ev, std::uint64_t held_at);
  void sort_placements(size_t from);
  void alloc(const Event& ev);
  void free(const Event& ev);
  void observe(const Event& ev);
  void run_deferred();
  // route, key and slot: the common case (a known space, the device of the event before, an
  // existing slot) inline; the rest out of line.
  Space route(Space sp, const Event& ev) const {
    Space r = route_[static_cast<int>(sp)];
    if (r == Space::kCount) no_route(sp, ev);
    return r;
  }
  [[noreturn]] void no_route(Space sp, const Event& ev) const;
  std::uint32_t key(std::uint32_t device, Space sp) {
    if (devices_.empty() || device != devices_[last_dense_]) new_device(device);
    return last_dense_ * kSpaces + static_cast<std::uint32_t>(sp);
  }
  void new_device(std::uint32_t device);
  std::uint32_t slot(std::uint32_t k, const Event& ev) {
    return slot_index_[k] != kNoSlot ? slot_index_[k] : new_slot(k, ev);
  }
  std::uint32_t new_slot(std::uint32_t k, const Event& ev);
  void account(std::uint32_t si);
  [[gnu::noinline]] void sink_counter(const Slot& s, const Footprint& u);  // off account()'s path
  void check_fatal(const Slot& s, const Event& ev) {
    if (!s.policy->fatal_error().empty()) stop_fatal(s, ev);
  }
  void stop_fatal(const Slot& s, const Event& ev);
  void record_oom(std::uint32_t si, const Event& ev, const AllocRequest& rq);
  // --follow-recording: the recorded address wins (sim/engine/recording_fidelity.h); buffers the policy
  // placed in its way leave the simulated state.
  Placement follow(std::uint32_t si, const Event& ev, const AllocRequest& rq, const Placement& predicted);
  void write_placement(const Event& ev, const Placement& p);
  // Regions the policy moved during this allocation (DeviceMemory::moves): into the result, and the
  // placement lines written before the move, still in pbuf_, name where they went.
  void take_moves(Slot& s, const Event& ev);
  void end_slice(Handle h, Tick t);
  // Moments: a space at its peak, a device at an OOM.
  std::vector<SlotView> slot_views() const;
  void take_peak_now(std::uint32_t si);
  void take_peak_when_leaving(std::uint32_t si);
  std::vector<std::optional<Moment>> peaks_by_rerun() const;
  void finish();

  const RunOptions& opt_;
  const Registry& reg_;
  const PolicyInfo& info_;
  // Where events of each space go: the space itself, hbm for collective buffers on hardware
  // without a collective space, kCount when the hardware lacks it (an input error).
  Space route_[static_cast<int>(Space::kCount)];
  Recording recording_;
  std::vector<Slot> slots_;
  std::unordered_map<std::uint32_t, std::uint32_t> dense_;  // device ordinal → dense index
  std::vector<std::uint32_t> devices_;                      // dense index → device ordinal
  std::uint32_t last_dense_ = 0;                            // the dense index key() found last
  std::vector<std::uint32_t> slot_index_;                   // per key: index in slots_
  std::vector<std::uint32_t> slot_key_;                     // per slot: its key
  struct Requested {
    ByteSum live = 0, peak = 0;
    // Allocations after the replay stopped (its first OOM or an abort, on whichever device): this
    // key's, never replayed (another device's stop, or a set's other ranks').
    std::uint64_t not_replayed = 0;
  };
  std::vector<Requested> req_;  // per key
  Totals totals_;               // allocated and reserved: kept by account() once a second slot exists
  std::priority_queue<Deferred, std::vector<Deferred>, std::greater<Deferred>> deferred_;
  std::uint64_t seq_ = 0;
  Tick now_;
  nlohmann::json config_;
  std::map<LifetimeKey, std::vector<Lifetime>> lifetimes_;  // offline policies only
  LiveSet live_;
  Fidelity fidelity_;
  RunResult out_;
  // Replay stops at an OOM (without --keep-going) or an allocator's abort — for the process that ran
  // out: each member of a set of recordings is its own process (Recording::device_process), whose
  // devices the others' OOMs do not stop. replaying_: no process has stopped (feed's short path);
  // stopped_dense_: per dense device, the event its process stopped at (kNotStopped: none);
  // all_stopped_: every process has.
  static constexpr std::uint64_t kNotStopped = UINT64_MAX;
  bool replaying_ = true, all_stopped_ = false;
  std::vector<std::uint64_t> stopped_dense_;
  std::map<std::uint32_t, std::uint64_t> stopped_processes_;  // process → the event it stopped at
  bool replays(std::uint32_t k) const { return replaying_ || stopped_dense_[k / kSpaces] == kNotStopped; }
  // Stops the process that used `device` at `event`: its spaces' peaks are taken now. While the
  // state before the recording is held, only that device stops, and the process after every
  // device's state was held (stops_after_settle_).
  void stop_process(std::uint32_t device, std::uint64_t event);
  std::vector<std::pair<std::uint32_t, std::uint64_t>> stops_after_settle_;  // (device, event)
  // Re-holding a history before the recording (rebuild_prior): its requests are not the program's,
  // so metrics see what the history leaves behind (one account() at its end), not its moments.
  bool in_prior_history_ = false;
  bool common_ = false;  // no window, history or check: feed's short path may serve (set by begin)
  std::uint64_t current_event_ = 0;
  // Peak snapshots are paid from a credit of kSnapshotCredit per event (take_peak_when_leaving).
  std::uint64_t snapshot_credit_ = 0;
  std::vector<std::uint64_t> rerun_take_at_;  // on the engine peaks_by_rerun() runs: per slot, the event
  size_t rerun_left_ = 0;                     // snapshots the re-run still owes
  std::unique_ptr<AtomicFile> placements_;
  std::unique_ptr<ReplaySink> sink_;  // RunOptions::sink's, null = none
  std::string pbuf_;
  // While a re-held state is placed: the trace's own index of the block being placed (its
  // placement line keeps it; everything else sees the event the state is held at), and placement
  // lines are kept in pbuf_ until settle_prior puts them in event order.
  std::optional<std::uint64_t> held_index_;
  bool settling_ = false;
  bool defer_history_ = false;  // a re-held state: the page's records take it once, when it is all held
  PriorState prior_;            // pre_trace events until the trace's own begin
  RecordingAnchor anchor_;      // the state before a mid-run recording, from its addresses
  std::uint64_t replayable_ = 0, pre_trace_allocs_ = 0;  // allocs and frees to replay; allocs of prior state
  // The same per member of a set of recordings (Recording::processes > 1: a rank whose recording
  // has nothing to replay is said, as one alone would be), with each dense device's member.
  std::vector<std::uint64_t> member_replayable_, member_pre_trace_;
  std::vector<std::uint32_t> member_of_dense_;
  void count_member(std::uint32_t k, bool pre_trace) {
    if (member_replayable_.empty()) return;
    const std::uint32_t m = member_of_dense_[k / kSpaces];
    ++(pre_trace ? member_pre_trace_ : member_replayable_)[m];
  }
  std::optional<std::int64_t> first_stream_;  // the first allocation's stream (RunResult::several_streams)
  FollowRecording follow_;                    // --follow-recording's tally
  // What a run keeps grows with its trace, within limits of the trace's size (sim/base/limits.h).
  LimitCounter devices_kept_, marks_kept_;
  // --check validates after every event while the state is small, then after every k-th event,
  // k = (placed buffers + spaces) / kCheckBatch: validate() walks a policy's whole state, so
  // checking stays a constant factor of the replay, not O(events x live).
  static constexpr std::uint64_t kCheckBatch = 1024;
  std::uint64_t live_placed_ = 0, since_check_ = 0;
  std::unique_ptr<HistoryRecorder> history_;     // a history pass (sim/engine/history.h)
  bool in_window_ = true, window_seen_ = false;  // --from/--to: the current event lies in it
};

}  // namespace fragsim

// Metrics: what the engine records after every event, in O(1) (docs/metrics.md).
//
//   SpaceMetrics — one (device, space): peaks of allocated and reserved memory, external
//     fragmentation at the peak of reserved and its maximum, the figures at the peak of allocated,
//     and its decimated timeline;
//   Totals       — the run's sums over every space at one moment (requested bytes may sum past
//     64 bits: they are kept in 128 and reported saturated).
// A Timeline keeps at most kMaxTimelinePoints: a new point per `stride` events, folded into the
// current one (keeping maxima) between; when full, neighbours merge and the stride doubles.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/engine/run_result.h"

namespace fragsim {

using ByteSum = unsigned __int128;
inline Bytes saturate(ByteSum v) { return v > kTooLarge ? kTooLarge : static_cast<Bytes>(v); }

class Timeline {
 public:
  // Between strides (nearly every event) p folds into the current point, inline; else add().
  void record(std::uint64_t event_index, const TimelinePoint& p) {
    if (points_.empty() || event_index >= next_) return add(event_index, p);
    auto& q = points_.back();
    q.requested = std::max(q.requested, p.requested);
    q.allocated = std::max(q.allocated, p.allocated);
    q.reserved = std::max(q.reserved, p.reserved);
    q.fragmentation = std::max(q.fragmentation, p.fragmentation);
  }
  std::vector<TimelinePoint> take() { return std::move(points_); }

 private:
  void add(std::uint64_t event_index, const TimelinePoint& p);
  std::vector<TimelinePoint> points_;
  std::uint64_t stride_ = 1, next_ = 0;
};

class SpaceMetrics {
 public:
  // The space's footprint after an event (requested: its live requested bytes); `timeline`: the
  // event is one the timeline shows (--from/--to). True when its allocated memory reached a new peak.
  bool account(const Footprint& u, std::uint64_t event_index, Bytes requested, bool timeline = true) {
    bool new_peak = false;
    // The peak's state is the last one before allocated memory leaves its first peak, as the engine
    // snapshots it (before the free that leaves it): what the allocator does to reserved memory
    // meanwhile (an OOM's release of its cache, empty_cache) is part of that state.
    if (u.allocated > peak_allocated_) {
      peak_allocated_ = u.allocated;
      at_peak_open_ = true;
      new_peak = true;
    } else if (u.allocated < peak_allocated_) {
      at_peak_open_ = false;
    }
    if (at_peak_open_) {
      at_peak_.allocated = u.allocated;
      at_peak_.reserved = u.reserved;
      at_peak_.largest_free = u.largest_free;
    }
    double f = fragmentation(u);
    if (begun_ && u.reserved > held_before_) grew_in_recording_ = true;
    if (u.reserved > peak_reserved_) {
      if (peak_reserved_) grew_ = true;  // more than the first event that reserved anything held
      peak_reserved_ = u.reserved;
      frag_at_peak_ = f;
    }
    frag_max_ = std::max(frag_max_, f);
    last_ = u;
    if (timeline) timeline_.record(event_index, {event_index, requested, u.allocated, u.reserved, f});
    return new_peak;
  }
  // The state before a mid-run recording is held, with `reserved` reserved: what the recording's
  // own events reserve beyond it is measured from here.
  void recording_begins(Bytes reserved) {
    begun_ = true;
    held_before_ = reserved;
  }
  const Footprint& last() const { return last_; }
  Bytes peak_allocated() const { return peak_allocated_; }
  Bytes peak_reserved() const { return peak_reserved_; }
  // Peaks and fragmentation into r; the timeline moves out.
  void finish(SpaceResult& r);

 private:
  Footprint last_;
  Bytes peak_allocated_ = 0, peak_reserved_ = 0;
  double frag_at_peak_ = 0, frag_max_ = 0;
  bool at_peak_open_ = false;                       // allocated memory has not left its first peak yet
  bool grew_ = false;                               // reserved memory rose after the first event that reserved any
  bool begun_ = false, grew_in_recording_ = false;  // recording_begins; reserved rose above held_before_ since
  Bytes held_before_ = 0;
  SpaceMoment at_peak_;
  Timeline timeline_;
};

// Sums over every space at one moment, and their peaks over time. While a run has one space these
// are that space's own figures: the engine starts keeping them when a second space appears.
struct Totals {
  ByteSum requested = 0, peak_requested = 0;
  Bytes allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;
  // A space's footprint went from `was` to `now`.
  void update(const Footprint& was, const Footprint& now) {
    allocated += now.allocated - was.allocated;
    reserved += now.reserved - was.reserved;
    if (allocated > peak_allocated) peak_allocated = allocated;
    if (reserved > peak_reserved) peak_reserved = reserved;
  }
  // The sums as the one space so far has them (m: its metrics).
  void start_from(const SpaceMetrics& m) {
    allocated = m.last().allocated;
    reserved = m.last().reserved;
    peak_allocated = m.peak_allocated();
    peak_reserved = m.peak_reserved();
  }
  void add_requested(Bytes b) {
    requested += b;
    if (requested > peak_requested) peak_requested = requested;
  }
  void remove_requested(Bytes b) { requested -= b; }
};

}  // namespace fragsim

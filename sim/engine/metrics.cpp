#include "sim/engine/metrics.h"

#include <algorithm>

namespace fragsim {

void Timeline::add(std::uint64_t index, const TimelinePoint& p) {
  points_.push_back(p);
  points_.back().event_index = index;
  next_ = index + stride_;
  if (points_.size() == kMaxTimelinePoints) {
    for (size_t i = 0; i < kMaxTimelinePoints / 2; ++i) {
      auto a = points_[2 * i], b = points_[2 * i + 1];
      points_[i] = {a.event_index, std::max(a.requested, b.requested), std::max(a.allocated, b.allocated),
                    std::max(a.reserved, b.reserved), std::max(a.fragmentation, b.fragmentation)};
    }
    points_.resize(kMaxTimelinePoints / 2);
    stride_ *= 2;
    next_ = points_.back().event_index + stride_;
  }
}

void SpaceMetrics::finish(SpaceResult& r) {
  r.peak_allocated = peak_allocated_;
  r.peak_reserved = peak_reserved_;
  r.frag_at_peak = frag_at_peak_;
  r.frag_max = frag_max_;
  r.reserved_up_front = peak_reserved_ && !grew_;
  r.reserved_before_recording = begun_ && held_before_ && !grew_in_recording_;
  r.at_peak_allocated.allocated = at_peak_.allocated;
  r.at_peak_allocated.reserved = at_peak_.reserved;
  r.at_peak_allocated.largest_free = at_peak_.largest_free;
  r.at_peak_allocated.device = r.device;
  r.at_peak_allocated.space = r.space;
  r.final_allocated = last_.allocated;
  r.final_reserved = last_.reserved;
  r.timeline = timeline_.take();
}

}  // namespace fragsim

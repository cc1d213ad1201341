#include "sim/metrics.h"

#include <algorithm>

namespace fragsim {

void Timeline::record(std::uint64_t index, const TimelinePoint& p) {
  if (!points_.empty() && index < next_) {  // fold into the current point, keeping maxima
    auto& q = points_.back();
    q.requested = std::max(q.requested, p.requested);
    q.allocated = std::max(q.allocated, p.allocated);
    q.reserved = std::max(q.reserved, p.reserved);
    q.fragmentation = std::max(q.fragmentation, p.fragmentation);
    return;
  }
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

bool SpaceMetrics::account(const Usage& u, std::uint64_t event_index, Bytes requested, bool timeline) {
  bool new_peak = false;
  if (u.allocated > peak_allocated_) {
    peak_allocated_ = u.allocated;
    at_peak_.allocated = u.allocated;
    at_peak_.reserved = u.reserved;
    at_peak_.largest_free = u.largest_free;
    new_peak = true;
  }
  double f = fragmentation(u);
  if (u.reserved > peak_reserved_) {
    peak_reserved_ = u.reserved;
    frag_at_peak_ = f;
  }
  frag_max_ = std::max(frag_max_, f);
  last_ = u;
  if (timeline) timeline_.record(event_index, {event_index, requested, u.allocated, u.reserved, f});
  return new_peak;
}

void SpaceMetrics::finish(SpaceResult& r) {
  r.peak_allocated = peak_allocated_;
  r.peak_reserved = peak_reserved_;
  r.frag_at_peak = frag_at_peak_;
  r.frag_max = frag_max_;
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

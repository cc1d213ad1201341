#include "policies/plan_instance.h"

#include <algorithm>
#include <map>

namespace fragsim {

namespace {

// Every buffer's start and end as (time, end first, index): at one instant the buffers that end
// leave before those that start arrive ([lower, upper) intervals).
struct Edge {
  std::uint64_t t;
  bool start;  // false sorts first
  std::uint32_t i;
  bool operator<(const Edge& o) const { return t != o.t ? t < o.t : start != o.start ? !start : i < o.i; }
};

std::vector<Edge> edges_of(const std::vector<PlanBuffer>& buffers) {
  std::vector<Edge> e;
  e.reserve(2 * buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!buffers[i].size) continue;
    e.push_back({buffers[i].lower, true, static_cast<std::uint32_t>(i)});
    e.push_back({buffers[i].upper, false, static_cast<std::uint32_t>(i)});
  }
  std::sort(e.begin(), e.end());
  return e;
}

}  // namespace

Bytes live_bytes_bound(const std::vector<PlanBuffer>& buffers) {
  Bytes live = 0, most = 0;
  bool saturated = false;
  for (const Edge& e : edges_of(buffers)) {
    const Bytes s = buffers[e.i].size;
    if (e.start) {
      saturated = saturated || live > kTooLarge - s;
      live = saturated ? kTooLarge : live + s;
      most = std::max(most, live);
    } else if (!saturated) {
      live -= s;
    }
  }
  return most;
}

Bytes plan_height(const std::vector<PlanBuffer>& buffers, const std::vector<Bytes>& offsets) {
  Bytes h = 0;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].size) h = std::max(h, sat_add(offsets[i], buffers[i].size));
  return h;
}

std::optional<PlanClash> find_clash(const std::vector<PlanBuffer>& buffers, const std::vector<Bytes>& offsets) {
  std::map<Bytes, std::uint32_t> live;  // offset → buffer, never overlapping (checked as each arrives)
  auto clash = [](size_t a, size_t b) { return PlanClash{std::min(a, b), std::max(a, b)}; };
  for (const Edge& e : edges_of(buffers)) {
    const Bytes off = offsets[e.i];
    if (!e.start) {
      live.erase(off);
      continue;
    }
    auto [it, fresh] = live.emplace(off, e.i);
    if (!fresh) return clash(it->second, e.i);
    if (auto next = std::next(it); next != live.end() && sat_add(off, buffers[e.i].size) > next->first)
      return clash(next->second, e.i);
    if (it != live.begin()) {
      auto prev = std::prev(it);
      if (sat_add(prev->first, buffers[prev->second].size) > off) return clash(prev->second, e.i);
    }
  }
  return std::nullopt;
}

}  // namespace fragsim

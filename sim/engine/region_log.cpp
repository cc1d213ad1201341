#include "sim/engine/region_log.h"

#include <algorithm>

namespace fragsim {

RegionLog::Live* RegionLog::holding(std::uint32_t slot, Addr addr) {
  if (slot >= tracks_.size()) return nullptr;
  auto& rs = tracks_[slot].regions;
  auto it = rs.upper_bound(addr);
  if (it == rs.begin()) return nullptr;
  --it;
  const RegionLife& g = lives_[it->second.life];
  return addr - g.base < g.size ? &it->second : nullptr;
}

void RegionLog::placed(std::uint32_t slot, Addr addr, Bytes block) {
  if (cut_at_ != RegionLife::kHeld || slot >= tracks_.size()) return;
  tracks_[slot].in_use += block;
  if (Live* r = holding(slot, addr)) r->in_use += block;
}

void RegionLog::freed(std::uint32_t slot, Addr addr, Bytes block) {
  if (cut_at_ != RegionLife::kHeld || slot >= tracks_.size()) return;
  tracks_[slot].in_use -= std::min(tracks_[slot].in_use, block);
  if (Live* r = holding(slot, addr)) r->in_use -= std::min(r->in_use, block);
}

void RegionLog::point(Live& r, std::uint64_t event) {
  RegionLife& g = lives_[r.life];
  if (!g.usage.empty() && g.usage.back().event == event) {
    g.usage.back().mapped = r.mapped;
    g.usage.back().in_use = r.in_use;
  } else {
    g.usage.push_back({event, r.mapped, r.in_use});
    ++points_;
  }
  r.last_mapped = r.mapped;
  r.last_in_use = r.in_use;
}

void RegionLog::cut(std::uint64_t event) {
  cut_at_ = event;
  tracks_.clear();
}

void RegionLog::refresh(std::uint32_t slot, const Event& ev, const SlotView& view) {
  MemoryMap map;
  view.policy->memory_map(&map);
  work_ += map.blocks.size() + map.regions.size();
  if (work_ > kMapWork) return cut(ev.index);
  std::sort(map.regions.begin(), map.regions.end(), [](const auto& a, const auto& b) { return a.base < b.base; });
  // Each region's mapped and in-use bytes, from the blocks it holds.
  std::vector<Bytes> unmapped(map.regions.size(), 0), in_use(map.regions.size(), 0);
  for (const auto& b : map.blocks) {
    auto it = std::upper_bound(map.regions.begin(), map.regions.end(), b.addr,
                               [](Addr a, const MemoryMap::Region& g) { return a < g.base; });
    if (it == map.regions.begin() || b.addr - std::prev(it)->base >= std::prev(it)->size) continue;
    const size_t i = static_cast<size_t>(std::prev(it) - map.regions.begin());
    if (!b.mapped) unmapped[i] += b.size;
    if (b.in_use) in_use[i] += b.size;
  }
  SlotTrack& tr = tracks_[slot];
  std::map<Addr, Live> now;
  Bytes sum = 0;
  for (size_t i = 0; i < map.regions.size(); ++i) {
    const auto& g = map.regions[i];
    auto was = tr.regions.find(g.base);
    Live r;
    if (was != tr.regions.end() && lives_[was->second.life].id == g.id) {
      r = was->second;
      lives_[r.life].size = std::max(lives_[r.life].size, g.size);
      tr.regions.erase(was);
    } else {
      if (lives_.size() >= kMaxRegions) return cut(ev.index);
      RegionLife life;
      life.slot = slot;
      life.id = g.id;
      life.base = g.base;
      life.size = g.size;
      life.obtained_event = ev.index;
      life.obtained_t = ev.t;
      life.pre_trace = ev.has(key::kPreTrace);
      r.life = lives_.size();
      r.last_mapped = r.last_in_use = ~Bytes{0};  // a point at its obtain
      lives_.push_back(std::move(life));
    }
    r.mapped = g.size - std::min(g.size, unmapped[i]);
    r.in_use = in_use[i];
    sum += r.in_use;
    if (r.mapped != r.last_mapped || r.last_in_use == ~Bytes{0}) point(r, ev.index);
    now.emplace(g.base, r);
  }
  for (auto& [base, r] : tr.regions) {  // the regions the map no longer lists: released
    RegionLife& g = lives_[r.life];
    g.released_event = ev.index;
    g.released_t = ev.t;
    g.released_by = ev.op;
  }
  tr.regions = std::move(now);
  tr.in_use = sum;
  tr.calls = view.device_calls;
  tr.reserved = view.footprint.reserved;
  tr.seen = true;
}

void RegionLog::after(const Event& ev, const std::vector<SlotView>& slots, bool sample) {
  if (cut_at_ != RegionLife::kHeld) return;
  if (tracks_.size() < slots.size()) tracks_.resize(slots.size());
  for (std::uint32_t i = 0; i < slots.size(); ++i) {
    SlotTrack& tr = tracks_[i];
    const SlotView& v = slots[i];
    const bool moved = !tr.seen || tr.calls != v.device_calls || tr.reserved != v.footprint.reserved;
    if (moved || (sample && tr.in_use != v.footprint.allocated)) {
      refresh(i, ev, v);
      if (cut_at_ != RegionLife::kHeld) return;
    }
    if (!sample) continue;
    if (points_ >= kMaxUsagePoints) return cut(ev.index);
    for (auto& [base, r] : tracks_[i].regions)
      if (r.in_use != r.last_in_use || r.mapped != r.last_mapped) point(r, ev.index);
  }
}

std::vector<RegionLife> RegionLog::finish() {
  tracks_.clear();
  return std::move(lives_);
}

}  // namespace fragsim

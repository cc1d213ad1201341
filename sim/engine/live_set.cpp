#include "sim/engine/live_set.h"

#include <algorithm>

#include "sim/engine/site_grouper.h"

namespace fragsim {

std::uint32_t LiveSet::intern(const std::string& name) {
  if (name.empty()) return 0;
  auto [it, fresh] = name_ids_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
  if (fresh) {
    names_kept_.spend(name.size());
    names_.push_back(name);
  }
  return it->second;
}

// The one place an event's fields become what reports show of a buffer: fill_rec (kept per live
// handle: the name interned, the shape apart) and view_of (a BufferView from a record).
// fill_rec writes the record where it is kept, field by field: a record built on the stack and
// copied is read back in 16-byte pieces before its 8-byte stores have left the store buffer, a
// store-forwarding stall that cost remember() most of its time (perf annotate).
void LiveSet::fill_rec(Rec& l, const Event& ev, const Placement& p, std::uint32_t name) {
  l.id = ev.id;
  l.requested = ev.size;
  l.block = p.block;
  l.event_index = ev.index;
  l.t = ev.t;
  l.addr = p.addr;
  l.has_addr = p.has_addr;
  l.name = name;
  l.stack = ev.has(key::kStack) ? ev.stack : 0;
  l.dtype = ev.dtype;
  l.has_shape = ev.has(key::kShape);
}

BufferView LiveSet::view_of(const Rec& l, std::string name, std::span<const std::uint64_t> shape, std::uint32_t device,
                            Space space, std::uint64_t now) {
  BufferView b;
  b.id = l.id;
  b.event_index = l.event_index;
  b.t = l.t;
  b.device = device;
  b.space = space;
  b.requested = l.requested;
  b.block = l.block;
  b.has_addr = l.has_addr;
  b.addr = l.addr;
  b.name = std::move(name);
  b.dtype = l.dtype;
  b.has_shape = l.has_shape;
  if (l.has_shape) b.shape.assign(shape.begin(), shape.end());
  b.stack = l.stack;
  b.age_events = now - std::min(now, l.event_index);
  return b;
}

void LiveSet::remember(const Event& ev, const Placement& p, std::uint32_t slot) {
  if (ev.handle >= live_.size()) {
    live_.resize(ev.handle + 1);
    shapes_.resize(ev.handle + 1);
  }
  slot_[ev.handle] = slot;
  fill_rec(live_[ev.handle], ev, p, ev.has(key::kName) ? intern(ev.name) : 0);
  if (live_[ev.handle].has_shape) shapes_[ev.handle] = ev.shape;
  if (indexed_ && p.has_addr) {
    if (slot >= by_addr_.size()) by_addr_.resize(slot + 1);
    by_addr_[slot].at.emplace(p.addr, ev.handle);
    by_addr_[slot].widest = std::max(by_addr_[slot].widest, p.block);
  }
}

void LiveSet::unindex(Handle h) {
  if (!live_[h].has_addr) return;
  auto& at = by_addr_[slot_[h]].at;
  for (auto [it, end] = at.equal_range(live_[h].addr); it != end; ++it)
    if (it->second == h) {
      at.erase(it);
      return;
    }
}

BufferView LiveSet::request_view(const Event& ev) {
  Rec r;
  fill_rec(r, ev, Placement::failed(), 0);
  BufferView b = view_of(r, ev.has(key::kName) ? ev.name : std::string(), ev.shape, ev.device, ev.space, ev.index);
  b.block = 0;
  return b;
}

BufferView LiveSet::view(Handle h, std::uint64_t now, const std::vector<SlotView>& slots) const {
  const SlotView& s = slots[slot_[h]];
  return view_of(live_[h], names_[live_[h].name], shapes_[h], s.device, s.space, now);
}

Moment LiveSet::moment(std::uint64_t event_index, Tick t, const std::vector<SlotView>& slots,
                       const std::function<bool(std::uint32_t)>& include, bool keep_live) const {
  Moment m;
  m.event_index = event_index;
  m.t = t;
  std::vector<std::pair<Bytes, Handle>> top;  // a min-heap of the kTopBuffers largest
  auto cmp = [](const auto& a, const auto& b) { return a.first > b.first; };
  SiteGrouper sites;
  for (Handle h = 0; h < state_.size() && h < live_.size(); ++h) {
    if (state_[h] != State::kPlaced || !include(slot_[h])) continue;
    ++m.live_buffers;
    sites.add(live_[h].stack, live_[h].name, live_[h].block, live_[h].requested);
    if (keep_live && live_[h].has_addr) {
      if (m.live.size() < kMaxMapBlocks)
        m.live.push_back(view(h, event_index, slots));
      else
        m.live_truncated = true;
    }
    if (top.size() < kTopBuffers) {
      top.emplace_back(live_[h].block, h);
      std::push_heap(top.begin(), top.end(), cmp);
    } else if (live_[h].block > top.front().first) {
      std::pop_heap(top.begin(), top.end(), cmp);
      top.back() = {live_[h].block, h};
      std::push_heap(top.begin(), top.end(), cmp);
    }
  }
  std::sort(top.begin(), top.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (const auto& [size, h] : top) m.top_buffers.push_back(view(h, event_index, slots));
  sites.finish([&](std::uint32_t n) { return names_[n]; }, kMaxSites, &m.sites, &m.other_sites);
  for (std::uint32_t i = 0; i < slots.size(); ++i) {
    if (!include(i)) continue;
    const SlotView& s = slots[i];
    SpaceMoment sm;
    sm.device = s.device;
    sm.space = s.space;
    sm.allocated = s.footprint.allocated;
    sm.reserved = s.footprint.reserved;
    sm.largest_free = s.footprint.largest_free;
    s.policy->memory_map(&sm.map);
    if (sm.map.blocks.size() > kMaxMapBlocks) {
      sm.map.blocks.resize(kMaxMapBlocks);
      sm.truncated = true;
    }
    m.allocated += sm.allocated;
    m.reserved += sm.reserved;
    m.spaces.push_back(std::move(sm));
  }
  return m;
}

std::vector<Handle> LiveSet::overlapping(std::uint32_t slot, const Extent& e, Handle except) const {
  std::vector<Handle> in_the_way;
  auto meets = [&](Handle h) {
    return state_[h] == State::kPlaced && slot_[h] == slot && h != except && live_[h].has_addr &&
           live_[h].addr < e.end() && e.addr < live_[h].addr + std::max<Bytes>(live_[h].block, 1);
  };
  if (!indexed_) {
    for (Handle h = 0; h < state_.size() && h < live_.size(); ++h)
      if (meets(h)) in_the_way.push_back(h);
    return in_the_way;
  }
  if (slot >= by_addr_.size()) return in_the_way;
  // Buffers starting below e.end(), walked down to where even the widest block ends before e.
  const ByAddr& idx = by_addr_[slot];
  for (auto it = idx.at.lower_bound(e.end()); it != idx.at.begin();) {
    --it;
    if (it->first < e.addr && e.addr - it->first >= idx.widest) break;
    if (meets(it->second)) in_the_way.push_back(it->second);
  }
  std::sort(in_the_way.begin(), in_the_way.end());  // handle order, as the scan above gives
  return in_the_way;
}

void LiveSet::collect_stacks(RunResult& r) const {
  auto note = [&](std::uint64_t id) {
    if (!id || r.stacks.count(id)) return;
    if (auto it = stack_frames_.find(id); it != stack_frames_.end()) r.stacks[id] = it->second;
  };
  auto note_moment = [&](const Moment& m) {
    for (const auto& b : m.top_buffers) note(b.stack);
    for (const auto& b : m.live) note(b.stack);
    for (const auto& s : m.sites) note(s.stack);
  };
  for (const auto& s : r.spaces)
    if (s.peak) note_moment(*s.peak);
  for (const auto& o : r.ooms) {
    note(o.request.stack);
    if (o.moment) note_moment(*o.moment);
  }
}

}  // namespace fragsim

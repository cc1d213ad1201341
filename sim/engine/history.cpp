#include "sim/engine/history.h"

#include <algorithm>
#include <span>
#include <utility>

namespace fragsim {

namespace {

HistoryFigures figures_of(std::uint32_t slot, const Footprint& u) {
  return {slot, u.allocated, u.reserved, u.largest_free, fragmentation(u)};
}

// Unmapped bytes of a region's blocks (reserved address space with nothing behind it).
Bytes unmapped_bytes(const HistoryRegion& g) {
  Bytes b = 0;
  for (const auto& x : g.blocks)
    if (x.kind == HistoryBlock::kUnmapped) b += x.size;
  return b;
}

}  // namespace

HistoryRecorder::HistoryRecorder(const HistorySpec& spec, const LiveSet& live) : spec_(spec), live_(live) {
  for (const auto& [a, b] : spec.exact)
    if (a > 0) starts_.push_back(a - 1);
  if (spec.viewer) log_ = std::make_shared<AllocationLog>(spec.allocation_budget);
}

HistoryRecorder::SlotTrack& HistoryRecorder::track(std::uint32_t slot) {
  if (slot >= tracks_.size()) tracks_.resize(slot + 1);
  return tracks_[slot];
}

bool HistoryRecorder::exact(std::uint64_t event) const {
  if (cut_ && event >= cut_at_) return false;
  auto it = std::upper_bound(spec_.exact.begin(), spec_.exact.end(), std::make_pair(event, kStillLive));
  return it != spec_.exact.begin() && event <= std::prev(it)->second;
}

void HistoryRecorder::note_stack(std::uint64_t stack) {
  if (!stack || out_->stacks.count(stack)) return;
  if (const auto* f = live_.frames(stack)) out_->stacks[stack] = *f;
}

// The record of a live buffer (made once, when something first names it).
std::int64_t HistoryRecorder::record(Handle h, std::uint32_t slot, const std::vector<SlotView>& slots) {
  if (h >= buffer_of_.size()) buffer_of_.resize(h + 1, -1);
  if (buffer_of_[h] >= 0) return buffer_of_[h];
  HistoryBuffer b;
  b.view = live_.view(h, 0, slots);
  b.slot = slot;
  note_stack(b.view.stack);
  buffer_of_[h] = static_cast<std::int64_t>(out_->buffers.size());
  out_->buffers.push_back(std::move(b));
  return buffer_of_[h];
}

// A buffer live in the window competes for one of the slot's bands (the largest blocks win).
void HistoryRecorder::offer(Handle h, std::uint32_t slot, Bytes live_after, const std::vector<SlotView>& slots) {
  if (!spec_.viewer || !spec_.bands) return;
  if (h >= candidate_of_.size()) candidate_of_.resize(h + 1, -1);
  if (candidate_of_[h] >= 0) return;
  BufferView v = live_.view(h, 0, slots);
  if (!v.block) return;
  SlotTrack& tr = track(slot);
  if (tr.bands.size() >= spec_.bands) {
    auto smallest = tr.bands.begin();
    if (v.block <= smallest->first) return;
    Candidate& c = cands_[smallest->second];
    c.alive = false;
    if (c.buf.free_event == kStillLive) candidate_of_[c.handle] = -1;
    free_cands_.push_back(smallest->second);
    tr.bands.erase(smallest);
  }
  std::uint32_t i;
  if (!free_cands_.empty()) {
    i = free_cands_.back();
    free_cands_.pop_back();
  } else {
    i = static_cast<std::uint32_t>(cands_.size());
    cands_.emplace_back();
  }
  Candidate& c = cands_[i];
  c = Candidate();
  c.buf.view = std::move(v);
  c.buf.slot = slot;
  c.live_at_alloc = live_after;
  c.alive = true;
  c.handle = h;
  candidate_of_[h] = i;
  tr.bands.insert({c.buf.view.block, i});
}

void HistoryRecorder::enter_window(std::uint64_t event, const std::vector<SlotView>& slots) {
  if (in_window_ || event < spec_.first) return;
  in_window_ = true;
  for (Handle h = 0; h < live_.handle_limit(); ++h)  // the buffers live as the window opens
    if (live_.state(h) == LiveSet::State::kPlaced) offer(h, live_.slot_of(h), 0, slots);
}

void HistoryRecorder::placed(const Event& ev, const Placement& p, std::uint32_t slot,
                             const std::vector<SlotView>& slots) {
  enter_window(ev.index, slots);
  // Every allocation up to the window's end: those before it may still be live in it.
  if (log_ && ev.index <= spec_.last) log_->placed(slot, ev.handle, ev, p.block, p.has_addr, p.addr, p.pieces);
  SlotTrack& tr = track(slot);
  tr.live += p.block;
  if (in_window_ && ev.index <= spec_.last) offer(ev.handle, slot, tr.live, slots);
  if (!p.has_addr) return;
  // A block in several pieces is each piece where it lies (kept until freed: the live set knows
  // the block by its largest).
  const Extent one[1] = {{p.addr, p.block}};  // the common case: no allocation per placement
  const std::span<const Extent> pieces = p.pieces.empty() ? std::span<const Extent>(one) : p.pieces;
  if (!p.pieces.empty()) {
    if (ev.handle >= pieces_.size()) pieces_.resize(ev.handle + 1);
    pieces_[ev.handle] = p.pieces;
  }
  const bool delta = exact(ev.index);
  for (const Extent& e : pieces) {
    if (spec_.viewer) regions_.placed(slot, e.addr, e.bytes);
    tr.at[e.addr.value()] = ev.handle;
    if (!delta) continue;
    Delta d;
    d.kind = Delta::kPlace;
    d.slot = slot;
    d.addr = e.addr;
    d.size = e.bytes;
    d.buffer = record(ev.handle, slot, slots);
    pending_.changes.push_back(std::move(d));
    tr.mirror += e.bytes;
  }
}

void HistoryRecorder::freeing(const Event& ev, const std::vector<SlotView>& slots) {
  const Handle h = ev.handle;
  const std::uint64_t event = ev.index;
  const Tick t = ev.t;
  enter_window(event, slots);
  const std::uint32_t slot = live_.slot_of(h);
  BufferView v = live_.view(h, 0, slots);
  if (log_) log_->freed(h, event, t, ev.has(key::kStream), ev.stream);
  SlotTrack& tr = track(slot);
  tr.live -= std::min(tr.live, v.block);
  const Extent one[1] = {{v.addr, v.block}};
  std::vector<Extent> several;  // a block in several pieces (empty: no allocation per free)
  if (h < pieces_.size() && !pieces_[h].empty()) several = std::exchange(pieces_[h], {});
  const std::span<const Extent> pieces = !several.empty() ? std::span<const Extent>(several)
                                         : v.has_addr     ? std::span<const Extent>(one)
                                                          : std::span<const Extent>();
  const bool delta = exact(event);
  for (const Extent& e : pieces) {
    if (spec_.viewer) regions_.freed(slot, e.addr, e.bytes);
    tr.at.erase(e.addr.value());
    if (!delta) continue;
    Delta d;
    d.kind = Delta::kFree;
    d.slot = slot;
    d.addr = e.addr;
    d.size = e.bytes;
    d.buffer = record(h, slot, slots);
    pending_.changes.push_back(std::move(d));
    tr.mirror -= std::min(tr.mirror, e.bytes);
  }
  if (h < candidate_of_.size() && candidate_of_[h] >= 0) {
    Candidate& c = cands_[static_cast<size_t>(candidate_of_[h])];
    c.buf.free_event = event;
    c.buf.free_t = t;
    c.live_at_free = tr.live;
    candidate_of_[h] = -1;
  }
  if (h < buffer_of_.size() && buffer_of_[h] >= 0) {
    out_->buffers[static_cast<size_t>(buffer_of_[h])].free_event = event;
    out_->buffers[static_cast<size_t>(buffer_of_[h])].free_t = t;
    buffer_of_[h] = -1;
  }
}

HistorySlotState HistoryRecorder::slot_state(std::uint32_t slot, MemoryMap map, const std::vector<SlotView>& slots) {
  const SlotView& s = slots[slot];
  HistorySlotState st;
  st.figures = figures_of(slot, s.footprint);
  std::sort(map.regions.begin(), map.regions.end(), [](const auto& a, const auto& b) { return a.base < b.base; });
  std::sort(map.blocks.begin(), map.blocks.end(), [](const auto& a, const auto& b) { return a.addr < b.addr; });
  for (const auto& g : map.regions) st.regions.push_back({g.base, g.size, g.id, {}});
  const SlotTrack& tr = track(slot);
  size_t kept = 0;
  for (const auto& b : map.blocks) {
    auto it = std::upper_bound(st.regions.begin(), st.regions.end(), b.addr,
                               [](Addr a, const HistoryRegion& g) { return a < g.base; });
    if (it == st.regions.begin() || b.addr - std::prev(it)->base >= std::prev(it)->size) continue;
    if (kept++ == spec_.map_blocks) {
      st.truncated = true;
      break;
    }
    HistoryBlock hb;
    hb.addr = b.addr;
    hb.size = b.size;
    hb.kind = b.in_use ? HistoryBlock::kInUse : b.mapped ? HistoryBlock::kFree : HistoryBlock::kUnmapped;
    if (b.in_use)
      if (auto at = tr.at.find(b.addr.value()); at != tr.at.end()) hb.buffer = record(at->second, slot, slots);
    std::prev(it)->blocks.push_back(hb);
  }
  return st;
}

// The slot's regions as they now are, against what the viewer holds: each region obtained,
// resized or remapped is written whole, each one released is written gone (all of them whole on
// `resync`, when the blocks in use moved without a placement or free the engine saw).
void HistoryRecorder::follow_regions(std::uint32_t slot, const std::vector<SlotView>& slots, bool resync) {
  MemoryMap map;
  slots[slot].policy->memory_map(&map);
  HistorySlotState st = slot_state(slot, std::move(map), slots);
  SlotTrack& tr = track(slot);
  std::map<Addr, std::pair<Bytes, Bytes>> now;
  for (auto& g : st.regions) {
    std::pair<Bytes, Bytes> sig{g.size, unmapped_bytes(g)};
    now[g.base] = sig;
    auto was = tr.regions.find(g.base);
    if (!resync && was != tr.regions.end() && was->second == sig) continue;
    Delta d;
    d.kind = Delta::kRegion;
    d.slot = slot;
    d.addr = g.base;
    d.size = g.size;
    written_ += g.blocks.size();
    d.region = std::move(g);
    pending_.changes.push_back(std::move(d));
  }
  for (const auto& [base, sig] : tr.regions)
    if (!now.count(base)) {
      Delta d;
      d.kind = Delta::kRegionGone;
      d.slot = slot;
      d.addr = base;
      d.size = sig.first;
      pending_.changes.push_back(std::move(d));
    }
  tr.regions = std::move(now);
}

void HistoryRecorder::keyframe(std::uint64_t event, Tick t, const std::vector<SlotView>& slots) {
  Moment m = live_.moment(
      event, t, slots, [](std::uint32_t) { return true; }, false);
  Keyframe k;
  k.event = event;
  k.t = t;
  for (std::uint32_t i = 0; i < slots.size(); ++i) {
    MemoryMap map = std::move(m.spaces[i].map);
    k.slots.push_back(slot_state(i, std::move(map), slots));
    k.slots.back().truncated = k.slots.back().truncated || m.spaces[i].truncated;
    SlotTrack& tr = track(i);
    tr.regions.clear();
    for (const auto& g : k.slots.back().regions) {
      tr.regions[g.base] = {g.size, unmapped_bytes(g)};
      keyframe_blocks_ += g.blocks.size();
    }
    tr.mirror = slots[i].footprint.allocated;
    tr.calls = slots[i].device_calls;
    tr.reserved = slots[i].footprint.reserved;
  }
  for (const auto& s : m.sites) note_stack(s.stack);
  k.sites = std::move(m.sites);
  k.other_sites = m.other_sites;
  out_->keyframes.push_back(std::move(k));
}

void HistoryRecorder::after(const Event& ev, const std::vector<SlotView>& slots) {
  const std::uint64_t e = ev.index;
  if (e > stopped_at_) return;  // not replayed
  // The same event again (a re-held state before the recording, held at the event the engine fed
  // other parts of that state at): its sample and keyframe are taken again, after it all.
  if (after_any_ && e == last_after_) {
    if (next_sample_ > 0 && spec_.samples[next_sample_ - 1] == e) {
      --next_sample_;
      for (auto& tl : out_->timelines)
        if (!tl.points.empty() && tl.points.back().event == e) tl.points.pop_back();
    }
    if (next_keyframe_ > 0 && spec_.keyframes[next_keyframe_ - 1] == e) {
      --next_keyframe_;
      if (!out_->keyframes.empty() && out_->keyframes.back().event == e) {
        for (const auto& sl : out_->keyframes.back().slots)
          for (const auto& g : sl.regions) keyframe_blocks_ -= std::min(keyframe_blocks_, g.blocks.size());
        out_->keyframes.pop_back();
      }
    }
  }
  after_any_ = true;
  last_after_ = e;
  enter_window(e, slots);
  if (spec_.viewer) {
    const bool sample = next_sample_ < spec_.samples.size() && spec_.samples[next_sample_] == e;
    regions_.after(ev, slots, sample);
  }
  for (std::uint32_t i = 0; i < slots.size(); ++i) track(i);
  if (exact(e)) {
    for (std::uint32_t i = 0; i < slots.size(); ++i) {
      SlotTrack& tr = tracks_[i];
      const Footprint& u = slots[i].footprint;
      bool resync = tr.mirror != u.allocated;
      if (resync || tr.calls != slots[i].device_calls || tr.reserved != u.reserved || !tr.seen)
        follow_regions(i, slots, resync);
      tr.mirror = u.allocated;
      tr.calls = slots[i].device_calls;
      tr.reserved = u.reserved;
      tr.seen = true;
    }
    if (!pending_.changes.empty()) {
      std::vector<bool> changed(slots.size(), false);
      for (const auto& d : pending_.changes) changed[d.slot] = true;
      for (std::uint32_t i = 0; i < slots.size(); ++i)
        if (changed[i]) pending_.figures.push_back(figures_of(i, slots[i].footprint));
      pending_.event = e;
      pending_.t = ev.t;
      pending_.pre_trace = ev.has(key::kPreTrace);
      written_ += pending_.changes.size();
      out_->deltas.push_back(std::move(pending_));
      pending_ = DeltaEvent();
      if (spec_.viewer && !spec_.events && written_ > spec_.delta_budget) {  // the rest from keyframes only
        cut_ = true;
        cut_at_ = e + 1;
        out_->budget_exceeded = true;
      }
    }
  }
  pending_ = DeltaEvent();
  while (next_sample_ < spec_.samples.size() && spec_.samples[next_sample_] <= e) {
    if (spec_.samples[next_sample_++] != e) continue;
    for (std::uint32_t i = 0; i < slots.size(); ++i) {
      if (out_->timelines.size() <= i) out_->timelines.resize(i + 1);
      if (i < slot_stopped_at_.size() && e > slot_stopped_at_[i]) continue;  // its process stopped
      out_->timelines[i].points.push_back({e, ev.t, tracks_[i].live, 0});
    }
  }
  while (next_keyframe_ < spec_.keyframes.size() && spec_.keyframes[next_keyframe_] <= e) {
    if (spec_.keyframes[next_keyframe_++] != e) continue;
    // A keyframe that starts an exact range is owed; the others fit the budget or are left out.
    bool owed = std::binary_search(starts_.begin(), starts_.end(), e);
    if (owed || keyframe_blocks_ <= spec_.keyframe_budget) keyframe(e, ev.t, slots);
  }
}

std::shared_ptr<RunHistory> HistoryRecorder::finish(const std::vector<SlotView>& slots, Tick now) {
  RunHistory& h = *out_;
  h.first = spec_.first;
  h.last = std::min(spec_.last, stopped_at_);
  h.stopped_at = stopped_at_;
  // A slot stopped with the run's own stop is the run's (stopped_at says it).
  for (std::uint64_t& at : slot_stopped_at_)
    if (at >= stopped_at_) at = kStillLive;
  if (std::any_of(slot_stopped_at_.begin(), slot_stopped_at_.end(), [](std::uint64_t at) { return at != kStillLive; }))
    h.slot_stopped_at = slot_stopped_at_;
  h.allocations = log_;
  if (spec_.viewer) {
    h.regions = regions_.finish();
    h.regions_cut_at = regions_.cut_at();
  }
  for (const auto& s : slots) h.slots.emplace_back(s.device, s.space);
  if (spec_.events && (h.keyframes.empty() || h.keyframes.back().event != h.last)) {
    keyframe(h.last, now, slots);  // the state at the end: the snapshot's segments
  }
  // The ranges the deltas cover: each planned one whose keyframe (or the empty start) is there.
  for (const auto& [a, b] : spec_.exact) {
    if (cut_ && a >= cut_at_) break;
    bool based = a == 0 || std::any_of(h.keyframes.begin(), h.keyframes.end(),
                                       [&, a = a](const Keyframe& k) { return k.event == a - 1; });
    if (based) h.exact.emplace_back(a, cut_ ? std::min(b, cut_at_ - 1) : b);
  }
  // Bands: the surviving candidates, each slot's by alloc event; points: the samples and each
  // band's ends, with what the bands leave ("other").
  h.timelines.resize(slots.size());
  for (std::uint32_t s = 0; s < h.timelines.size(); ++s) {
    SlotTimeline& tl = h.timelines[s];
    tl.slot = s;
    if (s >= tracks_.size()) continue;
    std::vector<const Candidate*> bands;
    for (const auto& [block, i] : tracks_[s].bands) bands.push_back(&cands_[i]);
    std::sort(bands.begin(), bands.end(),
              [](const Candidate* a, const Candidate* b) { return a->buf.view.event_index < b->buf.view.event_index; });
    for (const Candidate* c : bands) {
      if (c->buf.view.event_index >= spec_.first && c->buf.view.event_index <= spec_.last)
        tl.points.push_back({c->buf.view.event_index, c->buf.view.t, c->live_at_alloc, 0});
      if (c->buf.free_event != kStillLive && c->buf.free_event <= spec_.last)
        tl.points.push_back({c->buf.free_event, c->buf.free_t, c->live_at_free, 0});
      note_stack(c->buf.view.stack);
      tl.bands.push_back(static_cast<std::uint32_t>(h.buffers.size()));
      h.buffers.push_back(c->buf);
    }
    std::stable_sort(tl.points.begin(), tl.points.end(),
                     [](const auto& a, const auto& b) { return a.event < b.event; });
    tl.points.erase(std::unique(tl.points.begin(), tl.points.end(),
                                [](const auto& a, const auto& b) { return a.event == b.event; }),
                    tl.points.end());
    // other = live − the bands live after that event (alloc ≤ event < free).
    std::vector<std::pair<std::uint64_t, Bytes>> starts, ends;
    for (const Candidate* c : bands) {
      starts.emplace_back(c->buf.view.event_index, c->buf.view.block);
      ends.emplace_back(c->buf.free_event, c->buf.view.block);
    }
    std::sort(starts.begin(), starts.end());
    std::sort(ends.begin(), ends.end());
    size_t a = 0, b = 0;
    Bytes drawn = 0;
    for (auto& p : tl.points) {
      for (; a < starts.size() && starts[a].first <= p.event; ++a) drawn += starts[a].second;
      for (; b < ends.size() && ends[b].first <= p.event; ++b) drawn -= ends[b].second;
      p.other = p.live > drawn ? p.live - drawn : 0;
    }
  }
  return out_;
}

// ---- planning ----

namespace {

constexpr std::uint64_t kExactEvents = 60000;   // events kept change by change (viewer), at most
constexpr size_t kSamples = 1200;               // points per space besides the bands' ends
constexpr std::uint64_t kKeyframeEvery = 1500;  // events between keyframes inside exact ranges

void merge_ranges(std::vector<std::pair<std::uint64_t, std::uint64_t>>* r) {
  std::sort(r->begin(), r->end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (const auto& x : *r) {
    if (!out.empty() && x.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  *r = std::move(out);
}

}  // namespace

HistorySpec plan_history(const RunResult& r, bool viewer, bool events) {
  HistorySpec s;
  s.viewer = viewer;
  s.events = events;
  const std::uint64_t last_event = r.events ? r.events - 1 : 0;
  s.first = r.window.empty() ? 0 : r.window_first;
  s.last = r.window.empty() ? last_event : r.window_last;
  if (events) {
    s.exact = {{0, last_event}};
    s.delta_budget = s.keyframe_budget = std::numeric_limits<size_t>::max();
    s.map_blocks = kMaxMapBlocks;
  }
  if (!viewer) return s;
  s.bands = 0;  // the allocation log draws every buffer (the page no longer draws 400 apart)
  const std::uint64_t n = s.last - s.first + 1;
  for (size_t i = 0; i < kSamples; ++i) s.samples.push_back(s.first + (n - 1) * i / (kSamples - 1));
  s.samples.push_back(s.last);
  // Bookmarks: each space's peak and the detailed OOMs in the window.
  std::vector<std::uint64_t> marks;
  for (const auto& sp : r.spaces)
    if (sp.peak && sp.peak->event_index >= s.first && sp.peak->event_index <= s.last)
      marks.push_back(sp.peak->event_index);
  for (size_t i = 0; i < r.ooms.size() && i < kDetailedOoms; ++i)
    if (r.ooms[i].event_index >= s.first && r.ooms[i].event_index <= s.last) marks.push_back(r.ooms[i].event_index);
  std::sort(marks.begin(), marks.end());
  marks.erase(std::unique(marks.begin(), marks.end()), marks.end());
  if (!events) {
    if (n <= kExactEvents || marks.empty()) {
      s.exact = {{s.first, std::min(s.last, s.first + kExactEvents - 1)}};
    } else {
      const std::uint64_t radius = std::max<std::uint64_t>(kExactEvents / (2 * marks.size()), 50);
      for (auto m : marks)
        s.exact.emplace_back(std::max(s.first, m > radius ? m - radius : 0), std::min(s.last, m + radius));
      merge_ranges(&s.exact);
    }
  }
  // Keyframes: before each exact range, the bookmarks, every kKeyframeEvery events inside the
  // ranges, and evenly over the window as many as the budget allows for maps of the peak's size.
  size_t est = 1;
  for (const auto& sp : r.spaces)
    if (sp.peak)
      for (const auto& m : sp.peak->spaces) est = std::max(est, m.map.blocks.size());
  for (const auto& [a, b] : s.exact) {
    if (a > 0) s.keyframes.push_back(a - 1);
    const std::uint64_t every = std::max<std::uint64_t>(kKeyframeEvery, (b - a) / 16);
    for (std::uint64_t k = a + every; k < b && !events; k += every) s.keyframes.push_back(k);
  }
  for (auto m : marks) s.keyframes.push_back(m);
  // Evenly over the window, where no exact range reaches.
  const size_t even = std::clamp<size_t>(s.keyframe_budget / est / 2, 4, 200);
  auto covered = [&](std::uint64_t e) {
    return std::any_of(s.exact.begin(), s.exact.end(), [&](const auto& r) { return e >= r.first && e <= r.second; });
  };
  for (size_t i = 0; i < even; ++i) {
    std::uint64_t e = s.first + (n - 1) * i / std::max<size_t>(1, even - 1);
    if (!covered(e)) s.keyframes.push_back(e);
  }
  // The page's allocator state starts from a keyframe: a window that none of the above reaches (one
  // exact range from its first event, no bookmark in it, as a window with no allocation) gets one there.
  if (s.keyframes.empty()) s.keyframes.push_back(s.first);
  std::sort(s.keyframes.begin(), s.keyframes.end());
  s.keyframes.erase(std::unique(s.keyframes.begin(), s.keyframes.end()), s.keyframes.end());
  return s;
}

void add_history(const std::vector<RunOptions>& runs, std::vector<RunResult>& results, const Registry& registry,
                 bool viewer, bool events, unsigned threads) {
  for (bool pass_events : {false, true}) {
    // The export wants every change of the run, the viewer a bounded part: one pass for each.
    if (pass_events ? !events : !viewer) continue;
    std::vector<RunOptions> again;
    for (size_t i = 0; i < runs.size() && i < results.size(); ++i) {
      RunOptions o = runs[i];
      o.placements.clear();
      o.sink = nullptr;
      o.check = false;
      o.keep_live_buffers = false;
      o.history = std::make_shared<HistorySpec>(plan_history(results[i], !pass_events, pass_events));
      o.region_moves = results[i].region_moves;  // each such region where the recording has it, from the start
      again.push_back(std::move(o));
    }
    std::vector<RunResult> more = run_simulations(again, registry, threads);
    for (size_t i = 0; i < more.size(); ++i) {
      if (!pass_events || !viewer) results[i].history = more[i].history;
      if (pass_events) results[i].export_history = more[i].history;
    }
  }
}

}  // namespace fragsim

// PriorState (sim/engine/prior_state.h): the regions of the state before a recording, and the
// range of answers over the orders and histories the recording cannot tell apart.
#include "sim/engine/prior_state.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/base/error.h"
#include "sim/engine/engine.h"

namespace fragsim {

PriorOptions::Mode parse_prior_mode(const std::string& s, const std::string& what) {
  if (s == "auto") return PriorOptions::Mode::kAuto;
  if (s == "recorded") return PriorOptions::Mode::kRecorded;
  if (s == "rebuilt") return PriorOptions::Mode::kRebuilt;
  throw InputError(fmt::format("{}: must be auto, recorded or rebuilt (got '{}')", what, s));
}

std::vector<PriorRegion> PriorState::regions(std::uint32_t device) const {
  std::vector<PriorRegion> v;
  for (const Event& ev : events_) {
    if (ev.device != device || !ev.has(key::kAddr) || !ev.size) continue;
    if (ev.op == Op::kSegmentAlloc || ev.op == Op::kSegmentMap)
      v.push_back({.addr = ev.addr,
                   .size = ev.size,
                   .stream = ev.stream,
                   .mapped_range = ev.op == Op::kSegmentMap,
                   .aggregate = ev.has(key::kAggregate),
                   .live = {}});
  }
  std::stable_sort(v.begin(), v.end(), [](const PriorRegion& a, const PriorRegion& b) { return a.addr < b.addr; });
  // The live blocks each region holds (the device's main memory: where its regions are).
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& ev = events_[i];
    if (ev.op != Op::kAlloc || ev.device != device || !belongs(ev) || !ev.has(key::kAddr)) continue;
    auto it = std::upper_bound(v.begin(), v.end(), ev.addr, [](Addr a, const PriorRegion& r) { return a < r.addr; });
    if (it == v.begin() || ev.addr - std::prev(it)->addr >= std::prev(it)->size) continue;
    std::prev(it)->live.push_back({.addr = ev.addr,
                                   .size = ev.size,
                                   .id = i,
                                   .aggregate = ev.has(key::kAggregate),
                                   .freed_unproven = freed_unproven(i)});
  }
  for (PriorRegion& r : v) {
    std::stable_sort(r.live.begin(), r.live.end(),
                     [](const PriorBlock& a, const PriorBlock& b) { return a.addr < b.addr; });
    // A block is always on its segment's stream (PyTorch's caching allocator): a region that a
    // reader put on a stream its blocks are not on — a profiler trace's memory that no request of
    // the window may use, traces/kineto.h — was the program's, on its blocks' stream, when a
    // re-held state obtains it.
    if (!r.live.empty()) {
      const std::int64_t s = events_[r.live.front().id].stream;
      if (std::all_of(r.live.begin(), r.live.end(), [&](const PriorBlock& b) { return events_[b.id].stream == s; }))
        r.stream = s;
    }
  }
  return v;
}

bool PriorState::learn_free(const Event& ev) {
  if (!unfreed_built_) {
    unfreed_built_ = true;
    unproven_.assign(events_.size(), false);
    for (size_t i = 0; i < events_.size(); ++i) {
      const Event& a = events_[i];
      if (a.op == Op::kAlloc && belongs(a) && !a.has(key::kAggregate)) unfreed_[{a.device, a.id.value()}] = i;
    }
  }
  if (ev.op == Op::kSegmentAlloc || ev.op == Op::kSegmentMap)  // the device's others were in use then
    unfreed_.erase(unfreed_.lower_bound({ev.device, 0}), unfreed_.upper_bound({ev.device, UINT64_MAX}));
  if (ev.op == Op::kFree)
    if (auto it = unfreed_.find({ev.device, ev.id.value()}); it != unfreed_.end()) {
      unproven_[it->second] = true;
      unfreed_.erase(it);
    }
  return !unfreed_.empty();
}

std::vector<PriorVariant> prior_variants(bool regions) {
  std::vector<PriorVariant> v = {{PriorHistory::kLikely, true}};
  if (regions) v.insert(v.end(), {{PriorHistory::kLeast, false}, {PriorHistory::kMost, false}});
  return v;
}

std::string prior_variants_of(std::uint64_t blocks, std::uint64_t regions) {
  std::string s = fmt::format("the {} block{}", blocks, blocks == 1 ? "" : "s");
  if (regions) s += fmt::format(" and {} region{}", regions, regions == 1 ? "" : "s");
  return s;
}

namespace {

// A run that stops at an OOM holds, at its peak, what it had reserved when memory ran out: the live
// bytes then and the fragmentation around them, which the order of the blocks placed before the
// recording decides (expandable_3dev_oom's device 1 without expandable segments, cut at 50 %: every
// order considered runs out at the request the complete recording runs out at, with 75.3-76.5 GiB
// reserved; the complete one with 78.4 GiB). Where an order considered runs out of memory, the range
// spans what such a run may hold: from the least peak allocated (reserved >= allocated) to the most
// the space lets it reserve.
void widen_for_oom(PriorOutcome::Range& g, const SpaceResult& s) {
  if (!g.oom_runs) return;
  g.reserved_low = std::min(g.reserved_low, g.allocated_low);
  Bytes most = s.usable;
  if (s.reserve_limit && (!most || s.reserve_limit < most)) most = s.reserve_limit;
  g.reserved_high = std::max(g.reserved_high, most);
}

}  // namespace

void add_prior_range(const std::vector<RunOptions>& runs, std::vector<RunResult>& results, const Registry& reg,
                     unsigned threads) {
  std::vector<RunOptions> extra;
  std::vector<size_t> of;  // the run each variant belongs to
  for (size_t i = 0; i < runs.size() && i < results.size(); ++i) {
    const auto& sp = results[i].spaces;
    if (!runs[i].prior.range ||
        std::none_of(sp.begin(), sp.end(), [](const SpaceResult& s) { return s.prior && s.prior->rebuilt; }))
      continue;
    const bool regions = std::any_of(
        sp.begin(), sp.end(), [](const SpaceResult& s) { return s.prior && s.prior->rebuilt && s.prior->regions; });
    for (const PriorVariant& v : prior_variants(regions)) {
      RunOptions o = runs[i];
      o.prior.history = v.history;
      o.prior.descending = v.descending;
      o.prior.range = false;
      // A variant answers one question: no outputs, no history, no live buffers kept.
      o.placements.clear();
      o.sink = {};
      o.history = nullptr;
      o.keep_live_buffers = false;
      extra.push_back(std::move(o));
      of.push_back(i);
    }
  }
  if (extra.empty()) return;
  std::vector<RunResult> more = run_simulations(extra, reg, threads);
  for (auto& r : results)
    for (auto& s : r.spaces)
      if (s.prior && s.prior->rebuilt)
        s.prior->range = PriorOutcome::Range{.reserved_low = s.peak_reserved,
                                             .reserved_high = s.peak_reserved,
                                             .allocated_low = s.peak_allocated,
                                             .allocated_high = s.peak_allocated,
                                             .variants = 1,
                                             .oom_runs = s.ooms.empty() ? 0u : 1u};
  for (size_t k = 0; k < more.size(); ++k)
    for (auto& s : results[of[k]].spaces) {
      if (!s.prior || !s.prior->range) continue;
      for (const auto& v : more[k].spaces) {
        if (v.device != s.device || v.space != s.space) continue;
        auto& g = *s.prior->range;
        g.reserved_low = std::min(g.reserved_low, v.peak_reserved);
        g.reserved_high = std::max(g.reserved_high, v.peak_reserved);
        g.allocated_low = std::min(g.allocated_low, v.peak_allocated);
        g.allocated_high = std::max(g.allocated_high, v.peak_allocated);
        ++g.variants;
        g.oom_runs += v.ooms.empty() ? 0 : 1;
      }
    }
  for (auto& r : results)
    for (auto& s : r.spaces)
      if (s.prior && s.prior->range) widen_for_oom(*s.prior->range, s);
}

}  // namespace fragsim

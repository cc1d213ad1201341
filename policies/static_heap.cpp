// static-heap: XLA's offline buffer assignment — HeapSimulator with
// GlobalDecreasingSizeBestFitHeap over the trace's lifetimes (specs/hardware.md §4; openxla/xla
// xla/service/heap_simulator/heap_simulator.cc). It needs the whole trace: the engine reads it
// once first to collect every lifetime (memory O(buffers), the only non-streaming path), then
// replays it.
//
//   time      — +1 per alloc and per free event of this (device, space); a buffer occupies
//               [start, end] inclusive.
//   order     — spatial: (size desc, duration desc, id); temporal: (duration desc, size desc, id);
//               best: both, keep the smaller heap (spatial on ties), as ChooseBestHeapAlgorithm.
//   placement — for each buffer in order: the committed buffers that overlap it in time, the free
//               gaps of [0, ∞) they leave (chunk ends rounded up to `alignment`), drop gaps
//               smaller than it, take the smallest (lowest offset on ties); heap = max end.
//               XLA lists the overlapping buffers (BufferIntervalTree) and scans them: so does
//               scan_fit, the oracle, O(k log k) for k overlapping. plan_heap asks a BusyIndex
//               (busy_index.h: unions of chunks per block of time, walked gap by fitting gap;
//               per block, the chunks that hold all of it, for short-lived buffers), and scans
//               only where the index is over its memory budget or cannot hold a chunk: the same plans
//               (tests/test_structures.cpp compares them), at a cost that grows with the number of fitting gaps a
//               buffer sees rather than with the buffers live at once.
//   lower bound = peak of live bytes (NoFragmentationStatsHeap);
//   fragmentation_size = heap_size − lower bound.
// Replay: live buffers never overlap (validate), so the holes between them are kept in an
// ordered map with a multiset of hole sizes: usage() is O(log n).
// Sizes are the TPU per-device padded sizes (tpu_padding.h; `pad`, `shard` options) so that the
// heap is what the TPU compiler would lay out. A heap beyond the space's capacity fails every
// allocation, from the first, and holds nothing: the compiled program does not load (XLA's TPU
// compiler refuses it whole — "Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm.
// Exceeded hbm capacity by 6.47G", LargeWorldModel/LWM#60; its runtime, loading a program that
// does not fit, fails the whole load: "Error loading program ... Attempting to reserve 29.49G",
// openxla/xla docs/errors/error_0101.md), so no buffer of it is ever placed below the space's end.
#include "policies/static_heap.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "policies/busy_index.h"
#include "policies/interval_tree.h"
#include "policies/tpu_padding.h"
#include "sim/base/error.h"
#include "sim/base/limits.h"

namespace fragsim {

namespace {

using Chunk = std::pair<Bytes, Bytes>;  // [lo, hi) offsets

// The oracle's search, for one buffer: the overlapping chunks sorted by offset and scanned for
// the smallest gap that fits (as XLA's HeapSimulator); `busy` and `scratch` are reused buffers.
Bytes scan_fit(const IntervalTree<Chunk>& committed, const HeapBuffer& b, std::vector<Chunk>& busy,
               std::vector<Chunk>& scratch, LimitCounter* steps) {
  busy.clear();
  committed.overlapping(b.start, b.end, [&](const Chunk& c) { busy.push_back(c); });
  if (steps) steps->spend(busy.size());
  sort_by_offset(busy, scratch, [](const Chunk& c) { return c.first; });
  Bytes best_lo = 0, best_size = kTooLarge, cur = 0;
  bool found = false;
  for (const auto& [lo, hi] : busy) {
    if (lo > cur) {
      Bytes gap = lo - cur;
      if (gap >= b.size && gap < best_size) {
        best_size = gap;
        best_lo = cur;
        found = true;
      }
    }
    cur = std::max(cur, hi);
  }
  return found ? best_lo : cur;  // else the unbounded gap above everything
}

// Buffers placed before planning (a pre_trace buffer's recorded offset) must not overlap one another
// while both live — XLA never places two so; a trace that does is malformed (its replay would
// overlap them): an input error naming both. A sweep over start times with the live ones by offset.
void check_fixed(const std::vector<HeapBuffer>& bufs) {
  std::vector<const HeapBuffer*> fixed;
  for (const HeapBuffer& b : bufs)
    if (b.fixed) fixed.push_back(&b);
  std::sort(fixed.begin(), fixed.end(), [](const HeapBuffer* a, const HeapBuffer* b) { return a->start < b->start; });
  std::multimap<std::uint64_t, const HeapBuffer*> by_end;  // live, by the time they end
  std::map<Bytes, const HeapBuffer*> by_offset;            // live, by offset
  auto end_of = [](const HeapBuffer* b) { return *b->fixed > kTooLarge - b->size ? kTooLarge : *b->fixed + b->size; };
  for (const HeapBuffer* b : fixed) {
    while (!by_end.empty() && by_end.begin()->first < b->start) {
      by_offset.erase(*by_end.begin()->second->fixed);
      by_end.erase(by_end.begin());
    }
    const HeapBuffer* clash = nullptr;
    auto next = by_offset.lower_bound(*b->fixed);
    if (next != by_offset.end() && next->first < end_of(b)) clash = next->second;
    if (next != by_offset.begin() && end_of(std::prev(next)->second) > *b->fixed) clash = std::prev(next)->second;
    if (clash)
      throw InputError(fmt::format(
          "static-heap: the buffers of events {} and {} are placed at overlapping recorded offsets ({} and {}) "
          "while both live",
          clash->id, b->id, *clash->fixed, *b->fixed));
    by_offset[*b->fixed] = b;
    by_end.emplace(b->end, b);
  }
}

// The order buffers are placed in: spatial (size desc, duration desc), temporal (duration desc,
// size desc), then the trace's id and the alloc event index (a total order: ids are unique).
bool placed_before(const HeapBuffer& a, const HeapBuffer& b, bool spatial) {
  if (spatial) {
    if (a.size != b.size) return a.size > b.size;
    if (a.duration() != b.duration()) return a.duration() > b.duration();
  } else {
    if (a.duration() != b.duration()) return a.duration() > b.duration();
    if (a.size != b.size) return a.size > b.size;
  }
  return a.tie != b.tie ? a.tie < b.tie : a.id < b.id;
}

}  // namespace

bool same_heap_order(const std::vector<HeapBuffer>& bufs) {
  // Equal sizes: both orders compare duration, then tie and id. A linear look, not a sort: every
  // replay after an OOM (the advice's capacity search) asks again.
  return std::all_of(bufs.begin(), bufs.end(), [&](const HeapBuffer& b) { return b.size == bufs.front().size; });
}

HeapPlan plan_heap(std::vector<HeapBuffer> input, bool spatial, Bytes alignment, HeapSearch search, size_t time_block,
                   LimitCounter* steps) {
  // pos[i]: where the i-th buffer in placing order is in the input (the plan's offsets are by input place).
  std::vector<size_t> pos(input.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = i;
  std::sort(pos.begin(), pos.end(), [&](size_t x, size_t y) { return placed_before(input[x], input[y], spatial); });
  std::vector<HeapBuffer> bufs;
  bufs.reserve(input.size());
  for (size_t p : pos) bufs.push_back(std::move(input[p]));
  HeapPlan out;
  out.offset.assign(bufs.size(), 0);
  std::vector<std::uint64_t> starts, ends;
  for (const HeapBuffer& b : bufs) {
    starts.push_back(b.start);
    ends.push_back(b.end);
  }
  IntervalTree<Chunk> committed(starts, ends);  // time interval → [lo, hi) offsets
  std::optional<BusyIndex> index;
  if (search == HeapSearch::kIndexed) index.emplace(starts, ends, time_block);
  // The index holds no empty chunk (one saturated at kTooLarge): from the first on, the scan decides.
  auto commit = [&](size_t i, Bytes lo, Bytes hi) {
    committed.commit(i, {lo, hi});
    if (!index) return;
    if (hi > lo)
      index->commit(i, lo, hi);
    else
      index.reset();
  };
  // Buffers placed before planning keep their offsets (XLA assigns some outside its heap
  // simulation and simulates the rest around them).
  for (size_t i = 0; i < bufs.size(); ++i) {
    const HeapBuffer& b = bufs[i];
    if (!b.fixed) continue;
    Bytes end = *b.fixed > kTooLarge - b.size ? kTooLarge : *b.fixed + b.size;
    commit(i, *b.fixed, round_up_sat(end, alignment));
    out.offset[pos[i]] = *b.fixed;
    out.heap = std::max(out.heap, end);
  }
  std::vector<Chunk> busy, scratch;
  for (size_t i = 0; i < bufs.size(); ++i) {
    const HeapBuffer& b = bufs[i];
    if (b.fixed) continue;
    if (steps) steps->spend(1);
    Bytes lo;
    if (search == HeapSearch::kScan)
      lo = scan_fit(committed, b, busy, scratch, steps);
    else if (index && index->best_fit(i, b.size, &lo)) {
      ++out.indexed;
      if (steps) steps->spend(index->last_work());
    } else
      lo = scan_fit(committed, b, busy, scratch, steps);
    Bytes end = lo > kTooLarge - b.size ? kTooLarge : lo + b.size;
    commit(i, lo, round_up_sat(end, alignment));
    out.offset[pos[i]] = lo;
    out.heap = std::max(out.heap, end);
  }
  if (index) out.coarsened = index->coarsened();
  return out;
}

namespace {

// The plans this process made lately. A plan depends on the buffers (sizes, lifetimes, fixed
// offsets), the order and the alignment — never on the capacity, which only decides whether it
// fits. The replays after an OOM (the advice's capacity sweep: some forty capacities) and a sweep's
// replay the same buffers: planned once (a minute each at 200 k many-live events) and shared, not
// copied, by every later replay. Replays on several threads that ask at once wait for the one that
// plans; a plan that fails (the plan_steps limit) is not kept.
class PlanCache {
 public:
  using Plan = std::shared_future<std::shared_ptr<const HeapPlan>>;
  std::shared_ptr<const HeapPlan> get(const std::vector<HeapBuffer>& bufs, bool spatial, Bytes alignment,
                                      const std::function<HeapPlan()>& make) {
    // The plan_steps limit in force is part of the key: a plan made under a larger one is no answer
    // to a run that must be refused.
    const std::uint64_t steps = limit_value(Limit::kPlanSteps, 0);
    Plan plan;
    std::promise<std::shared_ptr<const HeapPlan>> mine;
    const Plan own = mine.get_future().share();
    {
      std::lock_guard<std::mutex> l(m_);
      for (const auto& e : entries_)
        if (e.spatial == spatial && e.alignment == alignment && e.steps == steps && e.bufs == bufs) plan = e.plan;
      if (!plan.valid()) {
        entries_.push_back({bufs, spatial, alignment, steps, own});
        if (entries_.size() > kEntries) entries_.pop_front();
      }
    }
    if (plan.valid()) return plan.get();  // planned, or being planned by another replay
    try {
      mine.set_value(std::make_shared<const HeapPlan>(make()));
    } catch (...) {
      mine.set_exception(std::current_exception());
      std::lock_guard<std::mutex> l(m_);
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->spatial == spatial && it->alignment == alignment && it->steps == steps && it->bufs == bufs) {
          entries_.erase(it);
          break;
        }
      throw;
    }
    return own.get();
  }

 private:
  static constexpr size_t kEntries = 4;  // a run's devices (each plans its own), both orders of a best plan
  struct Entry {
    std::vector<HeapBuffer> bufs;
    bool spatial;
    Bytes alignment;
    std::uint64_t steps;
    Plan plan;
  };
  std::mutex m_;
  std::deque<Entry> entries_;
};

std::shared_ptr<const HeapPlan> cached_plan(const std::vector<HeapBuffer>& bufs, bool spatial, Bytes alignment,
                                            const std::function<HeapPlan()>& make) {
  static PlanCache cache;
  return cache.get(bufs, spatial, alignment, make);
}

struct StaticHeapOptions {
  PaddingRule rule;
  std::string order;
  Bytes alignment = 1, capacity = 0;
  // A pre_trace buffer's recorded address is its offset in the heap (an XLA module's trace, or a
  // trace with no recording behind it): it stays there. In a runtime recording (a capture, a
  // snapshot) it is where the runtime's allocator put it: the buffer is planned with the others.
  bool recorded_offsets = true;
  std::uint32_t device = 0;
};

class StaticHeapPolicy : public AllocatorPolicy {
  // Every buffer the plan saw, by alloc event index: its padded size and, when not empty, its
  // place in the planned buffers (HeapPlan::offset).
  struct Planned {
    std::uint64_t id;
    Bytes size;
    size_t slot;
  };

 public:
  explicit StaticHeapPolicy(StaticHeapOptions o) : o_(std::move(o)) { holes_.insert(kTooLarge); }

  void plan(const std::vector<Lifetime>& lifetimes) override {
    std::vector<HeapBuffer> bufs;
    bufs.reserve(lifetimes.size());
    std::vector<std::pair<std::uint64_t, std::int64_t>> deltas;  // (time, ±size) for the lower bound
    for (const auto& l : lifetimes) {
      Bytes size = o_.rule.apply(l.buffer.get()).padded;
      std::uint64_t id = l.buffer.req.event_index;
      planned_.push_back({id, size, size ? bufs.size() : 0});
      if (size == 0) continue;
      std::optional<Bytes> fixed;
      if (l.buffer.req.seeded_at && o_.recorded_offsets) fixed = l.buffer.req.seeded_at->value();
      if (l.buffer.req.seeded_at && !o_.recorded_offsets) ++planned_pre_trace_;
      bufs.push_back({id, size, l.start, l.end, fixed, l.buffer.req.id.value()});
      deltas.emplace_back(l.start, static_cast<std::int64_t>(std::min<Bytes>(size, INT64_MAX / 4)));
      deltas.emplace_back(l.end + 1, -static_cast<std::int64_t>(std::min<Bytes>(size, INT64_MAX / 4)));
    }
    // By event index, for allocate (the lifetimes come in trace order: sorted already).
    if (!std::is_sorted(planned_.begin(), planned_.end(),
                        [](const Planned& a, const Planned& b) { return a.id < b.id; }))
      std::sort(planned_.begin(), planned_.end(), [](const Planned& a, const Planned& b) { return a.id < b.id; });
    std::sort(deltas.begin(), deltas.end());
    std::int64_t cur = 0;
    for (size_t i = 0; i < deltas.size();) {
      std::uint64_t t = deltas[i].first;
      for (; i < deltas.size() && deltas[i].first == t; ++i) cur += deltas[i].second;
      lower_bound_ = std::max(lower_bound_, static_cast<Bytes>(cur));
    }
    check_fixed(bufs);
    // order=best plans both ways, independently: the spatial plan on a second thread.
    auto plan_one = [&](bool spatial) {
      return cached_plan(bufs, spatial, o_.alignment, [&] {
        LimitCounter steps(Limit::kPlanSteps, spatial ? "static-heap's spatial plan" : "static-heap's temporal plan",
                           0);
        return plan_heap(bufs, spatial, o_.alignment, HeapSearch::kIndexed, kHeapAutoBlock, &steps);
      });
    };
    // When both orders place the buffers in one sequence (equal sizes: both sort by duration alone),
    // the two plans are one: it is made once, as the temporal plan (whose error a refused pair reports).
    const bool one_order = o_.order == "best" && same_heap_order(bufs);
    std::thread spatial;
    std::exception_ptr spatial_error;
    if (o_.order == "best" && !one_order)
      spatial = std::thread([&] {
        try {
          spatial_ = plan_one(true);
        } catch (...) {
          spatial_error = std::current_exception();
        }
      });
    std::exception_ptr error;
    try {
      if (o_.order == "spatial") spatial_ = plan_one(true);
      if (o_.order != "spatial") temporal_ = plan_one(false);
    } catch (...) {
      error = std::current_exception();  // the other plan's thread is joined first
    }
    if (spatial.joinable()) spatial.join();
    if (error) std::rethrow_exception(error);
    if (spatial_error) std::rethrow_exception(spatial_error);
    if (one_order) spatial_ = temporal_;
    bool temporal = o_.order == "temporal" || (o_.order == "best" && temporal_->heap < spatial_->heap);
    chosen_ = temporal ? temporal_.get() : spatial_.get();
    chosen_name_ = temporal ? "temporal" : "spatial";
  }

  Placement allocate(const AllocRequest& req) override {
    const Planned* b = find_planned(req.event_index);
    FRAGSIM_CHECK(b && chosen_, "static-heap: an allocation the plan did not see");
    Bytes size = b->size;
    if (size == 0) return Placement::unplaced();
    if (!fits()) return Placement::failed();  // the program does not load
    Bytes off = chosen_->offset[b->slot];
    if (req.handle >= live_.size()) live_.resize(req.handle + 1, {0, 0});
    live_[req.handle] = {off, size};
    add_live(off, size);
    allocated_ += size;
    // Offsets in the heap, as XLA's buffer assignment gives them (an HLO module's trace records those).
    return Placement::at(Addr(off), size, 0, Addr(0));
  }
  void release(Handle h) override {
    auto [off, size] = live_[h];
    if (size == 0) return;
    remove_live(off);
    allocated_ -= size;
    live_[h] = {0, 0};
  }
  Usage usage() const override {
    Usage u;
    u.allocated = allocated_;
    u.reserved = fits() ? chosen_->heap : 0;
    Bytes top = by_offset_.empty() ? 0 : by_offset_.rbegin()->first + by_offset_.rbegin()->second;
    // Holes between live buffers (the sentinel kTooLarge stands for the open space above them).
    auto it = holes_.rbegin();
    if (*it == kTooLarge) ++it;
    u.largest_free = it != holes_.rend() ? *it : 0;
    if (u.reserved > top) u.largest_free = std::max(u.largest_free, u.reserved - top);
    // A plan larger than the space does not load: nothing is available to any buffer.
    u.available = fits() ? o_.capacity - allocated_ : 0;
    u.largest_available = fits() ? u.largest_free : 0;
    return u;
  }
  Bytes rounded_size(const AllocRequest& req) const override { return o_.rule.apply(req).padded; }
  // The heap and its live buffers, at the addresses allocate() gives them: offsets in the heap
  // (a snapshot export and the address maps put each buffer where its placement says).
  void memory_map(MemoryMap* out) const override {
    if (!fits()) return;  // no plan, or one that does not load: nothing held
    Bytes heap = chosen_->heap;
    out->regions.push_back({Addr(0), heap, 0});
    Bytes at = 0;
    for (const auto& [off, size] : by_offset_) {
      if (off >= heap) break;
      if (off > at) out->blocks.push_back({Addr(at), off - at, false, true});
      out->blocks.push_back({Addr(off), size, true, true});
      at = off + size;
    }
    if (heap > at) out->blocks.push_back({Addr(at), heap - at, false, true});
  }
  std::optional<CompileTimePlan> compile_time_plan() const override {
    return CompileTimePlan{chosen_ ? chosen_->heap : 0, chosen_name_ + " order"};
  }
  nlohmann::json stats() const override {
    Bytes heap = chosen_ ? chosen_->heap : 0;
    nlohmann::json j = {{"order", chosen_name_},
                        {"heap_size", heap},
                        {"lower_bound", lower_bound_},
                        {"fragmentation_size", heap - std::min(heap, lower_bound_)}};
    if (o_.order != "temporal") j["spatial_heap_size"] = spatial_ ? spatial_->heap : 0;
    if (o_.order != "spatial") j["temporal_heap_size"] = temporal_ ? temporal_->heap : 0;
    if (planned_pre_trace_) j["pre_trace_planned"] = planned_pre_trace_;
    return j;
  }
  nlohmann::json extra_report() const override { return {{"static_heap", stats()}}; }
  std::vector<std::string> run_notes() const override {
    if (!planned_pre_trace_) return {};
    return {fmt::format(
        "static-heap on device {}: {} buffer{} live before the recording began {} planned with the "
        "others, from its start (a runtime recording's addresses are where its allocator put "
        "buffers, not offsets in a compiled program's heap)",
        o_.device, planned_pre_trace_, planned_pre_trace_ == 1 ? "" : "s", planned_pre_trace_ == 1 ? "is" : "are")};
  }
  void validate() const override {
    Bytes end = 0, sum = 0;
    std::multiset<Bytes> holes{kTooLarge};
    for (const auto& [off, size] : by_offset_) {
      FRAGSIM_CHECK(off >= end, "static-heap: live buffers overlap");
      if (off > end) holes.insert(off - end);
      end = off + size;
      sum += size;
    }
    FRAGSIM_CHECK(sum == allocated_, "static-heap: allocated bytes stale");
    FRAGSIM_CHECK(holes == holes_, "static-heap: hole sizes stale");
  }
  // A plan larger than the space: the program does not load, so every allocation fails and
  // nothing is held or available — the kind says why.
  std::string oom_kind(const AllocRequest&) const override { return chosen_ && !fits() ? "heap_exceeds_space" : ""; }
  std::string describe_oom(const AllocRequest&) const override {
    const Bytes heap = chosen_ ? chosen_->heap : 0;
    return fmt::format(
        "    the static heap ({} order) needs {} but the space holds {}, {} over: the program does not load, "
        "and none of its buffers is placed\n",
        chosen_name_, human_bytes(heap), human_bytes(o_.capacity), human_bytes(heap - std::min(heap, o_.capacity)));
  }

 private:
  bool fits() const { return chosen_ && chosen_->heap <= o_.capacity; }
  // The buffer of the allocation at `event`: allocations come in event order, so mostly the one
  // after the last found (a binary search otherwise).
  const Planned* find_planned(std::uint64_t event) {
    if (next_ >= planned_.size() || planned_[next_].id != event)
      next_ = static_cast<size_t>(std::lower_bound(planned_.begin(), planned_.end(), event,
                                                   [](const Planned& p, std::uint64_t e) { return p.id < e; }) -
                                  planned_.begin());
    if (next_ >= planned_.size() || planned_[next_].id != event) return nullptr;
    return &planned_[next_++];
  }
  // Holes: [end of the previous live buffer (or 0), start of the next) when not empty, and the
  // space above the highest buffer, counted as kTooLarge.
  void hole_erase(Bytes size) {
    if (size) holes_.erase(holes_.find(size));
  }
  void hole_insert(Bytes size) {
    if (size) holes_.insert(size);
  }
  // Pre: [off, off + size) lies in one hole (the plan never overlaps live buffers), size > 0.
  void add_live(Bytes off, Bytes size) {
    auto next = by_offset_.lower_bound(off);
    Bytes lo = next == by_offset_.begin() ? 0 : std::prev(next)->first + std::prev(next)->second;
    bool top = next == by_offset_.end();
    hole_erase(top ? kTooLarge : next->first - lo);
    hole_insert(off - lo);
    hole_insert(top ? kTooLarge : next->first - (off + size));
    by_offset_.emplace(off, size);
  }
  void remove_live(Bytes off) {
    auto it = by_offset_.find(off);
    auto next = std::next(it);
    Bytes lo = it == by_offset_.begin() ? 0 : std::prev(it)->first + std::prev(it)->second;
    bool top = next == by_offset_.end();
    hole_erase(off - lo);
    hole_erase(top ? kTooLarge : next->first - (off + it->second));
    hole_insert(top ? kTooLarge : next->first - lo);
    by_offset_.erase(it);
  }

  StaticHeapOptions o_;
  std::vector<Planned> planned_;
  size_t next_ = 0;                                     // where find_planned looks first
  std::shared_ptr<const HeapPlan> spatial_, temporal_;  // shared with the plan cache
  const HeapPlan* chosen_ = nullptr;
  std::string chosen_name_;
  Bytes lower_bound_ = 0, allocated_ = 0;
  size_t planned_pre_trace_ = 0;  // pre_trace buffers planned rather than kept at a recorded runtime address
  std::vector<std::pair<Bytes, Bytes>> live_;
  std::map<Bytes, Bytes> by_offset_;  // live buffers: offset → size
  std::multiset<Bytes> holes_;        // sizes of the holes between them, kTooLarge for the space above
};

// The alignment an XLA module's trace gives this device's heap (1 for other traces).
Bytes module_alignment(const ConfigContext& ctx) {
  if (!ctx.recording || ctx.recording->source != RecordingSource::kXlaHlo) return 1;
  return ctx.recording->alignment_of(ctx.device_index).value_or(1);
}

}  // namespace

void register_static_heap(Registry& r) {
  PolicyInfo info{"static-heap",
                  "XLA HeapSimulator offline best fit over the trace's lifetimes; reads the whole trace first",
                  [](ConfigReader& cfg, const ConfigContext& ctx) -> PolicyBuilder {
                    StaticHeapOptions o;
                    o.rule = PaddingRule::from_config(cfg, ctx);
                    o.order = cfg.choice("order", "best", {"spatial", "temporal", "best"});
                    // An XLA module's trace says the target's buffer alignment, per heap trace
                    // (one device each), and that its sizes are XLA's on-device ones (xla_modules.h).
                    Bytes def_align = module_alignment(ctx);
                    o.alignment = cfg.size("alignment", def_align);
                    if (o.alignment == 0) throw InputError("policy static-heap: alignment: must be > 0");
                    o.capacity = ctx.space->usable();
                    auto source = ctx.recording ? ctx.recording->source : RecordingSource::kPlain;
                    o.recorded_offsets = source != RecordingSource::kXprof &&
                                         source != RecordingSource::kTorchSnapshot &&
                                         source != RecordingSource::kKineto;  // runtime addresses, not offsets
                    o.device = ctx.device_index;
                    return [o](const PolicyContext&) { return std::make_unique<StaticHeapPolicy>(o); };
                  },
                  true,
                  {}};
  info.options = {{"order", "best", "spatial",
                   "the order buffers are placed in: spatial (size, then duration, descending), temporal (duration, "
                   "then size), best (both; the smaller heap, as XLA's ChooseBestHeapAlgorithm)"},
                  {"alignment", "1 (an XLA module's trace: its target's, 256 on GPU, 16 KiB in TPU HBM)", 64,
                   "buffer offsets are multiples of this many bytes (> 0)"}};
  for (auto& o : padding_options()) info.options.push_back(std::move(o));
  info.models_sharding = true;
  info.defaults = {{RecordingSource::kXlaHlo, "", "static-heap",
                    "the trace is an XLA module's heap trace, which XLA's heap simulator plans at compile time"}};
  r.add(std::move(info));
}

}  // namespace fragsim

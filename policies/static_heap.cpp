// static-heap: XLA's offline buffer assignment — HeapSimulator with
// GlobalDecreasingSizeBestFitHeap over the trace's lifetimes (specs/hardware.md §4; openxla/xla
// xla/service/heap_simulator/heap_simulator.cc). It needs the whole trace: the engine reads it
// once first to collect every lifetime (memory O(allocations)), then replays it.
//
//   time      — +1 per alloc and per free event of this (device, space); a buffer occupies
//               [start, end] inclusive.
//   order     — spatial: (size desc, duration desc, id); temporal: (duration desc, size desc, id);
//               best: both, keep the smaller heap (spatial on ties), as ChooseBestHeapAlgorithm.
//   placement — for each buffer in order: the free gaps of [0, ∞) left by committed buffers
//               that overlap it in time (chunk ends rounded up to `alignment`), drop gaps
//               smaller than it, take the smallest (lowest offset on ties); heap = max end.
//   lower bound = peak of live bytes (NoFragmentationStatsHeap);
//   fragmentation_size = heap_size − lower bound.
// Sizes are the TPU per-device padded sizes (tpu_padding.h; `pad`, `shard` options) so that the
// heap is what the TPU compiler would lay out. A heap beyond the space's capacity makes the
// buffers that end above it fail, as the compiled program would not fit.
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "policies/tpu_padding.h"
#include "sim/error.h"

namespace fragsim {

namespace {

struct Buf {
  std::uint64_t id;  // alloc event index
  Bytes size;
  std::uint64_t start, end;
  std::uint64_t duration() const { return end - start; }
};

struct Assignment {
  std::unordered_map<std::uint64_t, Bytes> offset;  // alloc event index → offset
  Bytes heap = 0;
};

Assignment best_fit(std::vector<Buf> bufs, bool spatial, Bytes alignment) {
  std::sort(bufs.begin(), bufs.end(), [&](const Buf& a, const Buf& b) {
    if (spatial) {
      if (a.size != b.size) return a.size > b.size;
      if (a.duration() != b.duration()) return a.duration() > b.duration();
    } else {
      if (a.duration() != b.duration()) return a.duration() > b.duration();
      if (a.size != b.size) return a.size > b.size;
    }
    return a.id < b.id;
  });
  Assignment out;
  struct Chunk {
    std::uint64_t start, end;
    Bytes lo, hi;
  };
  std::vector<Chunk> committed;
  std::vector<std::pair<Bytes, Bytes>> busy;
  for (const Buf& b : bufs) {
    busy.clear();
    for (const auto& c : committed)
      if (c.start <= b.end && b.start <= c.end) busy.emplace_back(c.lo, c.hi);
    std::sort(busy.begin(), busy.end());
    Bytes best_lo = 0, best_size = UINT64_MAX, cur = 0;
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
    if (!found) best_lo = cur;  // the unbounded gap above everything
    Bytes hi = round_up(best_lo + b.size, alignment);
    committed.push_back({b.start, b.end, best_lo, hi});
    out.offset[b.id] = best_lo;
    out.heap = std::max(out.heap, best_lo + b.size);
  }
  return out;
}

class StaticHeapPolicy : public AllocatorPolicy {
 public:
  StaticHeapPolicy(PaddingRule rule, std::string order, Bytes alignment, Bytes capacity)
      : rule_(rule), order_(std::move(order)), alignment_(alignment), capacity_(capacity) {}

  void plan(const std::vector<Lifetime>& lifetimes) override {
    std::vector<Buf> bufs;
    bufs.reserve(lifetimes.size());
    std::vector<std::pair<std::uint64_t, std::int64_t>> deltas;  // (time, ±size) for the lower bound
    for (const auto& l : lifetimes) {
      AllocRequest r{kNoHandle, l.event.id, l.size, l.event.stream, l.event.space, l.event.t, &l.event};
      Bytes size = rule_.apply(r).padded;
      sizes_[l.alloc_index] = size;
      if (size == 0) continue;
      bufs.push_back({l.alloc_index, size, l.start, l.end});
      deltas.emplace_back(l.start, static_cast<std::int64_t>(size));
      deltas.emplace_back(l.end + 1, -static_cast<std::int64_t>(size));  // live through `end`
    }
    std::sort(deltas.begin(), deltas.end());
    std::int64_t cur = 0;
    for (size_t i = 0; i < deltas.size();) {
      std::uint64_t t = deltas[i].first;
      for (; i < deltas.size() && deltas[i].first == t; ++i) cur += deltas[i].second;
      lower_bound_ = std::max(lower_bound_, static_cast<Bytes>(cur));
    }
    if (order_ != "temporal") spatial_ = best_fit(bufs, true, alignment_);
    if (order_ != "spatial") temporal_ = best_fit(bufs, false, alignment_);
    if (order_ == "spatial") chosen_ = &spatial_, chosen_name_ = "spatial";
    else if (order_ == "temporal") chosen_ = &temporal_, chosen_name_ = "temporal";
    else if (temporal_.heap < spatial_.heap) chosen_ = &temporal_, chosen_name_ = "temporal";
    else chosen_ = &spatial_, chosen_name_ = "spatial";
  }

  Placement allocate(const AllocRequest& req) override {
    Placement p;
    Bytes size = sizes_.count(req.event->index) ? sizes_[req.event->index] : 0;
    if (size == 0) {
      p.ok = true;
      return p;
    }
    Bytes off = chosen_->offset.at(req.event->index);
    if (off + size > capacity_) return p;  // the compiled program does not fit
    if (req.handle >= live_.size()) live_.resize(req.handle + 1, {0, 0});
    live_[req.handle] = {off, size};
    by_offset_.insert({off, size});
    allocated_ += size;
    p.ok = p.has_addr = true;
    p.addr = DeviceMemory::kBase + off;
    p.block = size;
    p.region = 0;
    p.region_offset = off;
    return p;
  }
  void release(Handle h) override {
    auto [off, size] = live_[h];
    if (size == 0) return;
    by_offset_.erase(by_offset_.find({off, size}));
    allocated_ -= size;
    live_[h] = {0, 0};
  }
  Usage usage() const override {
    Usage u;
    u.allocated = allocated_;
    u.reserved = std::min(chosen_ ? chosen_->heap : 0, capacity_);
    Bytes cur = 0;  // largest hole among live chunks, and above them up to the heap
    for (const auto& [off, size] : by_offset_) {
      if (off > cur) u.largest_free = std::max(u.largest_free, off - cur);
      cur = std::max(cur, off + size);
    }
    if (u.reserved > cur) u.largest_free = std::max(u.largest_free, u.reserved - cur);
    u.available = capacity_ - allocated_;
    u.largest_available = u.largest_free;
    return u;
  }
  Bytes rounded_size(const AllocRequest& req) const override { return rule_.apply(req).padded; }
  nlohmann::json stats() const override {
    nlohmann::json j = {{"order", chosen_name_}, {"heap_size", chosen_ ? chosen_->heap : 0}, {"lower_bound", lower_bound_},
                        {"fragmentation_size", (chosen_ ? chosen_->heap : 0) - lower_bound_}};
    if (order_ != "temporal") j["spatial_heap_size"] = spatial_.heap;
    if (order_ != "spatial") j["temporal_heap_size"] = temporal_.heap;
    return j;
  }
  nlohmann::json extra_report() const override { return {{"static_heap", stats()}}; }
  void validate() const override {
    Bytes end = 0, sum = 0;
    for (const auto& [off, size] : by_offset_) {
      if (off < end) throw std::logic_error("static-heap: live buffers overlap");
      end = off + size;
      sum += size;
    }
    if (sum != allocated_) throw std::logic_error("static-heap: allocated bytes stale");
  }
  std::string describe_oom(const AllocRequest&) const override {
    return fmt::format("    the static heap ({} order) needs {} but the space holds {}: the program does not fit\n",
                       chosen_name_, human_bytes(chosen_ ? chosen_->heap : 0), human_bytes(capacity_));
  }

 private:
  PaddingRule rule_;
  std::string order_;
  Bytes alignment_, capacity_;
  std::unordered_map<std::uint64_t, Bytes> sizes_;
  Assignment spatial_, temporal_;
  const Assignment* chosen_ = nullptr;
  std::string chosen_name_;
  Bytes lower_bound_ = 0, allocated_ = 0;
  std::vector<std::pair<Bytes, Bytes>> live_;
  std::multiset<std::pair<Bytes, Bytes>> by_offset_;
};

}  // namespace

void register_static_heap(Registry& r) {
  PolicyInfo info{"static-heap",
                  "XLA HeapSimulator offline best fit over the trace's lifetimes (order: spatial|temporal|best, "
                  "alignment, pad, shard); reads the whole trace first",
                  [](ConfigReader& cfg, const PolicyContext& ctx) -> std::unique_ptr<AllocatorPolicy> {
                    PaddingRule rule = PaddingRule::from_config(cfg, ctx);
                    std::string order = cfg.choice("order", "best", {"spatial", "temporal", "best"});
                    Bytes alignment = cfg.size("alignment", 1);
                    if (alignment == 0) throw InputError("policy static-heap: alignment: must be > 0");
                    return std::make_unique<StaticHeapPolicy>(rule, order, alignment, ctx.space->usable());
                  },
                  true};
  r.add(info);
}

}  // namespace fragsim

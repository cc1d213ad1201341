// cuda-async: JAX's XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async — cudaMallocAsync on the device's
// default memory pool (specs/xla-bfc.md §4 "cuda_async"; specs/torch-caching.md §9).
//
// KNOWN (documented): release threshold = total × fraction as JAX sets it; above the threshold,
//   unused pool memory goes back to the driver at the next synchronization; reuse is stream
//   ordered (a stream reuses its own frees at once; other streams' frees once the freeing work
//   completed: AllowOpportunistic/FollowEventDependencies, default on); with preallocate JAX
//   allocates and frees the pool size once at start, so that much stays cached.
// MODELLED (driver internals, to be calibrated with the real-device replayer):
//   the pool grows in segments of round_up(request, granularity) (2 MiB pages); placement
//   inside the pool is best fit over free blocks (size, address) with 512-byte rounding;
//   blocks split when the remainder is ≥ 512 bytes; a synchronization point is modelled after
//   every free (the replay has no explicit stream syncs), when a pool above its threshold
//   releases whole unused segments, largest first; cross-stream frees become reusable after
//   `cross_stream_delay` ticks (default 0: the freeing work is taken as complete); when the
//   device cannot grow the pool, unused segments are released and the allocation retried.
// State: a SegmentHeap per stream (policies/segment_heap.h) — a free block serves only its own
// stream until it has been released and reobtained.
#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "policies/jax_gpu.h"
#include "policies/policy.h"
#include "policies/segment_heap.h"
#include "sim/error.h"

namespace fragsim {

namespace {

constexpr Bytes kRound = 512;

class CudaAsyncPolicy : public AllocatorPolicy {
 public:
  CudaAsyncPolicy(const PolicyContext& ctx, Bytes threshold, Bytes prealloc, Tick cross_delay)
      : dev_(ctx.device), sched_(ctx.scheduler), threshold_(threshold), cross_delay_(cross_delay) {
    if (prealloc) {  // allocate + free the pool size once: it stays cached below the threshold
      if (auto g = dev_->allocate(prealloc)) add_segment(0, *g);
    }
  }

  Placement allocate(const AllocRequest& req) override {
    Placement p;
    if (req.size == 0) {
      p.ok = true;
      return p;
    }
    Bytes r = round_up(req.size, kRound);
    auto [owner_stream, blk] = find(req.stream, r, req.t);
    SegmentHeap* heap = blk == SegmentHeap::kNil ? nullptr : &pool(owner_stream);
    if (blk == SegmentHeap::kNil) {
      auto g = dev_->allocate(r);
      if (!g) {
        release_unused(0);  // the driver frees cached memory before failing
        g = dev_->allocate(r);
      }
      if (!g) return p;
      owner_stream = req.stream;
      heap = &pool(req.stream);
      std::int32_t s = add_segment(req.stream, *g);
      blk = heap->segment(s).first;
    }
    heap->take(blk, r, req.size, true);
    if (req.handle >= owner_.size()) owner_.resize(req.handle + 1, {0, SegmentHeap::kNil});
    owner_[req.handle] = {owner_stream, blk};  // the pool that holds the block (reuse may cross streams)
    const auto& b = heap->block(blk);
    p.ok = p.has_addr = true;
    p.addr = b.addr;
    p.block = b.size;
    p.region = heap->segment(b.seg).region;
    p.region_offset = b.addr - heap->segment(b.seg).base;
    return p;
  }

  void release(Handle h) override {
    auto [stream, blk] = owner_[h];
    SegmentHeap& heap = pool(stream);
    std::int32_t m = heap.free_block(blk);
    freed_at_[{stream, heap.block(m).seg}] = sched_->now();
    if (reserved() > threshold_ && !trim_pending_) {
      trim_pending_ = true;
      sched_->schedule(sched_->now(), [this] {
        trim_pending_ = false;
        release_unused(threshold_);
      });
    }
  }

  Usage usage() const override {
    Usage u;
    for (const auto& [s, heap] : pools_) {
      u.allocated += heap.allocated();
      u.reserved += heap.reserved();
      u.largest_free = std::max(u.largest_free, heap.largest_free());
    }
    u.available = u.reserved - u.allocated + dev_->available();
    u.largest_available = std::max(u.largest_free, dev_->available());
    return u;
  }
  Bytes rounded_size(const AllocRequest& req) const override { return round_up(req.size, kRound); }
  nlohmann::json stats() const override {
    Usage u = usage();
    return {{"reserved_mem_current", u.reserved}, {"used_mem_current", u.allocated},
            {"reserved_mem_high", peak_reserved_},  {"release_threshold", threshold_},
            {"trims", trims_}};
  }
  void validate() const override {
    for (const auto& [s, heap] : pools_) heap.validate(fmt::format("cuda-async stream {}", s));
  }

 private:
  SegmentHeap& pool(std::int64_t stream) { return pools_[stream]; }
  Bytes reserved() const {
    Bytes r = 0;
    for (const auto& [s, heap] : pools_) r += heap.reserved();
    return r;
  }

  std::int32_t add_segment(std::int64_t stream, const DeviceMemory::Grant& g) {
    std::int32_t s = pool(stream).add_segment(g.addr, g.bytes);
    pool(stream).segment_mut(s).region = next_region_++;
    peak_reserved_ = std::max(peak_reserved_, reserved());
    return s;
  }

  // Own stream first; then other streams' blocks whose free has completed. Returns the stream
  // whose pool holds the block.
  std::pair<std::int64_t, std::int32_t> find(std::int64_t stream, Bytes r, Tick now) {
    SegmentHeap& own = pool(stream);
    if (const auto* e = own.best_fit(r)) return {stream, static_cast<std::int32_t>(e->id)};
    for (auto& [s, heap] : pools_) {
      if (s == stream) continue;
      const SizeIndex::Entry* hit = nullptr;
      heap.scan_from(r, [&](const SizeIndex::Entry& e) {
        auto it = freed_at_.find({s, heap.block(static_cast<std::int32_t>(e.id)).seg});
        if (it != freed_at_.end() && it->second + cross_delay_ > now) return true;
        hit = &e;
        return false;
      });
      if (hit) return {s, static_cast<std::int32_t>(hit->id)};
    }
    return {stream, SegmentHeap::kNil};
  }

  // Releases unused segments, largest first, until reserved ≤ keep.
  void release_unused(Bytes keep) {
    std::vector<std::tuple<Bytes, std::int64_t, std::int32_t>> cand;
    for (auto& [s, heap] : pools_)
      for (size_t i = 0; i < heap.segment_count(); ++i)
        if (heap.segment_unused(static_cast<std::int32_t>(i)))
          cand.emplace_back(heap.segment(static_cast<std::int32_t>(i)).size, s, static_cast<std::int32_t>(i));
    std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
    for (const auto& [size, s, i] : cand) {
      if (reserved() <= keep) break;
      dev_->release(pool(s).segment(i).base);
      pool(s).remove_segment(i);
      ++trims_;
    }
  }

  DeviceMemory* dev_;
  Scheduler* sched_;
  Bytes threshold_;
  Tick cross_delay_;
  std::map<std::int64_t, SegmentHeap> pools_;
  std::map<std::pair<std::int64_t, std::int32_t>, Tick> freed_at_;
  std::vector<std::pair<std::int64_t, std::int32_t>> owner_;
  int next_region_ = 0;
  bool trim_pending_ = false;
  Bytes peak_reserved_ = 0;
  std::uint64_t trims_ = 0;
};

}  // namespace

void register_cuda_async(Registry& r) {
  r.add({"cuda-async",
         "JAX XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async: modelled cudaMallocAsync pool (mem_fraction -> release "
         "threshold, preallocate, cross_stream_delay)",
         [](ConfigReader& cfg, const PolicyContext& ctx) -> std::unique_ptr<AllocatorPolicy> {
           JaxlibBehaviour jb = jaxlib_behaviour(cfg.text("jaxlib", kNewestJaxlib), "jaxlib");
           double f = cfg.number("mem_fraction", 0.75);
           if (!(f > 0)) throw InputError("policy cuda-async: mem_fraction: must be > 0");
           bool pre = cfg.flag("preallocate", true);
           Tick delay = static_cast<Tick>(cfg.integer("cross_stream_delay", 0));
           Bytes total = jb.limit_from_free ? ctx.space->usable() : ctx.space->capacity;
           auto threshold = static_cast<Bytes>(static_cast<double>(total) * pjrt_fraction(f));
           if (cfg.has("release_threshold")) threshold = cfg.size("release_threshold", threshold);
           cfg.record("resolved_release_threshold", threshold);
           return std::make_unique<CudaAsyncPolicy>(ctx, threshold, pre ? threshold : 0, delay);
         }});
}

}  // namespace fragsim

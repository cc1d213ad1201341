// cuda-async: JAX's XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async — cudaMallocAsync on the device's
// default memory pool (specs/xla-bfc.md §4 "cuda_async"; specs/torch-caching.md §9).
//
// KNOWN (documented): release threshold = total × fraction as JAX sets it; above the threshold,
//   unused pool memory goes back to the driver at the next synchronization; reuse is stream
//   ordered (a stream reuses its own frees at once; other streams' frees once the freeing work
//   completed: AllowOpportunistic/FollowEventDependencies, default on); with preallocate JAX
//   allocates and frees the pool size once at start, so that much stays cached;
//   cudaMemPoolTrimTo (what an explicit empty-cache request does) releases unused memory down to
//   the threshold.
// MODELLED (driver internals, to be calibrated with the real-device replayer):
//   the pool grows in segments of round_up(request, granularity) (2 MiB pages); placement
//   inside the pool is best fit over free blocks (size, address) with 512-byte rounding;
//   blocks split when the remainder is ≥ 512 bytes; a synchronization point is modelled after
//   every free (the replay has no explicit stream syncs), when a pool above its threshold
//   releases whole unused segments, largest first; cross-stream frees become reusable
//   `cross_stream_delay` ticks after the block was freed (default 0: the freeing work is taken
//   as complete); when the device cannot grow the pool, unused segments are released and the
//   allocation retried.
// State: a SegmentHeap per stream (policies/segment_heap.h) — a free block serves only its own
// stream until it has been released and reobtained; a free block's `aux` is the tick it was
// freed at. Memory is O(live segments + blocks): segment slots are reused.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "policies/jax_gpu.h"
#include "policies/policy.h"
#include "policies/segment_heap.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

constexpr Bytes kRound = 512;

struct CudaAsyncOptions {
  Bytes threshold = 0;
  Bytes prealloc = 0;
  std::uint64_t cross_delay = 0;  // ticks
};

class CudaAsyncPolicy : public AllocatorPolicy {
 public:
  CudaAsyncPolicy(const PolicyContext& ctx, const CudaAsyncOptions& o)
      : dev_(ctx.device), sched_(ctx.scheduler), o_(o) {
    if (o_.prealloc) {  // allocate + free the pool size once: it stays cached below the threshold
      if (auto g = dev_->allocate(o_.prealloc)) add_segment(0, std::move(g));
    }
  }

  Placement allocate(const AllocRequest& req) override {
    Bytes r = round_up_sat(req.size, kRound);
    if (r == kTooLarge) return Placement::failed();
    auto [owner_stream, blk] = find(req.stream, r, req.t);
    if (blk == SegmentHeap::kNil) {
      auto g = dev_->allocate(r);
      if (!g) {
        release_unused(0);  // the driver frees cached memory before failing
        g = dev_->allocate(r);
      }
      if (!g) return Placement::failed();
      owner_stream = req.stream;
      blk = pool(req.stream).segment(add_segment(req.stream, std::move(g))).first;
    }
    SegmentHeap& heap = pool(owner_stream);
    heap.take(blk, r, req.size, true);
    note_use(owner_stream, heap.block(blk).region);
    if (req.handle >= owner_.size()) owner_.resize(req.handle + 1, {0, SegmentHeap::kNil});
    owner_[req.handle] = {owner_stream, blk};  // the pool that holds the block (reuse may cross streams)
    const auto& b = heap.block(blk);
    const auto& sg = heap.segment(b.region);
    return Placement::at(b.addr, b.size, sg.id, sg.base);
  }

  void release(Handle h) override {
    auto [stream, blk] = owner_[h];
    SegmentHeap& heap = pool(stream);
    std::int32_t m = heap.free_block(blk);
    heap.block_extra(m).aux = sched_->now().value();
    note_use(stream, heap.block(m).region);
    if (reserved() > o_.threshold && !trim_.pending())
      trim_ = sched_->schedule(sched_->now(), [this] { release_unused(o_.threshold); });
  }

  // cudaMemPoolTrimTo(pool, threshold): what the framework's empty-cache call does.
  std::string empty_cache() override {
    Bytes before = reserved();
    release_unused(o_.threshold);
    return fmt::format("pool trimmed to the release threshold ({}): {} returned to the device",
                       human_bytes(o_.threshold), human_bytes(before - reserved()));
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
  Bytes rounded_size(const AllocRequest& req) const override { return round_up_sat(req.size, kRound); }
  nlohmann::json stats() const override {
    Usage u = usage();
    return {{"reserved_mem_current", u.reserved},
            {"used_mem_current", u.allocated},
            {"reserved_mem_high", peak_reserved_},
            {"release_threshold", o_.threshold},
            {"trims", trims_}};
  }
  void memory_map(MemoryMap* out) const override {
    for (const auto& [s, heap] : pools_) heap.memory_map(out);
  }
  void validate() const override {
    Bytes reserved = 0;
    for (const auto& [s, heap] : pools_) {
      heap.validate(fmt::format("cuda-async stream {}", s));
      reserved += heap.reserved();
    }
    FRAGSIM_CHECK(reserved == reserved_, "cuda-async: reserved != Σ pools");
    size_t live = 0;
    for (const auto& [k, g] : grants_) live += g ? 1 : 0;
    FRAGSIM_CHECK(live == grants_.size(), "cuda-async: a released grant is still listed");
    size_t unused = 0;
    for (const auto& [s, heap] : pools_)
      for (size_t i = 0; i < heap.segment_count(); ++i) {
        auto seg = static_cast<std::int32_t>(i);
        if (!heap.segment(seg).live || !heap.segment_unused(seg)) continue;
        ++unused;
        FRAGSIM_CHECK(unused_.count({heap.segment(seg).size, s, seg}), "cuda-async: an unused segment is not indexed");
      }
    FRAGSIM_CHECK(unused == unused_.size(), "cuda-async: the unused-segment index lists a segment in use");
  }

 private:
  SegmentHeap& pool(std::int64_t stream) { return pools_[stream]; }
  Bytes reserved() const { return reserved_; }

  std::int32_t add_segment(std::int64_t stream, DeviceMemory::Grant g) {
    std::int32_t s = pool(stream).add_segment(g.addr(), g.bytes(), true, next_region_++);
    reserved_ += g.bytes();
    grants_[{stream, s}] = std::move(g);
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    note_use(stream, s);
    return s;
  }
  // Keeps unused_ in step with segment s of `stream`'s pool after a block in it changed.
  void note_use(std::int64_t stream, std::int32_t s) {
    const SegmentHeap& heap = pool(stream);
    UnusedKey k{heap.segment(s).size, stream, s};
    if (heap.segment_unused(s))
      unused_.insert(k);
    else
      unused_.erase(k);
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
        Tick freed(heap.block(static_cast<std::int32_t>(e.id)).x.aux);
        if (now - std::min(now, freed) < o_.cross_delay) return true;  // the freeing work has not completed
        hit = &e;
        return false;
      });
      if (hit) return {s, static_cast<std::int32_t>(hit->id)};
    }
    return {stream, SegmentHeap::kNil};
  }

  // Releases unused segments, largest first (ties: lower stream, then older segment slot), until
  // reserved ≤ keep: O(log segments) per segment released, whatever the pool's size.
  void release_unused(Bytes keep) {
    while (reserved_ > keep && !unused_.empty()) {
      auto [size, s, i] = *unused_.begin();
      unused_.erase(unused_.begin());
      pool(s).remove_segment(i);
      reserved_ -= size;
      grants_.erase({s, i});  // gives the memory back
      ++trims_;
    }
  }

  DeviceMemory* dev_;
  Scheduler* sched_;
  CudaAsyncOptions o_;
  std::map<std::int64_t, SegmentHeap> pools_;
  std::map<std::pair<std::int64_t, std::int32_t>, DeviceMemory::Grant> grants_;  // (stream, segment) → memory
  std::vector<std::pair<std::int64_t, std::int32_t>> owner_;
  // Unused segments (no block in use), largest first: what a trim releases, in its order.
  struct UnusedKey {
    Bytes size;
    std::int64_t stream;
    std::int32_t segment;
    bool operator<(const UnusedKey& o) const {
      if (size != o.size) return size > o.size;
      return stream != o.stream ? stream < o.stream : segment < o.segment;
    }
  };
  std::set<UnusedKey> unused_;
  Scheduler::Task trim_;
  int next_region_ = 0;  // obtain order across all streams' pools
  Bytes reserved_ = 0, peak_reserved_ = 0;
  std::uint64_t trims_ = 0;
};

}  // namespace

void register_cuda_async(Registry& r) {
  PolicyInfo info{
      "cuda-async",
      "JAX XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async: modelled cudaMallocAsync pool",
      [](ConfigReader& cfg, const ConfigContext& ctx) -> PolicyBuilder {
        JaxlibBehaviour jb = jaxlib_behaviour(cfg.text("jaxlib", kNewestJaxlib), "jaxlib");
        double f = cfg.number_in("mem_fraction", 0.75, 0, kMaxMemFraction);
        bool pre = cfg.flag("preallocate", true);
        CudaAsyncOptions o;
        o.cross_delay = static_cast<std::uint64_t>(cfg.integer_in("cross_stream_delay", 0, 0, INT64_MAX));
        Bytes total = jb.limit_from_free ? ctx.space->usable() : ctx.space->capacity;
        o.threshold = static_cast<Bytes>(std::min(static_cast<double>(total) * pjrt_fraction(f), 1.8e19));
        if (auto t = cfg.optional_size("release_threshold")) o.threshold = *t;
        cfg.record("resolved_release_threshold", o.threshold);
        o.prealloc = pre ? o.threshold : 0;
        if (ctx.space->space == Space::kHost) return jax_host_allocator(cfg, ctx);
        return [o](const PolicyContext& pc) { return std::make_unique<CudaAsyncPolicy>(pc, o); };
      },
      false,
      {jaxlib_option(),
       {"mem_fraction", "0.75", 0.9,
        "XLA_PYTHON_CLIENT_MEM_FRACTION: the pool's release threshold as a fraction of device memory"},
       {"preallocate", "true", false, "XLA_PYTHON_CLIENT_PREALLOCATE: grow the pool to the threshold at start"},
       {"release_threshold", "the fraction's", "8GiB",
        "cudaMemPoolAttrReleaseThreshold in bytes, instead of the fraction's"},
       {"cross_stream_delay", "0", 1000,
        "ticks after a cross-stream free before its block can be reused (0: the freeing work is complete)"}}};
  info.framework = "JAX";
  info.fraction = FractionKnob{"mem_fraction", "XLA_PYTHON_CLIENT_MEM_FRACTION", ""};
  r.add(std::move(info));
}

}  // namespace fragsim

// cuda-async: JAX's XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async — cudaMallocAsync on the device's
// default memory pool (specs/xla-bfc.md §4 "cuda_async"; specs/torch-caching.md §9) — and
// TensorFlow's TF_GPU_ALLOCATOR=cuda_malloc_async, the same pool as TensorFlow configures it.
//
// KNOWN (documented): release threshold = total × fraction as JAX sets it; above the threshold,
//   unused pool memory goes back to the driver at the next synchronization; reuse is stream
//   ordered (a stream reuses its own frees at once; other streams' frees once the freeing work
//   completed: AllowOpportunistic/FollowEventDependencies, default on); with preallocate JAX
//   allocates and frees the pool size once at start, so that much stays cached;
//   TensorFlow (tensorflow/core/common_runtime/gpu/gpu_process_state.cc) builds
//   GpuCudaMallocAsyncAllocator(platform_device_id, total_bytes): the release threshold is the
//   device's memory limit (total_bytes, what its BFC would have had) and reserve_memory keeps its
//   default, false (gpu_cudamallocasync_allocator.h), so the pool grows on demand; it is
//   preallocated only when TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC is -1
//   (gpu_cudamallocasync_allocator.cc), and TF_FORCE_GPU_ALLOW_GROWTH is not read;
//   cudaMemPoolTrimTo (what an explicit empty-cache request does) releases unused memory down to
//   the threshold.
// MEASURED (real H200, driver 580.159.04, CUDA 13.0: tests/data/device_h200, every cudaMallocAsync
//   call's address and cudaMemGetInfo after it, scripts/device-check and scripts/device-record):
//   - physical memory is mapped in 32 MiB chunks (`chunk`) under a contiguous virtual range: with
//     no stream sync, at each of the 897 cudaMemGetInfo samples taken after an allocation call in
//     the three async replays, the memory the pool held was 32 MiB × the most 32 MiB-aligned
//     chunks that live blocks had touched at once;
//   - one pool for every stream: a second stream's blocks lie in the same range, and a block one
//     stream freed is reused by another at once (probe_streams: 14 of 14 addresses);
//   - placement (reproduced by the rule below for 338 of 348 llm_serving_small and 507 of 531
//     jax_train_small addresses when each step starts from the real state): a request goes to
//     the smallest *mapped* free block that holds it (lowest address on ties; of those, one its
//     own stream freed first: 1,091 of 1,522 on a two-stream random trace against 717 without
//     that preference); when none does, every free block of the pool gives its memory back
//     (becomes unmapped address space, merging with unmapped neighbours) and the request goes to
//     the smallest unmapped free range that holds it, the end of the reservation included (so
//     the pool grows at its end, taking the free range just before the end with it). Freed
//     blocks stay mapped and merge with mapped free neighbours;
//   - a stream sync (the replayer's --sync-after-free) unmaps every free block, whatever the
//     threshold, and gives back cached chunks until the pool holds at most the threshold: after
//     every sync of six replays (thresholds 0, 1 % and 75 % of the device) the pool held
//     max(chunks live blocks touch, min(what it held, the threshold rounded down to chunks));
//     placement with a sync after every free follows the rule above from that state (1,503 of
//     1,519 and 526 of 531 addresses; 1,506 of 1,522 with two streams).
// MODELLED (not measured): whether a sync happens — the trace has none: with sync_after_free
//   every free is followed by its stream's sync; else a sync is assumed after a free only when the
//   pool holds more than its threshold (the replays without syncs never gave memory back);
//   cudaMemPoolTrimTo (empty_cache) acts as a sync; another reservation when a request does not
//   fit what is left of one; cross-stream frees become reusable `cross_stream_delay` ticks after
//   the block was freed (default 0: the freeing work is taken as complete). Without syncs, the
//   real driver's placement depends on when it notices frees completed, which no trace records:
//   on random churn this model places 86 % (one stream), 63 % (two) and 51 % (four streams) of
//   the addresses as the driver did with --follow-recording, against 99 % with a sync after every
//   free (a scorer that also kept freed blocks of different streams apart reached 72 % and 68 %).
// State: one SegmentHeap over the reservations (policies/segment_heap.h, unmapped free ranges
// indexed too); a free block's `tag` is the stream that freed it and its `aux` the tick it was
// freed at; how many chunks blocks map (a block's first and last chunk may be shared with its
// neighbours, found by walking out from it) and how many are held (grants, newest last); the
// slivers — parts of unmapped ranges inside a chunk a neighbour maps, free memory the pool holds
// — in a SizeIndex. Memory is O(blocks + streams), whatever the number of chunks.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "policies/jax_gpu.h"
#include "policies/policy.h"
#include "policies/segment_heap.h"
#include "sim/base/error.h"
#include "sim/base/recording.h"

namespace fragsim {

namespace {

constexpr Bytes kRound = 512;
constexpr std::uint64_t kVaTop = std::uint64_t{1} << 62;  // reservations stay below

struct CudaAsyncOptions {
  Bytes threshold = 0;
  Bytes prealloc = 0;
  Bytes chunk = 32 * kMiB;        // physical mapping granularity (measured on an H200)
  std::uint64_t cross_delay = 0;  // ticks
  bool sync_after_free = false;   // every free is followed by a sync of its stream
  bool as_recorded = false;       // replays a capture of this allocator with its recorded threshold
};

class CudaAsyncPolicy : public AllocatorPolicy {
 public:
  CudaAsyncPolicy(const PolicyContext& ctx, const CudaAsyncOptions& o)
      : dev_(ctx.device), sched_(ctx.scheduler), o_(o) {
    heap_.index_unmapped();
    // A reservation spans the device's memory (no request beyond it can ever be backed).
    va_size_ = std::min(round_up_sat(std::max(dev_->limit(), o_.chunk), o_.chunk), kVaTop / 4 / o_.chunk * o_.chunk);
    if (o_.prealloc) {  // allocate + free the pool size once: it stays cached below the threshold
      Bytes r = round_up_sat(o_.prealloc, kRound);
      if (r <= va_size_)
        if (auto b = place(stream_number(0), r, r, Tick(), std::nullopt)) release_block(*b, stream_number(0));
    }
  }

  bool seeds_recording() const override { return o_.as_recorded; }

  Placement allocate(const AllocRequest& req) override {
    Bytes r = round_up_sat(req.size, kRound);
    if (r > va_size_) return Placement::failed();  // more than the device holds
    const std::int32_t stream = stream_number(req.stream);
    // A buffer live before the trace began goes at its recorded address when that range is free
    // here; else (the recording's allocator rounds finer than the pool's 512 B, so two recorded
    // buffers can share one of the pool's blocks) the pool places it as any request: the state
    // before the trace held it, so it is no OOM of the trace's.
    std::optional<std::int32_t> at;
    if (req.seeded_at) {
      at = place_at(r, req.size, *req.seeded_at);
      if (!at) ++pre_trace_not_at_recorded_;
    }
    if (!at) at = place(stream, r, req.size, req.t, req.recorded_addr);
    if (!at) return Placement::failed();
    if (req.handle >= owner_.size()) owner_.resize(req.handle + 1, {SegmentHeap::kNil, 0});
    owner_[req.handle] = {*at, stream};
    const auto& b = heap_.block(*at);
    const auto& sg = heap_.segment(b.region);
    return Placement::at(b.addr, b.size, sg.id, sg.base);
  }

  void release(Handle h) override {
    release_block(owner_[h].first, owner_[h].second);
    if (o_.sync_after_free)
      trim(o_.threshold);  // the freeing stream is synchronized at once
    else if (reserved() > o_.threshold && !trim_.pending())
      trim_ = sched_->schedule(sched_->now(), [this] { trim(o_.threshold); });
  }

  // cudaMemPoolTrimTo(pool, threshold): what the framework's empty-cache call does.
  std::string empty_cache() override {
    Bytes before = reserved();
    trim(o_.threshold);
    return fmt::format("pool trimmed to the release threshold ({}): {} returned to the device",
                       human_bytes(o_.threshold), human_bytes(before - reserved()));
  }

  // Free memory inside what the pool holds: mapped free blocks, the unused parts of chunks that
  // blocks share (slivers), chunks held but mapped nowhere (cached, which can back any request,
  // as can the device's free memory).
  Usage usage() const override {
    Usage u;
    const Bytes largest_mapped = heap_.largest_free();
    u.allocated = heap_.allocated();
    u.reserved = reserved();
    Bytes cached = static_cast<Bytes>(held_chunks_ - mapped_chunks_) * o_.chunk;
    Bytes sliver = slivers_.largest_size();
    u.largest_free = std::max({largest_mapped, cached, sliver});
    u.available = u.reserved - u.allocated + dev_->available();
    u.largest_available = std::max({largest_mapped, sliver, cached + dev_->available()});
    return u;
  }
  Bytes rounded_size(const AllocRequest& req) const override { return round_up_sat(req.size, kRound); }
  nlohmann::json stats() const override {
    Usage u = usage();
    return {{"reserved_mem_current", u.reserved},
            {"used_mem_current", u.allocated},
            {"reserved_mem_high", peak_reserved_},
            {"release_threshold", o_.threshold},
            {"chunk", o_.chunk},
            {"chunks_mapped", mapped_chunks_},
            {"chunks_released", chunks_released_},
            {"trims", trims_},
            {"pre_trace_not_at_recorded", pre_trace_not_at_recorded_}};
  }
  // The reservations and their blocks; the parts of unmapped ranges that lie in a chunk a
  // neighbouring block maps have memory behind them, and show as free mapped memory. Chunks held
  // but mapped nowhere (cached) are in no region.
  void memory_map(MemoryMap* out) const override {
    MemoryMap m;
    heap_.memory_map(&m);
    out->regions.insert(out->regions.end(), m.regions.begin(), m.regions.end());
    size_t r = 0;
    for (const auto& b : m.blocks) {
      // The blocks follow their region, regions in the order they were reserved (not address order).
      while (b.addr < m.regions[r].base || b.addr.value() >= m.regions[r].base.value() + m.regions[r].size) ++r;
      if (b.in_use || b.mapped) {
        out->blocks.push_back(b);
        continue;
      }
      Addr at = b.addr;
      for_slivers(m.regions[r].base, m.regions[r].base + m.regions[r].size, b.addr, b.addr + b.size,
                  [&](Addr lo, Bytes n) {
                    if (lo > at) out->blocks.push_back({at, lo - at, false, false});
                    out->blocks.push_back({lo, n, false, true});
                    at = lo + n;
                  });
      if (b.addr + b.size > at) out->blocks.push_back({at, b.addr + b.size - at, false, false});
    }
  }
  void validate() const override {
    heap_.validate("cuda-async pool");
    size_t mapped = 0, slivers = 0;  // chunks under mapped blocks: runs of chunks, in address order
    for (size_t i = 0; i < heap_.segment_count(); ++i) {
      const auto& sg = heap_.segment(static_cast<std::int32_t>(i));
      if (!sg.live) continue;
      std::uint64_t next = 0;  // the first chunk not yet counted in this reservation
      for (auto b = sg.first; b != SegmentHeap::kNil; b = heap_.block(b).next) {
        const auto& bl = heap_.block(b);
        if (bl.in_use || bl.x.mapped) {
          const std::uint64_t first = (bl.addr - sg.base) / o_.chunk,
                              last = (bl.addr - sg.base + bl.size - 1) / o_.chunk;
          if (last + 1 > next) mapped += last + 1 - std::max(first, next), next = last + 1;
          continue;
        }
        for_slivers(sg, bl.addr, bl.addr + bl.size, [&](Addr at, Bytes n) {
          ++slivers;
          FRAGSIM_CHECK(slivers_.contains(n, at), "cuda-async: a sliver is not indexed");
        });
      }
    }
    FRAGSIM_CHECK(mapped == mapped_chunks_, "cuda-async: mapped chunk count != the chunks under mapped blocks");
    FRAGSIM_CHECK(slivers == slivers_.size(), "cuda-async: the sliver index holds stale slivers");
    FRAGSIM_CHECK(held_chunks_ >= mapped_chunks_, "cuda-async: more chunks mapped than held");
    size_t held = 0;
    Bytes bytes = 0;
    for (const auto& [g, k] : grants_) held += k, bytes += g.bytes();
    FRAGSIM_CHECK(held == held_chunks_ && bytes == held_bytes_, "cuda-async: held chunks != Σ grants");
  }

 private:
  Bytes reserved() const { return held_bytes_; }

  // Chunks are the reservation's 32 MiB pieces, base + k·chunk. Of the chunks [addr, addr+size)
  // of free block b touches, those no other block holds (in use, or free and mapped): b's
  // neighbours are the only blocks that can share its first and last chunk — walk out from b
  // while they still reach into that chunk. The chunks in between lie inside b.
  size_t own_chunks(std::int32_t b, Addr addr, Bytes size) const {
    const std::uint64_t base = heap_.segment(heap_.block(b).region).base.value();
    const std::uint64_t first = (addr.value() - base) / o_.chunk, last = (addr.value() + size - 1 - base) / o_.chunk;
    auto shared = [&](std::uint64_t c) {
      const std::uint64_t lo = base + c * o_.chunk, hi = lo + o_.chunk;
      for (auto p = heap_.block(b).prev;
           p != SegmentHeap::kNil && heap_.block(p).addr.value() + heap_.block(p).size > lo; p = heap_.block(p).prev)
        if (heap_.block(p).in_use || heap_.block(p).x.mapped) return true;
      for (auto n = heap_.block(b).next; n != SegmentHeap::kNil && heap_.block(n).addr.value() < hi;
           n = heap_.block(n).next)
        if (heap_.block(n).in_use || heap_.block(n).x.mapped) return true;
      return false;
    };
    size_t k = last - first + 1;
    if (shared(first)) --k;
    if (last != first && shared(last)) --k;
    return k;
  }
  // Holds enough chunks for `more` newly mapped ones: cached chunks first, then the device (one
  // grant for what is missing).
  bool hold_for(size_t more) {
    size_t want = mapped_chunks_ + more;
    if (want <= held_chunks_) return true;
    return obtain(want - held_chunks_);
  }
  bool obtain(size_t chunks) {
    if (chunks > kTooLarge / o_.chunk) return false;
    Bytes bytes = chunks * o_.chunk, padded = dev_->padded(bytes);
    if (padded == kTooLarge || padded > dev_->available()) return false;
    auto g = dev_->allocate(bytes);
    if (!g) return false;
    held_bytes_ += g.bytes();
    held_chunks_ += chunks;
    grants_.push_back({std::move(g), chunks});
    peak_reserved_ = std::max(peak_reserved_, held_bytes_);
    return true;
  }

  // `hint`: where the recording placed the request, the base of a new reservation (the driver
  // chose it) when it lies outside every reservation.
  std::optional<std::int32_t> place(std::int32_t stream, Bytes r, Bytes requested, Tick now, std::optional<Addr> hint) {
    if (auto b = find_mapped(stream, r, now)) return heap_.take(*b, r, requested, true);
    unmap_free();  // a miss: every free block gives its memory back to the pool
    const SizeIndex::Entry* e = heap_.best_fit_unmapped(r);
    std::int32_t u = e ? static_cast<std::int32_t>(e->id) : heap_.segment(new_reservation(hint)).first;
    return map_into(u, heap_.block(u).addr, r, requested);
  }

  // Places [at, at+r) where the recording says, if that range is free (or outside every
  // reservation: a new one starts there).
  std::optional<std::int32_t> place_at(Bytes r, Bytes requested, Addr at) {
    // Recorded addresses come on every allocation a recording placed (--follow-recording): find
    // their blocks through an address index from the first on, not by walking the reservation.
    heap_.index_addresses();
    auto it = reservations_.upper_bound(at);
    if (it == reservations_.begin() || at - std::prev(it)->first >= va_size_) {
      if (at.value() > kVaTop - va_size_ || overlaps_reservation(at, va_size_)) return std::nullopt;
      std::int32_t sg = new_reservation(at);
      return map_into(heap_.segment(sg).first, at, r, requested);
    }
    const std::int32_t sg = std::prev(it)->second;
    std::int32_t b = block_at(sg, at);
    if (heap_.block(b).in_use) return std::nullopt;
    if (heap_.block(b).addr + heap_.block(b).size < at + r) {
      // The range spans free blocks, mapped and unmapped in turn: when they are all free, the
      // unmapped parts are mapped, so that the range lies in one mapped free block.
      std::int32_t x = b;
      for (; x != SegmentHeap::kNil && heap_.block(x).addr < at + r; x = heap_.block(x).next)
        if (heap_.block(x).in_use) return std::nullopt;
      const std::int32_t last = x == SegmentHeap::kNil ? heap_.segment(sg).last : heap_.block(x).prev;
      if (heap_.block(last).addr + heap_.block(last).size < at + r) return std::nullopt;
      // The parts are mapped in address order from the chunks the pool holds or can obtain. When
      // one does not fit, every free block gives its memory back once (unmap_free) and the walk
      // starts again: giving memory back within the walk unmaps the parts already mapped, and a
      // range the device cannot hold at all went round that way for ever.
      for (bool retried = false;; retried = true) {
        if (map_free_parts(sg, at, r)) break;
        if (retried) return std::nullopt;
        unmap_free();
      }
      b = block_at(sg, at);
    }
    if (heap_.block(b).x.mapped) return heap_.carve(b, at, r, requested);
    return map_into(b, at, r, requested);
  }

  // Maps [at, at+r) inside unmapped free block u and takes it (or leaves it free and mapped): the
  // chunks it newly covers come from the cache, else the device (after every free block gave its
  // memory back); nullopt when the device cannot supply them.
  std::optional<std::int32_t> map_into(std::int32_t u, Addr at, Bytes r, Bytes requested) {
    size_t more = own_chunks(u, at, r);
    if (!hold_for(more)) {
      const std::int32_t seg = heap_.block(u).region;
      unmap_free();
      u = block_at(seg, at);  // u may have merged with a neighbour unmapped now
      more = own_chunks(u, at, r);
      if (!hold_for(more)) return std::nullopt;
    }
    return map_held(u, at, r, more, requested, true);
  }
  // The unmapped parts of free range [at, at+r) of reservation sg mapped, each from the chunks
  // the pool holds or obtains without giving any back: false when one does not fit (the parts
  // before it stay mapped and free).
  bool map_free_parts(std::int32_t sg, Addr at, Bytes r) {
    for (;;) {
      std::int32_t y = block_at(sg, at);
      while (y != SegmentHeap::kNil && heap_.block(y).addr < at + r && heap_.block(y).x.mapped) y = heap_.block(y).next;
      if (y == SegmentHeap::kNil || heap_.block(y).addr >= at + r) return true;
      const Addr lo = std::max(heap_.block(y).addr, at),
                 hi = std::min(heap_.block(y).addr + heap_.block(y).size, at + r);
      const size_t more = own_chunks(y, lo, hi - lo);
      if (!hold_for(more)) return false;
      map_held(y, lo, hi - lo, more, 0, false);
    }
  }
  // map_into once the pool holds the `more` chunks [at, at+r) newly covers; take: the range
  // becomes an allocated block (else it stays free and mapped).
  std::int32_t map_held(std::int32_t u, Addr at, Bytes r, size_t more, Bytes requested, bool take) {
    mapped_chunks_ += more;
    const Addr lo = heap_.block(u).addr, hi = lo + heap_.block(u).size;
    const auto& sg = heap_.segment(heap_.block(u).region);
    note_slivers(sg, lo, hi, -1);  // u becomes [lo, at) unmapped, [at, at+r) mapped, the rest unmapped
    note_slivers(sg, lo, at, +1);
    note_slivers(sg, at + r, hi, +1);
    // A mapped free block right after the range (place_at can map up to one) merges with it and
    // would take the range's stale free tick and stream: it keeps its own.
    const std::int32_t after = heap_.block(u).next;
    const bool joins = at + r == hi && after != SegmentHeap::kNil && !heap_.block(after).in_use;
    const std::uint64_t after_aux = joins ? heap_.block(after).x.aux : 0;
    const std::int32_t after_stream = joins ? freed_by(after) : 0;
    if (at > lo) u = heap_.split_unmapped(u, at - lo);
    std::int32_t b = heap_.map_prefix(u, r);  // may merge with mapped free blocks around it
    if (!take) return b;
    b = heap_.carve(b, at, r, requested);
    if (joins) {
      heap_.block_extra(heap_.block(b).next).aux = after_aux;
      set_freed_by(heap_.block(b).next, after_stream);
    }
    return b;
  }

  std::int32_t block_at(std::int32_t sg, Addr at) const { return heap_.block_at(sg, at); }

  // Unmapped range [lo, hi) of reservation sg: its parts inside a chunk that a neighbouring block
  // maps have memory behind them ("slivers": at most one at each end). f(addr, bytes) each.
  template <class F>
  void for_slivers(const SegmentHeap::Segment& sg, Addr lo, Addr hi, F f) const {
    for_slivers(sg.base, sg.base + sg.size, lo, hi, f);
  }
  template <class F>
  void for_slivers(Addr region_base, Addr region_end, Addr lo, Addr hi, F f) const {
    const std::uint64_t base = region_base.value(), end = region_end.value(), l = lo.value(), h = hi.value();
    std::uint64_t head = l, tail = h;
    if (l != base && (l - base) % o_.chunk) head = std::min(h, base + round_up(l - base, o_.chunk));
    if (h != end && (h - base) % o_.chunk) tail = std::max(head, base + (h - base) / o_.chunk * o_.chunk);
    if (head > l) f(lo, head - l);
    if (h > tail) f(Addr(tail), h - tail);
  }
  void note_slivers(const SegmentHeap::Segment& sg, Addr lo, Addr hi, int sign) {
    if (hi <= lo) return;
    for_slivers(sg, lo, hi, [&](Addr at, Bytes n) {
      if (sign > 0)
        slivers_.insert({n, at, 0});
      else
        slivers_.erase(n, at);
    });
  }

  // The smallest mapped free block that holds r that `stream` freed; else the smallest another
  // stream freed whose freeing work has completed (cross_stream_delay).
  std::optional<std::int32_t> find_mapped(std::int32_t stream, Bytes r, Tick now) {
    std::optional<std::int32_t> other;
    heap_.scan_from(r, [&](const SizeIndex::Entry& e) {
      const auto b = static_cast<std::int32_t>(e.id);
      if (freed_by(b) == stream) {
        other = b;
        return false;
      }
      if (!other && completed(b, now)) other = b;
      return true;
    });
    return other;
  }
  // Whether the work that freed block b has completed by `now`.
  bool completed(std::int32_t b, Tick now) const {
    const Tick freed(heap_.block(b).x.aux);
    return now - std::min(now, freed) >= o_.cross_delay;
  }
  // A free block's tag: the stream that freed it, numbered densely in order of appearance.
  std::int32_t freed_by(std::int32_t b) const { return heap_.block(b).x.tag; }
  void set_freed_by(std::int32_t b, std::int32_t stream) { heap_.block_extra(b).tag = stream; }
  std::int32_t stream_number(std::int64_t stream) {
    return stream_numbers_.try_emplace(stream, static_cast<std::int32_t>(stream_numbers_.size())).first->second;
  }

  bool overlaps_reservation(Addr base, Bytes size) const {
    auto it = reservations_.lower_bound(Addr(base.value() + size));
    return it != reservations_.begin() && std::prev(it)->first.value() + va_size_ > base.value();
  }
  // A new reservation of the device's size: at `hint` when it overlaps no other, else at this
  // model's next free address. Pre: r ≤ va_size_.
  std::int32_t new_reservation(std::optional<Addr> hint) {
    Bytes size = va_size_;
    Addr base;
    if (hint && hint->value() <= kVaTop - size && !overlaps_reservation(*hint, size)) {
      base = *hint;
    } else {
      while (overlaps_reservation(next_va_, size)) next_va_ = round_up(Addr(next_va_.value() + size), o_.chunk);
      base = next_va_;
      next_va_ = Addr(base.value() + size);
    }
    std::int32_t sg = heap_.add_segment(base, size, false, next_region_++);
    reservations_[base] = sg;
    return sg;
  }

  void release_block(std::int32_t b, std::int32_t stream) {
    std::int32_t m = heap_.free_block(b);
    heap_.block_extra(m).aux = sched_->now().value();
    set_freed_by(m, stream);
  }

  // Mapped free block b becomes unmapped address space (merging with unmapped neighbours): its
  // chunks, unless a neighbour holds them too, return to the cache.
  void unmap_block(std::int32_t b) {
    const Addr a = heap_.block(b).addr, e = a + heap_.block(b).size;
    const auto& sg = heap_.segment(heap_.block(b).region);
    mapped_chunks_ -= own_chunks(b, a, e - a);
    auto unmapped = [&](std::int32_t x) {
      return x != SegmentHeap::kNil && !heap_.block(x).in_use && !heap_.block(x).x.mapped;
    };
    Addr from = a, to = e;
    if (std::int32_t p = heap_.block(b).prev; unmapped(p)) {
      from = heap_.block(p).addr;
      note_slivers(sg, from, a, -1);
    }
    if (std::int32_t n = heap_.block(b).next; unmapped(n)) {
      to = heap_.block(n).addr + heap_.block(n).size;
      note_slivers(sg, e, to, -1);
    }
    note_slivers(sg, from, to, +1);
    heap_.unmap_range(b, a, e);
  }
  // Every mapped free block of the pool whose freeing work has completed (cross_stream_delay):
  // the memory under the others may still be in use.
  void unmap_free() {
    const Tick now = sched_->now();
    scratch_.clear();
    heap_.scan_from(0, [&](const SizeIndex::Entry& e) {
      if (completed(static_cast<std::int32_t>(e.id), now)) scratch_.push_back(static_cast<std::int32_t>(e.id));
      return true;
    });
    for (std::int32_t b : scratch_) unmap_block(b);
  }

  // A synchronization point / cudaMemPoolTrimTo(keep): every free block is unmapped (measured at
  // a stream sync), then cached chunks go back to the device until the pool holds ≤ keep.
  void trim(Bytes keep) {
    unmap_free();
    if (reserved() <= keep) return;
    const size_t want = (held_bytes_ - keep + o_.chunk - 1) / o_.chunk;
    size_t drop = std::min(held_chunks_ - mapped_chunks_, want);
    if (!drop) return;
    ++trims_;
    chunks_released_ += drop;
    while (drop) {  // gives the memory back, newest grants first
      auto& [g, k] = grants_.back();
      const size_t had = k, gone = std::min(had, drop);
      const Bytes before = g.bytes();
      if (gone == had || (had - gone) * o_.chunk % dev_->spec().granularity) {
        grants_.pop_back();  // releases the grant
        held_chunks_ -= had;
        held_bytes_ -= before;
        // Chunks not a whole number of device pages: those kept are held anew (the device just
        // got more back than this asks for).
        FRAGSIM_CHECK(gone == had || obtain(had - gone), "cuda-async: could not hold again the chunks a trim keeps");
      } else {
        dev_->shrink(g, (had - gone) * o_.chunk);
        k -= gone;
        held_chunks_ -= gone;
        held_bytes_ -= before - g.bytes();
      }
      drop -= gone;
    }
  }

  DeviceMemory* dev_;
  Scheduler* sched_;
  CudaAsyncOptions o_;
  Bytes va_size_ = 0;
  Addr next_va_ = Addr(0x500000000000ULL);                      // this model's reservations (address space only)
  SegmentHeap heap_;                                            // the pool: every stream's blocks, in its reservations
  std::map<Addr, std::int32_t> reservations_;                   // base → segment
  std::vector<std::pair<std::int32_t, std::int32_t>> owner_;    // handle → (block, stream number)
  std::map<std::int64_t, std::int32_t> stream_numbers_;         // stream → its tag number
  size_t mapped_chunks_ = 0;                                    // chunks under blocks in use or free and mapped
  size_t held_chunks_ = 0;                                      // chunks held from the device (mapped or cached)
  std::vector<std::pair<DeviceMemory::Grant, size_t>> grants_;  // what holds them, and how many chunks each
  std::vector<std::int32_t> scratch_;
  SizeIndex slivers_;  // the slivers of every unmapped free range
  Scheduler::Task trim_;
  int next_region_ = 0;  // reservation order
  Bytes held_bytes_ = 0, peak_reserved_ = 0;
  std::uint64_t trims_ = 0, chunks_released_ = 0;
  std::uint64_t pre_trace_not_at_recorded_ = 0;  // buffers live before the trace placed elsewhere than recorded
};

}  // namespace

constexpr Range kDelayRange = integers(0, static_cast<double>(INT64_MAX));

void register_cuda_async(Registry& r) {
  PolicyInfo info{
      "cuda-async",
      "JAX XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async: cudaMallocAsync's pool as measured on an H200 (32 MiB chunks)",
      [](ConfigReader& cfg, const ConfigContext& ctx) -> PolicyBuilder {
        JaxlibBehaviour jb = gpu_behaviour(cfg, ctx);
        const bool host = ctx.space->space == Space::kHost;  // (pinned host memory is XLA's host BFC)
        double f = cfg.number_in("mem_fraction", 0.75, kMemFractionRange);
        // A capture of JAX's BFC: XLA_PYTHON_CLIENT_PREALLOCATE, which its mode shows (one region, or
        // regions grown on demand), sets the cudaMallocAsync pool's too (se_gpu_pjrt_client.cc,
        // GetStreamExecutorGpuDeviceAllocator: CreateCudaAsyncAllocator(device, memory_fraction,
        // /*reserve_memory=*/preallocate, ...)). TensorFlow's pool ignores its BFC's mode.
        const RecordedAllocator* rec = cfg.flag("use_recorded_settings", true) ? recorded_bfc(ctx) : nullptr;
        const bool rec_mode =
            rec && !host && jb.async_prealloc && rec->name.rfind("gpu_async", 0) != 0 && !cfg.has("preallocate");
        bool pre =
            cfg.flag("preallocate", rec_mode ? rec->mode == RecordedAllocator::Mode::kSingleRegion : jb.async_prealloc);
        CudaAsyncOptions o;
        o.cross_delay = static_cast<std::uint64_t>(cfg.integer_in("cross_stream_delay", 0, kDelayRange));
        o.sync_after_free = cfg.flag("sync_after_free", false);
        o.chunk = cfg.size("chunk", o.chunk);
        if (o.chunk < kRound || o.chunk % kRound)
          throw InputError(fmt::format("chunk: must be a positive multiple of {} bytes (got {})", kRound, o.chunk));
        Bytes total = jb.limit_from_free ? ctx.space->usable() : ctx.space->capacity;
        // TensorFlow's threshold is its BFC's limit: with no fraction, the free memory less its reserve.
        const bool rec_threshold = rec && !cfg.has("mem_fraction") && !cfg.has("release_threshold");
        const bool tf_default =
            jb.tf_limit && !rec_threshold && !cfg.has("mem_fraction") && !cfg.has("release_threshold");
        o.threshold = tf_default ? tensorflow_default_limit(cfg, ctx)
                                 : static_cast<Bytes>(std::min(
                                       static_cast<double>(total) * (jb.f32_fraction ? pjrt_fraction(f) : f), 1.8e19));
        // A capture of the BFC gives the limit its framework's rule made (JAX: the memory fraction ×
        // total, rounded up to 2 MiB from jaxlib 0.10.2; TensorFlow: free memory less its reserve
        // unless a fraction was set): with cuda_async the same setting sets the release threshold
        // and the preallocation.
        const std::string mode = pre ? "is preallocated to its threshold, as the capture's BFC was one region"
                                     : "grows on demand, as the capture's BFC did";
        if (rec_threshold) {
          const DeviceLimit here = recorded_limit(*rec, cfg, ctx, jb);
          o.threshold = here.bytes;
          if (!host)
            cfg.note(fmt::format(
                "cuda-async on device {}: release threshold {} B, {} ({}){}; "
                "use_recorded_settings=false drops {}",
                ctx.device_index, o.threshold,
                here.basis.empty() ? "the limit the capture's BFC had"
                                   : fmt::format("the capture's BFC limit made on this device ({})", here.basis),
                limit_origin(jb),
                rec_mode ? fmt::format("; the pool {} (XLA_PYTHON_CLIENT_PREALLOCATE sets both)", mode) : "",
                rec_mode ? "them" : "it"));
        } else if (rec_mode) {
          cfg.note(
              fmt::format("cuda-async on device {}: the capture's mode kept (a threshold given): the pool {} "
                          "(XLA_PYTHON_CLIENT_PREALLOCATE sets both); use_recorded_settings=false drops it",
                          ctx.device_index, mode));
        }
        if ((rec_threshold || tf_default) && !host)
          cfg.record("mem_fraction", fraction_in_force(o.threshold, total, jb));
        // XLA and TensorFlow build the cudaMallocAsync allocator only for CUDA: a device on ROCm has
        // none, and this run models CUDA's pool over its memory (a what-if no program there can run).
        const Platform platform = ctx.hw && ctx.hw->platform != Platform::kUnknown ? ctx.hw->platform
                                  : ctx.recording                                  ? ctx.recording->platform
                                                                                   : Platform::kUnknown;
        if (platform == Platform::kRocm && !host)
          cfg.note(
              "cuda-async on ROCm: cudaMallocAsync is CUDA's, and XLA and TensorFlow build their allocator on it only "
              "for CUDA (JAX fails to start with XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async there): this run models "
              "CUDA's pool over this device's memory, which no program on it can use (--hw names a CUDA device)");
        if (auto t = cfg.optional_size("release_threshold")) o.threshold = *t;
        // A capture of this allocator itself (XLA names it gpu_async_N) replayed as recorded: the
        // buffers live before it may go where it placed them.
        o.as_recorded = rec && o.threshold == *rec->limit && rec->name.rfind("gpu_async", 0) == 0 &&
                        !cfg.has("mem_fraction") && !cfg.has("release_threshold") && !cfg.has("chunk");
        cfg.record("resolved_release_threshold", o.threshold);
        o.prealloc = pre ? o.threshold : 0;
        if (host) return jax_host_allocator(cfg, ctx);
        return [o](const PolicyContext& pc) { return std::make_unique<CudaAsyncPolicy>(pc, o); };
      },
      false,
      {jaxlib_option(),
       {"mem_fraction", "0.75 (for a TensorFlow capture: none, the free memory less TensorFlow's reserve)", 0.9,
        "XLA_PYTHON_CLIENT_MEM_FRACTION (TensorFlow: per_process_gpu_memory_fraction): the pool's release threshold "
        "as a fraction of device memory",
        kMemFractionRange},
       {"preallocate", "true (TensorFlow's: false; for a JAX capture of the BFC: its recorded mode)", false,
        "XLA_PYTHON_CLIENT_PREALLOCATE (TensorFlow: TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC=-1): grow the pool to "
        "the threshold at start"},
       {"release_threshold", "the fraction's", "8GiB",
        "cudaMemPoolAttrReleaseThreshold in bytes, instead of the fraction's"},
       {"chunk", "32MiB", "2MiB",
        "physical mapping granularity of the pool (32 MiB measured on an H200, driver 580, CUDA 13)"},
       {"cross_stream_delay", "0", 1000,
        "ticks after a cross-stream free before its block can be reused (0: the freeing work is complete)",
        kDelayRange},
       {"use_recorded_settings", "true", false,
        "replaying an XProf capture of the BFC: the release threshold is the limit it recorded (the program's "
        "memory fraction)"},
       {"sync_after_free", "false", true,
        "every free is followed by a sync of its stream (cudaStreamSynchronize): the pool unmaps every free block "
        "and gives memory above the threshold back; false: a sync only when the pool holds more than the threshold"}}};
  info.frameworks = {Framework::kJax, Framework::kTensorFlow};
  info.fraction = jax_memory_fraction();
  info.fraction->not_a_cap =
      "the pool's release threshold (and, with preallocation, what it reserves at start), not a cap: XLA's and "
      "TensorFlow's GpuCudaMallocAsyncAllocator let the pool grow past it as the program needs, so every fraction "
      "fits and none keeps the process within that share of the device";
  info.real_hardware_kind = "gpu";
  r.add(std::move(info));
}

}  // namespace fragsim

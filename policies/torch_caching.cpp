// torch-caching: PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp), per
// specs/torch-caching.md §1–§7. Split as PyTorch splits it: the configuration and size arithmetic
// (torch_alloc_config.h, CUDAAllocatorConfig), expandable segments (torch_expandable.h,
// ExpandableSegment), and the device caching allocator here (DeviceCachingAllocator).
//
// Model:
//   pools   — small (rounded size ≤ 1 MiB) and large; each keeps one SegmentHeap per stream, so
//             the best fit ordered (stream, size, address) is a lookup in the stream's heap.
//   segment — one cudaMalloc of alloc_size(r): 2 MiB (small), 20 MiB (r < 10 MiB), else r
//             rounded up to 2 MiB. Blocks never merge across segments. Its memory is a
//             DeviceMemory grant held here (returned at cudaFree, or when the policy goes).
//   block   — [addr, addr+size); split when the remainder is ≥ 512 B (small pool) or, in the
//             large pool, when r < max_split_size and the remainder > 1 MiB; else handed out whole.
// malloc(n): r = round_size(n) (512 B, or roundup_power2_divisions); best fit (oversize blocks ≥
//   max_split_size only serve requests ≥ max_split_size, and those at most
//   max_non_split_rounding above them); else [GC when a memory fraction and threshold are set]
//   new segment, else release_available_cached_blocks (max_split_size set) + new segment, else
//   release_cached_blocks (empty_cache) + new segment (num_alloc_retries), else OOM.
// free: the block returns to its pool and merges with free neighbours (prev, then next). A free
//   on another stream than the allocation's (record_stream) completes after
//   `stream_event_delay` ticks (the CUDA event), until then the block stays active; the pending
//   completion is a scheduler task owned here.
// empty_cache (the program's torch.cuda.empty_cache(), and the OOM retry): complete pending
//   frees, then cudaFree every whole free segment (large pool, then small); with expandable
//   segments unmap every whole free page.
// Invariants (validate): each SegmentHeap's invariants; Σ in-use block sizes =
//   active_bytes.all.current; Σ segment sizes (mapped pages when expandable) =
//   reserved_bytes.all.current = Σ grants held.
// Pre-trace seeding: segment_alloc observations marked pre_trace (from snapshots) become
//   segments at their recorded addresses, and allocations seeded_at a recorded address are
//   carved there, so that the rest of the trace replays from the recorded state.
// Not modelled: CUDA graphs / private pools.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "policies/policy.h"
#include "policies/segment_heap.h"
#include "policies/torch_alloc_config.h"
#include "policies/torch_expandable.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

using namespace torch;

struct Stat {
  std::int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void add(std::int64_t n) {
    current += n;
    allocated += n;
    peak = std::max(peak, current);
  }
  void sub(std::int64_t n) {
    current -= n;
    freed += n;
  }
};
enum { kAll, kSmallPool, kLargePool };
struct StatArray {
  Stat s[3];
  void add(bool small, std::int64_t n) {
    s[kAll].add(n);
    s[small ? kSmallPool : kLargePool].add(n);
  }
  void sub(bool small, std::int64_t n) {
    s[kAll].sub(n);
    s[small ? kSmallPool : kLargePool].sub(n);
  }
  Bytes current() const { return static_cast<Bytes>(s[kAll].current); }
};

// How this run's configuration stands to the recording's allocator (prior state, policy.h).
struct AsRecorded {
  bool same_settings = false;  // a PyTorch recording, replayed with the settings it recorded
  // Its settings differ from the run's at most in max_split_size and roundup_power2_divisions
  // (seeds_state).
  bool comparable = false;
  // The recording's settings (PyTorch's defaults where it states none): expandable, whether its
  // memory was expandable reservations; max_split_size and how it rounded requests.
  Config settings;
};

class TorchCachingPolicy : public AllocatorPolicy {
 public:
  TorchCachingPolicy(const Config& c, const AsRecorded& rec, const PolicyContext& ctx)
      : c_(c),
        rec_(rec),
        dev_(ctx.device),
        sched_(ctx.scheduler),
        total_(ctx.space->capacity),
        device_index_(ctx.device_index),
        rocm_(ctx.hw->platform == Platform::kRocm ||
              (ctx.hw->platform == Platform::kUnknown && ctx.recording && ctx.recording->platform == Platform::kRocm)),
        expandable_(ctx.device,
                    ctx.hw->space(Space::kHbm) ? ctx.hw->space(Space::kHbm)->capacity : ctx.space->capacity) {}

  Placement allocate(const AllocRequest& req) override {
    std::int32_t blk = SegmentHeap::kNil;
    bool small = false;
    std::int64_t stream = req.stream;  // the stream whose pool holds the block
    SegmentHeap* heap = nullptr;
    bool tail_unknown = false;
    if (req.seeded_at) tail_unknown = seeded(req, *req.seeded_at, &heap, &small, &stream, &blk);
    if (blk == SegmentHeap::kNil) {
      Bytes r = block_for(req);
      if (r == kTooLarge) {
        ++num_ooms_;
        return Placement::failed();
      }
      small = r <= kSmallSize;
      heap = &pools_[small][req.stream];
      ++free_block_calls_[small];
      blk = best_fit(*heap, r);
      if (req.recorded_addr && rec_.same_settings && !tail_unknown_.empty())
        blk = settle_tails(*heap, small, req.stream, r, *req.recorded_addr, blk);
      if (blk == SegmentHeap::kNil) {
        if (c_.memory_fraction > 0 && c_.gc_threshold > 0) garbage_collect();
        auto grow = [&](bool retry) {
          if (retry) ++num_alloc_retries_;
          return c_.expandable ? expand(small, req.stream, r) : new_segment(small, req.stream, segment_for(req, r));
        };
        blk = grow(false);
        if (blk == SegmentHeap::kNil && release_available_cached_blocks(r, small, req.stream)) blk = grow(false);
        if (blk == SegmentHeap::kNil && release_cached_blocks()) blk = grow(true);
        if (blk == SegmentHeap::kNil) {
          ++num_ooms_;
          return Placement::failed();
        }
      }
      // An aggregate's bytes are its blocks' whole sizes (a profiler trace's Total Allocated counts
      // each block's unsplit remainder): it takes exactly them, whatever remains.
      Bytes remaining = heap->block(blk).size - r;
      bool split = (small || c_.expandable || req.aggregate) ? remaining >= kMinBlockSize
                                                             : (r < c_.max_split_size && remaining > kSmallSize);
      heap->take(blk, r, req.size, split);
      recount_inactive_split(*heap, heap->block(blk).region, small);
    }
    const auto& b = heap->block(blk);
    if (req.handle >= owner_.size()) owner_.resize(req.handle + 1);
    owner_[req.handle] = {small, stream, blk};
    if (tail_unknown) tail_unknown_[owner_[req.handle]] = 0;
    allocated_.add(small, static_cast<std::int64_t>(b.size));
    active_.add(small, static_cast<std::int64_t>(b.size));
    requested_.add(small, static_cast<std::int64_t>(req.size));
    allocations_.add(small, 1);
    const auto& sg = heap->segment(b.region);
    return Placement::at(b.addr, b.size, sg.id, sg.base);
  }

  void release(Handle h) override { release_on_stream(h, owner_[h].stream); }

  void release_on_stream(Handle h, std::int64_t stream) override {
    Owner o = owner_[h];
    SegmentHeap& heap = pools_[o.small][o.stream];
    const auto& b = heap.block(o.block);
    allocated_.sub(o.small, static_cast<std::int64_t>(b.size));
    requested_.sub(o.small, static_cast<std::int64_t>(b.x.requested));
    allocations_.sub(o.small, 1);
    if (stream != o.stream) {  // record_stream: completes when the other stream's event does
      pending_[o] = sched_->schedule(sched_->now() + c_.stream_event_delay, [this, o] {
        pending_.erase(o);
        free_block(o);
      });
      return;
    }
    free_block(o);
  }

  std::string empty_cache() override {
    Bytes before = reserved_.current();
    release_cached_blocks();
    return fmt::format("empty_cache released {} of cached memory", human_bytes(before - reserved_.current()));
  }

  Usage usage() const override {
    Usage u;
    u.allocated = allocated_.current();
    u.reserved = reserved_.current();
    for (const auto& pool : pools_)
      for (const auto& [s, heap] : pool) u.largest_free = std::max(u.largest_free, heap.largest_free());
    u.available = u.reserved - u.allocated + device_room();
    u.largest_available = std::max(u.largest_free, device_room());
    return u;
  }
  Bytes rounded_size(const AllocRequest& req) const override { return block_for(req); }
  // No cached block held it, so it needed the segment it asks the device for (alloc_size: 2 MiB for
  // at most 1 MiB, 20 MiB for up to 10 MiB, else its size to 2 MiB; PyTorch's message names it). An
  // expandable segment maps only the pages the block needs.
  Bytes oom_need(const AllocRequest& req) const override {
    return c_.expandable ? block_for(req) : segment_for(req, block_for(req));
  }
  // The block a request takes: round_size of its bytes; an aggregate (the bytes of several
  // allocations from before the recording, sizes unknown) only to whole 512-byte blocks, as each of
  // its allocations is at least — rounding it as one request of its size (roundup_power2_divisions)
  // would add a step of the whole sum's power of two that none of its parts pays.
  Bytes block_for(const AllocRequest& req) const {
    return req.aggregate ? std::max(round_up_sat(req.size, kMinBlockSize), kMinBlockSize) : c_.round_size(req.size);
  }
  // The segment a miss of block r obtains: alloc_size(r); for an aggregate of the large pool, r to
  // 2 MiB (the reserved memory of segments the recording does not list is no request under 10 MiB
  // that would have obtained 20 MiB).
  static Bytes segment_for(const AllocRequest& req, Bytes r) {
    return req.aggregate && r > kSmallSize ? round_up_sat(r, kSmallBuffer) : Config::alloc_size(r);
  }

  // The settings a snapshot of this run records (sim/report/snapshot_export.h writes them), also in the report.
  nlohmann::json snapshot_allocator_settings() const override { return snapshot_settings(c_); }
  nlohmann::json extra_report() const override { return {{"allocator_settings", snapshot_allocator_settings()}}; }
  nlohmann::json stats() const override {
    nlohmann::json j = nlohmann::json::object();
    auto put = [&](const char* name, const StatArray& a) {
      const char* pools[] = {"all", "small_pool", "large_pool"};
      for (int k = 0; k < 3; ++k) {
        j[fmt::format("{}.{}.current", name, pools[k])] = a.s[k].current;
        j[fmt::format("{}.{}.peak", name, pools[k])] = a.s[k].peak;
        j[fmt::format("{}.{}.allocated", name, pools[k])] = a.s[k].allocated;
        j[fmt::format("{}.{}.freed", name, pools[k])] = a.s[k].freed;
      }
    };
    put("allocation", allocations_);
    put("allocated_bytes", allocated_);
    put("active_bytes", active_);
    put("requested_bytes", requested_);
    put("reserved_bytes", reserved_);
    put("segment", segments_);
    put("inactive_split_bytes", inactive_split_);
    j["num_alloc_retries"] = num_alloc_retries_;
    j["num_ooms"] = num_ooms_;
    j["num_device_alloc"] = num_device_alloc_;
    j["num_device_free"] = num_device_free_;
    j["max_split_size"] = c_.max_split_size == kTooLarge ? -1 : static_cast<std::int64_t>(c_.max_split_size);
    if (pre_trace_widened_ || pre_trace_ambiguous_) {
      j["pre_trace_blocks_widened"] = pre_trace_widened_;  // held an unsplit remainder: block size = request + it
      j["pre_trace_blocks_ambiguous"] = pre_trace_ambiguous_;
    }
    if (pre_trace_overlapping_) j["pre_trace_segments_overlapping"] = pre_trace_overlapping_;
    // memory_allocated() and friends: the all-pool currents under their short names.
    j["allocated_bytes"] = allocated_.s[kAll].current;
    j["reserved_bytes"] = reserved_.s[kAll].current;
    j["active_bytes"] = active_.s[kAll].current;
    j["inactive_split_bytes"] = inactive_split_.s[kAll].current;
    j["requested_bytes"] = requested_.s[kAll].current;
    return j;
  }

  void validate() const override {
    Bytes active = 0, reserved = 0;
    for (int k = 0; k < 2; ++k)
      for (const auto& [s, heap] : pools_[k]) {
        heap.validate(fmt::format("torch-caching {} pool stream {}", k ? "small" : "large", s));
        active += heap.allocated();
        if (c_.expandable) {
          for (size_t i = 0; i < heap.segment_count(); ++i) {
            const auto& sg = heap.segment(static_cast<std::int32_t>(i));
            if (!sg.live) continue;
            for (std::int32_t b = sg.first; b != SegmentHeap::kNil; b = heap.block(b).next)
              if (heap.block(b).x.mapped) reserved += heap.block(b).size;
          }
        } else {
          reserved += heap.reserved();
        }
      }
    FRAGSIM_CHECK(reserved == reserved_.current(),
                  "torch-caching: reserved_bytes != Σ segments (mapped pages when expandable)");
    FRAGSIM_CHECK(active == active_.current(), "torch-caching: active_bytes != Σ in-use blocks");
    Bytes granted = expandable_.mapped_bytes();
    for (const auto& [base, g] : grants_) granted += g.bytes();
    FRAGSIM_CHECK(granted == dev_->used(), "torch-caching: device memory in use != Σ segment and page grants");
    FRAGSIM_CHECK(reserved_.current() <= granted, "torch-caching: more reserved than the device granted");
    for (const auto& [o, task] : pending_) FRAGSIM_CHECK(task.pending(), "torch-caching: a pending free lost its task");
  }

  void memory_map(MemoryMap* out) const override {
    for (const auto& pool : pools_)
      for (const auto& [s, heap] : pool) heap.memory_map(out);
  }

  std::string describe_oom(const AllocRequest& req) const override {
    const Bytes block = block_for(req), a = segment_for(req, block);
    Bytes free = dev_->available();  // cudaMemGetInfo's free: what is left of the device
    Bytes allocated = allocated_.current(), reserved = reserved_.current();
    // PyTorch names the segment it asks the device for (specs/torch-caching.md, OOM message), not the
    // block: said first when the two differ, so that the two sizes do not read as a contradiction.
    std::string s;
    if (a != block)
      s = fmt::format(
          "    (PyTorch's message below names the segment it asks the device for, {} ({} B); the block: {} ({} B))\n",
          format_size(a), a, format_size(block), block);
    // A ROCm build's message (hipified): "HIP out of memory ... try setting PYTORCH_HIP_ALLOC_CONF=..."
    // (pytorch/pytorch#138002, ROCm/TheRock#1054; builds from 2.9 name PYTORCH_CUDA_ALLOC_CONF there).
    return s + fmt::format(
                   "    torch.OutOfMemoryError: {} out of memory. Tried to allocate {}. GPU {} has a total capacity "
                   "of {} of which {} is free. {}Of the allocated memory {} is allocated by PyTorch, and {} is "
                   "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
                   "{}=expandable_segments:True to avoid fragmentation.\n",
                   rocm_ ? "HIP" : "CUDA", format_size(a), device_index_, format_size(total_), format_size(free),
                   limit() ? format_size(limit()) + " allowed; " : "", format_size(allocated),
                   format_size(reserved - allocated), rocm_ ? "PYTORCH_HIP_ALLOC_CONF" : "PYTORCH_CUDA_ALLOC_CONF");
  }

  bool seeds_recording() const override { return rec_.same_settings; }

  // Settings that differ from the recording's only in max_split_size and roundup_power2_divisions
  // decide as the recorded ones wherever the state before the recording shows anything: every
  // segment smaller than both max_split_size values (no block in it was ever oversize under either),
  // every segment of at least 10 MiB (obtained for one request, of its size to 2 MiB) of a size this
  // run's rounding keeps, and every live block rounded alike. The allocator with these settings could
  // then have left that very state, and it is taken as recorded: re-held, it was laid out anew, which
  // the recording shows no reason for (a synthetic JAX-style loop of power-of-two tensors, cut at
  // 20-60 %: max_split_size_mb=256 and roundup_power2_divisions=4, on which the complete recording's
  // what-if is the recording itself, read 5.4 % above it at every cut; on the real snapshots whose
  // segments are all below 256 MiB, max_split_size_mb=256 went from 92 % to 100 % within 2 %).
  bool seeds_state(std::span<const PriorRegion> regions) const override {
    if (rec_.same_settings) return true;
    if (!rec_.comparable || c_.expandable) return false;
    const Bytes lo = std::min(c_.max_split_size, rec_.settings.max_split_size);
    const bool same_split = c_.max_split_size == rec_.settings.max_split_size;
    // Live bytes at no address the recording states (a profiler trace's, PriorBlock::aggregate) are
    // blocks of unknown sizes: rounded alike only when the rounding is the same for every size.
    const bool same_rounding = std::equal(std::begin(c_.divisions), std::end(c_.divisions),
                                          std::begin(rec_.settings.divisions), std::end(rec_.settings.divisions));
    for (const PriorRegion& r : regions) {
      if (r.mapped_range || (holds_aggregate(r) && !same_rounding)) return false;
      if (!same_split && r.size >= lo) return false;
      if (r.size >= kMinLargeAlloc && (Config::alloc_size(c_.round_size(r.size)) != r.size ||
                                       Config::alloc_size(rec_.settings.round_size(r.size)) != r.size))
        return false;
      for (const PriorBlock& b : r.live)
        if (c_.round_size(b.size) != rec_.settings.round_size(b.size)) return false;
    }
    return true;
  }

  // The history that obtained the recording's regions (PriorRegion, docs/report.md "Before the
  // recording"). A segment (cudaMalloc) was obtained for one request: of its size (alloc_size(r) = r
  // for r >= 10 MiB, and a 20 MiB segment's request may be its size), or in the small pool (2 MiB)
  // for requests of at most 1 MiB (kSmallSize), two of which fill it. When the what-if holds memory
  // in segments as the recording did, every request is held until the last one is made: the
  // recording obtained each segment while the others were in use, and the what-if then obtains the
  // same ones, keeping the recording's fragmentation between them. Otherwise a request is held only
  // as long as a later request of its pool (small or large: neither serves the other) would have
  // fitted in it, and a segment's live blocks are placed at their turn in its history
  // (prior_requests_of_regions; those the recording proves in use at a moment of demand,
  // PriorBlock::freed_unproven): memory the recording reserved only because its segments could
  // not be reused is not taken for demand, memory in use when a later segment was obtained is.
  // A mapped range of an expandable reservation was not obtained for one request: the reservation
  // maps pages as the blocks carved from its start need them, so the range is the blocks it held,
  // in address order — each block live when recording began at its own place in that order (the
  // block itself), and each gap between them a request the program made and released (kLikely;
  // kMost reads the range as one request; its blocks keep their place whenever the trace frees
  // them). A what-if then lays out those blocks as the reservation did, with the holes the gaps
  // leave, instead of one block as large as the range.
  std::vector<PriorRequest> prior_requests(std::span<const PriorRegion> regions, PriorHistory history) const override {
    std::vector<PriorRegion> split;
    std::vector<const PriorRegion*> ranges;
    const std::vector<bool> served =
        history == PriorHistory::kLikely ? served_another(regions) : std::vector<bool>(regions.size(), false);
    for (size_t i = 0; i < regions.size(); ++i) {
      const PriorRegion& r = regions[i];
      if (served[i]) continue;
      if (r.mapped_range && history == PriorHistory::kLikely) {
        ranges.push_back(&r);
        continue;
      }
      const bool small = r.mapped_range ? r.size % kLargeBuffer != 0 : r.size == kSmallBuffer;
      if (!small) {
        split.push_back(r);
        continue;
      }
      for (Bytes at = 0; at + kSmallSize <= r.size; at += kSmallSize)
        split.push_back(
            {.addr = r.addr + at, .size = kSmallSize, .stream = r.stream, .mapped_range = r.mapped_range, .live = {}});
    }
    const bool together = c_.expandable == rec_.settings.expandable;
    std::vector<PriorRequest> out = prior_requests_of_regions(
        split, history, together, [](const PriorRegion& r) { return r.size; },
        [](const PriorRegion& r) -> std::uint64_t { return r.size <= kSmallSize ? 1 : 0; },
        [&](const PriorRegion& r) { return least_served_as_recorded(r); });
    if (together && history == PriorHistory::kLikely) release_unproven_oversize(split, out);
    for (const PriorRegion* r : ranges) {
      for_each_region_piece(
          *r, false,
          [&](Bytes bytes) {
            if (bytes)
              out.push_back({.size = bytes, .stream = r->stream, .released_before = SIZE_MAX, .live = SIZE_MAX});
          },
          [&](const PriorBlock& b) {
            out.push_back({.size = b.size, .stream = r->stream, .released_before = SIZE_MAX, .live = b.id});
          },
          [](Bytes bytes) { return round_up_sat(std::max(bytes, kMinBlockSize), kMinBlockSize); });
    }
    return out;
  }

  // The smallest request the recording's allocator served from this segment, free: with
  // max_split_size M, a segment of at least M (one block, never split) served only requests of at
  // least M less than max_non_split_rounding below its size (get_free_block); any other, any request
  // of its pool that fits. Read where a what-if holds memory in another kind than the recording
  // (expandable segments on a recording made without): a later small request the recording served
  // with a segment of its own does not prove such a segment in use (a synthetic eager run recorded
  // with max_split_size_mb=128, cut at 20-60 %: expandable segments read 10-49 % above the complete
  // recording's what-if, every segment of 128 MiB or more held until the history's last small
  // request).
  Bytes least_served_as_recorded(const PriorRegion& r) const {
    const Bytes m = rec_.settings.max_split_size, round = rec_.settings.max_non_split_rounding;
    if (m == kTooLarge || r.mapped_range || r.size <= kSmallBuffer || r.size < m) return 0;
    return std::max(m, r.size >= round ? r.size - round + 1 : 0);
  }

  // A recording made with max_split_size M: a free segment of at least M (one block, never split)
  // served only requests of at least M within max_non_split_rounding of its size (get_free_block),
  // so the recording obtained a segment for a smaller request while such a segment lay free in its
  // cache. Held together, the segments that recording reserved would all read as in use at once,
  // and a what-if that splits such a segment (a larger max_split_size, or none) would keep the
  // recording's fragmentation it does not have. Such a segment is held as long as the recording
  // proves it in use: until the last later request of its stream it could have served (the
  // history's order, `split`, as prior_requests_of_regions' one-to-one held-together history;
  // released at once when none could). A synthetic PyTorch eager run recorded with
  // max_split_size_mb=128 replayed with 256 from a cut at 20-60 %: 29-55 % above the complete
  // recording's what-if, every segment of 128 MiB or more held at once.
  void release_unproven_oversize(std::span<const PriorRegion> split, std::vector<PriorRequest>& out) const {
    if (out.size() != split.size()) return;
    for (size_t k = 0; k < split.size(); ++k) {
      const PriorRegion& r = split[k];
      const Bytes least = least_served_as_recorded(r);                // 0: not such a segment
      if (!least || holds_aggregate(r) || !r.live.empty()) continue;  // a live block holds it anyway
      size_t last = k;
      for (size_t j = k + 1; j < split.size(); ++j) {
        const Bytes q = split[j].size;
        if (split[j].stream == r.stream && q > kSmallBuffer && q >= least && q <= r.size) last = j;
      }
      out[k].released_before = last + 1;
    }
  }

  // With max_split_size set, a block of at least that size is never split and serves only requests
  // less than max_non_split_rounding below it (get_free_block): a segment of at least that size
  // holds one block at a time, none smaller than max_split_size. A recorded segment of the large pool
  // of at least that size whose live blocks are all smaller was carved for them, after its own block
  // was freed, by an allocator without this limit; from then on it served no large request, and a
  // large request that found no free block obtained a segment of its own. The what-if keeps such a
  // segment whole and serves that request from it: the two recorded segments are one of the
  // what-if's (small_mlp_97ev cut at 60 % with max_split_size_mb=64: a 512 MiB segment holding an
  // 8.1 MiB block, 3.54 GiB reserved on the cut where the complete recording's what-if reserves 3.04
  // GiB). The recording proves such a request where another segment of the pool and stream holds a
  // live block the carved one could serve (rounded size within max_non_split_rounding of the
  // segment's): that segment's request stays, the carved one's is left out of the history (its
  // blocks follow it, policy.h, PriorRequest), each pair once. Whether the carving came before that
  // request the recording cannot tell; a partner with no such block proves no request (read so,
  // finetune_torch20_format cut at 50-60 % went from +0.8 % to -3.3 %).
  std::vector<bool> served_another(std::span<const PriorRegion> regions) const {
    std::vector<bool> out(regions.size(), false);
    if (c_.max_split_size == kTooLarge) return out;
    auto segment = [&](const PriorRegion& r) {
      return !r.mapped_range && !holds_aggregate(r) && r.size > kSmallBuffer && r.size >= c_.max_split_size;
    };
    auto carved = [&](const PriorRegion& r) {
      return segment(r) && !r.live.empty() &&
             std::all_of(r.live.begin(), r.live.end(), [&](const PriorBlock& b) { return b.size < c_.max_split_size; });
    };
    // The live blocks of at least max_split_size, by rounded size: the large requests a carved
    // segment of size S could serve are those in (S - max_non_split_rounding, S].
    std::vector<std::pair<Bytes, size_t>> large;  // (rounded size, segment)
    for (size_t j = 0; j < regions.size(); ++j)
      if (segment(regions[j]))
        for (const PriorBlock& b : regions[j].live)
          if (const Bytes r = c_.round_size(b.size); r >= c_.max_split_size) large.emplace_back(r, j);
    std::sort(large.begin(), large.end());
    std::vector<bool> taken(regions.size(), false);  // a segment whose request a carved one serves
    for (size_t i = 0; i < regions.size(); ++i) {
      if (taken[i] || !carved(regions[i])) continue;  // a request another one serves still obtained memory
      const Bytes size = regions[i].size;
      const Bytes from = size >= c_.max_non_split_rounding ? size - c_.max_non_split_rounding + 1 : 0;
      for (auto it = std::lower_bound(large.begin(), large.end(), std::pair<Bytes, size_t>(from, 0));
           it != large.end() && it->first <= size; ++it) {
        const size_t j = it->second;
        if (j == i || out[j] || taken[j] || regions[j].stream != regions[i].stream) continue;
        out[i] = true;
        taken[j] = true;
        break;
      }
    }
    return out;
  }

  void observe(const Observation& ob) override {
    if (ob.op == Op::kSegmentMap && ob.has_addr) {
      if (!ob.pre_trace) {  // where the recording allocator's next reservation starts, if it is one
        expandable_.observe_map(ob.addr, ob.size);
        return;
      }
      // A range mapped before recording began: seed it in its pool's reservation. Replayed without
      // expandable segments, that memory was held all the same: one segment of its size (below).
      if (c_.expandable) {
        bool small = ob.size % kLargeBuffer != 0;
        if (overlaps_other_segment(ob.addr, ob.size, small, ob.stream)) {
          ++pre_trace_overlapping_;
          return;
        }
        SegmentHeap& heap = pools_[small][ob.stream];
        count_mapped(small, expandable_.seed(heap, small, ob.addr, ob.size, reservations_of(small, ob.stream),
                                             reserve_in(small, ob.stream)));
        return;
      }
    } else if (ob.op != Op::kSegmentAlloc || !ob.pre_trace || ob.bfc_region) {
      return;  // a capture's BFC region is no PyTorch segment: buffers before it are placed anew
    }
    // A segment that existed before recording: obtain it (the engine queued its address).
    bool small = ob.size == kSmallBuffer;
    auto g = dev_->allocate(ob.size);
    if (!g) return;
    Addr base = g.addr();
    if (overlaps_other_segment(base, ob.size, small, ob.stream, false)) {  // the grant goes back
      ++pre_trace_overlapping_;
      return;
    }
    grants_[base] = std::move(g);
    register_segment(small, ob.stream, base, ob.size, true);
    reserved_.add(small, static_cast<std::int64_t>(ob.size));
    segments_.add(small, 1);
    ++num_device_alloc_;
  }

 private:
  struct Owner {
    bool small = false;
    std::int64_t stream = 0;
    std::int32_t block = SegmentHeap::kNil;
    auto operator<=>(const Owner&) const = default;
  };
  struct SegRef {
    bool small;
    std::int64_t stream;
    std::int32_t seg;
    bool expandable = false;  // an expandable reservation (else one cudaMalloc)
  };

  // What the device (and a per-process memory fraction) still lets the pools take.
  Bytes device_room() const {
    Bytes room = dev_->available();
    if (c_.memory_fraction > 0) {
      auto allowed = static_cast<Bytes>(c_.memory_fraction * static_cast<double>(total_));
      room = std::min(room, allowed > reserved_.current() ? allowed - reserved_.current() : 0);
    }
    return room;
  }

  // A new segment (or expandable reservation) of a pool: findable by address, numbered in the
  // order segments are obtained. Stats are the caller's (reservations count mapped pages only).
  std::int32_t register_segment(bool small, std::int64_t stream, Addr base, Bytes size, bool mapped) {
    SegmentHeap& heap = pools_[small][stream];
    std::int32_t s = heap.add_segment(base, size, mapped, next_region_++);
    seg_by_addr_[base] = {small, stream, s};
    return s;
  }

  // Whether [at, at+size) meets a segment other than an expandable reservation of pool (small,
  // stream) (any segment at all with own_reservation false). A recording whose pre-trace segments
  // overlap (a cudaMalloc segment and a mapped range at one address) contradicts itself: the
  // later one is left out and counted (pre_trace_segments_overlapping), as two segments at one
  // address would leave no consistent state to replay from.
  bool overlaps_other_segment(Addr at, Bytes size, bool small, std::int64_t stream, bool own_reservation = true) const {
    auto meets = [&](const std::pair<const Addr, SegRef>& e) {
      const Bytes n = pools_[e.second.small].at(e.second.stream).segment(e.second.seg).size;
      const bool ours = own_reservation && e.second.expandable && e.second.small == small && e.second.stream == stream;
      return !ours && e.first < at + size && at < e.first + n;
    };
    auto it = seg_by_addr_.upper_bound(at);
    if (it != seg_by_addr_.end() && meets(*it)) return true;
    return it != seg_by_addr_.begin() && meets(*std::prev(it));
  }

  // Places an allocation at its recorded address (a pre-trace one inside a seeded segment, or one
  // --follow-recording corrects) when the simulated state has that range free.
  // Returns whether the block's end is unknown: sized by its request alone, with free memory after
  // it that an unsplit remainder of up to 1 MiB may have been part of (settle_tails).
  bool seeded(const AllocRequest& req, Addr at, SegmentHeap** heap, bool* small, std::int64_t* stream,
              std::int32_t* blk) {
    auto it = seg_by_addr_.upper_bound(at);
    if (it == seg_by_addr_.begin()) return false;
    --it;
    SegRef ref = it->second;
    SegmentHeap& h = pools_[ref.small][ref.stream];
    h.index_addresses();  // every allocation of a followed recording comes here: find blocks by address
    const auto& sg = h.segment(ref.seg);
    Bytes r = block_for(req);
    if (!sg.live || r > sg.size || at - sg.base > sg.size - r) return false;
    // Only the requested size was recorded; the split rule tells the block's real size. In the
    // large pool a free block is never 1 MiB or less (blocks are bigger, and free neighbours
    // merge), so such a gap after a block is that block's unsplit remainder (§3 should_split).
    // With max_split_size set, oversize blocks are never split and the remainder could be up to
    // max_non_split_rounding: then the size stays as requested, counted as ambiguous. A block
    // size the recording gives (a snapshot's segments at the dump) wins over both.
    bool split_rule = !ref.small && !sg.x.expandable;
    // In a reservation the recorded block's pages were mapped: map what this state has not.
    if (sg.x.expandable) {
      Bytes span = req.seeded_block > r && req.seeded_block - r <= sg.size - r - (at - sg.base) ? req.seeded_block : r;
      auto g = expandable_.map_range(h, ref.small, ref.seg, at, span);
      count_mapped(ref.small, g);
      if (g.block == SegmentHeap::kNil) return false;
    }
    // Only the free block holding `at` can hold the range.
    std::int32_t b = h.block_at(ref.seg, at);
    const auto& bl = h.block(b);
    if (at + r > bl.addr + bl.size || bl.in_use || !bl.x.mapped) return false;
    if (split_rule && at > bl.addr && at - bl.addr <= kSmallSize && bl.prev != SegmentHeap::kNil &&
        h.block(bl.prev).in_use) {
      std::int32_t p = bl.prev;
      Bytes gap = at - bl.addr;
      if (h.block(p).size >= c_.max_split_size) {
        ++pre_trace_ambiguous_;
      } else {
        h.grow_in_use(p, gap);
        allocated_.add(false, static_cast<std::int64_t>(gap));
        active_.add(false, static_cast<std::int64_t>(gap));
        ++pre_trace_widened_;
        b = h.block(p).next;
      }
    }
    const auto& fb = h.block(b);
    Bytes rest = fb.addr + fb.size - (at + r), take = r;
    if (req.seeded_block >= r && req.seeded_block - r <= rest) {  // the recording says (no remainder, if r)
      take = req.seeded_block;
    } else if (split_rule && rest > 0 && rest <= kSmallSize) {
      if (r >= c_.max_split_size) {
        ++pre_trace_ambiguous_;
      } else {
        take = r + rest;
        ++pre_trace_widened_;
      }
    }
    *blk = h.carve(b, at, take, req.size);
    *heap = &h;
    *small = ref.small;
    *stream = ref.stream;
    recount_inactive_split(h, ref.seg, ref.small);
    const std::int32_t next = h.block(*blk).next;
    return rec_.same_settings && split_rule && !req.recorded_addr && !req.seeded_block && take == r &&
           next != SegmentHeap::kNil && !h.block(next).in_use;
  }

  // A block held before the recording began whose size only its request gives may have kept an
  // unsplit remainder of up to 1 MiB (kSmallSize): a neighbour, freed before the trace began, may
  // have ended the free block it was carved from there. The state cannot tell, but the allocator's
  // choices can: best fit takes the smallest free block that holds a request, so when the free
  // block it would take lies right after such a block and the recording placed the request
  // elsewhere, that free block was smaller than the request — the block before it held the
  // difference. Widened by the least that explains the choice (each block at most 1 MiB in all,
  // never leaving a free block of 1 MiB or less, which the large pool never has); then best fit
  // chooses again. Only a run that holds the recorded state with the recorded settings seeds such
  // blocks, and only the recorded placement of a request is read: it decides nothing the
  // allocator decides (a block the state holds free stays a candidate unless the rule shrinks it).
  // A block the dump lists at exactly its request's size comes without a recorded size too (the
  // importer states only sizes above the request: the trace's digest stays) and is read alike.
  // A random churn recording cut at 50 % (a 14.3 MiB block whose 0.97 MiB remainder a freed
  // neighbour had closed off) reproduced 2076 of 2987 addresses and 2.0 % more reserved memory.
  // With max_split_size set, a block of at least that size was never split (should_split): it is the
  // whole free block it was taken from, less than max_non_split_rounding above its request (or a fresh
  // segment's rounding), so a free block right after it that the recording shows was not free is part
  // of it, whole (a recording made with max_split_size_mb=64 cut as the ring buffer does: a 75.8 MiB
  // block holding its 78 MiB segment left a 2.2 MiB tail free, and a 1.8 MiB request went there
  // instead of to a 20 MiB segment of its own: 0/1 addresses, trial 15).
  std::int32_t settle_tails(SegmentHeap& h, bool small, std::int64_t stream, Bytes r, Addr recorded, std::int32_t blk) {
    while (blk != SegmentHeap::kNil && h.block(blk).addr != recorded) {
      const std::int32_t p = h.block(blk).prev;
      if (p == SegmentHeap::kNil || !h.block(p).in_use) break;
      auto it = tail_unknown_.find(Owner{small, stream, p});
      if (it == tail_unknown_.end()) break;
      const bool whole = h.block(p).size - it->second >= c_.max_split_size;  // never split: all of it
      const Bytes f = h.block(blk).size, g = whole ? f : f - r + kMinBlockSize;
      if (whole ? it->second + g >= c_.max_non_split_rounding : it->second + g > kSmallSize || f - g <= kSmallSize)
        break;
      h.grow_in_use(p, g);
      allocated_.add(small, static_cast<std::int64_t>(g));
      active_.add(small, static_cast<std::int64_t>(g));
      it->second += g;
      ++pre_trace_widened_;
      recount_inactive_split(h, h.block(p).region, small);
      blk = best_fit(h, r);
    }
    return blk;
  }

  // Size of a free block counting the unmapped space right after it (expandable segments).
  static Bytes expandable_size(const SegmentHeap& h, const SizeIndex::Entry& e) {
    const auto& b = h.block(static_cast<std::int32_t>(e.id));
    Bytes extra = b.next != SegmentHeap::kNil && !h.block(b.next).x.mapped ? h.block(b.next).size : 0;
    return b.size + extra;
  }

  std::int32_t best_fit(SegmentHeap& heap, Bytes r) {
    const SizeIndex::Entry* e = heap.best_fit(r);
    if (!e) return SegmentHeap::kNil;
    // In an expandable segment, prefer blocks that fit without growing into unmapped space.
    if (c_.expandable && heap.segment(heap.block(static_cast<std::int32_t>(e->id)).region).x.expandable) {
      const SizeIndex::Entry* cur = e;
      heap.scan_from(r, [&](const SizeIndex::Entry& x) {
        if (&x == e) return true;
        if (expandable_size(heap, x) < expandable_size(heap, *cur)) {
          cur = &x;
          return true;
        }
        return false;
      });
      e = cur;
    }
    if (r < c_.max_split_size && e->size >= c_.max_split_size) return SegmentHeap::kNil;
    if (r >= c_.max_split_size && e->size - r >= c_.max_non_split_rounding) return SegmentHeap::kNil;
    return static_cast<std::int32_t>(e->id);
  }

  std::int32_t new_segment(bool small, std::int64_t stream, Bytes a) {
    if (a > device_room()) return SegmentHeap::kNil;  // the fraction check happens before cudaMalloc
    auto g = dev_->allocate(a);
    if (!g) return SegmentHeap::kNil;
    Addr base = g.addr();
    grants_[base] = std::move(g);
    std::int32_t s = register_segment(small, stream, base, a, true);
    reserved_.add(small, static_cast<std::int64_t>(a));
    segments_.add(small, 1);
    ++num_device_alloc_;
    return pools_[small][stream].segment(s).first;
  }

  // A segment cudaFree can return: one free block, no expandable reservation (§5: the GC, empty_cache
  // and release_available_cached_blocks free whole-segment blocks only; an expandable reservation
  // gives back its free pages instead, and may hold free blocks both mapped and not).
  static bool whole_free_segment(SegmentHeap& heap, std::int32_t s) {
    return heap.segment_unused(s) && !heap.segment_extra(s).expandable;
  }

  void release_segment(bool small, std::int64_t stream, std::int32_t s) {
    SegmentHeap& heap = pools_[small][stream];
    Addr base = heap.segment(s).base;
    Bytes size = heap.segment(s).size;
    heap.remove_segment(s);
    grants_.erase(base);  // cudaFree
    seg_by_addr_.erase(base);
    reserved_.sub(small, static_cast<std::int64_t>(size));
    segments_.sub(small, 1);
    ++num_device_free_;
  }

  // With max_split_size set: free one cached oversize segment big enough, else several from the
  // largest down (specs/torch-caching.md §5).
  bool release_available_cached_blocks(Bytes r, bool small, std::int64_t stream) {
    if (c_.max_split_size == kTooLarge) return false;
    SegmentHeap& heap = pools_[small][stream];
    Bytes key = std::max(r, c_.max_split_size);
    if (const auto* e = heap.best_fit(key)) {
      const auto& b = heap.block(static_cast<std::int32_t>(e->id));
      if (b.prev == SegmentHeap::kNil && b.next == SegmentHeap::kNil && whole_free_segment(heap, b.region)) {
        release_segment(small, stream, b.region);
        return true;
      }
    }
    // Oversize whole-segment free blocks, largest first.
    std::vector<std::pair<Bytes, std::int32_t>> cand;
    for (size_t s = 0; s < heap.segment_count(); ++s) {
      const auto& sg = heap.segment(static_cast<std::int32_t>(s));
      if (whole_free_segment(heap, static_cast<std::int32_t>(s)) && sg.size >= c_.max_split_size)
        cand.emplace_back(sg.size, static_cast<std::int32_t>(s));
    }
    std::sort(cand.rbegin(), cand.rend());
    Bytes released = 0;
    for (const auto& [size, s] : cand) {
      if (released >= key) break;
      release_segment(small, stream, s);
      released += size;
    }
    return released >= key;
  }

  // empty_cache: complete pending frees, then free every unsplit free block, large then small pool.
  // release_blocks walks the pool's free blocks in its order, (stream, size, address): a whole
  // free cudaMalloc segment is freed there; the free pages of expandable reservations are unmapped
  // after the walk. Both kinds meet in one pool when a run with expandable segments starts from a
  // recording's segments made without them.
  bool release_cached_blocks() {
    while (!pending_.empty()) {
      Owner o = pending_.begin()->first;
      pending_.erase(pending_.begin());  // cancels the scheduled completion
      free_block(o);
    }
    for (int small = 0; small < 2; ++small)
      for (auto& [stream, heap] : pools_[small]) {
        std::vector<std::pair<Bytes, std::int32_t>> whole;
        for (size_t s = 0; s < heap.segment_count(); ++s) {
          auto si = static_cast<std::int32_t>(s);
          if (whole_free_segment(heap, si)) whole.emplace_back(heap.segment(si).size, si);
        }
        std::sort(whole.begin(), whole.end(), [&](const auto& x, const auto& y) {
          return x.first != y.first ? x.first < y.first : heap.segment(x.second).base < heap.segment(y.second).base;
        });
        for (const auto& [size, s] : whole) release_segment(small, stream, s);
        if (!c_.expandable) continue;
        auto u = expandable_.unmap_free_pages(heap, small);
        reserved_.sub(small, static_cast<std::int64_t>(u.bytes));
        num_device_free_ += u.pages;
        for (std::int32_t s : u.released) {  // release_expandable_segment: the address space goes too
          seg_by_addr_.erase(heap.segment(s).base);
          heap.remove_segment(s);
        }
      }
    return true;
  }

  // The stream's expandable reservations of a pool, by base address.
  std::map<Addr, std::int32_t> reservations_of(bool small, std::int64_t stream) const {
    std::map<Addr, std::int32_t> out;
    for (const auto& [base, ref] : seg_by_addr_)
      if (ref.small == small && ref.stream == stream && ref.expandable) out.emplace(base, ref.seg);
    return out;
  }
  ExpandableSegments::Reserve reserve_in(bool small, std::int64_t stream) {
    return [this, small, stream](Addr base, Bytes size) {
      if (overlaps_other_segment(base, size, small, stream, false)) return SegmentHeap::kNil;
      std::int32_t s = register_segment(small, stream, base, size, false);
      seg_by_addr_[base].expandable = true;
      pools_[small][stream].segment_extra(s).expandable = true;
      return s;
    };
  }
  void count_mapped(bool small, const ExpandableSegments::Grown& g) {
    reserved_.add(small, static_cast<std::int64_t>(g.mapped));
    num_device_alloc_ += g.pages;
  }

  // Expandable segments: room for r bytes in the stream's reservations, mapping what is missing
  // (alloc_block: the fraction check is on the segment size a cudaMalloc would have asked for).
  std::int32_t expand(bool small, std::int64_t stream, Bytes r) {
    if (c_.memory_fraction > 0 && reserved_.current() + Config::alloc_size(r) >
                                      static_cast<Bytes>(c_.memory_fraction * static_cast<double>(total_)))
      return SegmentHeap::kNil;
    SegmentHeap& heap = pools_[small][stream];
    auto g = expandable_.grow(heap, small, r, reservations_of(small, stream), reserve_in(small, stream));
    count_mapped(small, g);
    return g.block;
  }

  void garbage_collect() {
    auto allowed = c_.memory_fraction * static_cast<double>(total_);
    double threshold = c_.gc_threshold * allowed;
    double reserved = static_cast<double>(reserved_.current());
    if (reserved <= threshold) return;
    double target = reserved - threshold, reclaimed = 0;
    struct Cand {
      std::int64_t stream;
      std::int32_t seg;
      std::uint64_t age;
    };
    std::vector<Cand> cand;
    for (auto& [stream, heap] : pools_[0])
      for (size_t s = 0; s < heap.segment_count(); ++s)
        if (whole_free_segment(heap, static_cast<std::int32_t>(s))) {
          const auto& b = heap.block(heap.segment(static_cast<std::int32_t>(s)).first);
          cand.push_back({stream, static_cast<std::int32_t>(s), free_block_calls_[0] - b.x.aux});
        }
    double total_age = 0;
    for (const auto& c : cand) total_age += static_cast<double>(c.age);
    size_t count = cand.size();
    bool freed = true;
    std::vector<bool> done(cand.size(), false);
    while (reclaimed < target && freed && count > 0) {
      double threshold_age = total_age / static_cast<double>(count);
      freed = false;
      for (size_t k = 0; k < cand.size(); ++k) {
        if (done[k] || static_cast<double>(cand[k].age) < threshold_age) continue;
        done[k] = true;
        freed = true;
        reclaimed += static_cast<double>(pools_[0][cand[k].stream].segment(cand[k].seg).size);
        total_age -= static_cast<double>(cand[k].age);
        --count;
        release_segment(false, cand[k].stream, cand[k].seg);
      }
    }
  }

  void free_block(const Owner& o) {
    if (!tail_unknown_.empty()) tail_unknown_.erase(o);  // a lookup only where seeded blocks may end later
    SegmentHeap& heap = pools_[o.small][o.stream];
    active_.sub(o.small, static_cast<std::int64_t>(heap.block(o.block).size));
    std::int32_t m = heap.free_block(o.block);
    heap.block_extra(m).aux = free_block_calls_[o.small];
    recount_inactive_split(heap, heap.block(m).region, o.small);
  }

  // inactive_split_bytes counts free bytes of split segments; refresh one segment's share.
  void recount_inactive_split(SegmentHeap& heap, std::int32_t seg, bool small) {
    const auto& sg = heap.segment(seg);
    std::int64_t now = !c_.expandable && sg.live && sg.chunks > 1 ? static_cast<std::int64_t>(sg.free_bytes) : 0;
    std::int64_t& was = heap.segment_extra(seg).counted;
    if (now > was) inactive_split_.add(small, now - was);
    if (now < was) inactive_split_.sub(small, was - now);
    was = now;
  }

  Bytes limit() const override {
    return c_.memory_fraction > 0 ? static_cast<Bytes>(c_.memory_fraction * static_cast<double>(total_)) : 0;
  }

  Config c_;
  AsRecorded rec_;
  DeviceMemory* dev_;
  Scheduler* sched_;
  Bytes total_;
  std::uint32_t device_index_;
  bool rocm_;  // PyTorch's ROCm build: its messages say HIP (hipify), its variable PYTORCH_HIP_ALLOC_CONF
  ExpandableSegments expandable_;
  std::map<Addr, DeviceMemory::Grant> grants_;    // segment base → its cudaMalloc
  std::map<std::int64_t, SegmentHeap> pools_[2];  // [large, small] per stream
  std::map<Addr, SegRef> seg_by_addr_;
  std::vector<Owner> owner_;
  std::map<Owner, Scheduler::Task> pending_;  // record_stream frees waiting for their event
  std::map<Owner, Bytes> tail_unknown_;       // pre-trace blocks that may end later (settle_tails): bytes added
  int next_region_ = 0;                       // segments' obtain order across pools and streams
  std::uint64_t free_block_calls_[2] = {0, 0};
  StatArray allocations_, allocated_, active_, requested_, reserved_, segments_, inactive_split_;
  std::uint64_t num_alloc_retries_ = 0, num_ooms_ = 0, num_device_alloc_ = 0, num_device_free_ = 0;
  std::uint64_t pre_trace_overlapping_ = 0;  // pre-trace segments left out: they overlap an earlier one
  std::uint64_t pre_trace_widened_ = 0, pre_trace_ambiguous_ = 0;  // seeded blocks sized by the split rule
};

// A recorded OOM that the device had room for was refused by the allocator's own cap
// (RecordedAllocatorCap): unless a memory fraction is given, the device is replayed with the least
// cap the recording allows, as a fraction of the memory this run gives the device (so that the cap
// in bytes is the recording's whatever the hardware). Per device, as set_per_process_memory_fraction
// sets it: a device whose recording shows no refusal keeps the whole device.
void adopt_recorded_cap(const ConfigContext& ctx, Config& c, ConfigReader& cfg) {
  const RecordedDeviceMemory* rd = ctx.recording ? ctx.recording->device(ctx.device_index) : nullptr;
  if (!rd || !rd->cap || !ctx.space || rd->cap->cap >= ctx.space->capacity) return;
  const RecordedAllocatorCap& rc = *rd->cap;
  const auto total = static_cast<double>(ctx.space->capacity);
  double f = static_cast<double>(rc.cap) / total;
  while (static_cast<Bytes>(f * total) < rc.cap) f = std::nextafter(f, 1.0);  // the cap, not a byte below it
  c.memory_fraction = f;
  cfg.record("memory_fraction", f);
  cfg.note(fmt::format(
      "policy torch-caching: the recorded OOM at event {} came with {} free on device {}, so the allocator refused "
      "{} itself, as it does under torch.cuda.set_per_process_memory_fraction: replayed with memory_fraction={} of "
      "its {} (a cap of {} ({} B), the most memory the recording held or asked for; --set memory_fraction= sets "
      "yours)",
      rc.oom_event, human_bytes(rc.device_free), ctx.device_index, human_bytes(rc.request), f,
      human_bytes(ctx.space->capacity), human_bytes(rc.cap), rc.cap));
}

// The bounds of the single keys, as PyTorch checks them in PYTORCH_CUDA_ALLOC_CONF (parse_alloc_conf):
// max_split_size_mb > 20 (kLargeBuffer) and below 2^43 MiB, garbage_collection_threshold in (0, 1).
constexpr Range kMaxSplitRange = open_closed(static_cast<double>(kLargeBuffer / kMiB), 8796093022207.0);
constexpr Range kGcThresholdRange = {0, 1, true, true, false};
constexpr Range kDivisionsRange = integers(0, 1 << 30);  // and a power of two
constexpr Range kMemoryFractionRange = open_closed(0, 1);
constexpr Range kDelayRange = integers(0, static_cast<double>(INT64_MAX));

PolicyBuilder configure_torch_caching(ConfigReader& cfg, const ConfigContext& ctx) {
  Config c;
  // PYTORCH_CUDA_ALLOC_CONF (alloc_conf) is read whole, as PyTorch reads the variable: it replaces
  // the snapshot's recorded settings. The single keys (--set max_split_size_mb=...) override the
  // recorded settings one by one, so that overriding one keeps the others.
  const bool whole = cfg.has("alloc_conf");
  const bool keys = cfg.has("max_split_size_mb") || cfg.has("garbage_collection_threshold") ||
                    cfg.has("roundup_power2_divisions") || cfg.has("expandable_segments");
  const std::string conf = cfg.text("alloc_conf", "");
  bool use_recorded = cfg.flag("use_recorded_settings", true);
  // This device's recorded settings (each rank's own in a set; PyTorch's defaults where it states none).
  const RecordedTorchSettings* own = ctx.recording ? ctx.recording->torch_settings_of(ctx.device_index) : nullptr;
  Config recorded;
  if (own) apply_recorded_settings(*own, recorded);
  const std::string recorded_text = alloc_conf_text(recorded);
  // (A whole variable given replaces every rank's recorded settings: no rank replays its own then.)
  if (use_recorded && !whole && ctx.recording && ctx.recording->device_torch_settings.count(ctx.device_index))
    cfg.note(
        fmt::format("torch-caching: device {} replays its own recording's settings ({}){}: the set's "
                    "recordings state different ones, and each process configured its own allocator",
                    ctx.device_index,
                    !own                    ? std::string("none recorded")
                    : recorded_text.empty() ? std::string("PyTorch's defaults")
                                            : recorded_text,
                    keys ? ", with the keys --set gives over them" : ""));
  if (use_recorded && own) {
    if (whole) {
      std::string bare = conf;  // PyTorch's tokenizer skips spaces
      bare.erase(std::remove(bare.begin(), bare.end(), ' '), bare.end());
      std::vector<std::string> set_keys, dropped;
      for (const auto& p : conf_parts(bare)) set_keys.push_back(conf_key(p));
      for (const auto& p : conf_parts(recorded_text))
        if (std::find(set_keys.begin(), set_keys.end(), conf_key(p)) == set_keys.end()) dropped.push_back(p);
      if (!dropped.empty())
        cfg.note(fmt::format(
            "torch-caching: PYTORCH_CUDA_ALLOC_CONF={} replaces the snapshot's recorded settings ({}), as PyTorch "
            "reads the variable whole: {} dropped (--set KEY=VALUE changes one key and keeps the rest)",
            conf, recorded_text, fmt::join(dropped, ", ")));
    } else {
      c = recorded;
      cfg.record(kRecordedSettingsKey, true);
      if (!own->inferred.empty())
        cfg.note(fmt::format("torch-caching: the recording's settings include {}", own->inferred));
      if (keys && !recorded_text.empty())
        cfg.note(
            fmt::format("torch-caching: the snapshot's recorded settings ({}) stay where the settings given do "
                        "not replace them (use_recorded_settings=false drops them)",
                        recorded_text));
    }
  }
  parse_alloc_conf(conf, c);
  if (cfg.has("max_split_size_mb")) {
    double v = cfg.number_in("max_split_size_mb", 0, kMaxSplitRange);
    c.max_split_size = static_cast<Bytes>(v) * kMiB;
  }
  if (cfg.has("garbage_collection_threshold"))
    c.gc_threshold = cfg.number_in("garbage_collection_threshold", 0, kGcThresholdRange);
  if (cfg.has("roundup_power2_divisions")) {
    auto d = static_cast<std::uint64_t>(cfg.integer_in("roundup_power2_divisions", 0, kDivisionsRange));
    if (d & (d - 1)) throw InputError("policy torch-caching: roundup_power2_divisions: must be a power of 2");
    std::fill(c.divisions, c.divisions + kIntervals, d);
  }
  c.expandable = cfg.flag("expandable_segments", c.expandable);
  if (cfg.has("memory_fraction"))
    c.memory_fraction = cfg.number_in("memory_fraction", 0, kMemoryFractionRange);
  else if (use_recorded)
    adopt_recorded_cap(ctx, c, cfg);
  c.stream_event_delay = static_cast<std::uint64_t>(cfg.integer_in("stream_event_delay", 0, kDelayRange));
  cfg.record("resolved_expandable_segments", c.expandable);
  cfg.record("resolved_max_split_size",
             c.max_split_size == kTooLarge ? -1 : static_cast<std::int64_t>(c.max_split_size));
  cfg.record("resolved_garbage_collection_threshold", c.gc_threshold);
  cfg.record(kResolvedAllocConfKey, alloc_conf_text(c));
  // The recording's own settings (PyTorch's defaults when it states none): a run with the same ones
  // makes its decisions and takes the state before it as recorded; memory_fraction is a limit, not
  // a setting of where blocks go (the engine re-holds the state when it does not fit the limit).
  AsRecorded rec;
  if (ctx.recording && ctx.recording->framework() == "PyTorch") {
    rec.same_settings = recorded_text == alloc_conf_text(c);
    Config probe = recorded;
    probe.max_split_size = c.max_split_size;
    std::copy(std::begin(c.divisions), std::end(c.divisions), std::begin(probe.divisions));
    rec.comparable = alloc_conf_text(probe) == alloc_conf_text(c);
    rec.settings = recorded;
  }
  // Host memory (a profiler trace's CPU events) is PyTorch's CPU allocator's: posix_memalign per
  // tensor, released at its free (c10/core/CPUAllocator.cpp, DefaultCPUAllocator), no cache — the
  // memory it holds is what is live. The CUDA caching allocator's segments there were memory no
  // process reserved.
  if (ctx.space->space == Space::kHost) {
    cfg.note("host memory: PyTorch's CPU allocator caches nothing (malloc and free per tensor): it holds what is live");
    return uncached_allocator(ctx, ctx.recording && ctx.recording->framework_of() == Framework::kPyTorch);
  }
  return [c, rec](const PolicyContext& pc) { return std::make_unique<TorchCachingPolicy>(c, rec, pc); };
}

// The variable the run's platform reads the allocator's configuration from.
std::string alloc_conf_variable(const Vocabulary& vocab) {
  return vocab.rocm() ? "PYTORCH_HIP_ALLOC_CONF" : "PYTORCH_CUDA_ALLOC_CONF";
}

// PYTORCH_CUDA_ALLOC_CONF with `key` set to `value` and every other key as in `conf`.
std::string conf_with(const std::string& conf, const std::string& key, const std::string& value) {
  std::string out;
  for (const auto& p : conf_parts(conf))
    if (conf_key(p) != key) out += (out.empty() ? "" : ",") + p;
  return out + (out.empty() ? "" : ",") + key + ":" + value;
}

// The values advice and compare's what-ifs propose.
constexpr int kAdvisedMaxSplitMb = 256;
constexpr const char* kAdvisedGcThreshold = "0.8";

// What max_split_size_mb:N changes under configuration k (§3), in words true for it. get_free_block
// gives a free block of N MiB or more only to a request of N MiB or more that it exceeds by less
// than max_non_split_rounding. should_split splits every block of an expandable segment, whatever
// N; without them it never splits a block for a request of N MiB or more.
std::string max_split_why(const Config& k, int mb) {
  const std::string serves = fmt::format(
      "free blocks of {} MiB or more serve only requests of {} MiB or more that they exceed by less than {}", mb, mb,
      human_bytes(k.max_non_split_rounding));
  if (k.expandable)
    return serves + ", so smaller requests leave large free ranges whole (expandable segments still split every block)";
  return fmt::format("blocks of {} MiB or more are never split; {}, so large holes stay whole", mb, serves);
}

// After a first OOM (sim/commands/advice.h replays each before printing it): against fragmentation, the
// settings PyTorch's own message and docs point to that are not on yet and can act in this run;
// and with a memory cap below the device (either cause), the smallest
// set_per_process_memory_fraction that fits. The variable is the one the run's platform reads
// (PYTORCH_HIP_ALLOC_CONF on ROCm), given whole: the configuration in force with the key set.
std::vector<AdviceCandidate> advise_torch_caching(const AdviceInput& in) {
  const nlohmann::json& c = in.config;
  const std::string conf = c.value(kResolvedAllocConfKey, std::string());
  Config k;  // the configuration in force, as its variable states it
  parse_alloc_conf(conf, k);
  const std::string var = alloc_conf_variable(in.vocab);
  std::vector<AdviceCandidate> a;
  auto conf_candidate = [&](const std::string& key, const std::string& value, const std::string& why) {
    std::string env = var + "=" + conf_with(conf, key, value);
    a.push_back({.problem = "fragmentation",
                 .setting = env,
                 .why = why,
                 .envs = {env},
                 .drop_envs = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"}});
  };
  if (in.fragmentation) {
    if (!k.expandable)
      conf_candidate("expandable_segments", "True", "segments grow in place instead of leaving holes between them");
    if (k.max_split_size == kTooLarge)
      conf_candidate("max_split_size_mb", std::to_string(kAdvisedMaxSplitMb), max_split_why(k, kAdvisedMaxSplitMb));
    // malloc collects only `if (set_fraction && garbage_collection_threshold() > 0)`, and the
    // collection frees whole cudaMalloc segments (release_block asserts !expandable_segment_): it
    // acts only under a memory fraction and without expandable segments.
    if (k.gc_threshold <= 0 && c.value("memory_fraction", 0.0) > 0 && !k.expandable)
      conf_candidate("garbage_collection_threshold", kAdvisedGcThreshold,
                     fmt::format("whole cached segments are freed, the longest unused first, once reserved memory "
                                 "passes {} of the memory fraction's limit",
                                 kAdvisedGcThreshold));
  }
  // A cap below the device binds whatever the cause: more of the device can hold the same blocks
  // with room to spare (a fragmentation OOM at 0.65 of an 80 GB device fitted at 0.66).
  if (c.value("memory_fraction", 1.0) < 1.0)
    a.push_back({.problem = "memory", .why = "a larger share of the device", .find_fraction = true});
  return a;
}

// The configuration in force (a snapshot's recorded settings, or the settings given), whole, in the
// variable the platform reads: PyTorch's default is none.
std::vector<StatedSetting> stated_torch_caching(const nlohmann::json& c, const Vocabulary& vocab) {
  const std::string conf = c.value(kResolvedAllocConfKey, std::string());
  if (conf.empty()) return {};
  const std::string s = alloc_conf_variable(vocab) + "=" + conf;
  return {{s, s, "alloc_conf"}};
}

// Compare's what-ifs, each with the variable that selects it as PyTorch users set it: the
// configuration in force with the one key changed (the variable is read whole: advise_torch_caching).
std::vector<WhatIf> torch_caching_what_ifs(const nlohmann::json& c, const Vocabulary& vocab) {
  const std::string conf = c.value(kResolvedAllocConfKey, std::string());
  Config k;  // the configuration in force, as its variable states it (as advise_torch_caching reads it)
  parse_alloc_conf(conf, k);
  const std::string var = alloc_conf_variable(vocab);
  auto what_if = [&](const std::string& key, const std::string& option, const std::string& value) {
    return WhatIf{fmt::format("torch-caching[{}={}]", key, option), var + "=" + conf_with(conf, key, value)};
  };
  std::vector<WhatIf> v;
  if (k.expandable)
    v.push_back(what_if("expandable_segments", "false", "False"));
  else
    v.push_back(what_if("expandable_segments", "true", "True"));
  if (k.max_split_size == kTooLarge)
    v.push_back(what_if("max_split_size_mb", std::to_string(kAdvisedMaxSplitMb), std::to_string(kAdvisedMaxSplitMb)));
  return v;
}

}  // namespace

void register_torch_caching(Registry& r) {
  PolicyInfo info{
      "torch-caching",
      "PyTorch CUDACachingAllocator (PYTORCH_CUDA_ALLOC_CONF, expandable segments, memory fraction)",
      configure_torch_caching,
      false,
      {{"alloc_conf", "\"\" (or the snapshot's recorded settings)", "expandable_segments:True",
        "PYTORCH_CUDA_ALLOC_CONF as PyTorch parses it, whole: given, it replaces the snapshot's recorded settings "
        "(the keys below override its parts); in POLICY[...] its commas stay "
        "(torch-caching[alloc_conf=expandable_segments:True,max_split_size_mb:256])"},
       {"expandable_segments", "false", true,
        "one growing segment per stream and size class (mapped in 2 MiB/20 MiB pages)"},
       {"max_split_size_mb", "unlimited", 512, "blocks above this size (MiB) are never split", kMaxSplitRange},
       {"garbage_collection_threshold", "0 (off)", 0.8,
        "above this fraction of the memory fraction's limit, free cached blocks oldest first before cudaMalloc",
        kGcThresholdRange},
       {"roundup_power2_divisions", "0 (512-byte rounding)", 4,
        "round requests above 1 MiB up to one of N divisions of a power of two (N a power of two)", kDivisionsRange},
       {"memory_fraction", "unset (the whole device)", 0.9,
        "torch.cuda.set_per_process_memory_fraction: a cap on reserved memory", kMemoryFractionRange},
       {"stream_event_delay", "0", 1000,
        "ticks a block freed on another stream (record_stream) stays busy, waiting for its CUDA event", kDelayRange},
       {"use_recorded_settings", "true", false,
        "start from the allocator settings a PyTorch snapshot recorded (unless alloc_conf replaces them), and from "
        "the memory fraction its OOM implies when the device had room for the request (the single keys above "
        "override theirs one by one)"}}};
  info.frameworks = {Framework::kPyTorch};
  info.fraction = FractionKnob{"memory_fraction",
                               {{Framework::kPyTorch, "torch.cuda.set_per_process_memory_fraction", false,
                                 "torch.cuda.set_per_process_memory_fraction({})"}},
                               ""};
  info.defaults = {{RecordingSource::kTorchSnapshot, "", "torch-caching", "the trace is a PyTorch memory snapshot"},
                   {RecordingSource::kKineto, "", "torch-caching", "the trace is a PyTorch profiler trace"}};
  info.what_ifs = torch_caching_what_ifs;
  info.advise = advise_torch_caching;
  info.stated = stated_torch_caching;
  info.real_hardware_kind = "gpu";
  r.add(std::move(info));
}

}  // namespace fragsim

// torch-caching: PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp), per
// specs/torch-caching.md §1–§7.
//
// Model:
//   pools   — small (rounded size ≤ 1 MiB) and large; each keeps one SegmentHeap per stream, so
//             the best fit ordered (stream, size, address) is a lookup in the stream's heap.
//   segment — one cudaMalloc of alloc_size(r): 2 MiB (small), 20 MiB (r < 10 MiB), else r
//             rounded up to 2 MiB. Blocks never merge across segments.
//   block   — [addr, addr+size); split when the remainder is ≥ 512 B (small pool) or, in the
//             large pool, when r < max_split_size and the remainder > 1 MiB; else handed out whole.
// malloc(n): r = round_size(n) (512 B, or roundup_power2_divisions); best fit (oversize blocks ≥
//   max_split_size only serve requests ≥ max_split_size, and those at most
//   max_non_split_rounding above them); else [GC when a memory fraction and threshold are set]
//   new segment, else release_available_cached_blocks (max_split_size set) + new segment, else
//   release_cached_blocks (empty_cache) + new segment (num_alloc_retries), else OOM.
// free: the block returns to its pool and merges with free neighbours (prev, then next). A free
//   on another stream than the allocation's (record_stream) completes after
//   `stream_event_delay` ticks (the CUDA event), until then the block stays active.
// Invariants (validate): each SegmentHeap's invariants; Σ allocated block sizes =
//   allocated_bytes.all.current; Σ segment sizes = reserved_bytes.all.current.
// Pre-trace seeding: segment_alloc observations named "pre-trace" (from snapshots) become
//   segments at their recorded addresses, and pre-trace allocations are carved at their
//   recorded addresses, so that the rest of the trace replays from the recorded state.
// expandable_segments:True (§6): per (pool, stream) a reservation of ceil(1.125 × total / page)
//   pages of address space (page = 2 MiB small, 20 MiB large) is one SegmentHeap segment whose
//   unmapped blocks are free but unindexed. A miss asks for r (not the segment size): the lowest
//   unmapped range of the stream (with a free mapped block just before it) with room, mapping
//   ceil(need / page) pages (one device allocation each); best fit prefers blocks that fit
//   without growing (size + following unmapped space compared); empty_cache unmaps whole free
//   pages. Expandable blocks never count as inactive split.
// Not modelled: CUDA graphs / private pools.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "policies/policy.h"
#include "policies/segment_heap.h"
#include "sim/error.h"
#include "traces/torch_snapshot.h"

namespace fragsim {

namespace {

constexpr Bytes kMinBlockSize = 512, kSmallSize = 1 * kMiB, kSmallBuffer = 2 * kMiB, kLargeBuffer = 20 * kMiB,
                kMinLargeAlloc = 10 * kMiB, kRoundLarge = 2 * kMiB;
constexpr int kIntervals = 16;

struct TorchConfig {
  Bytes max_split_size = UINT64_MAX;
  Bytes max_non_split_rounding = 20 * kMiB;
  double gc_threshold = 0;
  std::uint64_t divisions[kIntervals] = {};
  bool expandable = false;
  double memory_fraction = 0;  // set_per_process_memory_fraction; 0 = not set
  Tick stream_event_delay = 0;
};

bool pow2(std::uint64_t v) { return v && !(v & (v - 1)); }

// PYTORCH_CUDA_ALLOC_CONF as PyTorch tokenizes it: key:value pairs separated by ',', with
// bracketed lists for roundup_power2_divisions.
void parse_alloc_conf(const std::string& conf, TorchConfig& c) {
  auto bad = [&](const std::string& m) { return InputError("PYTORCH_CUDA_ALLOC_CONF: " + m); };
  std::vector<std::string> tok;
  std::string cur;
  for (char ch : conf) {
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (!cur.empty()) tok.push_back(cur);
      cur.clear();
      tok.emplace_back(1, ch);
    } else if (ch != ' ') {
      cur += ch;
    }
  }
  if (!cur.empty()) tok.push_back(cur);
  auto number = [&](const std::string& s, const std::string& key) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end) throw bad(fmt::format("{}: '{}' is not a number", key, s));
    return v;
  };
  size_t i = 0;
  auto expect = [&](const char* t) {
    if (i >= tok.size() || tok[i] != t) throw bad(fmt::format("expected '{}'", t));
    ++i;
  };
  while (i < tok.size()) {
    if (tok[i] == ",") {
      ++i;
      continue;
    }
    std::string key = tok[i++];
    expect(":");
    if (i >= tok.size()) throw bad(key + ": missing value");
    if (key == "max_split_size_mb") {
      double v = number(tok[i++], key);
      if (v <= static_cast<double>(kLargeBuffer / kMiB))
        throw bad(fmt::format("max_split_size_mb too small, must be > {}", kLargeBuffer / kMiB));
      c.max_split_size = static_cast<Bytes>(v) * kMiB;
    } else if (key == "max_non_split_rounding_mb") {
      c.max_non_split_rounding = static_cast<Bytes>(number(tok[i++], key)) * kMiB;
    } else if (key == "garbage_collection_threshold") {
      double v = number(tok[i++], key);
      if (!(v > 0 && v < 1)) throw bad("garbage_collection_threshold must be in (0.0, 1.0)");
      c.gc_threshold = v;
    } else if (key == "roundup_power2_divisions") {
      if (tok[i] == "[") {
        ++i;
        size_t last = 0;
        bool first = true;
        while (i < tok.size() && tok[i] != "]") {
          if (tok[i] == ",") {
            ++i;
            continue;
          }
          std::string k = tok[i++];
          expect(":");
          auto d = static_cast<std::uint64_t>(number(tok[i++], key));
          if (d != 0 && !pow2(d)) throw bad("For roundups, the divisions has to be power of 2");
          if (k == ">") {
            std::fill(c.divisions + std::min<size_t>(last + 1, kIntervals), c.divisions + kIntervals, d);
          } else {
            auto mb = static_cast<std::uint64_t>(number(k, key));
            if (!pow2(mb)) throw bad("For roundups, the intervals have to be power of 2");
            size_t idx = std::min<size_t>(63 - __builtin_clzll(mb), kIntervals - 1);
            if (first) std::fill(c.divisions, c.divisions + idx, d);
            c.divisions[idx] = d;
            last = idx;
            first = false;
          }
        }
        expect("]");
      } else {
        auto d = static_cast<std::uint64_t>(number(tok[i++], key));
        if (d != 0 && !pow2(d)) throw bad("For roundups, the divisions has to be power of 2");
        std::fill(c.divisions, c.divisions + kIntervals, d);
      }
    } else if (key == "expandable_segments") {
      std::string v = tok[i++];
      if (v != "True" && v != "False") throw bad("Expected a single True/False argument for expandable_segments");
      c.expandable = v == "True";
    } else if (key == "backend") {
      std::string v = tok[i++];
      if (v == "cudaMallocAsync") throw bad("backend:cudaMallocAsync is modelled by --policy cuda-async");
      if (v != "native") throw bad("Unknown allocator backend, options are native and cudaMallocAsync");
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_num_register_threads" || key == "pinned_use_background_threads" ||
               key == "pinned_reserve_segment_size_mb") {
      ++i;  // host-side options: no effect on device placement
    } else {
      throw bad(fmt::format("Unrecognized key '{}' in CUDA allocator config", key));
    }
  }
}

std::string format_size(Bytes b) {
  if (b <= 1024) return fmt::format("{} bytes", b);
  if (b <= 1048576) return fmt::format("{:.2f} KiB", static_cast<double>(b) / 1024.0);
  if (b <= 1073741824) return fmt::format("{:.2f} MiB", static_cast<double>(b) / 1048576.0);
  return fmt::format("{:.2f} GiB", static_cast<double>(b) / 1073741824.0);
}

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
};

class TorchCachingPolicy : public AllocatorPolicy {
 public:
  TorchCachingPolicy(const TorchConfig& c, const PolicyContext& ctx)
      : c_(c), dev_(ctx.device), sched_(ctx.scheduler), total_(ctx.space->capacity), device_index_(ctx.device_index) {}

  Bytes round_size(Bytes n) const {
    if (n < kMinBlockSize) return kMinBlockSize;
    int lg = 63 - __builtin_clzll(n);
    std::uint64_t d = c_.divisions[std::clamp(lg - 20, 0, kIntervals - 1)];
    if (d > 1 && n > kMinBlockSize * d) {
      if (pow2(n)) return n;
      Bytes floor2 = Bytes{1} << lg;
      Bytes step = floor2 >> (63 - __builtin_clzll(d));
      if (step == 0) return floor2 << 1;
      Bytes f = n & ~(step - 1);
      return f == n ? n : f + step;
    }
    return round_up(n, kMinBlockSize);
  }
  static Bytes alloc_size(Bytes r) {
    if (r <= kSmallSize) return kSmallBuffer;
    if (r < kMinLargeAlloc) return kLargeBuffer;
    return round_up(r, kRoundLarge);
  }

  Placement allocate(const AllocRequest& req) override {
    Placement p;
    if (req.size == 0) {  // at::empty of zero bytes never reaches the allocator
      p.ok = true;
      return p;
    }
    std::int32_t blk = SegmentHeap::kNil;
    bool small = false;
    std::int64_t stream = req.stream;  // the stream whose pool holds the block
    SegmentHeap* heap = nullptr;
    const Event* ev = req.event;
    if (ev && ev->has(key::kAddr) && ev->has(key::kName) && ev->name == kPreTrace)
      seeded(req, ev->addr, &heap, &small, &stream, &blk);
    if (blk == SegmentHeap::kNil) {
      Bytes r = round_size(req.size);
      small = r <= kSmallSize;
      heap = &pools_[small][req.stream];
      ++free_block_calls_[small];
      blk = best_fit(*heap, r);
      if (blk == SegmentHeap::kNil) {
        if (c_.memory_fraction > 0 && c_.gc_threshold > 0) garbage_collect();
        Bytes a = alloc_size(r);
        auto grow = [&](bool retry) {
          return c_.expandable ? expand(small, req.stream, r, retry) : new_segment(small, req.stream, a, retry);
        };
        blk = grow(false);
        if (blk == SegmentHeap::kNil && release_available_cached_blocks(r, small, req.stream)) blk = grow(false);
        if (blk == SegmentHeap::kNil && release_cached_blocks()) blk = grow(true);
        if (blk == SegmentHeap::kNil) {
          ++num_ooms_;
          return p;
        }
      }
      const auto& b = heap->block(blk);
      Bytes remaining = b.size - r;
      bool split = (small || c_.expandable) ? remaining >= kMinBlockSize
                                            : (r < c_.max_split_size && remaining > kSmallSize);
      heap->take(blk, r, req.size, split);
      recount_inactive_split(*heap, heap->block(blk).seg, small);
    }
    const auto& b = heap->block(blk);
    if (req.handle >= owner_.size()) owner_.resize(req.handle + 1);
    owner_[req.handle] = {small, stream, blk};
    allocated_.add(small, static_cast<std::int64_t>(b.size));
    active_.add(small, static_cast<std::int64_t>(b.size));
    requested_.add(small, static_cast<std::int64_t>(req.size));
    allocations_.add(small, 1);
    p.ok = p.has_addr = true;
    p.addr = b.addr;
    p.block = b.size;
    p.region = heap->segment(b.seg).region;
    p.region_offset = b.addr - heap->segment(b.seg).base;
    return p;
  }

  void release(Handle h) override { release_on_stream(h, owner_[h].stream); }

  void release_on_stream(Handle h, std::int64_t stream) override {
    Owner o = owner_[h];
    SegmentHeap& heap = pools_[o.small][o.stream];
    const auto& b = heap.block(o.block);
    allocated_.sub(o.small, static_cast<std::int64_t>(b.size));
    requested_.sub(o.small, static_cast<std::int64_t>(b.requested));
    allocations_.sub(o.small, 1);
    if (stream != o.stream) {  // record_stream: completes when the other stream's event does
      pending_.push_back(o);
      sched_->schedule(sched_->now() + c_.stream_event_delay, [this, o] { complete_pending(o); });
      return;
    }
    free_block(o);
  }

  Usage usage() const override {
    Usage u;
    u.allocated = static_cast<Bytes>(allocated_.s[kAll].current);
    u.reserved = static_cast<Bytes>(reserved_.s[kAll].current);
    for (const auto& pool : pools_)
      for (const auto& [s, heap] : pool) u.largest_free = std::max(u.largest_free, heap.largest_free());
    u.available = u.reserved - u.allocated + device_room();
    u.largest_available = std::max(u.largest_free, device_room());
    return u;
  }
  Bytes rounded_size(const AllocRequest& req) const override { return round_size(req.size); }

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
    j["max_split_size"] = c_.max_split_size == UINT64_MAX ? -1 : static_cast<std::int64_t>(c_.max_split_size);
    // Short names as in the issue text.
    j["allocated_bytes"] = allocated_.s[kAll].current;
    j["reserved_bytes"] = reserved_.s[kAll].current;
    j["active_bytes"] = active_.s[kAll].current;
    j["inactive_split_bytes"] = inactive_split_.s[kAll].current;
    j["requested_bytes"] = requested_.s[kAll].current;
    return j;
  }

  void validate() const override {
    Bytes alloc = 0, reserved = 0;
    for (int k = 0; k < 2; ++k)
      for (const auto& [s, heap] : pools_[k]) {
        heap.validate(fmt::format("torch-caching {} pool stream {}", k ? "small" : "large", s));
        alloc += heap.allocated();
        reserved += heap.reserved();
      }
    if (c_.expandable) reserved = 0;  // counted as mapped pages below
    for (int k = 0; k < 2 && c_.expandable; ++k) {
      Bytes mapped = 0;
      for (const auto& [s, heap] : pools_[k])
        for (size_t i = 0; i < heap.segment_count(); ++i) {
          const auto& sg = heap.segment(static_cast<std::int32_t>(i));
          if (!sg.live) continue;
          for (std::int32_t b = sg.first; b != SegmentHeap::kNil; b = heap.block(b).next)
            if (heap.block(b).mapped) mapped += heap.block(b).size;
        }
      reserved += mapped;
    }
    if (static_cast<std::int64_t>(reserved) != reserved_.s[kAll].current)
      throw std::logic_error("torch-caching: reserved_bytes != Σ segments (mapped pages when expandable)");
    if (static_cast<std::int64_t>(alloc) != active_.s[kAll].current)
      throw std::logic_error("torch-caching: active_bytes != Σ in-use blocks");
  }

  std::string describe_oom(const AllocRequest& req) const override {
    Bytes r = round_size(req.size);
    Bytes a = alloc_size(r);
    Bytes free = dev_->available();  // cudaMemGetInfo's free: what is left of the device
    Bytes allocated = static_cast<Bytes>(allocated_.s[kAll].current), reserved = static_cast<Bytes>(reserved_.s[kAll].current);
    return fmt::format(
        "    torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {}. GPU {} has a total capacity of {} of "
        "which {} is free. Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.\n",
        format_size(a), device_index_, format_size(total_), format_size(free), format_size(allocated),
        format_size(reserved - allocated));
  }

  void observe(const Event& ev) override {
    if (ev.op != Op::kSegmentAlloc || !ev.has(key::kName) || ev.name != kPreTrace) return;
    // A segment that existed before recording: obtain it (the engine queued its address).
    bool small = ev.size == kSmallBuffer;
    auto g = dev_->allocate(ev.size);
    if (!g) return;
    register_segment(small, ev.stream, g->addr, ev.size, true);
    reserved_.add(small, static_cast<std::int64_t>(ev.size));
    segments_.add(small, 1);
    ++num_device_alloc_;
  }

 private:
  struct Owner {
    bool small = false;
    std::int64_t stream = 0;
    std::int32_t block = SegmentHeap::kNil;
  };
  struct SegRef {
    bool small;
    std::int64_t stream;
    std::int32_t seg;
  };

  Bytes device_room() const {
    Bytes room = dev_->available();
    if (c_.memory_fraction > 0) {
      auto allowed = static_cast<Bytes>(c_.memory_fraction * static_cast<double>(total_));
      Bytes reserved = static_cast<Bytes>(reserved_.s[kAll].current);
      room = std::min(room, allowed > reserved ? allowed - reserved : 0);
    }
    return room;
  }

  // A new segment (or expandable reservation) of a pool: findable by address, numbered in the
  // order segments are obtained. Stats are the caller's (reservations count mapped pages only).
  std::int32_t register_segment(bool small, std::int64_t stream, Addr base, Bytes size, bool mapped) {
    SegmentHeap& heap = pools_[small][stream];
    std::int32_t s = heap.add_segment(base, size, mapped);
    heap.segment_mut(s).region = next_region_++;
    seg_by_addr_[base] = {small, stream, s};
    return s;
  }

  // Places a pre-trace allocation at its recorded address inside a seeded segment.
  void seeded(const AllocRequest& req, Addr at, SegmentHeap** heap, bool* small, std::int64_t* stream,
              std::int32_t* blk) {
    auto it = seg_by_addr_.upper_bound(at);
    if (it == seg_by_addr_.begin()) return;
    --it;
    SegRef ref = it->second;
    SegmentHeap& h = pools_[ref.small][ref.stream];
    const auto& sg = h.segment(ref.seg);
    Bytes r = round_size(req.size);
    if (!sg.live || at + r > sg.base + sg.size) return;
    for (std::int32_t b = sg.first; b != SegmentHeap::kNil; b = h.block(b).next) {
      const auto& bl = h.block(b);
      if (bl.addr <= at && at + r <= bl.addr + bl.size && !bl.in_use) {
        *blk = h.carve(b, at, r, req.size);
        *heap = &h;
        *small = ref.small;
        *stream = ref.stream;
        recount_inactive_split(h, ref.seg, ref.small);
        return;
      }
      if (bl.addr > at) break;
    }
  }

  // Size of a free block counting the unmapped space right after it (expandable segments).
  static Bytes expandable_size(const SegmentHeap& h, const SizeIndex::Entry& e) {
    const auto& b = h.block(static_cast<std::int32_t>(e.id));
    Bytes extra = b.next != SegmentHeap::kNil && !h.block(b.next).mapped ? h.block(b.next).size : 0;
    return b.size + extra;
  }

  std::int32_t best_fit(SegmentHeap& heap, Bytes r) {
    const SizeIndex::Entry* e = heap.best_fit(r);
    if (!e) return SegmentHeap::kNil;
    if (c_.expandable) {  // prefer blocks that fit without growing into unmapped space
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
    if (r >= c_.max_split_size && e->size >= r + c_.max_non_split_rounding) return SegmentHeap::kNil;
    return static_cast<std::int32_t>(e->id);
  }

  std::int32_t new_segment(bool small, std::int64_t stream, Bytes a, bool retry) {
    if (retry) ++num_alloc_retries_;
    if (c_.memory_fraction > 0) {
      auto allowed = static_cast<Bytes>(c_.memory_fraction * static_cast<double>(total_));
      if (static_cast<Bytes>(reserved_.s[kAll].current) + a > allowed) return SegmentHeap::kNil;
    }
    auto g = dev_->allocate(a);
    if (!g) return SegmentHeap::kNil;
    std::int32_t s = register_segment(small, stream, g->addr, a, true);
    reserved_.add(small, static_cast<std::int64_t>(a));
    segments_.add(small, 1);
    ++num_device_alloc_;
    return pools_[small][stream].segment(s).first;
  }

  void release_segment(bool small, std::int64_t stream, std::int32_t s) {
    SegmentHeap& heap = pools_[small][stream];
    Addr base = heap.segment(s).base;
    Bytes size = heap.segment(s).size;
    dev_->release(base);
    heap.remove_segment(s);
    seg_by_addr_.erase(base);
    reserved_.sub(small, static_cast<std::int64_t>(size));
    segments_.sub(small, 1);
    ++num_device_free_;
  }

  // With max_split_size set: free one cached oversize segment big enough, else several from the
  // largest down (specs/torch-caching.md §5).
  bool release_available_cached_blocks(Bytes r, bool small, std::int64_t stream) {
    if (c_.max_split_size == UINT64_MAX) return false;
    SegmentHeap& heap = pools_[small][stream];
    Bytes key = std::max(r, c_.max_split_size);
    if (const auto* e = heap.best_fit(key)) {
      const auto& b = heap.block(static_cast<std::int32_t>(e->id));
      if (b.prev == SegmentHeap::kNil && b.next == SegmentHeap::kNil) {
        release_segment(small, stream, b.seg);
        return true;
      }
    }
    // Oversize whole-segment free blocks, largest first.
    std::vector<std::pair<Bytes, std::int32_t>> cand;
    for (size_t s = 0; s < heap.segment_count(); ++s) {
      const auto& sg = heap.segment(static_cast<std::int32_t>(s));
      if (sg.live && sg.in_use == 0 && sg.size >= c_.max_split_size) cand.emplace_back(sg.size, static_cast<std::int32_t>(s));
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
  bool release_cached_blocks() {
    while (!pending_.empty()) complete_pending(pending_.front());
    if (c_.expandable) {
      unmap_free_pages();
      return true;
    }
    for (int small = 0; small < 2; ++small)
      for (auto& [stream, heap] : pools_[small])
        for (size_t s = 0; s < heap.segment_count(); ++s)
          if (heap.segment_unused(static_cast<std::int32_t>(s))) release_segment(small, stream, static_cast<std::int32_t>(s));
    return true;
  }

  Bytes page_size(bool small) const { return small ? kSmallBuffer : kLargeBuffer; }

  // Expandable segments: find room for r bytes in the stream's reservations (creating one if
  // needed), map the pages it lacks, and return a free mapped block of ≥ r bytes.
  std::int32_t expand(bool small, std::int64_t stream, Bytes r, bool retry) {
    if (retry) ++num_alloc_retries_;
    SegmentHeap& heap = pools_[small][stream];
    Bytes page = page_size(small);
    auto allocatable = [&](std::int32_t b) { return b != SegmentHeap::kNil && !heap.block(b).in_use; };
    std::int32_t cand = SegmentHeap::kNil;
    // Unmapped blocks in address order (reservations are created at increasing addresses).
    for (size_t s = 0; s < heap.segment_count() && cand == SegmentHeap::kNil; ++s) {
      const auto& sg = heap.segment(static_cast<std::int32_t>(s));
      if (!sg.live) continue;
      for (std::int32_t b = sg.first; b != SegmentHeap::kNil; b = heap.block(b).next) {
        if (heap.block(b).in_use || heap.block(b).mapped) continue;
        std::int32_t c = allocatable(heap.block(b).prev) ? heap.block(b).prev : b;
        Bytes room = 0;
        for (std::int32_t x = c; room < r && allocatable(x); x = heap.block(x).next) room += heap.block(x).size;
        if (room >= r) {
          cand = c;
          break;
        }
      }
    }
    if (cand == SegmentHeap::kNil) {
      Bytes pages = (static_cast<Bytes>(1.125 * static_cast<double>(total_)) + page - 1) / page;
      Bytes va = pages * page;
      Addr base = round_up(next_va_, page);
      next_va_ = base + va;
      cand = heap.segment(register_segment(small, stream, base, va, false)).first;
    }
    // Map what the candidate lacks: its own range if unmapped, else the unmapped block after it.
    Bytes need = heap.block(cand).mapped ? r - std::min(r, heap.block(cand).size) : r;
    if (need > 0) {
      std::int32_t target = heap.block(cand).mapped ? heap.block(cand).next : cand;
      Bytes bytes = std::min(round_up(need, page), heap.block(target).size);
      if (!map_pages(small, heap.block(target).addr, bytes)) return SegmentHeap::kNil;
      cand = heap.map_prefix(target, bytes);
    }
    return cand;
  }

  bool map_pages(bool small, Addr at, Bytes bytes) {
    Bytes page = page_size(small);
    if (c_.memory_fraction > 0 &&
        static_cast<Bytes>(reserved_.s[kAll].current) + bytes >
            static_cast<Bytes>(c_.memory_fraction * static_cast<double>(total_)))
      return false;
    if (dev_->available() < bytes) return false;
    for (Bytes off = 0; off < bytes; off += page) {
      auto g = dev_->allocate(page);
      pages_[at + off] = g->addr;
      ++num_device_alloc_;
    }
    reserved_.add(small, static_cast<std::int64_t>(bytes));
    return true;
  }

  // empty_cache with expandable segments: unmap every whole page inside free mapped blocks.
  void unmap_free_pages() {
    for (int small = 0; small < 2; ++small) {
      Bytes page = page_size(small);
      for (auto& [stream, heap] : pools_[small]) {
        for (size_t s = 0; s < heap.segment_count(); ++s) {
          const auto& sg = heap.segment(static_cast<std::int32_t>(s));
          if (!sg.live) continue;
          for (std::int32_t b = sg.first; b != SegmentHeap::kNil;) {
            const auto& bl = heap.block(b);
            std::int32_t next = bl.next;
            if (!bl.in_use && bl.mapped) {
              Addr lo = sg.base + round_up(bl.addr - sg.base, page), hi = sg.base + round_down(bl.addr + bl.size - sg.base, page);
              if (hi > lo) {
                for (Addr a = lo; a < hi; a += page) {
                  dev_->release(pages_[a]);
                  pages_.erase(a);
                  ++num_device_free_;
                }
                reserved_.sub(small, static_cast<std::int64_t>(hi - lo));
                heap.unmap_range(b, lo, hi);
                next = heap.segment(static_cast<std::int32_t>(s)).first;  // blocks changed: rescan
                continue;
              }
            }
            b = next;
          }
        }
      }
    }
  }

  void garbage_collect() {
    auto allowed = static_cast<double>(c_.memory_fraction) * static_cast<double>(total_);
    double threshold = c_.gc_threshold * allowed;
    double reserved = static_cast<double>(reserved_.s[kAll].current);
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
        if (heap.segment_unused(static_cast<std::int32_t>(s))) {
          const auto& b = heap.block(heap.segment(static_cast<std::int32_t>(s)).first);
          cand.push_back({stream, static_cast<std::int32_t>(s), free_block_calls_[0] - b.aux});
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

  void complete_pending(Owner o) {
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Owner& p) { return p.block == o.block && p.stream == o.stream && p.small == o.small; });
    if (it == pending_.end()) return;  // already completed by a synchronization
    pending_.erase(it);
    free_block(o);
  }

  void free_block(const Owner& o) {
    SegmentHeap& heap = pools_[o.small][o.stream];
    active_.sub(o.small, static_cast<std::int64_t>(heap.block(o.block).size));
    std::int32_t m = heap.free_block(o.block);
    heap.block_mut(m).aux = free_block_calls_[o.small];
    recount_inactive_split(heap, heap.block(m).seg, o.small);
  }

  // inactive_split_bytes counts free bytes of split segments; refresh one segment's share.
  void recount_inactive_split(SegmentHeap& heap, std::int32_t seg, bool small) {
    auto& sg = heap.segment_mut(seg);
    std::int64_t now = !c_.expandable && sg.live && sg.blocks > 1 ? static_cast<std::int64_t>(sg.free_bytes) : 0;
    std::int64_t& was = sg.counted;
    if (now > was) inactive_split_.add(small, now - was);
    if (now < was) inactive_split_.sub(small, was - now);
    was = now;
  }

  TorchConfig c_;
  DeviceMemory* dev_;
  Scheduler* sched_;
  Bytes total_;
  std::uint32_t device_index_;
  std::map<std::int64_t, SegmentHeap> pools_[2];  // [large, small] per stream
  std::map<Addr, SegRef> seg_by_addr_;
  int next_region_ = 0;
  Addr next_va_ = 0x600000000000ULL;  // expandable reservations' virtual addresses
  std::map<Addr, Addr> pages_;         // mapped page VA → device allocation
  std::vector<Owner> owner_;
  std::vector<Owner> pending_;
  std::uint64_t free_block_calls_[2] = {0, 0};
  StatArray allocations_, allocated_, active_, requested_, reserved_, segments_, inactive_split_;
  std::uint64_t num_alloc_retries_ = 0, num_ooms_ = 0, num_device_alloc_ = 0, num_device_free_ = 0;
};

// A snapshot's allocator_settings (the effective configuration when it was recorded).
void apply_recorded_settings(const nlohmann::json& s, TorchConfig& c) {
  if (s.contains("max_split_size") && s["max_split_size"].is_number_integer() && s["max_split_size"].get<std::int64_t>() > 0 &&
      s["max_split_size"].get<std::uint64_t>() < (1ULL << 62))
    c.max_split_size = s["max_split_size"].get<std::uint64_t>();
  if (s.contains("garbage_collection_threshold") && s["garbage_collection_threshold"].is_number())
    c.gc_threshold = s["garbage_collection_threshold"].get<double>();
  if (s.contains("expandable_segments") && s["expandable_segments"].is_boolean())
    c.expandable = s["expandable_segments"].get<bool>();
  if (s.contains("roundup_power2_divisions") && s["roundup_power2_divisions"].is_object())
    for (auto it = s["roundup_power2_divisions"].begin(); it != s["roundup_power2_divisions"].end(); ++it) {
      std::uint64_t mb = std::strtoull(it.key().c_str(), nullptr, 10);
      if (!pow2(mb) || !it.value().is_number_integer() || it.value().get<std::int64_t>() < 0) continue;
      c.divisions[std::min<size_t>(63 - __builtin_clzll(mb), kIntervals - 1)] = it.value().get<std::uint64_t>();
    }
}

std::unique_ptr<AllocatorPolicy> make_torch_caching(ConfigReader& cfg, const PolicyContext& ctx) {
  TorchConfig c;
  bool user = cfg.has("alloc_conf") || cfg.has("max_split_size_mb") || cfg.has("garbage_collection_threshold") ||
              cfg.has("roundup_power2_divisions") || cfg.has("expandable_segments");
  bool use_recorded = cfg.flag("use_recorded_settings", true);
  if (use_recorded && !user && ctx.trace_header && ctx.trace_header->contains("allocator_settings")) {
    apply_recorded_settings(ctx.trace_header->at("allocator_settings"), c);
    cfg.record("recorded_settings_applied", true);
  }
  std::string conf = cfg.text("alloc_conf", "");
  parse_alloc_conf(conf, c);
  if (cfg.has("max_split_size_mb")) {
    double v = cfg.number("max_split_size_mb", 0);
    if (v <= static_cast<double>(kLargeBuffer / kMiB))
      throw InputError("policy torch-caching: max_split_size_mb too small, must be > 20");
    c.max_split_size = static_cast<Bytes>(v) * kMiB;
  }
  if (cfg.has("garbage_collection_threshold")) c.gc_threshold = cfg.number("garbage_collection_threshold", 0);
  if (cfg.has("roundup_power2_divisions")) {
    auto d = static_cast<std::uint64_t>(cfg.integer("roundup_power2_divisions", 0));
    if (d != 0 && !pow2(d)) throw InputError("policy torch-caching: roundup_power2_divisions: must be a power of 2");
    std::fill(c.divisions, c.divisions + kIntervals, d);
  }
  c.expandable = cfg.flag("expandable_segments", c.expandable);
  c.memory_fraction = cfg.number("memory_fraction", 0);
  c.stream_event_delay = static_cast<Tick>(cfg.integer("stream_event_delay", 0));
  cfg.record("resolved_expandable_segments", c.expandable);
  cfg.record("resolved_max_split_size", c.max_split_size == UINT64_MAX ? -1 : static_cast<std::int64_t>(c.max_split_size));
  cfg.record("resolved_garbage_collection_threshold", c.gc_threshold);
  return std::make_unique<TorchCachingPolicy>(c, ctx);
}

}  // namespace

void register_torch_caching(Registry& r) {
  r.add({"torch-caching",
         "PyTorch CUDACachingAllocator (alloc_conf = PYTORCH_CUDA_ALLOC_CONF incl. expandable_segments, "
         "max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions, memory_fraction, "
         "stream_event_delay, use_recorded_settings)",
         make_torch_caching});
}

}  // namespace fragsim

// xla-bfc: XLA/TSL's BFCAllocator as JAX configures it on GPU, decision for decision.
//
// Sources: specs/xla-bfc.md §1–§5 (classic path; constants, Extend, bins, split and merge rules,
// GC, stats), specs/xla-bfc-spatial.md §1 (spatial partitioning as of openxla/xla 183fa00c: the
// logic of jaxlib 0.11.0), §2 (2 MiB limit rounding, VMM padding of regions) and §4 (which jaxlib
// release gets what). Upstream file: openxla/xla xla/tsl/framework/bfc_allocator.cc.
//
// Model (regions → chunks → free index):
//   Region  — one device allocation (bytes_received); never merged with another (GPU
//             DeviceMemAllocator does not coalesce). Ids count regions in the order obtained.
//   Chunk   — [ptr, ptr+size) inside a region; prev/next are physical neighbours; tag LOW, UP or
//             GAP (spatial mode; classic mode tags everything LOW and has no gap).
//   Free index — per tag a SizeIndex ordered (size, ptr): the 21 BFC bins scanned from
//             BinOf(R) upward visit free chunks in exactly this global order, so
//             "first chunk ≥ R" in it is BFC's FindChunkPtr. The single GAP chunk lives in gap_.
// Invariants (validate()):
//   chunks of a region tile it; no two free chunks are adjacent (frees coalesce at once: the
//   timestamped-chunk machinery is TensorFlow-only, xla-bfc.md §6);
//   bytes_in_use = Σ in-use chunk sizes; pool_bytes = Σ region sizes;
//   spatial: every LOW chunk < gap < every UP chunk, at most one GAP chunk.
// Decisions:
//   R = round256(n). LOW: own-tag hole first (best fit), else the gap, else Extend and retry,
//   else GC (option) + Extend, else OOM. The low end of the chosen chunk is handed out; it is
//   split when size ≥ 2R or size − R ≥ 128 MiB, else taken whole (also from the gap, 183fa00c).
//   UP (collective space, spatial only): the first own-tag hole where an aligned start fits,
//   else the gap; the chunk [aligndown(end − R, A), +R) is taken exactly, prefix keeps the
//   source tag, suffix becomes an UP hole.
//   Free: boundary chunks return to the gap, then merge right, then left; merged tag = common
//   tag or GAP.
// Deviation: XLA's pre-2026-08 backpedal loop can spin forever below 2560 B when the device keeps
// failing; the model forces progress there (d5c110db), which changes nothing above that size.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "policies/chunk_list.h"
#include "policies/jax_gpu.h"
#include "policies/memory_map.h"
#include "policies/policy.h"
#include "policies/size_index.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

constexpr Bytes kMinAllocationSize = 256;
constexpr Bytes kMaxInternalFragmentation = 128 * kMiB;
constexpr int kNumBins = 21;
constexpr std::int32_t kNil = ChunkList<>::kNil;

enum Tag : std::uint8_t { kLow, kUp, kGap };

// Rounded request (kTooLarge when rounding overflows: no device holds it).
Bytes rounded_bytes(Bytes n) { return round_up_sat(n, kMinAllocationSize); }
int bin_of(Bytes s) {
  Bytes v = std::max(s, kMinAllocationSize) >> 8;
  return std::min(kNumBins - 1, 63 - __builtin_clzll(v));
}

struct BfcOptions {
  std::string name;
  Bytes limit = 0;
  bool allow_growth = false;
  bool spatial = false;
  bool garbage_collection = false;
  bool vmm_padding = true;
  Bytes upper_alignment = 2 * kMiB;
  // Memory obtained right after a region extends it (TSL's coalesce_regions_, when the
  // sub-allocator supports coalescing): chunks can then span what were two driver allocations.
  bool coalesce_regions = false;
  // The OOM message as jaxlib 0.11 logs it (seen on an H200, tests/data/device_h200/record): the
  // end it allocated from ("from the lower end") and the newer fragmentation hint. (It goes on
  // "requested by op NAME", the op a framework annotated; a policy never knows it, and JAX names
  // none: left out.)
  bool end_in_message = false;
  // The program's framework, whose exception an OOM raises: TensorFlow's op kernel, else JAX.
  bool tensorflow = false;
  std::uint32_t device = 0;  // the device index (TensorFlow names its device in the exception)
};

// TensorFlow's DataTypeString: NumPy's names but for float, double and half.
std::string_view tf_dtype_name(Dtype d) {
  return d == Dtype::kF32 ? "float" : d == Dtype::kF64 ? "double" : d == Dtype::kF16 ? "half" : numpy_dtype_name(d);
}

// The exception the program raises when the allocator returns no memory for the request: JAX's
// (PJRT's RESOURCE_EXHAUSTED status), or TensorFlow's as its op kernel builds it
// (OpKernelContext::allocate_tensor: "OOM when allocating tensor with shape" + the shape's
// DebugString + " and type " + DataTypeString + " on " + device + " by allocator " + name).
std::string oom_exception(const BfcOptions& o, const AllocRequest& req) {
  if (!o.tensorflow)
    return fmt::format("JAX raises: RESOURCE_EXHAUSTED: Out of memory while trying to allocate {} bytes.", req.size);
  const bool known = req.has_shape && req.dtype != Dtype::kNone;
  return fmt::format(
      "TensorFlow raises ResourceExhaustedError: OOM when allocating tensor with shape[{}] and type {} on "
      "/job:localhost/replica:0/task:0/device:GPU:{} by allocator {}{}",
      req.has_shape ? fmt::format("{}", fmt::join(req.shape, ",")) : "?",
      req.dtype != Dtype::kNone ? tf_dtype_name(req.dtype) : "?", o.device, o.name,
      known ? "" : fmt::format(" (the trace gives no shape or type for these {} bytes)", req.size));
}

class Bfc {
 public:
  struct ChunkExtra {
    Bytes requested = 0;
    Tag tag = kLow;
  };
  struct RegionExtra {
    bool anchored = false;  // its base is the recording's (else made up until a recorded buffer lands in it)
  };
  using Chunks = ChunkList<ChunkExtra, RegionExtra>;
  using Chunk = Chunks::Chunk;
  using Region = Chunks::Region;
  struct Stats {
    std::uint64_t num_allocs = 0;
    Bytes bytes_in_use = 0, peak_bytes_in_use = 0, largest_alloc_size = 0, pool_bytes = 0, peak_pool_bytes = 0;
  };

  Bfc(BfcOptions o, DeviceMemory* dev) : o_(std::move(o)), dev_(dev) {
    curr_region_bytes_ = o_.allow_growth ? rounded_bytes(std::min(o_.limit, 2 * kMiB)) : rounded_bytes(o_.limit);
  }

  // Returns the chunk or kNil (OOM). *fatal is set when the real allocator would CHECK-fail.
  // recorded: where the recording placed it. A region obtained for it from the driver starts at
  // that address (a lower-end chunk is its region's first), so later placements compare with the
  // recording's; BFC's choices within its regions never look at it.
  std::int32_t allocate(Bytes n, bool upper, std::string* fatal, std::optional<Addr> recorded = std::nullopt) {
    Bytes r = rounded_bytes(n);
    if (r == kTooLarge) return kNil;
    region_hint_ = upper ? std::nullopt : recorded;
    std::int32_t c = find(r, upper);
    if (c == kNil && extend(r, fatal)) c = find(r, upper);
    if (c == kNil && fatal->empty() && deallocate_free_regions(r) && extend(r, fatal)) c = find(r, upper);
    if (c == kNil) return kNil;
    c = take(c, n);
    if (recorded && !upper) anchor(c, *recorded);
    return c;
  }

  // A buffer at its recorded address (classic mode; live before the trace began, or placed as
  // --follow-recording places it): carved out of the free chunk that holds it, or out of a region
  // obtained at that address when no region holds it. kNil when the recorded range is not free
  // here (the caller then places it as an ordinary request); nothing changes then.
  std::int32_t seed(Bytes n, Addr at, std::string* fatal, Bytes block = 0) {
    if (o_.spatial) return kNil;
    Bytes r = std::max(rounded_bytes(n), rounded_bytes(block));  // the recorded chunk, when larger (unsplit)
    if (r == kTooLarge) return kNil;
    std::int32_t c = free_chunk_holding(at, r);
    if (c == kNil) {
      if (region_holding(at) != kNil) return kNil;  // in use here, or a free chunk too small
      region_hint_ = at;
      if (!extend(r, fatal)) return kNil;
      c = free_chunk_holding(at, r);
      if (c == kNil) return kNil;
    }
    remove_free(c);
    if (chunks_.chunk(c).addr < at) {  // the part below stays free
      std::int32_t rest = chunks_.split(c, at - chunks_.chunk(c).addr);
      insert_free(c, fatal);
      c = rest;
    }
    if (chunks_.chunk(c).size > r) split(c, r);
    return take(c, n);
  }

  // A region that existed before the trace began, at the base the recording shows (classic
  // mode): obtained as Extend obtains one for a request of `bytes` (0: the smallest; with growth,
  // a region that large and the target it leaves), at that address. False when it cannot be obtained.
  bool seed_region(Addr base, Bytes bytes, std::string* fatal) {
    if (o_.spatial) return false;
    if (region_holding(base) != kNil) return true;
    region_hint_ = base;
    return extend(std::max(kMinAllocationSize, rounded_bytes(bytes)), fatal);
  }

  void free(std::int32_t h, std::string* fatal) {
    const Chunk& c = chunks_.chunk(h);
    s_.bytes_in_use -= c.size;
    chunks_.set_in_use(h, false);
    if (o_.spatial) {  // ReturnBoundaryChunkToGap
      Tag& tag = chunks_.extra(h).tag;
      if (tag == kLow && (c.next == kNil || chunks_.chunk(c.next).x.tag != kLow))
        tag = kGap;
      else if (tag == kUp && (c.prev == kNil || chunks_.chunk(c.prev).x.tag != kUp))
        tag = kGap;
    }
    insert_free(coalesce(h), fatal);
  }

  const Chunk& chunk(std::int32_t c) const { return chunks_.chunk(c); }
  const Region& region(std::int32_t r) const { return chunks_.region(r); }
  const Stats& stats() const { return s_; }
  const BfcOptions& options() const { return o_; }
  Bytes largest_free() const {
    Bytes l = std::max(low_.largest_size(), up_.largest_size());
    if (gap_ != kNil) l = std::max(l, chunks_.chunk(gap_).size);
    return l;
  }
  // Fresh device memory Extend could still obtain.
  Bytes obtainable() const {
    Bytes avail = round_down(o_.limit - s_.pool_bytes, kMinAllocationSize);  // size_t arithmetic, may wrap
    return std::min(avail, dev_->available());
  }

  nlohmann::json stats_json() const {
    return {{"num_allocs", s_.num_allocs},
            {"bytes_in_use", s_.bytes_in_use},
            {"peak_bytes_in_use", s_.peak_bytes_in_use},
            {"largest_alloc_size", s_.largest_alloc_size},
            {"bytes_limit", o_.limit},
            {"pool_bytes", s_.pool_bytes},
            {"peak_pool_bytes", s_.peak_pool_bytes},
            {"largest_free_block_bytes", largest_free()}};
  }

  void validate() const {
    auto check = [&](bool ok, const char* m) { FRAGSIM_CHECK(ok, o_.name + ": " + m); };
    Bytes in_use = 0, pool = 0;
    size_t nfree_low = 0, nfree_up = 0, ngap = 0;
    std::int32_t cur_region = kNil;
    int phase = 0;  // spatial layout inside a region: 0 LOW…, 1 after the gap, 2 UP…
    for (std::int32_t r = 0; r < chunks_.region_count(); ++r)
      if (region(r).live) pool += region(r).size;
    chunks_.validate(o_.name, [&](std::int32_t c) {
      const Chunk& ch = chunks_.chunk(c);
      if (ch.region != cur_region) cur_region = ch.region, phase = 0;
      check(ch.size % kMinAllocationSize == 0, "chunk size not a multiple of 256");
      if (ch.in_use) {
        in_use += ch.size;
        check(ch.x.tag != kGap, "in-use chunk tagged GAP");
      } else {
        check(ch.prev == kNil || chunks_.chunk(ch.prev).in_use, "two adjacent free chunks");
        if (ch.x.tag == kGap) {
          ++ngap;
          check(gap_ == c, "GAP chunk is not the gap slot");
        } else {
          (ch.x.tag == kLow ? nfree_low : nfree_up)++;
          check((ch.x.tag == kLow ? low_ : up_).contains(ch.size, ch.addr), "free chunk missing from its index");
        }
      }
      if (o_.spatial) {
        int p = ch.x.tag == kLow ? 0 : ch.x.tag == kGap ? 1 : 2;
        check(p >= phase, "spatial layout LOW < gap < UP broken");
        phase = std::max(phase, p);
      } else {
        check(ch.x.tag == kLow, "classic mode chunk not tagged LOW");
      }
    });
    check(ngap <= 1, "more than one GAP chunk");
    check(ngap == 1 || gap_ == kNil, "gap slot points at a non-GAP chunk");
    check(nfree_low == low_.size() && nfree_up == up_.size(), "free index holds stale chunks");
    check(in_use == s_.bytes_in_use, "bytes_in_use != Σ in-use chunks");
    check(pool == s_.pool_bytes, "pool_bytes != Σ regions");
  }

  void memory_map(MemoryMap* out) const { append_memory_map(chunks_, out); }

  // BFC's OOM dump as TSL's bfc_allocator.cc logs it (sizes in TSL's HumanReadableNumBytes): the
  // failed request, every bin, the in-use chunks by size, the pool and AllocatorStats; then
  // fragsim's own summary (largest free chunk, fragmentation) and an occupancy map per region.
  std::string dump(Bytes n, bool upper) const {
    std::string s;
    auto out = std::back_inserter(s);
    Bytes r = rounded_bytes(n);
    if (o_.end_in_message)
      fmt::format_to(out,
                     "    Allocator ({}) ran out of memory trying to allocate {} (rounded to {}) from the {} end\n"
                     "    If this is caused by memory fragmentation, the environment variable "
                     "'TF_GPU_ALLOCATOR=cuda_malloc_async' may improve the situation.\n",
                     o_.name, tsl_bytes(n), r, upper ? "upper" : "lower");
    else
      fmt::format_to(out,
                     "    Allocator ({}) ran out of memory trying to allocate {} (rounded to {}){}\n"
                     "    If the cause is memory fragmentation maybe the environment variable "
                     "'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation.\n",
                     o_.name, tsl_bytes(n), r, upper ? " from the upper end (collective memory)" : "");
    fmt::format_to(out, "    Current allocation summary follows.\n    BFCAllocator dump for {}\n", o_.name);
    struct BinRow {
      std::uint64_t chunks = 0, in_use = 0;
      Bytes total = 0, used = 0, requested = 0;
    } bins[kNumBins];
    std::map<Bytes, std::uint64_t> in_use_by_size;
    for_each_region([&](const Region& rg) {
      for (std::int32_t c = rg.first; c != kNil; c = chunks_.chunk(c).next) {
        const Chunk& ch = chunks_.chunk(c);
        BinRow& b = bins[bin_of(ch.size)];
        ++b.chunks;
        b.total += ch.size;
        if (ch.in_use) {
          ++b.in_use;
          b.used += ch.size;
          b.requested += ch.x.requested;
          ++in_use_by_size[ch.size];
        }
      }
    });
    for (int b = 0; b < kNumBins; ++b)
      fmt::format_to(
          out,
          "    Bin ({}): \tTotal Chunks: {}, Chunks in use: {}. {} allocated for chunks. {} in use in bin. {} "
          "client-requested in use in bin.\n",
          kMinAllocationSize << b, bins[b].chunks, bins[b].in_use, tsl_bytes(bins[b].total), tsl_bytes(bins[b].used),
          tsl_bytes(bins[b].requested));
    fmt::format_to(out, "    Bin for {} was {}, Chunk State: \n", tsl_bytes(r),
                   tsl_bytes(kMinAllocationSize << bin_of(r)));
    fmt::format_to(out, "         Summary of in-use Chunks by size: \n");
    size_t shown = 0;
    for (const auto& [size, count] : in_use_by_size) {
      if (shown++ == 40) {
        fmt::format_to(out, "    ... {} more sizes\n", in_use_by_size.size() - 40);
        break;
      }
      fmt::format_to(out, "    {} Chunks of size {} totalling {}\n", count, size, tsl_bytes(size * count));
    }
    fmt::format_to(out, "    Sum Total of in-use chunks: {}\n", tsl_bytes(s_.bytes_in_use));
    fmt::format_to(
        out, "    Total bytes in pool: {} memory_limit_: {} available bytes: {} curr_region_allocation_bytes_: {}\n",
        s_.pool_bytes, o_.limit, o_.limit - std::min(o_.limit, s_.pool_bytes), curr_region_bytes_);
    Bytes free = s_.pool_bytes - s_.bytes_in_use, lf = largest_free();
    fmt::format_to(
        out,
        "    Stats: \n    Limit:            {:>20}\n    InUse:            {:>20}\n    MaxInUse:         {:>20}\n"
        "    NumAllocs:        {:>20}\n    MaxAllocSize:     {:>20}\n    Reserved:         {:>20}\n"
        "    PeakReserved:     {:>20}\n    LargestFreeBlock: {:>20}\n",
        o_.limit, s_.bytes_in_use, s_.peak_bytes_in_use, s_.num_allocs, s_.largest_alloc_size, 0, 0, lf);
    fmt::format_to(out, "    (fragsim) largest free chunk {}", human_bytes(lf));
    if (gap_ != kNil) fmt::format_to(out, " (central gap {})", human_bytes(chunks_.chunk(gap_).size));
    fmt::format_to(out, ", external fragmentation {:.1f}% (1 - largest free / free, of {} free in the pool)\n",
                   free ? 100.0 * static_cast<double>(free - std::min(lf, free)) / static_cast<double>(free) : 0.0,
                   human_bytes(free));
    for_each_region([&](const Region& rg) {
      // 100 columns; a column shows '#' if mostly in use, '_' if it holds the gap, '.' if free.
      std::string map(100, '.');
      std::vector<double> used(100, 0.0), gap(100, 0.0);
      double col = static_cast<double>(rg.size) / 100.0;
      for (std::int32_t c = rg.first; c != kNil; c = chunks_.chunk(c).next) {
        const Chunk& ch = chunks_.chunk(c);
        if (!ch.in_use && ch.x.tag != kGap) continue;
        double a = static_cast<double>(ch.addr - rg.base), e = a + static_cast<double>(ch.size);
        for (int k = std::max(0, static_cast<int>(a / col)); k < 100 && k * col < e; ++k) {
          double lo = std::max(a, k * col), hi = std::min(e, (k + 1) * col);
          (ch.in_use ? used : gap)[k] += std::max(0.0, hi - lo);
        }
      }
      for (int k = 0; k < 100; ++k) map[k] = used[k] >= col / 2 ? '#' : gap[k] >= col / 2 ? '_' : '.';
      fmt::format_to(out, "    (fragsim) region {} ({}): [{}]\n", rg.id, human_bytes(rg.size), map);
    });
    return s;
  }

 private:
  SizeIndex& index(Tag t) { return t == kUp ? up_ : low_; }
  // Live regions in the order they were obtained.
  template <class F>
  void for_each_region(F f) const {
    std::vector<const Region*> live;
    for (std::int32_t r = 0; r < chunks_.region_count(); ++r)
      if (region(r).live) live.push_back(&region(r));
    std::sort(live.begin(), live.end(), [](const Region* a, const Region* b) { return a->id < b->id; });
    for (const Region* rg : live) f(*rg);
  }

  void insert_free(std::int32_t c, std::string* fatal) {
    const Chunk& ch = chunks_.chunk(c);
    if (ch.x.tag == kGap) {
      if (gap_ != kNil) {
        *fatal = "BFC CHECK failure: spatial partitioning expects one central gap";
        return;
      }
      gap_ = c;
      return;
    }
    index(ch.x.tag).insert({ch.size, ch.addr, static_cast<std::uint32_t>(c)});
  }
  void remove_free(std::int32_t c) {
    const Chunk& ch = chunks_.chunk(c);
    if (ch.x.tag == kGap && gap_ == c) {
      gap_ = kNil;
      return;
    }
    index(ch.x.tag).erase(ch.size, ch.addr);
  }

  // c keeps [ptr, ptr+num); the rest becomes a new free chunk with c's tag, inserted free.
  void split(std::int32_t c, Bytes num) {
    std::int32_t n = chunks_.split(c, num);
    chunks_.extra(n).requested = 0;
    std::string ignore;  // a split-off piece never needs the CHECK (its GAP source left the slot)
    insert_free(n, &ignore);
  }

  // c1 absorbs its right neighbour c2; merged tag = common tag or GAP.
  void merge(std::int32_t c1, std::int32_t c2) {
    Tag t2 = chunks_.chunk(c2).x.tag;
    Tag& t1 = chunks_.extra(c1).tag;
    t1 = t1 == t2 ? t1 : kGap;
    chunks_.merge_next(c1);
  }

  std::int32_t coalesce(std::int32_t h) {
    std::int32_t n = chunks_.chunk(h).next;
    if (n != kNil && !chunks_.chunk(n).in_use) {
      remove_free(n);
      merge(h, n);
    }
    std::int32_t p = chunks_.chunk(h).prev;
    if (p != kNil && !chunks_.chunk(p).in_use) {
      remove_free(p);
      merge(p, h);
      h = p;
    }
    return h;
  }

  bool fits_upper(const Chunk& c, Bytes r) const {
    return c.size >= r && round_down(c.addr + c.size - r, o_.upper_alignment) >= c.addr;
  }

  std::int32_t find(Bytes r, bool upper) {
    if (!upper) {
      if (SizeIndex::Entry e{}; low_.pop_lower_bound(r, &e)) return take_low(static_cast<std::int32_t>(e.id), r);
      if (gap_ != kNil && chunks_.chunk(gap_).size >= r) {
        std::int32_t c = gap_;
        gap_ = kNil;
        return take_low(c, r);
      }
      return kNil;
    }
    std::int32_t found = kNil;
    up_.scan_from(r, [&](const SizeIndex::Entry& e) {
      if (!fits_upper(chunks_.chunk(static_cast<std::int32_t>(e.id)), r)) return true;
      found = static_cast<std::int32_t>(e.id);
      return false;
    });
    if (found != kNil) {
      remove_free(found);
      return take_high(found, r);
    }
    if (gap_ != kNil && fits_upper(chunks_.chunk(gap_), r)) {
      std::int32_t c = gap_;
      gap_ = kNil;
      return take_high(c, r);
    }
    return kNil;
  }

  // Marks free chunk c (out of the free structures) in use for a request of n bytes.
  std::int32_t take(std::int32_t c, Bytes n) {
    chunks_.extra(c).requested = n;
    chunks_.set_in_use(c, true);
    const Chunk& ch = chunks_.chunk(c);
    ++s_.num_allocs;
    s_.bytes_in_use += ch.size;
    s_.peak_bytes_in_use = std::max(s_.peak_bytes_in_use, s_.bytes_in_use);
    s_.largest_alloc_size = std::max(s_.largest_alloc_size, ch.size);
    return c;
  }

  // Chunk c was placed in a region whose base this model made up (obtained with no recorded
  // address: for memory live before the trace, or a request whose address is unknown); the
  // recording shows c at `recorded`, so the driver put the region there: it moves, with every
  // chunk, to base + (recorded − c). BFC's choice inside the region is unchanged. Once per region,
  // and only where the moved region overlaps no other.
  void anchor(std::int32_t c, Addr recorded) {
    std::int32_t g = chunks_.chunk(c).region;
    if (chunks_.region_extra(g).anchored) return;
    chunks_.region_extra(g).anchored = true;
    const Region& rg = region(g);
    Addr at = chunks_.chunk(c).addr;
    if (recorded == at || recorded.value() < at - rg.base) return;
    Addr base = recorded - (at - rg.base);
    if (base.value() % kMinAllocationSize || base.value() > ~std::uint64_t{0} - rg.size) return;
    for (std::int32_t o = 0; o < chunks_.region_count(); ++o)
      if (o != g && region(o).live && region(o).base < base + rg.size && base < region(o).base + region(o).size) return;
    // A region grown from several driver allocations stays; so does one whose new base the
    // device already hands out.
    if (static_cast<size_t>(g) >= grants_.size() || grants_[g].size() != 1 || grants_[g].front().addr() != rg.base ||
        !dev_->move(grants_[g].front(), base))
      return;
    std::vector<std::int32_t> free_chunks;
    for (std::int32_t x = rg.first; x != kNil; x = chunks_.chunk(x).next)
      if (!chunks_.chunk(x).in_use && chunks_.chunk(x).x.tag != kGap) free_chunks.push_back(x);
    for (std::int32_t x : free_chunks) remove_free(x);
    chunks_.move_region(g, base);
    std::string ignore;
    for (std::int32_t x : free_chunks) insert_free(x, &ignore);
  }

  // The live region holding address at, or kNil.
  std::int32_t region_holding(Addr at) const {
    for (std::int32_t g = 0; g < chunks_.region_count(); ++g)
      if (region(g).live && at >= region(g).base && at - region(g).base < region(g).size) return g;
    return kNil;
  }
  // The free chunk holding [at, at + r), or kNil.
  std::int32_t free_chunk_holding(Addr at, Bytes r) const {
    std::int32_t g = region_holding(at);
    if (g == kNil) return kNil;
    for (std::int32_t c = region(g).first; c != kNil; c = chunks_.chunk(c).next) {
      const Chunk& ch = chunks_.chunk(c);
      if (at >= ch.addr && at - ch.addr < ch.size) return !ch.in_use && ch.size - (at - ch.addr) >= r ? c : kNil;
    }
    return kNil;
  }

  // Pre: c removed from the free structures.
  std::int32_t take_low(std::int32_t c, Bytes r) {
    Bytes size = chunks_.chunk(c).size;
    if (size >= 2 * r || size - r >= kMaxInternalFragmentation) split(c, r);
    chunks_.extra(c).tag = kLow;
    return c;
  }

  std::int32_t take_high(std::int32_t c, Bytes r) {
    const Chunk& ch = chunks_.chunk(c);
    Addr s = round_down(ch.addr + ch.size - r, o_.upper_alignment);
    if (s > ch.addr) {
      // [ptr, s) stays free with the source tag (gap stays gap, UP hole stays UP).
      split(c, s - ch.addr);
      std::int32_t a = chunks_.chunk(c).next;
      remove_free(a);
      std::string ignore;  // the prefix takes the slot its source just left
      insert_free(c, &ignore);
      c = a;
    }
    chunks_.extra(c).tag = kUp;
    if (chunks_.chunk(c).size > r) split(c, r);  // suffix: an UP hole
    return c;
  }

  bool extend(Bytes r, std::string* fatal) {
    passed_over_ = {};
    Bytes available = round_down(o_.limit - s_.pool_bytes, kMinAllocationSize);  // wraps as size_t does
    if (r > available) return false;
    bool increased = false;
    while (r > curr_region_bytes_) {  // (a zero-byte limit never gets here: r > available above)
      curr_region_bytes_ =
          curr_region_bytes_ >= (Bytes{1} << 62) ? r : std::max(curr_region_bytes_, kMinAllocationSize) * 2;
      increased = true;
    }
    Bytes bytes = std::min(curr_region_bytes_, available);
    if (region_hint_) dev_->next_address(*region_hint_);
    auto grant = dev_->allocate(bytes);
    const Bytes first = bytes;
    while (!grant) {
      Bytes back = rounded_bytes(static_cast<Bytes>(static_cast<float>(bytes) * 0.9f));
      if (back >= bytes) back = bytes - kMinAllocationSize;
      const Bytes tried = bytes;
      bytes = back;
      if (bytes < r) {
        // The device had r bytes left in one piece, but between two tries: each asks for 90 % of
        // the one before, and the last one above r asked for more than it had.
        if (dev_->padded(r) <= dev_->available()) passed_over_ = {first, tried, bytes, dev_->available()};
        return false;
      }
      if (region_hint_) dev_->next_address(*region_hint_);
      grant = dev_->allocate(bytes);
    }
    if (!increased && curr_region_bytes_ < (Bytes{1} << 62)) curr_region_bytes_ *= 2;
    Bytes received = o_.vmm_padding ? grant.bytes() : bytes;
    s_.pool_bytes += received;
    s_.peak_pool_bytes = std::max(s_.peak_pool_bytes, s_.pool_bytes);
    if (o_.coalesce_regions)  // AddOrExtendAllocationRegion: extend a region that ends right here
      for (std::int32_t r = 0; r < chunks_.region_count(); ++r) {
        const Region& g = region(r);
        if (!g.live || g.base + g.size != grant.addr()) continue;
        std::int32_t c = chunks_.extend_region(r, received, ChunkExtra{0, kLow});
        grants_[r].push_back(std::move(grant));
        insert_free(coalesce(c), fatal);
        return fatal->empty();
      }
    std::int32_t rg = chunks_.add_region(grant.addr(), received, ChunkExtra{0, o_.spatial ? kGap : kLow},
                                         RegionExtra{region_hint_ && grant.addr() == *region_hint_});
    if (static_cast<size_t>(rg) >= grants_.size()) grants_.resize(rg + 1);
    grants_[rg].clear();
    grants_[rg].push_back(std::move(grant));
    insert_free(region(rg).first, fatal);
    return fatal->empty();
  }

  bool deallocate_free_regions(Bytes r) {
    if (!o_.garbage_collection) return false;
    Bytes total_free = 0;
    for (std::int32_t rg = 0; rg < chunks_.region_count(); ++rg)
      if (chunks_.region_unused(rg)) total_free += region(rg).size;
    if (total_free == 0) return false;
    if (r > o_.limit - s_.pool_bytes + total_free) return false;
    for (std::int32_t rg = 0; rg < chunks_.region_count(); ++rg) {
      if (!chunks_.region_unused(rg)) continue;
      remove_free(region(rg).first);
      s_.pool_bytes -= region(rg).size;
      chunks_.remove_region(rg);
      grants_[rg].clear();  // every driver allocation the region grew from
    }
    ++gc_runs_;
    return true;
  }

  BfcOptions o_;
  DeviceMemory* dev_;
  Chunks chunks_;
  std::vector<std::vector<DeviceMemory::Grant>> grants_;  // per region slot: its driver allocations
  SizeIndex low_, up_;
  std::int32_t gap_ = kNil;
  Bytes curr_region_bytes_ = 0;

 public:
  // The last failed Extend, where it passed over enough device memory (empty otherwise).
  struct Backoff {
    // The first and the last size asked for, the next one (below the request), what the device had.
    Bytes first = 0, last = 0, next = 0, left = 0;
  };
  const Backoff& passed_over() const { return passed_over_; }

 private:
  Backoff passed_over_;
  std::optional<Addr> region_hint_;  // the recorded address of the request being served
  Stats s_;

 public:
  std::uint64_t gc_runs_ = 0;
};

class XlaBfcPolicy : public AllocatorPolicy {
 public:
  XlaBfcPolicy(BfcOptions main, std::optional<BfcOptions> collective, bool as_recorded, DeviceMemory* dev)
      : main_(std::move(main), dev), collective_opts_(std::move(collective)), as_recorded_(as_recorded), dev_(dev) {}

  // A capture replayed with its recorded limit and mode: the buffers live before it go where its
  // addresses put them. Another limit or mode moves the region, and they are re-held.
  bool seeds_recording() const override { return as_recorded_; }

  Placement allocate(const AllocRequest& req) override {
    bool coll = req.space == Space::kCollective;
    Bfc& b = coll ? collective_bfc() : main_;
    bool upper = coll && main_.options().spatial;
    if (req.handle >= owner_.size()) owner_.resize(req.handle + 1, {nullptr, kNil});
    std::int32_t c = kNil;
    if (!coll && !req.seeded_extents.empty())
      c = seed_extents(b, req);
    else if (!coll && !req.held_pieces.empty() && (c = hold_pieces(b, req)) == kNil)
      return Placement::failed();  // a piece does not fit: the block does not
    else if (!coll && req.seeded_at)
      c = b.seed(req.size, *req.seeded_at, &fatal_, req.seeded_block);
    if (c == kNil && fatal_.empty()) c = b.allocate(req.size, upper, &fatal_, req.recorded_addr);
    if (c == kNil) return Placement::failed();
    owner_[req.handle] = {&b, c};
    auto it = more_chunks_.find(req.handle);
    if (it == more_chunks_.end()) {
      const auto& ch = b.chunk(c);
      return Placement::at(ch.addr, ch.size, b.region(ch.region).id, b.region(ch.region).base);
    }
    // Several pieces: named by the largest.
    std::int32_t largest = c;
    Bytes block = b.chunk(c).size;
    std::vector<Extent> pieces = {{b.chunk(c).addr, b.chunk(c).size}};
    for (std::int32_t m : it->second) {
      block += b.chunk(m).size;
      pieces.push_back({b.chunk(m).addr, b.chunk(m).size});
      if (b.chunk(m).size > b.chunk(largest).size) largest = m;
    }
    std::sort(pieces.begin(), pieces.end());
    const auto& ch = b.chunk(largest);
    Placement p = Placement::at(ch.addr, block, b.region(ch.region).id, b.region(ch.region).base);
    p.pieces = std::move(pieces);
    return p;
  }

  void release(Handle h) override {
    auto [b, c] = owner_[h];
    owner_[h] = {nullptr, kNil};
    if (b) b->free(c, &fatal_);
    if (auto it = more_chunks_.find(h); it != more_chunks_.end()) {
      for (std::int32_t m : it->second) main_.free(m, &fatal_);
      more_chunks_.erase(it);
    }
  }

  // A region the recording shows before the trace (a pre-trace segment_alloc observation).
  void observe(const Observation& ob) override {
    if (ob.op == Op::kSegmentAlloc && ob.pre_trace && ob.has_addr)
      main_.seed_region(ob.addr, main_.options().allow_growth ? ob.size : 0, &fatal_);
  }

  static void add_footprint(const Bfc& b, Footprint& f) {
    f.allocated += b.stats().bytes_in_use;
    f.reserved += b.stats().pool_bytes;
    f.largest_free = std::max(f.largest_free, b.largest_free());
  }
  Footprint footprint() const override {
    Footprint f;
    add_footprint(main_, f);  // after every event: the collective pool's only where there is one
    if (collective_) add_footprint(*collective_, f);
    return f;
  }
  // Beyond the footprint: the free bytes of both pools and what the main one can still obtain.
  Usage usage() const override {
    const Footprint f = footprint();
    const Bytes fresh = main_.obtainable();
    return {f.allocated, f.reserved, f.largest_free, f.reserved - f.allocated + fresh, std::max(f.largest_free, fresh)};
  }

  Bytes rounded_size(const AllocRequest& req) const override { return rounded_bytes(req.size); }

  nlohmann::json stats() const override {
    nlohmann::json j = main_.stats_json();
    if (collective_) j["collective"] = collective_->stats_json();
    return j;
  }

  Bytes limit() const override { return main_.options().limit; }
  Bytes reserve_limit() const override {
    return collective_ ? main_.options().limit + collective_->options().limit : limit();
  }
  Bytes preallocated() const override {
    auto pool = [](const Bfc& b) { return b.options().allow_growth ? Bytes(0) : b.options().limit; };
    return pool(main_) + (collective_ ? pool(*collective_) : 0);
  }
  nlohmann::json extra_report() const override {
    nlohmann::json j = {{"bfc",
                         {{"name", main_.options().name},
                          {"memory_limit", main_.options().limit},
                          {"spatial_partitioning", main_.options().spatial},
                          {"allow_growth", main_.options().allow_growth}}}};
    if (main_.gc_runs_) j["bfc"]["garbage_collections"] = main_.gc_runs_;
    return j;
  }

  void validate() const override {
    main_.validate();
    if (collective_) collective_->validate();
  }

  std::string describe_oom(const AllocRequest& req) const override {
    bool coll = req.space == Space::kCollective;
    if (!fatal_.empty()) return "    " + fatal_ + "\n";
    const Bfc* b = coll && collective_ ? collective_.get() : &main_;
    std::string out =
        b->dump(req.size, coll && main_.options().spatial) + "    " + oom_exception(b->options(), req) + "\n";
    if (const auto& p = b->passed_over(); p.first)
      out += fmt::format(
          "    region growth passed over the device's memory: Extend asked the device for {}{}, and the next try, {}, "
          "is below the {} request: the {} the device had left lay between two tries (XLA's BFCAllocator::Extend "
          "backs off by a factor of 0.9)\n",
          human_bytes(p.first),
          p.last == p.first ? std::string()
                            : fmt::format(", then 90 % of each failed size down to {}", human_bytes(p.last)),
          human_bytes(p.next), human_bytes(rounded_bytes(req.size)), human_bytes(p.left));
    return out;
  }
  std::string oom_kind(const AllocRequest& req) const override {
    const bool coll = req.space == Space::kCollective;
    const Bfc* b = coll && collective_ ? collective_.get() : &main_;
    return fatal_.empty() && b->passed_over().first ? "region_growth_backoff" : "";
  }

  void memory_map(MemoryMap* out) const override {
    main_.memory_map(out);
    if (collective_) collective_->memory_map(out);
  }

  std::string empty_cache() override {
    return "XLA's BFC allocator has no cache to release: JAX keeps its regions (nothing released)";
  }

 private:
  // A pre-trace allocation spread over several extents: one chunk each, the first one owns the
  // handle and the others are freed with it. kNil (nothing seeded) when one is not free here.
  std::int32_t seed_extents(Bfc& b, const AllocRequest& req) {
    std::vector<std::int32_t> cs;
    for (const Extent& e : req.seeded_extents) {
      std::int32_t c = b.seed(e.bytes, e.addr, &fatal_);
      if (c == kNil) {
        for (std::int32_t x : cs) b.free(x, &fatal_);
        return kNil;
      }
      cs.push_back(c);
    }
    if (cs.size() > 1) more_chunks_[req.handle].assign(cs.begin() + 1, cs.end());
    return cs.front();
  }

  // Bytes live before the trace at unstated addresses, re-held under other settings (AllocRequest::
  // held_pieces): each piece the recording put some of them in, and the rest, a request of its own,
  // as the allocations they were (one request of their sum grows a fresh BFC's region target past
  // any one of them: trial finding 2, 128 MiB + 1,280 B took a 252 MiB region where a 128 MiB one and
  // the 1,280 B in a 2 MiB one fit). kNil when one does not fit (none kept).
  std::int32_t hold_pieces(Bfc& b, const AllocRequest& req) {
    std::vector<std::int32_t> cs;
    Bytes left = req.size;
    auto hold = [&](Bytes n) {
      const std::int32_t c = b.allocate(n, false, &fatal_);
      if (c != kNil) cs.push_back(c), left -= n;
      return c != kNil;
    };
    bool ok = true;
    for (size_t i = 0; ok && left && i < req.held_pieces.size(); ++i)
      ok = hold(std::min(req.held_pieces[i].bytes, left));
    if (ok && left) ok = hold(left);  // the rest, elsewhere
    if (!ok || cs.empty()) {
      for (std::int32_t x : cs) b.free(x, &fatal_);
      return kNil;
    }
    if (cs.size() > 1) more_chunks_[req.handle].assign(cs.begin() + 1, cs.end());
    return cs.front();
  }

  Bfc& collective_bfc() {
    if (!collective_opts_) return main_;  // spatial: the pool's upper end
    if (!collective_) collective_ = std::make_unique<Bfc>(*collective_opts_, dev_);
    return *collective_;
  }

  Bfc main_;
  std::optional<BfcOptions> collective_opts_;
  std::unique_ptr<Bfc> collective_;
  bool as_recorded_ = false;  // seeds_recording()
  DeviceMemory* dev_;
  std::vector<std::pair<Bfc*, std::int32_t>> owner_;
  std::map<Handle, std::vector<std::int32_t>> more_chunks_;  // seeded extents after the first, per handle
};

PolicyBuilder configure_xla_bfc(ConfigReader& cfg, const ConfigContext& ctx) {
  const bool user_jaxlib = cfg.has("jaxlib");
  JaxlibBehaviour jb = gpu_behaviour(cfg, ctx);
  // Pinned host memory has its own BFC (xla_gpu_host_bfc in XLA's se_gpu_pjrt_client.cc): a
  // 64 GiB limit (XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB; the hardware's host space) and allow_growth;
  // JAX's device-memory settings (fraction, preallocation, a byte limit) never reach it.
  const bool host = ctx.space->space == Space::kHost;
  const bool user_limit = !host && (cfg.has("memory_limit") || cfg.has("mem_fraction"));
  const bool user_mode = !host && cfg.has("preallocate");
  if (host && (cfg.has("memory_limit") || cfg.has("mem_fraction") || cfg.has("preallocate")))
    cfg.note(fmt::format(
        "pinned host memory ({}) keeps its own growing pool: mem_fraction, memory_limit and preallocate set device "
        "memory only",
        jb.f32_fraction ? "XLA's xla_gpu_host_bfc" : "TensorFlow's gpu_host_bfc"));
  // A capture's recorded configuration: its limit unless the user sets one, its mode unless the
  // user sets preallocate — overriding one keeps the other.
  const RecordedAllocator* rec = cfg.flag("use_recorded_settings", true) ? recorded_bfc(ctx) : nullptr;
  const bool rec_limit = rec && !user_limit, rec_mode = rec && !user_mode;
  // (The host BFC always grows: a capture whose host addresses fit one region shows only that its
  // first region held them.)
  const bool mode_default = !host && (rec ? rec->mode == RecordedAllocator::Mode::kSingleRegion : true);
  bool preallocate = cfg.flag("preallocate", mode_default);
  if (host) cfg.record("preallocate", preallocate = false);
  double fraction = cfg.number_in("mem_fraction", 0.75, kMemFractionRange);
  // A capture's one region is replayed in the classic layout unless asked: TensorFlow's BFC and
  // jaxlib before 0.11 have no spatial partitioning, and without collective buffers both layouts
  // place every buffer alike (holes first by best fit, then the low end of the rest), while only
  // the classic one can hold the buffers live before the capture where their addresses put them.
  bool spatial_flag = cfg.flag("spatial_partitioning", rec ? false : jb.spatial_default);
  bool gc = cfg.flag("garbage_collection", false);
  Bytes collective_size = cfg.size("collective_memory_size", 0);
  Bytes upper_alignment = cfg.size("upper_alignment", 2 * kMiB);
  if (upper_alignment < kMinAllocationSize || (upper_alignment & (upper_alignment - 1)))
    throw InputError("policy xla-bfc: upper_alignment: must be a power of two >= 256");
  // A release that rounds its limit up to 2 MiB also pads its regions to that granularity
  // (xla-bfc-spatial.md §2); a recorded limit that is no 2 MiB multiple comes from an allocator that
  // does neither (TensorFlow, jaxlib before 0.10.2): its regions are cuMemAlloc'd at the size asked.
  // That is the recording's release, whichever limit this run gives it: a fraction or a byte limit
  // what-if makes its limit by the same rule (trial: .97, the capture's own fraction, gave a limit
  // rounded up to 2 MiB, and so not the recorded one).
  // A jaxlib asked for that rounds (0.10.2 on) is modelled as asked, but the capture's unrounded limit
  // contradicts it, and the run says so (trial: jaxlib=0.10.2 on the MI300X capture, accepted silently).
  if (rec && !host && jb.vmm_padding && *rec->limit % (2 * kMiB) != 0) {
    if (user_jaxlib) {
      cfg.note(fmt::format(
          "xla-bfc on device {}: the recording contradicts jaxlib={}: that release rounds its limit up to a multiple "
          "of 2 MiB, and the capture's limit {} B is none, so its allocator was TensorFlow's or jaxlib 0.10.1 or "
          "older; modelled as asked",
          ctx.device_index, jb.version, *rec->limit));
    } else {
      jb.round_limit = jb.vmm_padding = false;
      cfg.record("vmm_padding", false);
      cfg.note(fmt::format(
          "xla-bfc on device {}: the capture's limit {} B is no multiple of 2 MiB, so its allocator neither rounds "
          "its limit nor pads its regions (TensorFlow, or jaxlib before 0.10.2): neither is modelled (jaxlib=VERSION "
          "chooses)",
          ctx.device_index, *rec->limit));
    }
  }
  Bytes total = jb.limit_from_free ? ctx.space->usable() : ctx.space->capacity;
  // TensorFlow with no per_process_gpu_memory_fraction: its free memory less its reserve, not a share.
  const bool tf_default = !host && jb.tf_limit && !rec_limit && !cfg.has("mem_fraction") && !cfg.has("memory_limit");
  Bytes limit = host         ? ctx.space->capacity
                : tf_default ? tensorflow_default_limit(cfg, ctx)
                             : xla_memory_limit(total, fraction, jb);
  if (auto m = cfg.optional_size("memory_limit"); m && !host)  // gpu_system_memory_size: a byte limit instead
    limit = rounded_limit(*m, jb);
  // bytes_allocated + bytes_available + bytes_reserved, as logged (on other device memory, what the
  // framework's rule makes of it: JAX's share, TensorFlow's free memory less its reserve)
  std::string limit_text = fmt::format("limit {} B", limit);
  if (rec_limit) {
    const DeviceLimit here = recorded_limit(*rec, cfg, ctx, jb);
    limit = here.bytes;
    limit_text =
        here.basis.empty() ? fmt::format("limit {} B", limit) : fmt::format("limit {} B ({})", limit, here.basis);
  }
  // A limit no fraction given made (the capture's, TensorFlow's default) echoes the fraction in force,
  // not the key's default, 0.75: JAX's the share its limit is of the device (the program's
  // XLA_PYTHON_CLIENT_MEM_FRACTION), TensorFlow's none (null: free memory less its reserve).
  if ((rec_limit || tf_default) && !host) cfg.record("mem_fraction", fraction_in_force(limit, total, jb));
  if (rec_limit && rec_mode) {
    cfg.record(kRecordedSettingsKey,
               fmt::format("{} and {} from the capture's {}", limit_text,
                           preallocate ? "one preallocated region" : "growth on demand", rec->name));
  } else if (rec_limit || rec_mode) {
    std::string kept = rec_limit ? limit_text : (preallocate ? "one preallocated region" : "growth on demand");
    cfg.record(kRecordedSettingsKey, fmt::format("{} from the capture's {}", kept, rec->name));
    cfg.note(
        fmt::format("xla-bfc on device {}: the capture's {} kept ({} given); use_recorded_settings=false "
                    "drops it",
                    ctx.device_index, rec_limit ? "limit" : "mode", rec_limit ? "preallocate" : "a limit"));
  }
  cfg.record("resolved_memory_limit", limit);
  BfcOptions main;
  main.name = fmt::format("GPU_{}_bfc", ctx.device_index);
  main.limit = limit;
  main.allow_growth = !preallocate;
  main.spatial = preallocate && spatial_flag;
  main.garbage_collection = gc;
  main.vmm_padding = jb.vmm_padding;
  main.upper_alignment = upper_alignment;
  main.end_in_message = jb.spatial_default;
  main.tensorflow = ctx.recording && ctx.recording->framework_of() == Framework::kTensorFlow;
  main.device = ctx.device_index;
  // Regions obtained right after an earlier one extend it (TSL, with a coalescing sub-allocator).
  // Off by default: JAX's default sub-allocator does not coalesce, and turning it on for the
  // MI300X capture reproduces fewer addresses (50 of 69 against 62).
  main.coalesce_regions = cfg.flag("coalesce_regions", false);
  cfg.record("resolved_spatial_partitioning", main.spatial);
  std::optional<BfcOptions> coll;
  if (!main.spatial) {  // classic: collective memory gets its own BFC (xla-bfc.md §4)
    BfcOptions c = main;
    c.name = fmt::format("GPU_collectivememory_{}_bfc", ctx.device_index);
    c.spatial = false;
    if (collective_size) {
      c.allow_growth = false;
      c.limit = rounded_limit(collective_size, jb);
    } else {
      c.allow_growth = true;
      c.limit = rounded_limit(static_cast<Bytes>(static_cast<double>(total) * (1.0 - pjrt_fraction(fraction))), jb);
    }
    coll = c;
  }
  // (A limit the capture's share made on other device memory is no recorded decision.) The
  // recorded settings stated again (XLA_PYTHON_CLIENT_MEM_FRACTION=.75 where the capture's limit is
  // .75 of this device, PREALLOCATE as the capture's mode) are the recorded settings: what counts is
  // the configuration, not whether a variable was given.
  const bool same_mode = rec_mode || preallocate == mode_default;
  const bool as_recorded = rec && limit == *rec->limit && same_mode && !cfg.has("spatial_partitioning") && !gc &&
                           !main.coalesce_regions && !collective_size;
  return [main, coll, as_recorded](const PolicyContext& pc) {
    return std::make_unique<XlaBfcPolicy>(main, coll, as_recorded, pc.device);
  };
}

// What the framework offers in place of its preallocated (or growing) BFC, in its own words: one
// table for the advice after an OOM and for compare's what-ifs. TensorFlow's variables for a
// TensorFlow capture, JAX's otherwise; only what the framework builds on the platform: JAX's
// platform allocator everywhere, TensorFlow's cuMemAlloc one (TF_GPU_ALLOCATOR=cuda_malloc) on
// CUDA only, cudaMallocAsync on CUDA only.
struct BfcAlternative {
  std::string ref;      // as compare runs it: "xla-bfc[preallocate=false]", "platform"
  std::string setting;  // as the framework's users set it: "TF_FORCE_GPU_ALLOW_GROWTH=true"
  std::string why;      // what it changes, in a few words
  std::string policy;   // the policy the setting selects ("": xla-bfc itself, in the other mode)
  bool slow = false;    // a driver call per allocation and free (AdviceCandidate::slow)
  bool remedy = true;   // offered against fragmentation (one preallocated pool is not: it fragments as growth does)
};
// The variable that sets the BFC's mode, as the framework's users set it: JAX's preallocation, TensorFlow's
// allow_growth (its opposite).
std::string mode_setting(bool preallocate, const Vocabulary& vocab) {
  if (vocab.framework == Framework::kTensorFlow)
    return preallocate ? "TF_FORCE_GPU_ALLOW_GROWTH=false" : "TF_FORCE_GPU_ALLOW_GROWTH=true";
  return preallocate ? "XLA_PYTHON_CLIENT_PREALLOCATE=true" : "XLA_PYTHON_CLIENT_PREALLOCATE=false";
}

std::vector<BfcAlternative> bfc_alternatives(const nlohmann::json& c, const Vocabulary& vocab) {
  const bool tf = vocab.framework == Framework::kTensorFlow;
  std::vector<BfcAlternative> v;
  if (c.value("preallocate", true))
    v.push_back({"xla-bfc[preallocate=false]", mode_setting(false, vocab),
                 "the BFC grows region by region instead of carving one preallocated pool", ""});
  else
    v.push_back({"xla-bfc[preallocate=true]", mode_setting(true, vocab),
                 "the BFC carves one preallocated pool instead of growing region by region", "", false, false});
  // JAX's docs (GPU memory allocation): "allocate exactly what is needed on demand, and deallocate
  // memory that is no longer needed ... This is very slow, so is not recommended for general use, but
  // may be useful for running with the minimal possible GPU memory footprint or debugging OOM failures".
  if (!tf)
    v.push_back({"platform", "XLA_PYTHON_CLIENT_ALLOCATOR=platform",
                 "JAX then allocates exactly what each buffer needs and frees it on every deallocation: no "
                 "fragmentation, but a device call per allocation and free, which JAX's docs call very slow (for the "
                 "smallest footprint or debugging an OOM, not for general use)",
                 "platform", true});
  else if (!vocab.rocm())
    v.push_back({"platform", "TF_GPU_ALLOCATOR=cuda_malloc",
                 "TensorFlow then calls cuMemAlloc and cuMemFree for each tensor, with no cache: no fragmentation, "
                 "but a driver call per allocation and free (slow)",
                 "platform", true});
  if (!vocab.rocm())
    v.push_back({"cuda-async", tf ? "TF_GPU_ALLOCATOR=cuda_malloc_async" : "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async",
                 "the driver's stream-ordered pool places buffers instead of the BFC", "cuda-async"});
  return v;
}

// After a first OOM (sim/commands/advice.h replays each before printing it): against fragmentation,
// every placement the framework offers instead of the BFC in its mode (growth instead of one
// preallocated pool; the platform and cudaMallocAsync allocators where it builds them), the slow
// one last; against a limit below the device, the smallest memory fraction that fits.
std::vector<AdviceCandidate> advise_xla_bfc(const AdviceInput& in) {
  const nlohmann::json& c = in.config;
  std::vector<AdviceCandidate> a;
  const Bytes limit = c.value("resolved_memory_limit", Bytes{0});
  if (in.fragmentation) {
    for (const BfcAlternative& alt : bfc_alternatives(c, in.vocab))
      if (alt.remedy)
        a.push_back({.problem = "fragmentation",
                     .setting = alt.setting,
                     .why = alt.why,
                     .envs = {alt.setting},
                     .policy = alt.policy,
                     .slow = alt.slow});
    std::stable_partition(a.begin(), a.end(), [](const AdviceCandidate& x) { return !x.slow; });
  } else if (limit && in.reserved + in.rounded > limit && !c.contains("memory_limit") &&
             (!c.contains("mem_fraction") || !c["mem_fraction"].is_number() || c["mem_fraction"].get<double>() < 1.0)) {
    a.push_back({.problem = "memory", .why = "a larger share of the device", .find_fraction = true});
  }
  return a;
}

// Both frameworks preallocate unless told to grow: a run that grows (a capture that grew on demand, or
// preallocate=false) states it beside a fraction, which alone would preallocate.
std::vector<StatedSetting> stated_xla_bfc(const nlohmann::json& c, const Vocabulary& vocab) {
  if (c.value("preallocate", true)) return {};
  const std::string s = mode_setting(false, vocab);
  return {{s, s, "preallocate"}};
}

// The other mode, and the other allocators the framework builds on the platform, each with the
// setting that selects it.
std::vector<WhatIf> xla_bfc_what_ifs(const nlohmann::json& c, const Vocabulary& vocab) {
  std::vector<WhatIf> v;
  for (BfcAlternative& alt : bfc_alternatives(c, vocab)) v.push_back({std::move(alt.ref), std::move(alt.setting)});
  return v;
}

}  // namespace

void register_xla_bfc(Registry& r) {
  PolicyInfo info{
      "xla-bfc",
      "XLA/TSL BFC allocator as JAX (or TensorFlow) configures it on GPU",
      configure_xla_bfc,
      false,
      {{"preallocate", "true", false,
        "XLA_PYTHON_CLIENT_PREALLOCATE: reserve the whole limit at start (false: grow region by region)"},
       {"mem_fraction", "0.75 (for a TensorFlow capture: none, the free memory less TensorFlow's reserve)", 0.9,
        "XLA_PYTHON_CLIENT_MEM_FRACTION (TensorFlow: per_process_gpu_memory_fraction): the limit as a fraction of "
        "device memory",
        kMemFractionRange},
       {"memory_limit", "unset", "40GiB", "a byte limit instead of the fraction (XLA's gpu_system_memory_size)"},
       jaxlib_option(),
       {"spatial_partitioning", "true from jaxlib 0.11.0, else false (false for an XProf capture's recorded settings)",
        false,
        "--xla_gpu_enable_allocator_spatial_partitioning: one BFC whose collective buffers are served from the "
        "upper end of the preallocated region (needs preallocate)"},
       {"collective_memory_size", "0 (grows)", "1GiB",
        "without spatial partitioning: the separate collective-memory BFC's fixed size (0: it grows on demand "
        "up to what the fraction leaves)"},
       {"garbage_collection", "false", true,
        "BFC's garbage_collection option: when growing fails, return every wholly free region to the device "
        "and try again"},
       {"upper_alignment", "2MiB", "4MiB", "alignment of the upper-end (collective) allocations, a power of two"},
       {"coalesce_regions", "false", true,
        "memory obtained right after a region extends it (TSL BFC with a coalescing sub-allocator)"},
       {"use_recorded_settings", "true", false,
        "for an XProf capture: take the recorded limit (unless memory_limit or mem_fraction is given) and mode "
        "(one region or growth on demand; unless preallocate is given)"}}};
  info.frameworks = {Framework::kJax, Framework::kTensorFlow};
  info.fraction = jax_memory_fraction();
  info.defaults = {{RecordingSource::kXprof, "gpu", "xla-bfc", "the trace is an XProf capture of XLA's BFC allocator"},
                   {RecordingSource::kJaxMemoryProfile, "gpu", "xla-bfc", "the trace is a JAX device memory profile"}};
  info.what_ifs = xla_bfc_what_ifs;
  info.advise = advise_xla_bfc;
  info.stated = stated_xla_bfc;
  r.add(std::move(info));
}

}  // namespace fragsim

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
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "policies/jax_gpu.h"
#include "policies/policy.h"
#include "policies/size_index.h"
#include "policies/slot_pool.h"
#include "sim/error.h"

namespace fragsim {

namespace {

constexpr Bytes kMinAllocationSize = 256;
constexpr Bytes kMaxInternalFragmentation = 128 * kMiB;
constexpr int kNumBins = 21;
constexpr std::int32_t kNil = -1;

enum Tag : std::uint8_t { kLow, kUp, kGap };

Bytes rounded_bytes(Bytes n) { return round_up(n, kMinAllocationSize); }
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
};

class Bfc {
 public:
  struct Chunk {
    Addr ptr = 0;
    Bytes size = 0, requested = 0;
    std::int32_t prev = kNil, next = kNil, region = kNil;
    Tag tag = kLow;
    bool in_use = false;
  };
  struct Region {
    Addr base = 0;
    Bytes size = 0;
    std::int32_t first = kNil;
    std::uint32_t in_use = 0;
    bool live = true;
  };
  struct Stats {
    std::uint64_t num_allocs = 0;
    Bytes bytes_in_use = 0, peak_bytes_in_use = 0, largest_alloc_size = 0, pool_bytes = 0, peak_pool_bytes = 0;
  };

  Bfc(BfcOptions o, DeviceMemory* dev) : o_(std::move(o)), dev_(dev) {
    curr_region_bytes_ = o_.allow_growth ? rounded_bytes(std::min(o_.limit, 2 * kMiB)) : rounded_bytes(o_.limit);
  }

  // Returns the chunk or kNil (OOM). *fatal is set when the real allocator would CHECK-fail.
  std::int32_t allocate(Bytes n, bool upper, std::string* fatal) {
    Bytes r = rounded_bytes(n);
    std::int32_t c = find(r, upper);
    if (c == kNil && extend(r, fatal)) c = find(r, upper);
    if (c == kNil && fatal->empty() && deallocate_free_regions(r) && extend(r, fatal)) c = find(r, upper);
    if (c == kNil) return kNil;
    Chunk& ch = chunks_[c];
    ch.requested = n;
    ++regions_[ch.region].in_use;
    ++s_.num_allocs;
    s_.bytes_in_use += ch.size;
    s_.peak_bytes_in_use = std::max(s_.peak_bytes_in_use, s_.bytes_in_use);
    s_.largest_alloc_size = std::max(s_.largest_alloc_size, ch.size);
    return c;
  }

  void free(std::int32_t h, std::string* fatal) {
    Chunk& c = chunks_[h];
    c.in_use = false;
    --regions_[c.region].in_use;
    s_.bytes_in_use -= c.size;
    if (o_.spatial) {  // ReturnBoundaryChunkToGap
      if (c.tag == kLow && (c.next == kNil || chunks_[c.next].tag != kLow)) c.tag = kGap;
      else if (c.tag == kUp && (c.prev == kNil || chunks_[c.prev].tag != kUp)) c.tag = kGap;
    }
    insert_free(coalesce(h), fatal);
  }

  const Chunk& chunk(std::int32_t c) const { return chunks_[c]; }
  const Region& region(std::int32_t r) const { return regions_[r]; }
  const Stats& stats() const { return s_; }
  const BfcOptions& options() const { return o_; }
  Bytes largest_free() const {
    Bytes l = 0;
    if (auto* e = low_.largest()) l = e->size;
    if (auto* e = up_.largest()) l = std::max(l, e->size);
    if (gap_ != kNil) l = std::max(l, chunks_[gap_].size);
    return l;
  }
  // Fresh device memory Extend could still obtain.
  Bytes obtainable() const {
    Bytes avail = round_down(o_.limit - s_.pool_bytes, kMinAllocationSize);  // size_t arithmetic, may wrap
    return std::min(avail, dev_->available());
  }

  nlohmann::json stats_json() const {
    return {{"num_allocs", s_.num_allocs},         {"bytes_in_use", s_.bytes_in_use},
            {"peak_bytes_in_use", s_.peak_bytes_in_use}, {"largest_alloc_size", s_.largest_alloc_size},
            {"bytes_limit", o_.limit},             {"pool_bytes", s_.pool_bytes},
            {"peak_pool_bytes", s_.peak_pool_bytes}, {"largest_free_block_bytes", largest_free()}};
  }

  void validate() const {
    auto fail = [&](const std::string& m) { throw std::logic_error(o_.name + ": " + m); };
    Bytes in_use = 0, pool = 0;
    size_t nfree_low = 0, nfree_up = 0, ngap = 0;
    for (size_t ri = 0; ri < regions_.size(); ++ri) {
      const Region& rg = regions_[ri];
      if (!rg.live) continue;
      pool += rg.size;
      Addr at = rg.base;
      std::int32_t prev = kNil;
      int phase = 0;  // spatial layout: 0 LOW…, 1 after gap, 2 UP…
      std::uint32_t used = 0;
      for (std::int32_t c = rg.first; c != kNil; c = chunks_[c].next) {
        const Chunk& ch = chunks_[c];
        if (ch.ptr != at) fail(fmt::format("chunk at {:#x} expected at {:#x}", ch.ptr, at));
        if (ch.prev != prev) fail("broken prev link");
        if (ch.region != static_cast<std::int32_t>(ri)) fail("chunk in wrong region");
        if (ch.size == 0 || ch.size % kMinAllocationSize) fail("chunk size not a positive multiple of 256");
        if (ch.in_use) {
          in_use += ch.size;
          ++used;
          if (ch.tag == kGap) fail("in-use chunk tagged GAP");
        } else {
          if (prev != kNil && !chunks_[prev].in_use) fail("two adjacent free chunks");
          if (ch.tag == kGap) {
            ++ngap;
            if (gap_ != c) fail("GAP chunk is not the gap slot");
          } else {
            (ch.tag == kLow ? nfree_low : nfree_up)++;
            if (!(ch.tag == kLow ? low_ : up_).contains(ch.size, ch.ptr)) fail("free chunk missing from its index");
          }
        }
        if (o_.spatial) {
          int p = ch.tag == kLow ? 0 : ch.tag == kGap ? 1 : 2;
          if (p < phase) fail("spatial layout LOW < gap < UP broken");
          phase = std::max(phase, p);
        } else if (ch.tag != kLow) {
          fail("classic mode chunk not tagged LOW");
        }
        at += ch.size;
        prev = c;
      }
      if (at != rg.base + rg.size) fail("chunks do not cover the region");
      if (used != rg.in_use) fail("region in-use count stale");
    }
    if (ngap > 1) fail("more than one GAP chunk");
    if (ngap == 0 && gap_ != kNil) fail("gap slot points at a non-GAP chunk");
    if (nfree_low != low_.size() || nfree_up != up_.size()) fail("free index holds stale chunks");
    if (in_use != s_.bytes_in_use) fail(fmt::format("bytes_in_use {} != Σ in-use chunks {}", s_.bytes_in_use, in_use));
    if (pool != s_.pool_bytes) fail("pool_bytes != Σ regions");
  }

  // BFC's OOM dump: bins table, largest free chunk, fragmentation, occupancy map per region.
  std::string dump(Bytes n, bool upper) const {
    std::string s;
    auto out = std::back_inserter(s);
    Bytes r = rounded_bytes(n);
    fmt::format_to(out, "    Allocator ({}) ran out of memory trying to allocate {} (rounded to {}) from the {} end\n",
                   o_.name, human_bytes(n), r, upper ? "upper" : "lower");
    fmt::format_to(out, "    If this is caused by memory fragmentation, the environment variable "
                        "'TF_GPU_ALLOCATOR=cuda_malloc_async' may improve the situation.\n");
    struct BinRow {
      std::uint64_t chunks = 0, in_use = 0;
      Bytes total = 0, used = 0, requested = 0;
    } bins[kNumBins];
    for (const auto& rg : regions_) {
      if (!rg.live) continue;
      for (std::int32_t c = rg.first; c != kNil; c = chunks_[c].next) {
        const Chunk& ch = chunks_[c];
        BinRow& b = bins[bin_of(ch.size)];
        ++b.chunks;
        b.total += ch.size;
        if (ch.in_use) {
          ++b.in_use;
          b.used += ch.size;
          b.requested += ch.requested;
        }
      }
    }
    for (int b = 0; b < kNumBins; ++b) {
      if (!bins[b].chunks) continue;
      fmt::format_to(out,
                     "    Bin ({}): Total Chunks: {}, Chunks in use: {}. {} allocated for chunks. {} in use in bin. {} "
                     "client-requested in use in bin.\n",
                     human_bytes(kMinAllocationSize << b), bins[b].chunks, bins[b].in_use, human_bytes(bins[b].total),
                     human_bytes(bins[b].used), human_bytes(bins[b].requested));
    }
    Bytes free = s_.pool_bytes - s_.bytes_in_use, lf = largest_free();
    fmt::format_to(out, "    Bin for {} was {}; in use {}, pool {}, limit {}, largest free chunk {}", human_bytes(r),
                   human_bytes(kMinAllocationSize << bin_of(r)), human_bytes(s_.bytes_in_use),
                   human_bytes(s_.pool_bytes), human_bytes(o_.limit), human_bytes(lf));
    if (gap_ != kNil) fmt::format_to(out, " (central gap {})", human_bytes(chunks_[gap_].size));
    fmt::format_to(out, ", fragmentation {:.1f}% ((free - largest free) / free)\n",
                   free ? 100.0 * static_cast<double>(free - std::min(lf, free)) / static_cast<double>(free) : 0.0);
    for (size_t ri = 0; ri < regions_.size(); ++ri) {
      const Region& rg = regions_[ri];
      if (!rg.live) continue;
      // 100 columns; a column shows '#' if mostly in use, '_' if it holds the gap, '.' if free.
      std::string map(100, '.');
      std::vector<double> used(100, 0.0), gap(100, 0.0);
      double col = static_cast<double>(rg.size) / 100.0;
      for (std::int32_t c = rg.first; c != kNil; c = chunks_[c].next) {
        const Chunk& ch = chunks_[c];
        if (!ch.in_use && ch.tag != kGap) continue;
        double a = static_cast<double>(ch.ptr - rg.base), e = a + static_cast<double>(ch.size);
        for (int k = std::max(0, static_cast<int>(a / col)); k < 100 && k * col < e; ++k) {
          double lo = std::max(a, k * col), hi = std::min(e, (k + 1) * col);
          (ch.in_use ? used : gap)[k] += std::max(0.0, hi - lo);
        }
      }
      for (int k = 0; k < 100; ++k) map[k] = used[k] >= col / 2 ? '#' : gap[k] >= col / 2 ? '_' : '.';
      fmt::format_to(out, "    region {} ({}): [{}]\n", ri, human_bytes(rg.size), map);
    }
    return s;
  }

 private:
  SizeIndex& index(Tag t) { return t == kUp ? up_ : low_; }

  void insert_free(std::int32_t c, std::string* fatal) {
    Chunk& ch = chunks_[c];
    if (ch.tag == kGap) {
      if (gap_ != kNil) {
        *fatal = "BFC CHECK failure: spatial partitioning expects one central gap";
        return;
      }
      gap_ = c;
      return;
    }
    index(ch.tag).insert({ch.size, ch.ptr, static_cast<std::uint32_t>(c)});
  }
  void remove_free(std::int32_t c) {
    Chunk& ch = chunks_[c];
    if (ch.tag == kGap && gap_ == c) {
      gap_ = kNil;
      return;
    }
    index(ch.tag).erase(ch.size, ch.ptr);
  }

  // c keeps [ptr, ptr+num); the rest becomes a new free chunk with c's tag, inserted free.
  void split(std::int32_t c, Bytes num) {
    std::int32_t n = acquire_slot(chunks_, spare_);
    Chunk& a = chunks_[c];
    Chunk& b = chunks_[n];
    b.ptr = a.ptr + num;
    b.size = a.size - num;
    b.tag = a.tag;
    b.region = a.region;
    b.prev = c;
    b.next = a.next;
    if (a.next != kNil) chunks_[a.next].prev = n;
    a.next = n;
    a.size = num;
    std::string ignore;  // a split-off piece never needs the CHECK (its GAP source left the slot)
    insert_free(n, &ignore);
  }

  void merge(std::int32_t c1, std::int32_t c2) {
    Chunk& a = chunks_[c1];
    Chunk& b = chunks_[c2];
    a.next = b.next;
    if (b.next != kNil) chunks_[b.next].prev = c1;
    a.size += b.size;
    a.tag = a.tag == b.tag ? a.tag : kGap;
    spare_.push_back(c2);
  }

  std::int32_t coalesce(std::int32_t h) {
    std::int32_t n = chunks_[h].next;
    if (n != kNil && !chunks_[n].in_use) {
      remove_free(n);
      merge(h, n);
    }
    std::int32_t p = chunks_[h].prev;
    if (p != kNil && !chunks_[p].in_use) {
      remove_free(p);
      merge(p, h);
      h = p;
    }
    return h;
  }

  bool fits_upper(const Chunk& c, Bytes r) const {
    return c.size >= r && round_down(c.ptr + c.size - r, o_.upper_alignment) >= c.ptr;
  }

  std::int32_t find(Bytes r, bool upper) {
    if (!upper) {
      if (const auto* e = low_.lower_bound(r)) {
        std::int32_t c = static_cast<std::int32_t>(e->id);
        remove_free(c);
        return take_low(c, r);
      }
      if (gap_ != kNil && chunks_[gap_].size >= r) {
        std::int32_t c = gap_;
        gap_ = kNil;
        return take_low(c, r);
      }
      return kNil;
    }
    std::int32_t found = kNil;
    up_.scan_from(r, [&](const SizeIndex::Entry& e) {
      if (!fits_upper(chunks_[e.id], r)) return true;
      found = static_cast<std::int32_t>(e.id);
      return false;
    });
    if (found != kNil) {
      remove_free(found);
      return take_high(found, r);
    }
    if (gap_ != kNil && fits_upper(chunks_[gap_], r)) {
      std::int32_t c = gap_;
      gap_ = kNil;
      return take_high(c, r);
    }
    return kNil;
  }

  // Pre: c removed from the free structures.
  std::int32_t take_low(std::int32_t c, Bytes r) {
    Bytes size = chunks_[c].size;
    if (size >= 2 * r || size - r >= kMaxInternalFragmentation) split(c, r);
    chunks_[c].tag = kLow;
    chunks_[c].in_use = true;
    return c;
  }

  std::int32_t take_high(std::int32_t c, Bytes r) {
    Chunk& ch = chunks_[c];
    Addr s = round_down(ch.ptr + ch.size - r, o_.upper_alignment);
    if (s > ch.ptr) {
      // [ptr, s) stays free with the source tag (gap stays gap, UP hole stays UP).
      split(c, s - ch.ptr);
      std::int32_t a = chunks_[c].next;
      remove_free(a);
      std::string ignore;  // the prefix takes the slot its source just left
      insert_free(c, &ignore);
      c = a;
    }
    chunks_[c].tag = kUp;
    if (chunks_[c].size > r) split(c, r);  // suffix: an UP hole
    chunks_[c].in_use = true;
    return c;
  }

  bool extend(Bytes r, std::string* fatal) {
    Bytes available = round_down(o_.limit - s_.pool_bytes, kMinAllocationSize);  // wraps as size_t does
    if (r > available) return false;
    bool increased = false;
    while (r > curr_region_bytes_) {
      curr_region_bytes_ *= 2;
      increased = true;
    }
    Bytes bytes = std::min(curr_region_bytes_, available);
    auto grant = dev_->allocate(bytes);
    while (!grant) {
      Bytes back = rounded_bytes(static_cast<Bytes>(static_cast<float>(bytes) * 0.9f));
      if (back >= bytes) back = bytes - kMinAllocationSize;
      bytes = back;
      if (bytes < r) return false;
      grant = dev_->allocate(bytes);
    }
    if (!increased) curr_region_bytes_ *= 2;
    Bytes received = o_.vmm_padding ? grant->bytes : bytes;
    s_.pool_bytes += received;
    s_.peak_pool_bytes = std::max(s_.peak_pool_bytes, s_.pool_bytes);
    std::int32_t c = acquire_slot(chunks_, spare_);
    Chunk& ch = chunks_[c];
    ch.ptr = grant->addr;
    ch.size = received;
    ch.tag = o_.spatial ? kGap : kLow;
    ch.region = static_cast<std::int32_t>(regions_.size());
    regions_.push_back(Region{grant->addr, received, c, 0, true});
    insert_free(c, fatal);
    return fatal->empty();
  }

  bool deallocate_free_regions(Bytes r) {
    if (!o_.garbage_collection) return false;
    Bytes total_free = 0;
    for (const auto& rg : regions_)
      if (rg.live && rg.in_use == 0) total_free += rg.size;
    if (total_free == 0) return false;
    if (r > o_.limit - s_.pool_bytes + total_free) return false;
    for (auto& rg : regions_) {
      if (!rg.live || rg.in_use != 0) continue;
      for (std::int32_t c = rg.first; c != kNil;) {
        std::int32_t next = chunks_[c].next;
        remove_free(c);
        spare_.push_back(c);
        c = next;
      }
      dev_->release(rg.base);
      s_.pool_bytes -= rg.size;
      rg.live = false;
      rg.first = kNil;
    }
    ++gc_runs_;
    return true;
  }

  BfcOptions o_;
  DeviceMemory* dev_;
  std::vector<Chunk> chunks_;
  std::vector<std::int32_t> spare_;
  std::vector<Region> regions_;
  SizeIndex low_, up_;
  std::int32_t gap_ = kNil;
  Bytes curr_region_bytes_ = 0;
  Stats s_;

 public:
  std::uint64_t gc_runs_ = 0;
};

class XlaBfcPolicy : public AllocatorPolicy {
 public:
  XlaBfcPolicy(BfcOptions main, std::optional<BfcOptions> collective, DeviceMemory* dev)
      : main_(std::move(main), dev), collective_opts_(std::move(collective)), dev_(dev) {}

  Placement allocate(const AllocRequest& req) override {
    Placement p;
    if (req.size == 0) {  // the PJRT adapter returns a null buffer without calling BFC
      p.ok = true;
      return p;
    }
    bool coll = req.space == Space::kCollective;
    Bfc& b = coll ? collective_bfc() : main_;
    bool upper = coll && main_.options().spatial;
    std::int32_t c = b.allocate(req.size, upper, &fatal_);
    if (c == kNil) return p;
    if (req.handle >= owner_.size()) owner_.resize(req.handle + 1, {nullptr, kNil});
    owner_[req.handle] = {&b, c};
    const auto& ch = b.chunk(c);
    p.ok = p.has_addr = true;
    p.addr = ch.ptr;
    p.block = ch.size;
    p.region = ch.region;
    p.region_offset = ch.ptr - b.region(ch.region).base;
    return p;
  }

  void release(Handle h) override {
    auto [b, c] = owner_[h];
    owner_[h] = {nullptr, kNil};
    if (b) b->free(c, &fatal_);
  }

  Usage usage() const override {
    Usage u;
    for (const Bfc* b : std::initializer_list<const Bfc*>{&main_, collective_.get()}) {
      if (!b) continue;
      const auto& s = b->stats();
      u.allocated += s.bytes_in_use;
      u.reserved += s.pool_bytes;
      u.largest_free = std::max(u.largest_free, b->largest_free());
      u.available += s.pool_bytes - s.bytes_in_use;
      u.largest_available = std::max(u.largest_available, b->largest_free());
    }
    Bytes fresh = main_.obtainable();
    u.available += fresh;
    u.largest_available = std::max(u.largest_available, fresh);
    return u;
  }

  Bytes rounded_size(const AllocRequest& req) const override { return rounded_bytes(req.size); }

  nlohmann::json stats() const override {
    nlohmann::json j = main_.stats_json();
    if (collective_) j["collective"] = collective_->stats_json();
    return j;
  }

  nlohmann::json extra_report() const override {
    nlohmann::json j = {{"bfc", {{"name", main_.options().name},
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
    return b->dump(req.size, coll && main_.options().spatial) +
           fmt::format("    JAX raises: RESOURCE_EXHAUSTED: Out of memory while trying to allocate {} bytes.\n", req.size);
  }

  std::string_view fatal_error() const override { return fatal_; }

 private:
  Bfc& collective_bfc() {
    if (!collective_opts_) return main_;  // spatial: the pool's upper end
    if (!collective_) collective_ = std::make_unique<Bfc>(*collective_opts_, dev_);
    return *collective_;
  }

  Bfc main_;
  std::optional<BfcOptions> collective_opts_;
  std::unique_ptr<Bfc> collective_;
  DeviceMemory* dev_;
  std::vector<std::pair<Bfc*, std::int32_t>> owner_;
  std::string fatal_;
};

std::unique_ptr<AllocatorPolicy> make_xla_bfc(ConfigReader& cfg, const PolicyContext& ctx) {
  JaxlibBehaviour jb = jaxlib_behaviour(cfg.text("jaxlib", kNewestJaxlib), "jaxlib");
  bool preallocate = cfg.flag("preallocate", true);
  double fraction = cfg.number("mem_fraction", 0.75);
  if (!(fraction > 0) || !std::isfinite(fraction)) throw InputError("policy xla-bfc: mem_fraction: must be > 0");
  bool spatial_flag = cfg.flag("spatial_partitioning", jb.spatial_default);
  bool gc = cfg.flag("garbage_collection", false);
  Bytes collective_size = cfg.size("collective_memory_size", 0);
  Bytes upper_alignment = cfg.size("upper_alignment", 2 * kMiB);
  if (upper_alignment < kMinAllocationSize || (upper_alignment & (upper_alignment - 1)))
    throw InputError("policy xla-bfc: upper_alignment: must be a power of two >= 256");
  Bytes total = jb.limit_from_free ? ctx.space->usable() : ctx.space->capacity;
  Bytes limit = xla_memory_limit(total, fraction, jb);
  if (cfg.has("memory_limit")) {  // gpu_system_memory_size: a byte limit instead of the fraction
    limit = cfg.size("memory_limit", 0);
    if (jb.round_limit) limit = round_up(limit, 2 * kMiB);
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
  cfg.record("resolved_spatial_partitioning", main.spatial);
  std::optional<BfcOptions> coll;
  if (!main.spatial) {  // classic: collective memory gets its own BFC (xla-bfc.md §4)
    BfcOptions c = main;
    c.name = fmt::format("GPU_collectivememory_{}_bfc", ctx.device_index);
    c.spatial = false;
    if (collective_size) {
      c.allow_growth = false;
      c.limit = jb.round_limit ? round_up(collective_size, 2 * kMiB) : collective_size;
    } else {
      c.allow_growth = true;
      c.limit = static_cast<Bytes>(static_cast<double>(total) * (1.0 - pjrt_fraction(fraction)));
      if (jb.round_limit) c.limit = round_up(c.limit, 2 * kMiB);
    }
    coll = c;
  }
  return std::make_unique<XlaBfcPolicy>(main, coll, ctx.device);
}

}  // namespace

void register_xla_bfc(Registry& r) {
  r.add({"xla-bfc",
         "XLA/TSL BFC allocator as JAX configures it on GPU (preallocate, mem_fraction, jaxlib, "
         "spatial_partitioning, garbage_collection, memory_limit, collective_memory_size)",
         make_xla_bfc});
}

}  // namespace fragsim

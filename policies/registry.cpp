#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/text.h"

namespace fragsim {

const PolicyInfo& Registry::find(const std::string& name, std::string_view what) const {
  for (const auto& i : infos_)
    if (i.name == name) return i;
  std::vector<std::string_view> names;
  for (const auto& i : infos_) names.push_back(i.name);
  throw InputError(fmt::format("{}: unknown policy '{}'{} (valid: {})", what, name, did_you_mean(name, names),
                               fmt::join(names, ", ")));
}

const FrameworkInfo* Registry::framework_of_variable(const std::string& variable, const Recording& recording) const {
  const FrameworkInfo* first = nullptr;
  for (const auto& f : frameworks_)
    if (std::find(f.variables.begin(), f.variables.end(), variable) != f.variables.end()) {
      if (recording.framework_of() == f.id) return &f;
      if (!first) first = &f;
    }
  return first;
}

const FrameworkInfo* Registry::framework(const std::string& name) const {
  for (const auto& f : frameworks_)
    if (f.name == name) return &f;
  return nullptr;
}

const DefaultFor& Registry::default_for(const Recording& recording, const std::string& hardware_kind) const {
  const DefaultFor* best = nullptr;
  int best_rank = -1;
  for (const auto& i : infos_)
    for (const auto& d : i.defaults) {
      if (d.source && *d.source != recording.source) continue;
      if (!d.hardware_kind.empty() && d.hardware_kind != hardware_kind) continue;
      int rank = (d.source ? 2 : 0) + (d.hardware_kind.empty() ? 0 : 1);
      if (rank > best_rank) best = &d, best_rank = rank;
    }
  FRAGSIM_CHECK(best, "no policy declares itself the default for a plain trace");
  return *best;
}

const PolicyInfo& Registry::lower_bound() const {
  for (const auto& i : infos_)
    if (i.lower_bound) return i;
  FRAGSIM_CHECK(false, "no policy declares itself the lower bound");
  return infos_.front();
}

const FractionKnob::Spelling& FractionKnob::spelling(Framework f) const {
  FRAGSIM_CHECK(!spellings.empty(), "a memory fraction without a spelling");
  for (const auto& s : spellings)
    if (s.framework == f) return s;
  return spellings.front();
}

std::string FractionKnob::setting(double f, Framework fw) const {
  const Spelling& s = spelling(fw);
  if (s.env) return s.name + "=" + fraction_text(f);
  return fmt::format(fmt::runtime(s.call), fraction_number(f));
}

std::string FractionKnob::argument(double f, Framework fw) const {
  return by_env(fw) ? spelling(fw).name + "=" + fraction_text(f) : key + "=" + fraction_number(f);
}

void register_builtin_policies(Registry& r) {
  register_ideal(r);
  register_best_fit(r);
  register_first_fit(r);
  register_xla_bfc(r);
  register_platform(r);
  register_cuda_async(r);
  register_torch_caching(r);
  register_tpu_padded(r);
  register_static_heap(r);
  register_tpu_runtime(r);
  register_jax_settings(r);
  register_tensorflow_settings(r);
  register_torch_settings(r);
}

}  // namespace fragsim

namespace fragsim {

namespace {

// Request k's release under the least holding the recording proves (prior_requests_of_regions): just
// after the last later request of its pool that would have been served from it, or at once when none
// would. A later request it could serve needs it still in use, else the allocator would have reused
// its memory instead of obtaining a region of its own; one it could not serve proves nothing about
// it. Region k, free, could serve the requests of its pool of sizes least[k] to size[k] (least 0:
// any that fits; a recording's allocator may refuse to split a large block for a small request).
using PoolKey = std::pair<std::uint64_t, std::int64_t>;  // (pool_of, stream)
std::vector<size_t> least_releases(std::span<const Bytes> size, std::span<const Bytes> least,
                                   std::span<const PoolKey> pool) {
  const size_t n = size.size();
  // By pool, then size: the last index among a pool's requests of sizes least[k] to size[k] is a
  // range maximum over that pool's requests sorted by size (a sparse table per pool).
  std::vector<size_t> by(n);
  for (size_t k = 0; k < n; ++k) by[k] = k;
  auto key = [&](size_t k) { return std::pair(pool[k], size[k]); };
  std::sort(by.begin(), by.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<size_t> release(n);
  for (size_t a = 0; a < n;) {
    size_t b = a;
    while (b < n && pool[by[b]] == pool[by[a]]) ++b;
    std::vector<std::vector<size_t>> top{
        std::vector<size_t>(by.begin() + static_cast<std::ptrdiff_t>(a), by.begin() + static_cast<std::ptrdiff_t>(b))};
    for (size_t w = 1; 2 * w <= b - a; w *= 2) {
      const std::vector<size_t>& prev = top.back();
      std::vector<size_t> next(prev.size() - w);
      for (size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + w]);
      top.push_back(std::move(next));
    }
    for (size_t i = a; i < b; ++i) {
      const size_t k = by[i];
      // The group's requests of sizes least[k] to size[k]: positions [lo, hi).
      const auto first = by.begin() + static_cast<std::ptrdiff_t>(a), end = by.begin() + static_cast<std::ptrdiff_t>(b);
      const size_t lo = static_cast<size_t>(
          std::lower_bound(first, end, least[k], [&](size_t j, Bytes s) { return size[j] < s; }) - first);
      const size_t hi = static_cast<size_t>(
          std::upper_bound(first, end, size[k], [&](Bytes s, size_t j) { return s < size[j]; }) - first);
      size_t last = k;
      if (lo < hi) {
        size_t level = 0;
        while ((size_t{2} << level) <= hi - lo) ++level;
        last = std::max({last, top[level][lo], top[level][hi - (size_t{1} << level)]});
      }
      release[k] = last + 1;
    }
    a = b;
  }
  return release;
}

// Region by region in `order`, the history of each: the gaps between its live blocks are requests
// made and released together, each live block is the block itself at its place, never released.
// The recording shows only where the live blocks lie, so the region's other memory is read as the
// gaps' requests: the live blocks count as held while the history runs (a mid-run recording's
// live blocks are mostly the long-lived ones: weights, optimizer state, caches), and a policy that
// lays memory out as the recording did keeps the holes between them.
struct Pieces {
  std::vector<PriorRequest> out;
  std::vector<size_t> owner;  // each gap: its region's place in `order` (SIZE_MAX: a live block)
  std::vector<size_t> first;  // each region's first piece, and the count at the end
};
Pieces region_pieces(std::span<const PriorRegion> regions, std::span<const size_t> order, std::span<const Bytes> size) {
  const size_t n = order.size();
  Pieces p;
  p.first.assign(n + 1, 0);
  for (size_t k = 0; k < n; ++k) {
    p.first[k] = p.out.size();
    const PriorRegion& r = regions[order[k]];
    // A gap of at most 1 MiB is left out: an allocator keeps such a tail in the block before it
    // (PyTorch's large pool splits a block only when more than 1 MiB would remain), so it was no
    // request of its own; as one it would go to another pool.
    auto gap = [&](Bytes bytes) {
      if (bytes <= (Bytes{1} << 20) && bytes != size[k]) return;
      p.out.push_back(
          {.size = bytes, .stream = r.stream, .released_before = SIZE_MAX, .live = SIZE_MAX, .aggregate = r.aggregate});
      p.owner.push_back(k);
    };
    if (r.live.empty() || size[k] != r.size) {  // no blocks, or a request that is not the region's memory
      gap(size[k]);
      p.out.back().aggregate = holds_aggregate(r);
      continue;
    }
    for_each_region_piece(
        r, true, gap,
        [&](const PriorBlock& b) {
          p.out.push_back({.size = b.size, .stream = r.stream, .released_before = SIZE_MAX, .live = b.id});
          p.owner.push_back(SIZE_MAX);
        },
        [](Bytes bytes) { return bytes; });
  }
  p.first[n] = p.out.size();
  return p;
}

// The most bytes held at once by a history (live blocks are never released).
Bytes held_peak(std::span<const PriorRequest> h) {
  std::vector<Bytes> drop(h.size() + 1, 0);
  Bytes held = 0, peak = 0;
  for (size_t k = 0; k < h.size(); ++k) {
    held -= drop[k];
    held += h[k].size;
    peak = std::max(peak, held);
    if (h[k].live == SIZE_MAX) drop[std::min(h[k].released_before, h.size())] += h[k].size;
  }
  return peak;
}

}  // namespace

std::vector<PriorRequest> prior_requests_of_regions(std::span<const PriorRegion> regions, PriorHistory history,
                                                    bool held_together,
                                                    const std::function<Bytes(const PriorRegion&)>& size_of,
                                                    const std::function<std::uint64_t(const PriorRegion&)>& pool_of,
                                                    const std::function<Bytes(const PriorRegion&)>& least_served) {
  std::vector<PriorRequest> out;
  if (history == PriorHistory::kLeast) return out;
  if (history == PriorHistory::kMost || held_together) {
    for (const PriorRegion& r : regions)
      out.push_back({.size = size_of(r),
                     .stream = r.stream,
                     .released_before = SIZE_MAX,
                     .live = SIZE_MAX,
                     .aggregate = holds_aggregate(r)});
    return out;
  }
  // The order the regions were obtained in is what the recording cannot tell; address order is a
  // weak guide (a CUDA driver hands out addresses downwards as often as upwards). Of the two address
  // orders, the one whose history holds fewer bytes at once: the least demand the recording
  // proves, so that memory reserved only because the cache could not be reused is not read as a
  // past peak, while every region the allocator could only have obtained beside the others in use
  // still counts.
  const size_t n = regions.size();
  std::vector<PriorRequest> best;
  Bytes best_peak = 0;
  for (int o = 0; o < 2; ++o) {
    std::vector<size_t> order(n);
    std::vector<Bytes> size(n);
    std::vector<Bytes> least(n);
    std::vector<PoolKey> pool(n);
    for (size_t k = 0; k < n; ++k) {
      order[k] = o ? n - 1 - k : k;
      const PriorRegion& r = regions[order[k]];
      size[k] = size_of(r);
      least[k] = least_served ? std::min(least_served(r), size[k]) : 0;
      pool[k] = {pool_of ? pool_of(r) : 0, r.stream};
    }
    Pieces p = region_pieces(regions, order, size);
    const std::vector<size_t> release = least_releases(size, least, pool);
    for (size_t i = 0; i < p.out.size(); ++i)
      if (p.owner[i] != SIZE_MAX && release[p.owner[i]] < n) p.out[i].released_before = p.first[release[p.owner[i]]];
    const Bytes peak = held_peak(p.out);
    if (o == 0 || peak < best_peak) best = std::move(p.out), best_peak = peak;
  }
  return best;
}

std::vector<PriorRequest> AllocatorPolicy::prior_requests(std::span<const PriorRegion> regions,
                                                          PriorHistory history) const {
  return prior_requests_of_regions(
      regions, history, false, [](const PriorRegion& r) { return r.size; }, nullptr, nullptr);
}

}  // namespace fragsim

#include "traces/recorded_layout.h"

#include <algorithm>

namespace fragsim {

namespace {
constexpr Bytes kChunkUnit = 256;  // BFC's kMinAllocationSize: every chunk is a multiple of it
}

void RecordedLayout::occupied(Addr a, Bytes bytes) {
  Bytes n = round_up_sat(std::max<Bytes>(bytes, 1), kChunkUnit);
  std::uint64_t lo = a.value(), hi = n > ~lo ? ~std::uint64_t{0} : lo + n;
  touched_.add(lo, hi);
}

std::optional<SingleRegion> RecordedLayout::single_region(Bytes unknown, Bytes limit,
                                                          std::vector<Bytes> unplaced) const {
  if (touched_.empty()) return std::nullopt;
  const auto& r = touched_.ranges();
  std::uint64_t lowest = r.begin()->first, highest = std::prev(r.end())->second, prev_hi = 0;
  std::vector<Extent> gaps;
  for (const auto& [lo, hi] : r) {
    if (prev_hi && lo > prev_hi) gaps.push_back({Addr(prev_hi), lo - prev_hi});
    prev_hi = hi;
  }
  Bytes total = 0;
  for (const Extent& g : gaps) total += g.bytes;
  std::vector<bool> live(gaps.size(), true);
  if (total > unknown) {  // more gaps than memory to fill them: not one region, or addresses removed
    if (unplaced.empty()) return std::nullopt;
    for (Bytes& u : unplaced) u = round_up_sat(std::max<Bytes>(u, 1), kChunkUnit);
    std::sort(unplaced.begin(), unplaced.end());
    // Gaps exactly as wide as an allocation without an address are where such ones went, the
    // widest first; then, while the gaps still hold more than the unknown bytes, the highest.
    std::vector<size_t> order(gaps.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return gaps[x].bytes > gaps[y].bytes; });
    for (size_t i : order) {
      if (total <= unknown) break;
      auto it = std::lower_bound(unplaced.begin(), unplaced.end(), gaps[i].bytes);
      if (it == unplaced.end() || *it != gaps[i].bytes) continue;
      unplaced.erase(it);
      live[i] = false;
      total -= gaps[i].bytes;
    }
    for (size_t i = gaps.size(); i-- > 0 && total > unknown;)
      if (live[i]) live[i] = false, total -= gaps[i].bytes;
  }
  SingleRegion s;
  for (size_t i = 0; i < gaps.size(); ++i)
    if (live[i]) s.live.push_back(gaps[i]), s.in_gaps += gaps[i].bytes;
  s.below = unknown - s.in_gaps;
  if (s.below > lowest || highest - lowest > limit || s.below > limit - (highest - lowest)) return std::nullopt;
  s.base = Addr(lowest - s.below);
  if (s.below) s.live.insert(s.live.begin(), {s.base, s.below});
  return s;
}

}  // namespace fragsim

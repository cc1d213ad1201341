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
  const bool partial = !unplaced.empty();
  for (Bytes& u : unplaced) u = round_up_sat(std::max<Bytes>(u, 1), kChunkUnit);
  std::sort(unplaced.begin(), unplaced.end());
  SingleRegion s;
  for (const Extent& g : gaps) {
    if (auto it = std::lower_bound(unplaced.begin(), unplaced.end(), g.bytes);
        it != unplaced.end() && *it == g.bytes) {  // where an allocation without an address went
      unplaced.erase(it);
      continue;
    }
    if (s.in_gaps + g.bytes > unknown) {
      if (!partial) return std::nullopt;  // gaps that are not memory: several regions
      break;                              // the rest: memory the allocations without an address used
    }
    s.live.push_back(g);
    s.in_gaps += g.bytes;
  }
  s.below = unknown - s.in_gaps;
  if (s.below > lowest || highest - lowest > limit || s.below > limit - (highest - lowest)) return std::nullopt;
  s.base = Addr(lowest - s.below);
  if (s.below) s.live.insert(s.live.begin(), {s.base, s.below});
  return s;
}

}  // namespace fragsim

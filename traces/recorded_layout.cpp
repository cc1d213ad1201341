#include "traces/recorded_layout.h"

#include <algorithm>

namespace fragsim {

void RecordedLayout::occupied(Addr a, Bytes bytes) {
  Bytes n = bfc_chunk_of(bytes);
  std::uint64_t lo = a.value(), hi = n > ~lo ? ~std::uint64_t{0} : lo + n;
  touched_.add(lo, hi);
}

std::optional<SingleRegion> RecordedLayout::single_region(Bytes unknown, Bytes limit,
                                                          std::vector<Bytes> unplaced) const {
  if (touched_.empty()) return std::nullopt;
  const auto& r = touched_.ranges();
  std::uint64_t lowest = r.begin()->first, highest = std::prev(r.end())->second;
  std::vector<Extent> gaps;
  for (const auto& [lo, hi] : touched_.holes(lowest, highest)) gaps.push_back({Addr(lo), hi - lo});
  Bytes total = 0;
  for (const Extent& g : gaps) total += g.bytes;
  std::vector<bool> live(gaps.size(), true);
  if (!unplaced.empty()) {
    // Allocations without an address went somewhere no stated buffer was: a gap one of them fits
    // in may be theirs (several of them over time make gaps of any width above the smallest), so
    // only the gaps none of them fits in are proof of memory live before the recording.
    Bytes smallest = ~Bytes{0};
    for (Bytes u : unplaced) smallest = std::min(smallest, bfc_chunk_of(u));
    for (size_t i = 0; i < gaps.size(); ++i)
      if (gaps[i].bytes >= smallest) live[i] = false, total -= gaps[i].bytes;
  }
  if (total > unknown) {  // more gaps than memory to fill them: not one region
    if (unplaced.empty()) return std::nullopt;
    for (size_t i = gaps.size(); i-- > 0 && total > unknown;)  // addresses removed: keep the lowest
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

std::vector<std::vector<Extent>> place_in_extents(const std::vector<Extent>& live, const std::vector<Bytes>& sizes) {
  std::vector<Extent> pieces = live;  // what is still free of each extent, ascending
  std::vector<std::vector<Extent>> out(sizes.size());
  std::vector<size_t> split;  // buffers no piece held whole
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Bytes n = bfc_chunk_of(sizes[i]);
    auto it = std::find_if(pieces.begin(), pieces.end(), [&](const Extent& p) { return p.bytes >= n; });
    if (it == pieces.end()) {
      split.push_back(i);
      continue;
    }
    out[i].push_back({it->addr, n});
    it->addr = it->addr + n;
    it->bytes -= n;
  }
  Bytes left = 0;
  for (const Extent& p : pieces) left += p.bytes;
  for (size_t i : split) {
    Bytes n = bfc_chunk_of(sizes[i]);
    if (n > left) continue;  // more than the layout holds: placed by the policy
    left -= n;
    for (Extent& p : pieces) {
      if (!n) break;
      if (!p.bytes) continue;
      const Bytes take = std::min(n, p.bytes);
      out[i].push_back({p.addr, take});
      p.addr = p.addr + take;
      p.bytes -= take;
      n -= take;
    }
  }
  return out;
}

}  // namespace fragsim

#include "policies/plan_greedy.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "policies/busy_index.h"
#include "policies/interval_tree.h"
#include "policies/static_heap.h"

namespace fragsim {

namespace {

using Chunk = std::pair<Bytes, Bytes>;  // [lo, hi) offsets

// The offset for a buffer of `size` among `busy` (sorted by lo): the lowest or smallest gap.
Bytes fit_among(const std::vector<Chunk>& busy, Bytes size, PlanFit fit) {
  Bytes best = 0, best_gap = kTooLarge, cur = 0;
  bool found = false;
  for (const auto& [lo, hi] : busy) {
    if (lo > cur && lo - cur >= size) {
      if (fit == PlanFit::kFirst) return cur;
      if (lo - cur < best_gap) best_gap = lo - cur, best = cur, found = true;
    }
    cur = std::max(cur, hi);
  }
  return found ? best : cur;
}

}  // namespace

Bytes place_in_order(const std::vector<PlanBuffer>& buffers, const std::vector<std::uint32_t>& order, PlanFit fit,
                     std::vector<Bytes>& offsets, Bytes give_up_above) {
  std::vector<std::uint64_t> starts, ends;
  starts.reserve(buffers.size());
  ends.reserve(buffers.size());
  for (const PlanBuffer& b : buffers) {
    starts.push_back(b.lower);
    ends.push_back(b.upper > b.lower ? b.upper - 1 : b.lower);  // closed [lower, upper − 1]
  }
  IntervalTree<Chunk> placed(starts, ends);
  // The gaps come from a BusyIndex where it can say (as static-heap's do), else from a scan of the
  // buffers that live with this one (the index holds no empty chunk: from the first on, the scan).
  std::optional<BusyIndex> index(std::in_place, starts, ends, kHeapTimeBlock);
  offsets.resize(buffers.size());
  std::vector<Chunk> busy, scratch;
  Bytes height = 0;
  for (std::uint32_t i : order) {
    const PlanBuffer& b = buffers[i];
    if (!b.size) {
      offsets[i] = 0;
      continue;
    }
    Bytes off;
    if (!index || !(fit == PlanFit::kFirst ? index->first_fit(i, b.size, &off) : index->best_fit(i, b.size, &off))) {
      busy.clear();
      placed.overlapping(b.lower, ends[i], [&](const Chunk& c) { busy.push_back(c); });
      sort_by_offset(busy, scratch, [](const Chunk& c) { return c.first; });
      off = fit_among(busy, b.size, fit);
    }
    const Bytes top = sat_add(off, b.size);
    offsets[i] = off;
    placed.commit(i, {off, top});
    if (index) {
      if (top > off)
        index->commit(i, off, top);
      else
        index.reset();
    }
    height = std::max(height, top);
    if (height > give_up_above) return height;
  }
  return height;
}

std::vector<Bytes> load_during_life(const std::vector<PlanBuffer>& buffers) {
  // Live bytes per elementary interval of time (between consecutive distinct ends), then a range
  // maximum per buffer from a sparse table.
  std::vector<std::uint64_t> pts;
  for (const PlanBuffer& b : buffers)
    if (b.size) pts.push_back(b.lower), pts.push_back(b.upper);
  std::sort(pts.begin(), pts.end());
  pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
  std::vector<Bytes> out(buffers.size(), 0);
  if (pts.size() < 2) return out;
  auto at = [&](std::uint64_t t) {
    return static_cast<size_t>(std::lower_bound(pts.begin(), pts.end(), t) - pts.begin());
  };
  const size_t m = pts.size() - 1;
  std::vector<std::int64_t> delta(m + 1, 0);  // live bytes fit in 63 bits for any instance a plan can hold
  for (const PlanBuffer& b : buffers)
    if (b.size)
      delta[at(b.lower)] += static_cast<std::int64_t>(b.size), delta[at(b.upper)] -= static_cast<std::int64_t>(b.size);
  std::vector<std::vector<Bytes>> table(1, std::vector<Bytes>(m));
  std::int64_t live = 0;
  for (size_t s = 0; s < m; ++s) table[0][s] = static_cast<Bytes>(live += delta[s]);
  for (size_t k = 1; (size_t(1) << k) <= m; ++k) {
    table.emplace_back(m - (size_t(1) << k) + 1);
    for (size_t s = 0; s + (size_t(1) << k) <= m; ++s)
      table[k][s] = std::max(table[k - 1][s], table[k - 1][s + (size_t(1) << (k - 1))]);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!buffers[i].size) continue;
    const size_t lo = at(buffers[i].lower), hi = at(buffers[i].upper);  // sections [lo, hi)
    const size_t k = static_cast<size_t>(std::bit_width(hi - lo) - 1);
    out[i] = std::max(table[k][lo], table[k][hi - (size_t(1) << k)]);
  }
  return out;
}

std::vector<std::uint32_t> greedy_order(const std::vector<PlanBuffer>& buffers, const std::vector<Bytes>& load,
                                        PlanOrder order) {
  std::vector<std::uint32_t> v(buffers.size());
  std::iota(v.begin(), v.end(), 0u);
  auto life = [&](std::uint32_t i) { return buffers[i].upper - buffers[i].lower; };
  auto area = [&](std::uint32_t i) {
    const Bytes l = life(i), s = buffers[i].size;
    return l && s > kTooLarge / l ? kTooLarge : s * l;
  };
  auto key = [&](std::uint32_t i) -> std::array<Bytes, 3> {
    switch (order) {
      case PlanOrder::kSize:
        return {buffers[i].size, life(i), 0};
      case PlanOrder::kArea:
        return {area(i), buffers[i].size, 0};
      case PlanOrder::kLife:
        return {life(i), buffers[i].size, 0};
      case PlanOrder::kLoad:
        return {load[i], area(i), buffers[i].size};
    }
    return {};
  };
  std::vector<std::array<Bytes, 3>> keys(buffers.size());
  for (std::uint32_t i = 0; i < buffers.size(); ++i) keys[i] = key(i);
  std::sort(v.begin(), v.end(),
            [&](std::uint32_t a, std::uint32_t b) { return keys[a] != keys[b] ? keys[a] > keys[b] : a < b; });
  return v;
}

}  // namespace fragsim

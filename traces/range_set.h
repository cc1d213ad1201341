// RangeSet: half-open integer ranges [lo, hi), kept disjoint and merged (touching ranges join).
// Used for what a recording shows of address space: ranges mapped before a snapshot's trace
// began (torch_snapshot.cpp), ranges a capture's buffers occupied (recorded_layout.h).
// Invariant: ranges() is ordered by lo, and for consecutive ranges a.hi < b.lo.
// Cost: add/remove O(log n + ranges merged or cut).
#pragma once
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

namespace fragsim {

class RangeSet {
 public:
  void add(std::uint64_t lo, std::uint64_t hi) {
    if (lo >= hi) return;
    auto it = r_.upper_bound(lo);
    if (it != r_.begin() && std::prev(it)->second >= lo) --it;
    while (it != r_.end() && it->first <= hi) {
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
      it = r_.erase(it);
    }
    r_.emplace(lo, hi);
  }
  void remove(std::uint64_t lo, std::uint64_t hi) {
    if (lo >= hi) return;
    auto it = r_.upper_bound(lo);
    if (it != r_.begin()) --it;
    while (it != r_.end() && it->first < hi) {
      auto [a, b] = *it;
      if (b <= lo) {
        ++it;
        continue;
      }
      it = r_.erase(it);
      if (a < lo) r_.emplace(a, lo);
      if (b > hi) r_.emplace(hi, b);
    }
  }
  // The parts of [lo, hi) no range covers that lie below or between ranges (none above the last
  // range that reaches into it), ascending.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> holes(std::uint64_t lo, std::uint64_t hi) const {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    auto it = r_.upper_bound(lo);
    if (it != r_.begin()) --it;  // a range that starts below lo may reach past it
    for (std::uint64_t at = lo; it != r_.end() && it->first < hi; ++it) {
      if (it->second <= at) continue;
      if (it->first > at) out.emplace_back(at, it->first);
      at = std::min(it->second, hi);
    }
    return out;
  }
  const std::map<std::uint64_t, std::uint64_t>& ranges() const { return r_; }
  bool empty() const { return r_.empty(); }

 private:
  std::map<std::uint64_t, std::uint64_t> r_;  // lo → hi
};

}  // namespace fragsim

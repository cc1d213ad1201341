// IntervalTree: the time intervals [start, end] (closed) of every buffer a plan will place, known
// in advance, of which some are *committed* (placed) with a payload; answers "every committed
// interval that overlaps [lo, hi]" — what XLA's HeapSimulator keeps (BufferIntervalTree) to find
// the placed buffers that live at the same time as the one being placed.
//
// Because an offline plan knows every interval before it places any, the tree is static: the
// intervals sorted by start are the leaves of an array-laid max-segment tree whose nodes hold the
// latest end among their committed leaves. Commit is a leaf update, O(log n); a query takes the
// leaves that start before lo and descends only into nodes whose latest end is ≥ lo (the leaves
// that start within [lo, hi] are scanned):
// O((k + 1) log n) for k answers, over contiguous arrays (the top levels stay in cache), whatever
// order intervals are committed in. Nodes also hold the earliest end among their leaves (an
// uncommitted leaf counts as ended before time 0), so a node whose leaves are all committed and
// all end at or after lo hands its payloads out in one loop: when thousands of buffers live at
// once, most answers come from such runs. Answers come in (start, index) order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace fragsim {

template <class T>
class IntervalTree {
 public:
  // Interval i is [starts[i], ends[i]].
  IntervalTree(const std::vector<std::uint64_t>& starts, const std::vector<std::uint64_t>& ends) : ends_(ends) {
    size_t n = starts.size();
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return starts[a] < starts[b]; });
    rank_.resize(n);
    starts_.resize(n);
    for (size_t r = 0; r < n; ++r) {
      rank_[order[r]] = static_cast<std::uint32_t>(r);
      starts_[r] = starts[order[r]];
    }
    while (leaves_ < n) leaves_ *= 2;
    latest_.assign(2 * leaves_, 0);
    earliest_.assign(2 * leaves_, 0);
    for (size_t p = leaves_ + n; p < 2 * leaves_; ++p) earliest_[p] = UINT64_MAX;  // no leaf: never the minimum
    for (size_t p = leaves_ - 1; p; --p) earliest_[p] = std::min(earliest_[2 * p], earliest_[2 * p + 1]);
    values_.resize(n);
  }
  // Commits interval i with its payload (pre: not committed yet).
  void commit(size_t i, const T& value) {
    size_t r = rank_[i];
    values_[r] = value;
    size_t p = r + leaves_;
    latest_[p] = earliest_[p] = ends_[i] + 1;  // 0 = nothing committed below
    for (p /= 2; p; p /= 2) {
      latest_[p] = std::max(latest_[2 * p], latest_[2 * p + 1]);
      earliest_[p] = std::min(earliest_[2 * p], earliest_[2 * p + 1]);
    }
  }
  // Calls f(value) for every committed interval with start ≤ hi and end ≥ lo.
  template <class F>
  void overlapping(std::uint64_t lo, std::uint64_t hi, F f) const {
    // Intervals that start before lo overlap when they end at or after it: the tree finds them.
    // Those that start within [lo, hi] all overlap: a scan of their leaves keeps the committed
    // ones, in sequential memory (each pair of overlapping intervals is scanned at most once over
    // a whole plan, from the one that starts first, so the scans cost no more than the answers).
    size_t first = static_cast<size_t>(std::lower_bound(starts_.begin(), starts_.end(), lo) - starts_.begin());
    size_t prefix = static_cast<size_t>(std::upper_bound(starts_.begin() + first, starts_.end(), hi) - starts_.begin());
    if (first) visit(1, 0, leaves_, first, lo + 1, f);
    for (size_t leaf = first; leaf < prefix; ++leaf)
      if (latest_[leaves_ + leaf]) f(values_[leaf]);
  }
  size_t size() const { return starts_.size(); }

 private:
  template <class F>
  void visit(size_t node, size_t from, size_t to, size_t prefix, std::uint64_t min_latest, F& f) const {
    if (from >= prefix || latest_[node] < min_latest) return;
    if (to <= prefix && earliest_[node] >= min_latest) {  // every leaf below is an answer
      for (size_t leaf = from; leaf < to && leaf < starts_.size(); ++leaf) f(values_[leaf]);
      return;
    }
    if (node >= leaves_) {
      f(values_[from]);
      return;
    }
    size_t mid = (from + to) / 2;
    visit(2 * node, from, mid, prefix, min_latest, f);
    visit(2 * node + 1, mid, to, prefix, min_latest, f);
  }

  std::vector<std::uint64_t> ends_;      // by interval index
  std::vector<std::uint32_t> rank_;      // interval index → leaf
  std::vector<std::uint64_t> starts_;    // by leaf
  std::vector<T> values_;                // by leaf
  std::vector<std::uint64_t> latest_;    // segment tree: latest end + 1 of committed leaves below
  std::vector<std::uint64_t> earliest_;  // earliest end + 1 of the leaves below (0: one is uncommitted)
  size_t leaves_ = 1;
};

}  // namespace fragsim

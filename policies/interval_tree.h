// IntervalTree: closed time intervals [start, end] with a payload, answering "every interval that
// overlaps [lo, hi]" in O(log n + k) — what XLA's HeapSimulator keeps (BufferIntervalTree) to
// find the buffers that live at the same time as the one being placed.
//
// A treap (nodes in one vector, addressed by index) keyed by (start, insertion order), each node
// knowing the largest end in its subtree. Priorities come from a fixed-seed generator, so the
// shape and the speed are the same on every run; answers never depend on them.
#pragma once
#include <cstdint>
#include <vector>

namespace fragsim {

template <class T>
class IntervalTree {
 public:
  void insert(std::uint64_t start, std::uint64_t end, const T& value) {
    std::int32_t n = static_cast<std::int32_t>(nodes_.size());
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 17;
    rng_ ^= rng_ << 5;
    nodes_.push_back(Node{start, end, end, static_cast<std::uint64_t>(n), rng_, kNil, kNil, value});
    root_ = insert(root_, n);
  }
  // Calls f(value) for every interval with start ≤ hi and end ≥ lo.
  template <class F>
  void overlapping(std::uint64_t lo, std::uint64_t hi, F f) const {
    visit(root_, lo, hi, f);
  }
  size_t size() const { return nodes_.size(); }

 private:
  static constexpr std::int32_t kNil = -1;
  struct Node {
    std::uint64_t start, end, max_end, seq;
    std::uint32_t prio;
    std::int32_t left, right;
    T value;
  };
  bool less(std::int32_t a, std::int32_t b) const {
    const Node &x = nodes_[a], &y = nodes_[b];
    return x.start != y.start ? x.start < y.start : x.seq < y.seq;
  }
  void pull(std::int32_t n) {
    Node& x = nodes_[n];
    x.max_end = x.end;
    if (x.left != kNil && nodes_[x.left].max_end > x.max_end) x.max_end = nodes_[x.left].max_end;
    if (x.right != kNil && nodes_[x.right].max_end > x.max_end) x.max_end = nodes_[x.right].max_end;
  }
  void split(std::int32_t t, std::int32_t key, std::int32_t& l, std::int32_t& r) {
    if (t == kNil) {
      l = r = kNil;
      return;
    }
    if (less(t, key)) {
      split(nodes_[t].right, key, nodes_[t].right, r);
      l = t;
    } else {
      split(nodes_[t].left, key, l, nodes_[t].left);
      r = t;
    }
    pull(t);
  }
  std::int32_t insert(std::int32_t t, std::int32_t n) {
    if (t == kNil) return n;
    if (nodes_[n].prio > nodes_[t].prio) {
      split(t, n, nodes_[n].left, nodes_[n].right);
      pull(n);
      return n;
    }
    if (less(n, t))
      nodes_[t].left = insert(nodes_[t].left, n);
    else
      nodes_[t].right = insert(nodes_[t].right, n);
    pull(t);
    return t;
  }
  template <class F>
  void visit(std::int32_t n, std::uint64_t lo, std::uint64_t hi, F& f) const {
    while (n != kNil) {
      const Node& x = nodes_[n];
      if (x.max_end < lo) return;  // nothing below ends late enough
      visit(x.left, lo, hi, f);
      if (x.start > hi) return;  // this node and everything right of it start too late
      if (x.end >= lo) f(x.value);
      n = x.right;
    }
  }

  std::vector<Node> nodes_;
  std::int32_t root_ = kNil;
  std::uint32_t rng_ = 2463534242u;
};

}  // namespace fragsim

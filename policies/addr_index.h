// AddrIndex: free blocks ordered by address, each subtree knowing its largest block — first fit
// ("the lowest-address block with size ≥ r") in O(log n) instead of a scan over every hole.
//
// A treap (randomised balanced binary search tree) whose nodes live in one vector addressed by
// index, keyed by address, with max_size(node) = max(size, max_size(left), max_size(right)).
// Priorities come from a fixed-seed generator: the shape, and so the speed, is the same on every
// run; results never depend on it (a key order is a key order).
#pragma once
#include <cstdint>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

class AddrIndex {
 public:
  static constexpr std::int32_t kNil = -1;

  void insert(Addr addr, Bytes size, std::uint32_t id) {
    std::int32_t n = new_node(addr, size, id);
    root_ = insert(root_, n);
    ++count_;
  }
  // Pre: addr present.
  void erase(Addr addr) {
    root_ = erase(root_, addr);
    --count_;
  }
  // Changes the block at old_addr in place to (addr, size, id). Pre: present, and no other block
  // lies between old_addr and addr (the key order is unchanged): what a hole becomes when its
  // front is taken or a neighbour merges into it. One descent, no restructuring.
  void rekey(Addr old_addr, Addr addr, Bytes size, std::uint32_t id) {
    path_.clear();
    std::int32_t n = root_;
    while (nodes_[n].addr != old_addr) {
      path_.push_back(n);
      n = old_addr < nodes_[n].addr ? nodes_[n].left : nodes_[n].right;
    }
    nodes_[n].addr = addr;
    nodes_[n].size = size;
    nodes_[n].id = id;
    pull(n);
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) pull(*it);
  }
  // The lowest-address block with size ≥ r: its id, or kNone.
  static constexpr std::uint32_t kNone = 0xffffffffu;
  std::uint32_t first_fit(Bytes r) const {
    std::int32_t n = root_;
    while (n != kNil) {
      const Node& x = nodes_[n];
      if (x.max < r) return kNone;
      if (x.left != kNil && nodes_[x.left].max >= r)
        n = x.left;
      else if (x.size >= r)
        return x.id;
      else
        n = x.right;
    }
    return kNone;
  }
  bool contains(Addr addr) const {
    for (std::int32_t n = root_; n != kNil;) {
      if (nodes_[n].addr == addr) return true;
      n = addr < nodes_[n].addr ? nodes_[n].left : nodes_[n].right;
    }
    return false;
  }
  Bytes largest() const { return root_ == kNil ? 0 : nodes_[root_].max; }
  size_t size() const { return count_; }

 private:
  struct Node {
    Addr addr;
    Bytes size = 0, max = 0;
    std::uint32_t id = 0, prio = 0;
    std::int32_t left = kNil, right = kNil;
  };

  std::int32_t new_node(Addr addr, Bytes size, std::uint32_t id) {
    std::int32_t n;
    if (!spare_.empty()) {
      n = spare_.back();
      spare_.pop_back();
    } else {
      n = static_cast<std::int32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 17;
    rng_ ^= rng_ << 5;
    nodes_[n] = Node{addr, size, size, id, rng_, kNil, kNil};
    return n;
  }
  void pull(std::int32_t n) {
    Node& x = nodes_[n];
    x.max = x.size;
    if (x.left != kNil && nodes_[x.left].max > x.max) x.max = nodes_[x.left].max;
    if (x.right != kNil && nodes_[x.right].max > x.max) x.max = nodes_[x.right].max;
  }
  // Splits t into keys < addr and keys ≥ addr.
  void split(std::int32_t t, Addr addr, std::int32_t& l, std::int32_t& r) {
    if (t == kNil) {
      l = r = kNil;
      return;
    }
    if (nodes_[t].addr < addr) {
      split(nodes_[t].right, addr, nodes_[t].right, r);
      l = t;
    } else {
      split(nodes_[t].left, addr, l, nodes_[t].left);
      r = t;
    }
    pull(t);
  }
  std::int32_t merge(std::int32_t l, std::int32_t r) {
    if (l == kNil) return r;
    if (r == kNil) return l;
    if (nodes_[l].prio > nodes_[r].prio) {
      nodes_[l].right = merge(nodes_[l].right, r);
      pull(l);
      return l;
    }
    nodes_[r].left = merge(l, nodes_[r].left);
    pull(r);
    return r;
  }
  std::int32_t insert(std::int32_t t, std::int32_t n) {
    if (t == kNil) return n;
    if (nodes_[n].prio > nodes_[t].prio) {
      split(t, nodes_[n].addr, nodes_[n].left, nodes_[n].right);
      pull(n);
      return n;
    }
    if (nodes_[n].addr < nodes_[t].addr)
      nodes_[t].left = insert(nodes_[t].left, n);
    else
      nodes_[t].right = insert(nodes_[t].right, n);
    pull(t);
    return t;
  }
  std::int32_t erase(std::int32_t t, Addr addr) {
    if (t == kNil) return kNil;
    if (nodes_[t].addr == addr) {
      std::int32_t m = merge(nodes_[t].left, nodes_[t].right);
      spare_.push_back(t);
      return m;
    }
    if (addr < nodes_[t].addr)
      nodes_[t].left = erase(nodes_[t].left, addr);
    else
      nodes_[t].right = erase(nodes_[t].right, addr);
    pull(t);
    return t;
  }

  std::vector<Node> nodes_;
  std::vector<std::int32_t> spare_;
  std::int32_t root_ = kNil;
  std::vector<std::int32_t> path_;  // rekey's descent
  size_t count_ = 0;
  std::uint32_t rng_ = 2463534242u;
};

}  // namespace fragsim

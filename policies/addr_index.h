// AddrIndex: free blocks ordered by address, answering first fit ("the lowest-address block with
// size ≥ r") without a scan over every hole.
//
// Layout: a two-level blocked array, flat so that every step reads contiguous memory.
//   leaves — runs of at most kLeaf entries in address order, each as three parallel arrays
//            (addresses, sizes, ids): a search within a leaf is a short linear pass.
//   order_ — the leaves in address order, with parallel arrays of each leaf's lowest address
//            (low_, binary-searched to find an address's leaf) and its largest size (max_).
//   gmax_  — the largest size of every group of kGroup consecutive leaves.
// first_fit(r) walks gmax_ to the first group with a block ≥ r, then that group's max_ to the
// leaf, then the leaf's sizes: O(n / (kLeaf·kGroup) + kGroup + kLeaf) compares, all sequential.
// insert and erase move the entries of one leaf (O(kLeaf)); a full leaf splits in two, a leaf
// that empties or fits with its right neighbour into half a leaf is merged away, so leaves stay
// at least a quarter full on average. rekey changes one entry in place (no entry moves). The
// entry first_fit returned is remembered, so that taking it (rekey or erase) needs no search.
// largest() is the maximum of gmax_. Results depend only on the set of blocks, never on how the
// leaves happen to be cut.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

class AddrIndex {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  void insert(Addr addr, Bytes size, std::uint32_t id) {
    ++count_;
    found_.valid = false;
    if (order_.empty()) {
      std::uint32_t l = new_leaf();
      order_.push_back(l);
      low_.push_back(addr);
      max_.push_back(0);
      gmax_.push_back(0);
    }
    size_t k = leaf_of(addr);
    Leaf& f = pool_[order_[k]];
    std::uint32_t pos = pos_in(f, addr);
    for (std::uint32_t j = f.n; j > pos; --j) {
      f.addr[j] = f.addr[j - 1];
      f.size[j] = f.size[j - 1];
      f.id[j] = f.id[j - 1];
    }
    f.addr[pos] = addr;
    f.size[pos] = size;
    f.id[pos] = id;
    ++f.n;
    low_[k] = f.addr[0];
    if (size > max_[k]) {
      max_[k] = size;
      gmax_[k / kGroup] = std::max(gmax_[k / kGroup], size);
    }
    if (f.n == kLeaf) split(k);
  }
  // Pre: addr present.
  void erase(Addr addr) {
    --count_;
    auto [k, pos] = locate(addr);
    Leaf& f = pool_[order_[k]];
    Bytes size = f.size[pos];
    for (std::uint32_t j = pos + 1; j < f.n; ++j) {
      f.addr[j - 1] = f.addr[j];
      f.size[j - 1] = f.size[j];
      f.id[j - 1] = f.id[j];
    }
    --f.n;
    if (f.n == 0 || (k + 1 < order_.size() && f.n + pool_[order_[k + 1]].n <= kLeaf / 2)) {
      merge(k);
      return;
    }
    low_[k] = f.addr[0];
    if (size == max_[k]) refresh_max(k);
  }
  // Changes the block at old_addr in place to (addr, size, id). Pre: present, and no other block
  // lies between old_addr and addr (the key order is unchanged): what a hole becomes when its
  // front is taken or a neighbour merges into it.
  void rekey(Addr old_addr, Addr addr, Bytes size, std::uint32_t id) {
    auto [k, pos] = locate(old_addr);
    Leaf& f = pool_[order_[k]];
    Bytes was = f.size[pos];
    f.addr[pos] = addr;
    f.size[pos] = size;
    f.id[pos] = id;
    if (pos == 0) low_[k] = addr;
    if (size > max_[k]) {
      max_[k] = size;
      gmax_[k / kGroup] = std::max(gmax_[k / kGroup], size);
    } else if (was == max_[k] && size < was) {
      refresh_max(k);
    }
  }
  // The lowest-address block with size ≥ r: its id, or kNone.
  std::uint32_t first_fit(Bytes r) const {
    for (size_t g = 0; g < gmax_.size(); ++g) {
      if (gmax_[g] < r) continue;
      size_t k = g * kGroup;
      while (max_[k] < r) ++k;
      const Leaf& f = pool_[order_[k]];
      std::uint32_t j = 0;
      while (f.size[j] < r) ++j;
      found_ = {f.addr[j], k, j, true};
      return f.id[j];
    }
    return kNone;
  }
  bool contains(Addr addr) const {
    if (order_.empty()) return false;
    const Leaf& f = pool_[order_[leaf_of(addr)]];
    std::uint32_t pos = pos_in(f, addr);
    return pos < f.n && f.addr[pos] == addr;
  }
  Bytes largest() const {
    Bytes m = 0;
    for (Bytes g : gmax_) m = std::max(m, g);
    return m;
  }
  size_t size() const { return count_; }

 private:
  static constexpr std::uint32_t kLeaf = 64;  // entries per leaf at most (a full leaf splits)
  static constexpr size_t kGroup = 64;        // leaves per gmax_ entry
  struct Leaf {
    std::uint32_t n = 0;
    std::array<Addr, kLeaf> addr;
    std::array<Bytes, kLeaf> size;
    std::array<std::uint32_t, kLeaf> id;
  };

  std::uint32_t new_leaf() {
    if (!spare_.empty()) {
      std::uint32_t l = spare_.back();
      spare_.pop_back();
      pool_[l].n = 0;
      return l;
    }
    pool_.emplace_back();
    return static_cast<std::uint32_t>(pool_.size() - 1);
  }
  // How many of the sorted v[0, n) are below addr (strictly, or with `or_equal` at most addr):
  // a binary search whose steps are conditional moves, not branches (a free's neighbours are at
  // addresses no branch predictor can guess: the branchy search mispredicted about every other step).
  template <bool or_equal>
  static size_t count_below(const Addr* v, size_t n, Addr addr) {
    if (n == 0) return 0;
    const Addr* base = v;
    while (n > 1) {
      size_t half = n / 2;
      base += half * static_cast<size_t>(or_equal ? base[half - 1] <= addr : base[half - 1] < addr);
      n -= half;
    }
    return static_cast<size_t>(base - v) + (or_equal ? *base <= addr : *base < addr);
  }
  // The position in order_ of the leaf that holds (or would hold) addr: the last whose lowest
  // address is ≤ addr, or the first.
  size_t leaf_of(Addr addr) const {
    size_t k = count_below<true>(low_.data(), low_.size(), addr);
    return k == 0 ? 0 : k - 1;
  }
  // Where addr is (or would go) in leaf f.
  static std::uint32_t pos_in(const Leaf& f, Addr addr) {
    return static_cast<std::uint32_t>(count_below<false>(f.addr.data(), f.n, addr));
  }
  // Where present entry addr lies (leaf position in order_, index in the leaf): first_fit's last
  // answer when it is that entry (the allocator takes what first fit found), else a search.
  std::pair<size_t, std::uint32_t> locate(Addr addr) {
    if (found_.valid && found_.addr == addr && found_.leaf < order_.size() &&
        pool_[order_[found_.leaf]].addr[found_.pos] == addr) {
      found_.valid = false;
      return {found_.leaf, found_.pos};
    }
    found_.valid = false;
    size_t k = leaf_of(addr);
    return {k, pos_in(pool_[order_[k]], addr)};
  }
  Bytes leaf_max(size_t k) const {
    const Leaf& f = pool_[order_[k]];
    Bytes m = 0;
    for (std::uint32_t j = 0; j < f.n; ++j) m = std::max(m, f.size[j]);
    return m;
  }
  void refresh_max(size_t k) {
    Bytes was = max_[k];
    max_[k] = leaf_max(k);
    if (max_[k] < was && was == gmax_[k / kGroup]) refresh_group(k / kGroup);
  }
  void refresh_group(size_t g) {
    Bytes m = 0;
    for (size_t k = g * kGroup, e = std::min(max_.size(), k + kGroup); k < e; ++k) m = std::max(m, max_[k]);
    gmax_[g] = m;
  }
  // After leaves were added or removed at position k: every group from k's on.
  void regroup(size_t k) {
    gmax_.resize((max_.size() + kGroup - 1) / kGroup);
    for (size_t g = k / kGroup; g < gmax_.size(); ++g) refresh_group(g);
  }
  // Moves the upper half of full leaf k into a new leaf after it.
  void split(size_t k) {
    std::uint32_t l = new_leaf();
    Leaf& f = pool_[order_[k]];  // after new_leaf: the pool may have grown
    Leaf& h = pool_[l];
    constexpr std::uint32_t kHalf = kLeaf / 2;
    std::copy(f.addr.begin() + kHalf, f.addr.end(), h.addr.begin());
    std::copy(f.size.begin() + kHalf, f.size.end(), h.size.begin());
    std::copy(f.id.begin() + kHalf, f.id.end(), h.id.begin());
    h.n = kLeaf - kHalf;
    f.n = kHalf;
    order_.insert(order_.begin() + static_cast<std::ptrdiff_t>(k + 1), l);
    low_.insert(low_.begin() + static_cast<std::ptrdiff_t>(k + 1), h.addr[0]);
    max_.insert(max_.begin() + static_cast<std::ptrdiff_t>(k + 1), 0);
    max_[k] = leaf_max(k);
    max_[k + 1] = leaf_max(k + 1);
    regroup(k);
  }
  // Leaf k is empty, or fits with its right neighbour into half a leaf: the neighbour's entries
  // join it and the neighbour goes (an empty leaf goes itself).
  void merge(size_t k) {
    Leaf& f = pool_[order_[k]];
    size_t gone = k;
    if (f.n > 0) {
      gone = k + 1;
      const Leaf& x = pool_[order_[gone]];
      std::copy(x.addr.begin(), x.addr.begin() + x.n, f.addr.begin() + f.n);
      std::copy(x.size.begin(), x.size.begin() + x.n, f.size.begin() + f.n);
      std::copy(x.id.begin(), x.id.begin() + x.n, f.id.begin() + f.n);
      f.n += x.n;
      low_[k] = f.addr[0];
    }
    spare_.push_back(order_[gone]);
    order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(gone));
    low_.erase(low_.begin() + static_cast<std::ptrdiff_t>(gone));
    max_.erase(max_.begin() + static_cast<std::ptrdiff_t>(gone));
    if (gone == k + 1) max_[k] = leaf_max(k);
    regroup(k);
  }

  std::vector<Leaf> pool_;
  std::vector<std::uint32_t> spare_;  // pool_ leaves not in use
  std::vector<std::uint32_t> order_;  // leaves in address order
  std::vector<Addr> low_;             // lowest address of each leaf of order_
  std::vector<Bytes> max_;            // largest size of each leaf of order_
  std::vector<Bytes> gmax_;           // largest size of each kGroup leaves of order_
  size_t count_ = 0;
  // first_fit's last answer, until the index next changes (every writer clears it).
  struct Found {
    Addr addr{};
    size_t leaf = 0;
    std::uint32_t pos = 0;
    bool valid = false;
  };
  mutable Found found_;
};

}  // namespace fragsim

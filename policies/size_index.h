// SizeIndex: free blocks ordered by (size, address) — the index behind every best-fit search
// (baseline arena, XLA BFC's bins, which together form exactly this global order).
//
// Layout: 3776 size classes (exact below 64 B, then 64 per power of two), each a vector sorted
// by (size, address), plus a bitmap of non-empty classes. Class(s) is monotonic in s, so
//   lower_bound(r) = first entry ≥ (r, 0) in class(r), else the first entry of the next
//   non-empty class,
// i.e. the smallest block with size ≥ r, lowest address on ties — a global best fit — in
// O(log k + classes/64) with no allocation per operation once vectors have grown.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

class SizeIndex {
 public:
  struct Entry {
    Bytes size;
    Addr addr;
    std::uint32_t id;  // caller's handle for the block
    bool operator<(const Entry& o) const { return size != o.size ? size < o.size : addr < o.addr; }
  };
  static constexpr std::uint32_t kClasses = 64 + 58 * 64;

  void insert(const Entry& e) {
    std::uint32_t c = cls(e.size);
    auto& v = bins_[c];
    if (v.empty() || v.back() < e)
      v.push_back(e);
    else
      v.insert(std::upper_bound(v.begin(), v.end(), e), e);
    set_bit(c);
    if (count_ == 0 || c > top_) top_ = c;
    ++count_;
  }
  // Pre: (size, addr) present.
  void erase(Bytes size, Addr addr) {
    std::uint32_t c = cls(size);
    auto& v = bins_[c];
    auto it = std::lower_bound(v.begin(), v.end(), Entry{size, addr, 0});
    v.erase(it);
    --count_;
    if (v.empty()) {
      clear_bit(c);
      if (c == top_ && count_) top_ = prev_class(c);
    }
  }
  bool contains(Bytes size, Addr addr) const {
    const auto& v = bins_[cls(size)];
    auto it = std::lower_bound(v.begin(), v.end(), Entry{size, addr, 0});
    return it != v.end() && it->size == size && it->addr == addr;
  }
  // Smallest entry with size ≥ r (lowest address on ties), or nullptr.
  const Entry* lower_bound(Bytes r) const {
    std::uint32_t c = cls(r);
    const auto& v = bins_[c];
    auto it = std::lower_bound(v.begin(), v.end(), Entry{r, Addr(), 0});
    if (it != v.end()) return &*it;
    std::uint32_t n = next_class(c + 1);
    return n == kClasses ? nullptr : &bins_[n].front();
  }
  // Entries in (size, address) order starting at the first with size ≥ r; f returns false to stop.
  template <class F>
  void scan_from(Bytes r, F f) const {
    std::uint32_t c = cls(r);
    const auto& v = bins_[c];
    for (auto it = std::lower_bound(v.begin(), v.end(), Entry{r, Addr(), 0}); it != v.end(); ++it)
      if (!f(*it)) return;
    for (c = next_class(c + 1); c < kClasses; c = next_class(c + 1))
      for (const auto& e : bins_[c])
        if (!f(e)) return;
  }
  const Entry* largest() const { return count_ ? &bins_[top_].back() : nullptr; }
  size_t size() const { return count_; }

  static std::uint32_t cls(Bytes s) {
    if (s < 64) return static_cast<std::uint32_t>(s);
    int oct = 63 - __builtin_clzll(s);  // ≥ 6
    return 64 + static_cast<std::uint32_t>(oct - 6) * 64 + static_cast<std::uint32_t>((s >> (oct - 6)) & 63);
  }

 private:
  static constexpr int kWords = (kClasses + 63) / 64;
  void set_bit(std::uint32_t c) { bits_[c >> 6] |= 1ULL << (c & 63); }
  void clear_bit(std::uint32_t c) { bits_[c >> 6] &= ~(1ULL << (c & 63)); }
  // Highest non-empty class below c (pre: one exists).
  std::uint32_t prev_class(std::uint32_t c) const {
    int w = static_cast<int>(c >> 6);
    std::uint64_t b = (c & 63) ? bits_[w] & ((1ULL << (c & 63)) - 1) : 0;
    while (!b) b = bits_[--w];
    return static_cast<std::uint32_t>(w * 64 + 63 - __builtin_clzll(b));
  }
  std::uint32_t next_class(std::uint32_t c) const {
    if (c >= kClasses) return kClasses;
    int w = static_cast<int>(c >> 6);
    std::uint64_t b = bits_[w] & (~0ULL << (c & 63));
    while (!b) {
      if (++w == kWords) return kClasses;
      b = bits_[w];
    }
    return static_cast<std::uint32_t>(w * 64 + __builtin_ctzll(b));
  }
  std::vector<std::vector<Entry>> bins_ = std::vector<std::vector<Entry>>(kClasses);
  std::array<std::uint64_t, kWords> bits_{};
  size_t count_ = 0;
  std::uint32_t top_ = 0;  // highest non-empty class when count_ > 0
};

}  // namespace fragsim

// SizeIndex: free blocks ordered by (size, address) — the index behind every best-fit search
// (baseline arena, XLA BFC's bins, which together form exactly this global order).
//
// Layout: 3776 size classes (exact below 64 B, then 64 per power of two), each an ordered
// sequence by (size, address), plus a two-level bitmap of non-empty classes (the next or previous
// non-empty class in O(1), however sparse the index). Class(s) is monotonic in s, so
//   lower_bound(r) = first entry ≥ (r, 0) in class(r), else the first entry of the next
//   non-empty class,
// i.e. the smallest block with size ≥ r, lowest address on ties — a global best fit.
// A large class is a sorted sequence cut into pieces of at most 2·kPiece entries (Pieces below):
// an insert or erase moves entries of one piece only, so a class holding k blocks of one size
// (equal layers, a paged KV cache) costs O(log k + kPiece) per operation, not O(k), and the
// common case — a few blocks per class — stays a binary search in one small vector.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
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
    bin(c).insert(e);
    set_bit(c);
    if (count_ == 0 || c > top_) top_ = c;
    ++count_;
    if (e.size > largest_size_) largest_size_ = e.size;
  }
  // Pre: (size, addr) present.
  void erase(Bytes size, Addr addr) {
    std::uint32_t c = cls(size);
    auto& v = bin(c);
    v.erase(Entry{size, addr, 0});
    erased_from(c, v, size);
  }
  // Removes the smallest entry with size ≥ r (lowest address on ties) into *out; false when there
  // is none. One search: what lower_bound followed by erase of its entry does with two.
  bool pop_lower_bound(Bytes r, Entry* out) {
    std::uint32_t c = cls(r);
    Pieces* b = has_class(c) ? &bin(c) : nullptr;
    if (!b || !b->pop_lower_bound(Entry{r, Addr(), 0}, out)) {  // else every entry of the next class fits
      c = next_class(c + 1);
      if (c == kClasses) return false;
      b = &bin(c);
      b->pop_front(out);
    }
    erased_from(c, *b, out->size);
    return true;
  }
  bool contains(Bytes size, Addr addr) const {
    const Pieces* b = find_bin(cls(size));
    const Entry* it = b ? b->lower_bound(Entry{size, addr, 0}) : nullptr;
    return it && it->size == size && it->addr == addr;
  }
  // Smallest entry with size ≥ r (lowest address on ties), or nullptr.
  const Entry* lower_bound(Bytes r) const {
    std::uint32_t c = cls(r);
    if (const Pieces* b = find_bin(c))
      if (const Entry* e = b->lower_bound(Entry{r, Addr(), 0})) return e;
    std::uint32_t n = next_class(c + 1);
    return n == kClasses ? nullptr : &find_bin(n)->front();
  }
  // Entries in (size, address) order starting at the first with size ≥ r; f returns false to stop.
  template <class F>
  void scan_from(Bytes r, F f) const {
    std::uint32_t c = cls(r);
    if (const Pieces* b = find_bin(c); b && !b->scan_from(Entry{r, Addr(), 0}, f)) return;
    for (c = next_class(c + 1); c < kClasses; c = next_class(c + 1))
      if (!find_bin(c)->scan_from(find_bin(c)->front(), f)) return;
  }
  const Entry* largest() const { return count_ ? &find_bin(top_)->back() : nullptr; }
  // largest()'s size, 0 when empty: kept up to date as entries come and go (a policy's footprint
  // reads it after every event; largest() follows three pointers).
  Bytes largest_size() const { return largest_size_; }
  size_t size() const { return count_; }

  static std::uint32_t cls(Bytes s) {
    if (s < 64) return static_cast<std::uint32_t>(s);
    int oct = 63 - __builtin_clzll(s);  // ≥ 6
    return 64 + static_cast<std::uint32_t>(oct - 6) * 64 + static_cast<std::uint32_t>((s >> (oct - 6)) & 63);
  }

 private:
  // One class: a sorted sequence. Up to 2·kPiece entries it is one sorted vector (the common
  // case: one dependent load, a binary search); past that it becomes consecutive non-empty
  // pieces, each sorted, every entry of a piece below every entry of the next, a piece that
  // grows past 2·kPiece cut in two, and back to one vector when one piece is left.
  class Pieces {
   public:
    static constexpr size_t kPiece = 128;
    bool empty() const { return one_.empty() && many_.empty(); }
    const Entry& front() const { return many_.empty() ? one_.front() : many_.front().front(); }
    const Entry& back() const { return many_.empty() ? one_.back() : many_.back().back(); }
    void insert(const Entry& e) {
      if (many_.empty()) {
        // The size is read before the entry goes in: read after, it waits for the vector's new
        // end to be stored (a store the load cannot take its value from).
        const bool cut_after = one_.size() >= 2 * kPiece;
        add(one_, e);
        if (cut_after) {
          many_.push_back(std::move(one_));
          one_ = {};
          cut(0);
        }
        return;
      }
      size_t i = std::min(piece_for(e), many_.size() - 1);
      add(many_[i], e);
      if (many_[i].size() > 2 * kPiece) cut(i);
    }
    // Pre: present.
    void erase(const Entry& e) {
      Entry ignore{};
      pop_lower_bound(e, &ignore);
    }
    // Removes the first entry ≥ e into *out; false when there is none.
    bool pop_lower_bound(const Entry& e, Entry* out) {
      if (many_.empty()) {
        auto it = std::lower_bound(one_.begin(), one_.end(), e);
        if (it == one_.end()) return false;
        *out = *it;
        one_.erase(it);
        return true;
      }
      size_t i = piece_for(e);
      if (i == many_.size()) return false;
      auto& v = many_[i];
      take_from(i, std::lower_bound(v.begin(), v.end(), e), out);
      return true;
    }
    // Removes the first entry into *out (pre: not empty).
    void pop_front(Entry* out) {
      if (many_.empty()) {
        *out = one_.front();
        one_.erase(one_.begin());
      } else {
        take_from(0, many_.front().begin(), out);
      }
    }
    // First entry ≥ e, or nullptr.
    const Entry* lower_bound(const Entry& e) const {
      const std::vector<Entry>* v = &one_;
      if (!many_.empty()) {
        size_t i = piece_for(e);
        if (i == many_.size()) return nullptr;
        v = &many_[i];
      }
      auto it = std::lower_bound(v->begin(), v->end(), e);
      return it == v->end() ? nullptr : &*it;
    }
    // f on every entry ≥ e in order; false when f stopped the scan.
    template <class F>
    bool scan_from(const Entry& e, F& f) const {
      if (many_.empty()) return scan(one_, e, f);
      for (size_t i = piece_for(e); i < many_.size(); ++i)
        if (!scan(many_[i], e, f)) return false;
      return true;
    }

   private:
    static void add(std::vector<Entry>& v, const Entry& e) {
      if (v.empty() || v.back() < e)
        v.push_back(e);
      else
        v.insert(std::upper_bound(v.begin(), v.end(), e), e);
    }
    // Removes the entry at `it` of piece i into *out.
    void take_from(size_t i, std::vector<Entry>::iterator it, Entry* out) {
      auto& v = many_[i];
      *out = *it;
      v.erase(it);
      if (v.empty()) many_.erase(many_.begin() + static_cast<std::ptrdiff_t>(i));
      if (many_.size() == 1) {
        one_ = std::move(many_.front());
        many_.clear();
      }
    }
    template <class F>
    static bool scan(const std::vector<Entry>& v, const Entry& e, F& f) {
      for (auto it = std::lower_bound(v.begin(), v.end(), e); it != v.end(); ++it)
        if (!f(*it)) return false;
      return true;
    }
    void cut(size_t i) {
      auto& v = many_[i];
      std::vector<Entry> rest(v.begin() + kPiece, v.end());
      v.resize(kPiece);
      many_.insert(many_.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(rest));
    }
    // The first piece whose last entry is ≥ e (many_.size() when none).
    size_t piece_for(const Entry& e) const {
      size_t lo = 0, hi = many_.size();
      while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (many_[m].back() < e)
          lo = m + 1;
        else
          hi = m;
      }
      return lo;
    }
    std::vector<Entry> one_;                // the class while it is small
    std::vector<std::vector<Entry>> many_;  // the class as pieces (one_ then empty)
  };

  static constexpr int kWords = (kClasses + 63) / 64;
  // An entry of class c (bin v) was removed.
  void erased_from(std::uint32_t c, const Pieces& v, Bytes size) {
    --count_;
    if (v.empty()) {
      clear_bit(c);
      if (c == top_ && count_) top_ = prev_class(c);
    }
    if (size == largest_size_) largest_size_ = count_ ? find_bin(top_)->back().size : 0;
  }
  // bits_: one bit per class, set while the class is non-empty; words_: one bit per word of
  // bits_, set while that word is non-zero (kWords ≤ 64), so that the next or previous non-empty
  // class is found in O(1) however far away it is.
  static_assert(kWords <= 64);
  bool has_class(std::uint32_t c) const { return (bits_[c >> 6] >> (c & 63)) & 1; }
  void set_bit(std::uint32_t c) {
    bits_[c >> 6] |= 1ULL << (c & 63);
    words_ |= 1ULL << (c >> 6);
  }
  void clear_bit(std::uint32_t c) {
    if (!(bits_[c >> 6] &= ~(1ULL << (c & 63)))) words_ &= ~(1ULL << (c >> 6));
  }
  // Highest non-empty class below c (pre: one exists).
  std::uint32_t prev_class(std::uint32_t c) const {
    std::uint32_t w = c >> 6;
    std::uint64_t b = bits_[w] & ((1ULL << (c & 63)) - 1);
    if (!b) {
      w = 63 - static_cast<std::uint32_t>(__builtin_clzll(words_ & ((1ULL << w) - 1)));
      b = bits_[w];
    }
    return w * 64 + 63 - static_cast<std::uint32_t>(__builtin_clzll(b));
  }
  // Lowest non-empty class ≥ c, or kClasses.
  std::uint32_t next_class(std::uint32_t c) const {
    if (c >= kClasses) return kClasses;
    std::uint32_t w = c >> 6;
    std::uint64_t b = bits_[w] & (~0ULL << (c & 63));
    if (!b) {
      const std::uint64_t above = w + 1 < 64 ? words_ & (~0ULL << (w + 1)) : 0;
      if (!above) return kClasses;
      w = static_cast<std::uint32_t>(__builtin_ctzll(above));
      b = bits_[w];
    }
    return w * 64 + static_cast<std::uint32_t>(__builtin_ctzll(b));
  }
  // The classes in groups of 64 (one word of the bitmap each), a group allocated when one of its
  // classes is first used: an index holding blocks of a few sizes costs a few KiB, not the 180 KiB
  // of every class (a trace on thousands of devices has an allocator, and indexes, per device).
  // A class whose bit is set has its group.
  using Group = std::array<Pieces, 64>;
  Pieces& bin(std::uint32_t c) {
    auto& g = groups_[c >> 6];
    if (!g) g = std::make_unique<Group>();
    return (*g)[c & 63];
  }
  const Pieces* find_bin(std::uint32_t c) const {
    const auto& g = groups_[c >> 6];
    return g ? &(*g)[c & 63] : nullptr;
  }
  std::array<std::unique_ptr<Group>, kWords> groups_;
  std::array<std::uint64_t, kWords> bits_{};
  std::uint64_t words_ = 0;
  size_t count_ = 0;
  std::uint32_t top_ = 0;   // highest non-empty class when count_ > 0
  Bytes largest_size_ = 0;  // see largest_size()
};

}  // namespace fragsim

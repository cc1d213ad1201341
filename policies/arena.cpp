#include "policies/arena.h"

#include <algorithm>

namespace fragsim {

Arena::Arena(Bytes capacity, Bytes alignment, Bytes granularity, bool by_addr)
    : capacity_(round_down(capacity, alignment)),
      alignment_(alignment),
      granularity_(granularity),
      keep_by_addr_(by_addr) {
  if (capacity_ > 0) insert_free(chunks_.region(chunks_.add_region(DeviceMemory::kBase, capacity_)).first);
}

Bytes Arena::round(Bytes n) const { return round_up_sat(n, alignment_); }

void Arena::insert_free(Index c) {
  const auto& ch = chunks_.chunk(c);
  if (c != tail()) by_size_.insert({ch.size, ch.addr, static_cast<std::uint32_t>(c)});
  if (keep_by_addr_) by_addr_.insert(ch.addr, ch.size, static_cast<std::uint32_t>(c));
}

std::uint32_t Arena::best_fit(Bytes r) const {
  if (r == 0 || r == kTooLarge) return kNone;
  const auto* e = by_size_.lower_bound(r);
  Index t = tail();
  if (t != Chunks::kNil && !chunks_.chunk(t).in_use && chunks_.chunk(t).size >= r) {
    const auto& tc = chunks_.chunk(t);
    if (!e || tc.size < e->size || (tc.size == e->size && tc.addr < e->addr)) return static_cast<std::uint32_t>(t);
  }
  return e ? e->id : kNone;
}

std::uint32_t Arena::first_fit(Bytes r) const { return r == 0 || r == kTooLarge ? kNone : by_addr_.first_fit(r); }

Addr Arena::take(std::uint32_t cu, Bytes r, Handle h) {
  auto c = static_cast<Index>(cu);
  Addr at = chunks_.chunk(c).addr;
  if (c != tail()) by_size_.erase(chunks_.chunk(c).size, at);
  if (chunks_.chunk(c).size > r) {
    Index rest = chunks_.split(c, r);
    const auto& ch = chunks_.chunk(rest);
    if (rest != tail()) by_size_.insert({ch.size, ch.addr, static_cast<std::uint32_t>(rest)});  // a new tail stays out
    if (keep_by_addr_) by_addr_.rekey(at, ch.addr, ch.size, static_cast<std::uint32_t>(rest));  // the hole's rest
  } else if (keep_by_addr_) {
    by_addr_.erase(at);
  }
  chunks_.set_in_use(c, true);
  if (h >= owner_.size()) owner_.resize(h + 1, Chunks::kNil);
  owner_[h] = c;
  allocated_ += r;
  return chunks_.chunk(c).addr;
}

void Arena::release(Handle h) {
  Index c = owner_[h];
  owner_[h] = Chunks::kNil;
  allocated_ -= chunks_.chunk(c).size;
  chunks_.set_in_use(c, false);
  // Merge with the right neighbour, then the left one. by_addr_ entries change in place where the
  // address order allows (a merged hole keeps a neighbour's entry), by_size_ ones are replaced.
  const Addr at = chunks_.chunk(c).addr;
  bool indexed = false;  // by_addr_ holds the freed range's entry (at `at`, for chunk c)
  Index n = chunks_.chunk(c).next;
  if (n != Chunks::kNil && !chunks_.chunk(n).in_use) {
    Addr na = chunks_.chunk(n).addr;
    if (n != tail()) by_size_.erase(chunks_.chunk(n).size, na);
    chunks_.merge_next(c);
    if (keep_by_addr_) by_addr_.rekey(na, at, chunks_.chunk(c).size, static_cast<std::uint32_t>(c));
    indexed = true;
  }
  Index p = chunks_.chunk(c).prev;
  if (p != Chunks::kNil && !chunks_.chunk(p).in_use) {
    Addr pa = chunks_.chunk(p).addr;
    if (p != tail()) by_size_.erase(chunks_.chunk(p).size, pa);
    chunks_.merge_next(p);
    if (keep_by_addr_) {
      if (indexed) by_addr_.erase(at);
      by_addr_.rekey(pa, pa, chunks_.chunk(p).size, static_cast<std::uint32_t>(p));
    }
    c = p;
    indexed = true;
  }
  const auto& ch = chunks_.chunk(c);
  if (c != tail()) by_size_.insert({ch.size, ch.addr, static_cast<std::uint32_t>(c)});
  if (keep_by_addr_ && !indexed) by_addr_.insert(ch.addr, ch.size, static_cast<std::uint32_t>(c));
}

Usage Arena::usage() const {
  Usage u;
  u.allocated = allocated_;
  Index t = tail();
  bool tail_free = t != Chunks::kNil && !chunks_.chunk(t).in_use;
  Bytes extent = tail_free ? chunks_.chunk(t).addr - DeviceMemory::kBase : capacity_;
  u.reserved = std::min(round_up(extent, granularity_), capacity_);
  // Largest hole below the extent: the biggest free chunk that is not the free tail.
  const auto* hole = by_size_.largest();
  u.largest_free = hole ? hole->size : 0;
  // The tail's part below the rounded extent is free reserved memory as well.
  if (tail_free) u.largest_free = std::max(u.largest_free, u.reserved - extent);
  u.available = capacity_ - allocated_;
  u.largest_available = std::max(u.largest_free, tail_free ? chunks_.chunk(t).size : 0);
  return u;
}

void Arena::memory_map(MemoryMap* out) const { append_memory_map(chunks_, out); }

void Arena::validate() const {
  Bytes alloc = 0;
  size_t nfree = 0;
  chunks_.validate("arena", [&](Index c) {
    const auto& ch = chunks_.chunk(c);
    FRAGSIM_CHECK((ch.addr - DeviceMemory::kBase) % alignment_ == 0, "arena: misaligned chunk");
    if (ch.in_use) {
      alloc += ch.size;
      return;
    }
    ++nfree;
    FRAGSIM_CHECK(ch.prev == Chunks::kNil || chunks_.chunk(ch.prev).in_use, "arena: two adjacent free chunks");
    FRAGSIM_CHECK(c == tail() || by_size_.contains(ch.size, ch.addr), "arena: free chunk missing from by_size");
    FRAGSIM_CHECK(!keep_by_addr_ || by_addr_.contains(ch.addr), "arena: free chunk missing from by_addr");
  });
  size_t tail_free = tail() != Chunks::kNil && !chunks_.chunk(tail()).in_use ? 1 : 0;
  FRAGSIM_CHECK(nfree - tail_free == by_size_.size() && (!keep_by_addr_ || nfree == by_addr_.size()),
                "arena: index sizes differ from the free chunk count");
  FRAGSIM_CHECK(alloc == allocated_, "arena: allocated != Σ in-use chunks");
}

}  // namespace fragsim

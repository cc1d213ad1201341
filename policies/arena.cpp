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

// The free-chunk index of this arena's fit (by_size_ for best fit, by_addr_ for first fit) holds
// every free chunk but the free tail. insert_free, erase_free and rekey_free are its only writers.
void Arena::insert_free(Index c) {
  if (c == tail()) return;
  const auto& ch = chunks_.chunk(c);
  if (keep_by_addr_)
    by_addr_.insert(ch.addr, ch.size, static_cast<std::uint32_t>(c));
  else
    by_size_.insert({ch.size, ch.addr, static_cast<std::uint32_t>(c)});
}

void Arena::erase_free(Bytes size, Addr addr) {
  if (keep_by_addr_)
    by_addr_.erase(addr);
  else
    by_size_.erase(size, addr);
}

// The indexed free chunk (size, addr) became chunk c (not the tail), with no other free chunk
// between the two addresses: a hole whose front was taken, or one a neighbour merged into.
void Arena::rekey_free(Bytes size, Addr addr, Index c) {
  const auto& ch = chunks_.chunk(c);
  if (keep_by_addr_) {
    by_addr_.rekey(addr, ch.addr, ch.size, static_cast<std::uint32_t>(c));
  } else {
    by_size_.erase(size, addr);
    by_size_.insert({ch.size, ch.addr, static_cast<std::uint32_t>(c)});
  }
}

// The free tail when it holds r bytes, else kNil.
Arena::Index Arena::fitting_tail(Bytes r) const {
  Index t = tail();
  return t != Chunks::kNil && !chunks_.chunk(t).in_use && chunks_.chunk(t).size >= r ? t : Chunks::kNil;
}

std::uint32_t Arena::best_fit(Bytes r) const {
  if (r == 0 || r == kTooLarge) return kNone;
  const auto* e = by_size_.lower_bound(r);
  if (Index t = fitting_tail(r); t != Chunks::kNil) {
    const auto& tc = chunks_.chunk(t);
    if (!e || tc.size < e->size || (tc.size == e->size && tc.addr < e->addr)) return static_cast<std::uint32_t>(t);
  }
  return e ? e->id : kNone;
}

// The tail lies above every indexed chunk: it is the first fit only when none of them fits.
std::uint32_t Arena::first_fit(Bytes r) const {
  if (r == 0 || r == kTooLarge) return kNone;
  std::uint32_t c = by_addr_.first_fit(r);
  if (c != AddrIndex::kNone) return c;
  Index t = fitting_tail(r);
  return t != Chunks::kNil ? static_cast<std::uint32_t>(t) : kNone;
}

Addr Arena::take(std::uint32_t cu, Bytes r, Handle h) {
  auto c = static_cast<Index>(cu);
  const Addr at = chunks_.chunk(c).addr;
  const Bytes size = chunks_.chunk(c).size;
  const bool was_tail = c == tail();  // not indexed; the rest of it, if any, is the new tail
  if (size > r) {
    Index rest = chunks_.split(c, r);
    if (!was_tail) rekey_free(size, at, rest);
  } else if (!was_tail) {
    erase_free(size, at);
  }
  chunks_.set_in_use(c, true);
  if (h >= owner_.size()) owner_.resize(h + 1, Chunks::kNil);
  owner_[h] = c;
  allocated_ += r;
  return at;
}

void Arena::release(Handle h) {
  Index c = owner_[h];
  owner_[h] = Chunks::kNil;
  allocated_ -= chunks_.chunk(c).size;
  chunks_.set_in_use(c, false);
  // Merge with the right neighbour, then the left one; a merged hole takes over a neighbour's
  // index entry where it has one (in place for by_addr_).
  const Addr at = chunks_.chunk(c).addr;
  bool indexed = false;  // the index holds an entry for chunk c, at `at`
  Index n = chunks_.chunk(c).next;
  if (n != Chunks::kNil && !chunks_.chunk(n).in_use) {
    const Addr na = chunks_.chunk(n).addr;
    const Bytes ns = chunks_.chunk(n).size;
    const bool n_tail = n == tail();
    chunks_.merge_next(c);
    if (!n_tail) rekey_free(ns, na, c);  // else c is the tail now
    indexed = !n_tail;
  }
  Index p = chunks_.chunk(c).prev;
  if (p != Chunks::kNil && !chunks_.chunk(p).in_use) {
    const Addr pa = chunks_.chunk(p).addr;
    const Bytes ps = chunks_.chunk(p).size, cs = chunks_.chunk(c).size;
    chunks_.merge_next(p);
    if (indexed) erase_free(cs, at);
    if (p == tail())
      erase_free(ps, pa);
    else
      rekey_free(ps, pa, p);
    return;
  }
  if (!indexed) insert_free(c);
}

Usage Arena::usage() const {
  Usage u;
  u.allocated = allocated_;
  Index t = tail();
  bool tail_free = t != Chunks::kNil && !chunks_.chunk(t).in_use;
  Bytes extent = tail_free ? chunks_.chunk(t).addr - DeviceMemory::kBase : capacity_;
  u.reserved = std::min(round_up(extent, granularity_), capacity_);
  // Largest hole below the extent: the biggest free chunk that is not the free tail.
  if (keep_by_addr_) {
    u.largest_free = by_addr_.largest();
  } else {
    u.largest_free = by_size_.largest_size();
  }
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
    FRAGSIM_CHECK(c == tail() || (keep_by_addr_ ? by_addr_.contains(ch.addr) : by_size_.contains(ch.size, ch.addr)),
                  "arena: free chunk missing from its index");
  });
  size_t tail_free = tail() != Chunks::kNil && !chunks_.chunk(tail()).in_use ? 1 : 0;
  FRAGSIM_CHECK(nfree - tail_free == (keep_by_addr_ ? by_addr_.size() : by_size_.size()),
                "arena: index size differs from the free chunk count");
  FRAGSIM_CHECK(alloc == allocated_, "arena: allocated != Σ in-use chunks");
}

}  // namespace fragsim

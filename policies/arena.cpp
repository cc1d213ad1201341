#include "policies/arena.h"
#include "policies/slot_pool.h"

#include <stdexcept>

#include <fmt/format.h>

namespace fragsim {

Arena::Arena(Bytes capacity, Bytes alignment, Bytes granularity, bool by_offset)
    : capacity_(round_down(capacity, alignment)), alignment_(alignment), granularity_(granularity),
      keep_by_offset_(by_offset) {
  if (capacity_ > 0) {
    std::uint32_t c = acquire_slot(chunks_, spare_);
    chunks_[c] = Chunk{0, capacity_, kNone, kNone, true};
    last_ = c;
    insert_free(c);
  }
}

void Arena::insert_free(std::uint32_t c) {
  if (c != last_) by_size_.insert({chunks_[c].size, chunks_[c].offset, c});
  if (keep_by_offset_) by_offset_.insert({chunks_[c].offset, c});
}

void Arena::erase_free(std::uint32_t c) {
  if (c != last_) by_size_.erase(chunks_[c].size, chunks_[c].offset);
  if (keep_by_offset_) by_offset_.erase({chunks_[c].offset, c});
}

std::uint32_t Arena::best_fit(Bytes r) const {
  const auto* e = by_size_.lower_bound(r);
  if (last_ != kNone && chunks_[last_].free && chunks_[last_].size >= r) {
    const Chunk& t = chunks_[last_];
    if (!e || t.size < e->size || (t.size == e->size && t.offset < e->addr)) return last_;
  }
  return e ? e->id : kNone;
}

std::uint32_t Arena::first_fit(Bytes r) const {
  for (const auto& [off, c] : by_offset_)
    if (chunks_[c].size >= r) return c;
  return kNone;
}

Bytes Arena::take(std::uint32_t c, Bytes r, Handle h) {
  erase_free(c);
  Chunk& ch = chunks_[c];
  if (ch.size > r) {
    std::uint32_t rest = acquire_slot(chunks_, spare_);
    Chunk& cc = chunks_[c];  // acquire_slot may have reallocated
    chunks_[rest] = Chunk{cc.offset + r, cc.size - r, c, cc.next, true};
    if (cc.next != kNone) chunks_[cc.next].prev = rest;
    else last_ = rest;
    cc.next = rest;
    cc.size = r;
    insert_free(rest);  // after last_ moved: a new tail stays out of by_size
  }
  chunks_[c].free = false;
  if (h >= owner_.size()) owner_.resize(h + 1, kNone);
  owner_[h] = c;
  allocated_ += chunks_[c].size;
  return chunks_[c].offset;
}

void Arena::release(Handle h) {
  std::uint32_t c = owner_[h];
  owner_[h] = kNone;
  allocated_ -= chunks_[c].size;
  chunks_[c].free = true;
  // Merge with the right neighbour, then the left one.
  std::uint32_t n = chunks_[c].next;
  if (n != kNone && chunks_[n].free) {
    erase_free(n);
    chunks_[c].size += chunks_[n].size;
    chunks_[c].next = chunks_[n].next;
    if (chunks_[n].next != kNone) chunks_[chunks_[n].next].prev = c;
    else last_ = c;
    spare_.push_back(n);
  }
  std::uint32_t p = chunks_[c].prev;
  if (p != kNone && chunks_[p].free) {
    erase_free(p);
    chunks_[p].size += chunks_[c].size;
    chunks_[p].next = chunks_[c].next;
    if (chunks_[c].next != kNone) chunks_[chunks_[c].next].prev = p;
    else last_ = p;
    spare_.push_back(c);
    c = p;
  }
  insert_free(c);
}

Usage Arena::usage() const {
  Usage u;
  u.allocated = allocated_;
  bool tail_free = last_ != kNone && chunks_[last_].free;
  Bytes extent = tail_free ? chunks_[last_].offset : capacity_;
  u.reserved = std::min(round_up(extent, granularity_), capacity_);
  // Largest hole below the extent: the biggest free chunk that is not the free tail.
  const auto* hole = by_size_.largest();
  u.largest_free = hole ? hole->size : 0;
  // The tail's part below the rounded extent is free reserved memory as well.
  if (tail_free) u.largest_free = std::max(u.largest_free, u.reserved - extent);
  u.available = capacity_ - allocated_;
  u.largest_available = std::max(u.largest_free, tail_free ? chunks_[last_].size : 0);
  return u;
}

void Arena::validate() const {
  auto fail = [](const std::string& s) { throw std::logic_error("arena: " + s); };
  Bytes off = 0, alloc = 0;
  size_t nfree = 0;
  std::uint32_t prev = kNone;
  // Chunk 0 is always the lowest: merges keep the left chunk and only split off to the right.
  std::uint32_t c = chunks_.empty() ? kNone : 0;
  while (c != kNone) {
    const Chunk& ch = chunks_[c];
    if (ch.offset != off) fail(fmt::format("chunk at {} expected at {} (gap or overlap)", ch.offset, off));
    if (ch.prev != prev) fail("prev link broken");
    if (ch.offset % alignment_) fail("misaligned chunk");
    if (ch.free) {
      ++nfree;
      if (prev != kNone && chunks_[prev].free) fail("two adjacent free chunks");
      if ((c != last_ && !by_size_.contains(ch.size, ch.offset)) || (keep_by_offset_ && !by_offset_.count({ch.offset, c})))
        fail("free chunk missing from an index");
    } else {
      alloc += ch.size;
    }
    off += ch.size;
    prev = c;
    c = ch.next;
  }
  if (off != capacity_) fail(fmt::format("chunks cover {} of {} bytes", off, capacity_));
  if (prev != last_) fail("last chunk pointer stale");
  size_t tail = last_ != kNone && chunks_[last_].free ? 1 : 0;
  if (nfree - tail != by_size_.size() || (keep_by_offset_ && nfree != by_offset_.size())) fail("index sizes differ from free chunk count");
  if (alloc != allocated_) fail(fmt::format("allocated {} != sum of in-use chunks {}", allocated_, alloc));
}

}  // namespace fragsim

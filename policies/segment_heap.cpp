#include "policies/segment_heap.h"
#include "policies/slot_pool.h"

#include <stdexcept>

#include <fmt/format.h>

namespace fragsim {

std::int32_t SegmentHeap::add_segment(Addr base, Bytes size, bool mapped) {
  std::int32_t b = acquire_slot(blocks_, spare_);
  std::int32_t s = static_cast<std::int32_t>(segments_.size());
  segments_.push_back(Segment{base, size, b, 0, 1, size, true, -1, 0});
  blocks_[b] = Block{base, size, 0, kNil, kNil, s, false, mapped, 0};
  if (mapped) index_insert(b);
  reserved_ += size;
  return s;
}

std::int32_t SegmentHeap::map_prefix(std::int32_t b, Bytes bytes) {
  if (bytes < blocks_[b].size) {
    std::int32_t rest = acquire_slot(blocks_, spare_);
    Block& a = blocks_[b];
    blocks_[rest] = Block{a.addr + bytes, a.size - bytes, 0, b, a.next, a.seg, false, false, 0};
    if (a.next != kNil) blocks_[a.next].prev = rest;
    a.next = rest;
    a.size = bytes;
    ++segments_[a.seg].blocks;
  }
  blocks_[b].mapped = true;
  return merge_free(b);
}

void SegmentHeap::unmap_range(std::int32_t b, Addr lo, Addr hi) {
  index_erase(b);
  if (lo > blocks_[b].addr) {  // keep [addr, lo) as a mapped free block, go on with the rest
    std::int32_t rest = split_after(b, lo - blocks_[b].addr);
    index_erase(rest);
    index_insert(b);
    b = rest;
  }
  if (hi < blocks_[b].addr + blocks_[b].size) split_after(b, hi - blocks_[b].addr);  // mapped free tail, indexed
  blocks_[b].mapped = false;
  merge_free(b);
}

std::int32_t SegmentHeap::merge_free(std::int32_t b) {
  Segment& sg = segments_[blocks_[b].seg];
  bool m = blocks_[b].mapped;
  std::int32_t p = blocks_[b].prev;
  if (p != kNil && !blocks_[p].in_use && blocks_[p].mapped == m) {
    if (m) index_erase(p);
    blocks_[p].size += blocks_[b].size;
    blocks_[p].next = blocks_[b].next;
    if (blocks_[b].next != kNil) blocks_[blocks_[b].next].prev = p;
    spare_.push_back(b);
    --sg.blocks;
    b = p;
  }
  std::int32_t n = blocks_[b].next;
  if (n != kNil && !blocks_[n].in_use && blocks_[n].mapped == m) {
    if (m) index_erase(n);
    blocks_[b].size += blocks_[n].size;
    blocks_[b].next = blocks_[n].next;
    if (blocks_[n].next != kNil) blocks_[blocks_[n].next].prev = b;
    spare_.push_back(n);
    --sg.blocks;
  }
  if (m) index_insert(b);
  return b;
}

std::int32_t SegmentHeap::split_after(std::int32_t b, Bytes keep) {
  std::int32_t n = acquire_slot(blocks_, spare_);
  Block& a = blocks_[b];
  blocks_[n] = Block{a.addr + keep, a.size - keep, 0, b, a.next, a.seg, false, a.mapped, 0};
  if (a.next != kNil) blocks_[a.next].prev = n;
  a.next = n;
  a.size = keep;
  ++segments_[a.seg].blocks;
  if (blocks_[n].mapped) index_insert(n);
  return n;
}

std::int32_t SegmentHeap::take(std::int32_t b, Bytes r, Bytes requested, bool split) {
  index_erase(b);
  if (split && blocks_[b].size > r) split_after(b, r);
  Block& a = blocks_[b];
  a.in_use = true;
  a.requested = requested;
  Segment& sg = segments_[a.seg];
  ++sg.in_use;
  sg.free_bytes -= a.size;
  allocated_ += a.size;
  return b;
}

std::int32_t SegmentHeap::carve(std::int32_t b, Addr at, Bytes r, Bytes requested) {
  if (at > blocks_[b].addr) {
    index_erase(b);
    std::int32_t rest = split_after(b, at - blocks_[b].addr);
    index_insert(b);
    b = rest;
  }
  return take(b, r, requested, true);
}

std::int32_t SegmentHeap::free_block(std::int32_t b) {
  Block& a = blocks_[b];
  a.in_use = false;
  Segment& sg = segments_[a.seg];
  --sg.in_use;
  sg.free_bytes += a.size;
  allocated_ -= a.size;
  return merge_free(b);
}

void SegmentHeap::remove_segment(std::int32_t s) {
  Segment& sg = segments_[s];
  std::int32_t b = sg.first;
  if (blocks_[b].mapped) index_erase(b);
  spare_.push_back(b);
  reserved_ -= sg.size;
  sg.live = false;
  sg.first = kNil;
}

void SegmentHeap::validate(const std::string& owner) const {
  auto fail = [&](const std::string& m) { throw std::logic_error(owner + ": " + m); };
  Bytes alloc = 0, reserved = 0;
  size_t nfree = 0;
  for (size_t si = 0; si < segments_.size(); ++si) {
    const Segment& sg = segments_[si];
    if (!sg.live) continue;
    reserved += sg.size;
    Addr at = sg.base;
    std::int32_t prev = kNil;
    std::uint32_t used = 0, count = 0;
    Bytes free_bytes = 0;
    for (std::int32_t b = sg.first; b != kNil; b = blocks_[b].next) {
      const Block& bl = blocks_[b];
      if (bl.addr != at) fail(fmt::format("block at {:#x} expected at {:#x}", bl.addr, at));
      if (bl.prev != prev || bl.seg != static_cast<std::int32_t>(si)) fail("broken block links");
      if (bl.in_use) {
        alloc += bl.size;
        ++used;
      } else {
        if (prev != kNil && !blocks_[prev].in_use && blocks_[prev].mapped == bl.mapped)
          fail("two adjacent free blocks of the same mapped state");
        if (bl.mapped) {
          ++nfree;
          if (!free_.contains(bl.size, bl.addr)) fail("free block missing from the index");
        }
      }
      at += bl.size;
      prev = b;
      ++count;
      if (!bl.in_use) free_bytes += bl.size;
    }
    if (at != sg.base + sg.size) fail("blocks do not cover the segment");
    if (count != sg.blocks || free_bytes != sg.free_bytes) fail("segment block count or free bytes stale");
    if (used != sg.in_use) fail("segment in-use count stale");
  }
  if (nfree != free_.size()) fail("index holds stale blocks");
  if (alloc != allocated_) fail(fmt::format("allocated {} != Σ in-use blocks {}", allocated_, alloc));
  if (reserved != reserved_) fail("reserved != Σ segments");
}

}  // namespace fragsim

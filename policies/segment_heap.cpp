#include "policies/segment_heap.h"

#include "sim/base/error.h"

namespace fragsim {

std::int32_t SegmentHeap::split(std::int32_t b, Bytes keep) {
  std::int32_t n = chunks_.split(b, keep);
  chunks_.extra(n).requested = 0;
  return n;
}

std::int32_t SegmentHeap::add_segment(Addr base, Bytes size, bool mapped, int id) {
  std::int32_t s = chunks_.add_region(base, size, SegmentBlockExtra{0, mapped, 0}, {}, id);
  index_insert(segment(s).first);
  reserved_ += size;
  return s;
}

std::int32_t SegmentHeap::map_prefix(std::int32_t b, Bytes bytes) {
  index_erase(b);
  if (bytes < block(b).size) index_insert(split(b, bytes));  // the rest stays unmapped
  chunks_.extra(b).mapped = true;
  return merge_free(b);
}

std::int32_t SegmentHeap::split_unmapped(std::int32_t b, Bytes keep) {
  index_erase(b);
  std::int32_t rest = split(b, keep);
  index_insert(b);
  index_insert(rest);
  return rest;
}

void SegmentHeap::unmap_range(std::int32_t b, Addr lo, Addr hi) {
  index_erase(b);
  if (lo > block(b).addr) {  // keep [addr, lo) as a mapped free block, go on with the rest
    std::int32_t rest = split(b, lo - block(b).addr);
    index_insert(b);
    b = rest;
  }
  if (hi < block(b).addr + block(b).size) index_insert(split(b, hi - block(b).addr));  // mapped free tail
  chunks_.extra(b).mapped = false;
  merge_free(b);
}

// Pre: b is not in an index (its neighbours are, by their state).
std::int32_t SegmentHeap::merge_free(std::int32_t b) {
  bool m = block(b).x.mapped;
  std::int32_t p = block(b).prev;
  if (mergeable(p, m)) {
    index_erase(p);
    chunks_.merge_next(p);
    b = p;
  }
  std::int32_t n = block(b).next;
  if (mergeable(n, m)) {
    index_erase(n);
    chunks_.merge_next(b);
  }
  index_insert(b);
  return b;
}

std::int32_t SegmentHeap::take(std::int32_t b, Bytes r, Bytes requested, bool may_split) {
  index_erase(b);
  if (may_split && block(b).size > r) index_insert(split(b, r));
  chunks_.extra(b).requested = requested;
  chunks_.set_in_use(b, true);
  allocated_ += block(b).size;
  return b;
}

std::int32_t SegmentHeap::carve(std::int32_t b, Addr at, Bytes r, Bytes requested) {
  if (at > block(b).addr) {
    index_erase(b);
    std::int32_t rest = split(b, at - block(b).addr);
    index_insert(b);
    index_insert(rest);
    b = rest;
  }
  return take(b, r, requested, true);
}

void SegmentHeap::grow_in_use(std::int32_t b, Bytes bytes) {
  std::int32_t f = block(b).next;
  FRAGSIM_CHECK(f != kNil && !block(f).in_use && block(f).x.mapped && bytes <= block(f).size, "bad grow");
  index_erase(f);
  if (bytes < block(f).size) index_insert(split(f, bytes));
  chunks_.absorb_next_free(b);
  allocated_ += bytes;
}

std::int32_t SegmentHeap::free_block(std::int32_t b) {
  allocated_ -= block(b).size;
  chunks_.set_in_use(b, false);
  return merge_free(b);
}

void SegmentHeap::remove_segment(std::int32_t s) {
  std::int32_t b = segment(s).first;
  index_erase(b);
  reserved_ -= segment(s).size;
  chunks_.remove_region(s);
}

void SegmentHeap::validate(const std::string& owner) const {
  Bytes alloc = 0, reserved = 0;
  size_t nfree = 0, nunmapped = 0;
  for (std::int32_t s = 0; s < chunks_.region_count(); ++s)
    if (segment(s).live) reserved += segment(s).size;
  chunks_.validate(owner, [&](std::int32_t b) {
    const Block& bl = block(b);
    if (bl.in_use) {
      alloc += bl.size;
      return;
    }
    FRAGSIM_CHECK(!mergeable(bl.prev, bl.x.mapped), owner + ": two adjacent free blocks of the same mapped state");
    if (bl.x.mapped) {
      ++nfree;
      FRAGSIM_CHECK(free_.contains(bl.size, bl.addr), owner + ": free block missing from the index");
    } else if (index_unmapped_) {
      ++nunmapped;
      FRAGSIM_CHECK(unmapped_.contains(bl.size, bl.addr), owner + ": unmapped block missing from its index");
    }
  });
  FRAGSIM_CHECK(nfree == free_.size(), owner + ": index holds stale blocks");
  FRAGSIM_CHECK(nunmapped == unmapped_.size(), owner + ": the unmapped index holds stale blocks");
  FRAGSIM_CHECK(alloc == allocated_, owner + ": allocated != Σ in-use blocks");
  FRAGSIM_CHECK(reserved == reserved_, owner + ": reserved != Σ segments");
}

}  // namespace fragsim

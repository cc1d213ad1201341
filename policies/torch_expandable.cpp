#include "policies/torch_expandable.h"

#include <algorithm>

#include "policies/torch_alloc_config.h"
#include "sim/base/error.h"

namespace fragsim::torch {

Bytes ExpandableSegments::page_size(bool small) { return small ? kSmallBuffer : kLargeBuffer; }

Bytes ExpandableSegments::reservation_size(bool small) const {
  Bytes page = page_size(small);
  Bytes want = total_ > kTooLarge - total_ / 8 ? kTooLarge : total_ + total_ / 8;
  return std::max<Bytes>(round_up_sat(want, page), page);
}

void ExpandableSegments::observe_map(Addr addr, Bytes size) {
  auto it = reservations_.upper_bound(addr);
  if (it != reservations_.begin()) {
    --it;
    if (addr - it->first < it->second) return;  // inside a reservation we know
  }
  bool small = size % kLargeBuffer != 0;
  if (std::find(expected_[small].begin(), expected_[small].end(), addr) == expected_[small].end())
    expected_[small].push_back(addr);
}

std::int32_t ExpandableSegments::new_reservation(bool small, const Reserve& reserve, std::optional<Addr> at) {
  Bytes page = page_size(small), size = reservation_size(small);
  // A range mapped before the trace: its reservation's pages lie at base + k·page, so the range's
  // own start is one of them (the base itself need not be page-aligned: the driver reserves at
  // its own granularity). Taking it as the base keeps every page where it is. Else the base the
  // recording's next reservation had, when it showed one.
  if (!at && !expected_[small].empty()) {
    at = expected_[small].front();
    expected_[small].pop_front();
  }
  auto take = [&](Addr base) {
    std::int32_t s = reserve(base, size);
    if (s != SegmentHeap::kNil) reservations_[base] = size;
    return s;
  };
  if (at)
    if (std::int32_t s = take(*at); s != SegmentHeap::kNil) return s;
  // This model's own address space, past any segment in the way (a recording may hold segments
  // anywhere): a recorded base that meets another segment comes here too.
  for (;;) {
    Addr base = round_up(next_va_, page);
    next_va_ = base + size;
    if (std::int32_t s = take(base); s != SegmentHeap::kNil) return s;
  }
}

bool ExpandableSegments::map_block(SegmentHeap& heap, std::int32_t* b, Bytes size, Bytes page, Grown* out) {
  Addr at = heap.block(*b).addr;
  Bytes bytes = std::min(round_up_sat(size, page), heap.block(*b).size);
  if (dev_->available() < bytes) return false;
  for (Bytes off = 0; off < bytes; off += page) {
    auto g = dev_->allocate(page);
    if (!g) {  // all or nothing, as ExpandableSegment::map releases what it created
      for (Bytes o = 0; o < off; o += page) unmap(at + o);
      return false;
    }
    mapped_bytes_ += g.bytes();
    pages_[at + off] = std::move(g);
  }
  out->mapped += bytes;
  out->pages += bytes / page;
  *b = heap.map_prefix(*b, bytes);
  return true;
}

ExpandableSegments::Grown ExpandableSegments::grow(SegmentHeap& heap, bool small, Bytes r,
                                                   const std::map<Addr, std::int32_t>& reservations,
                                                   const Reserve& reserve) {
  Grown out;
  Bytes page = page_size(small);
  auto allocatable = [&](std::int32_t b) { return b != SegmentHeap::kNil && !heap.block(b).in_use; };
  std::int32_t cand = SegmentHeap::kNil;
  // find_expandable_block: unmapped blocks in address order.
  for (const auto& [base, s] : reservations) {
    if (cand != SegmentHeap::kNil) break;
    for (std::int32_t b = heap.segment(s).first; b != SegmentHeap::kNil; b = heap.block(b).next) {
      if (heap.block(b).in_use || heap.block(b).x.mapped) continue;
      std::int32_t c = allocatable(heap.block(b).prev) ? heap.block(b).prev : b;
      Bytes have = 0;
      for (std::int32_t x = c; have < r && allocatable(x); x = heap.block(x).next) have += heap.block(x).size;
      if (have >= r) {
        cand = c;
        break;
      }
    }
  }
  if (cand == SegmentHeap::kNil) {
    if (r > reservation_size(small)) return out;  // larger than a whole reservation
    cand = heap.segment(new_reservation(small, reserve)).first;
  }
  // try_allocate_expandable_block: map the candidate if it is unmapped, then what follows.
  if (!heap.block(cand).x.mapped && !map_block(heap, &cand, std::min(heap.block(cand).size, r), page, &out)) return out;
  while (heap.block(cand).size < r) {
    std::int32_t next = heap.block(cand).next;
    FRAGSIM_CHECK(next != SegmentHeap::kNil && !heap.block(next).x.mapped, "expandable: free -> unmapped expected");
    Bytes remaining = r - heap.block(cand).size;
    if (!map_block(heap, &next, std::min(remaining, heap.block(next).size), page, &out)) return out;
    cand = next;
  }
  out.block = cand;
  return out;
}

ExpandableSegments::Grown ExpandableSegments::seed(SegmentHeap& heap, bool small, Addr addr, Bytes size,
                                                   const std::map<Addr, std::int32_t>& reservations,
                                                   const Reserve& reserve) {
  std::int32_t seg = -1;
  auto it = reservations.upper_bound(addr);
  if (it != reservations.begin()) {
    --it;
    const auto& sg = heap.segment(it->second);
    if (addr - sg.base < sg.size) seg = it->second;
  }
  if (seg < 0) seg = new_reservation(small, reserve, addr);
  return map_range(heap, small, seg, addr, size);
}

ExpandableSegments::Grown ExpandableSegments::map_range(SegmentHeap& heap, bool small, std::int32_t seg, Addr addr,
                                                        Bytes size) {
  Grown out;
  const auto& sg = heap.segment(seg);
  Bytes page = page_size(small);
  if (addr < sg.base || addr - sg.base >= sg.size) return out;
  size = std::min<Bytes>(std::max<Bytes>(size, 1), sg.size - (addr - sg.base));
  // Every unmapped block's bounds lie on pages (reservations are whole pages, and blocks are
  // mapped and unmapped a page at a time), so the pages under the range are whole blocks' parts.
  Addr lo = sg.base + round_down(addr - sg.base, page);
  Addr hi = sg.base + std::min(round_up_sat(addr + size - sg.base, page), sg.size);
  const std::int32_t from = heap.block_at(seg, lo);
  Bytes missing = 0;
  for (std::int32_t b = from; b != SegmentHeap::kNil && heap.block(b).addr < hi; b = heap.block(b).next) {
    const auto& bl = heap.block(b);
    Addr end = bl.addr + bl.size;
    if (end <= lo) continue;
    if (bl.in_use && end > addr && bl.addr < addr + size) return out;  // the range is taken
    if (!bl.in_use && !bl.x.mapped) missing += std::min(end, hi) - std::max(bl.addr, lo);
  }
  if (dev_->available() < missing) return out;
  for (std::int32_t b = from; b != SegmentHeap::kNil && heap.block(b).addr < hi;) {
    const auto& bl = heap.block(b);
    Addr end = bl.addr + bl.size;
    if (end <= lo || bl.in_use || bl.x.mapped) {
      b = bl.next;
      continue;
    }
    std::int32_t target = bl.addr < lo ? heap.split_unmapped(b, lo - bl.addr) : b;
    Bytes bytes = std::min(end, hi) - heap.block(target).addr;
    if (!map_block(heap, &target, bytes, page, &out)) return out;  // the device's free memory is in pieces
    b = heap.block(target).next;
  }
  const auto& bl = heap.block(heap.block_at(seg, addr));
  if (addr + size <= bl.addr + bl.size && !bl.in_use && bl.x.mapped) out.block = heap.block_at(seg, addr);
  return out;
}

void ExpandableSegments::unmap(Addr page) {
  auto it = pages_.find(page);
  FRAGSIM_CHECK(it != pages_.end(), "expandable: unmapping a page that is not mapped");
  mapped_bytes_ -= it->second.bytes();
  pages_.erase(it);  // the grant gives the page back
}

ExpandableSegments::Unmapped ExpandableSegments::unmap_free_pages(SegmentHeap& heap, bool small) {
  Bytes page = page_size(small);
  Unmapped out;
  for (size_t s = 0; s < heap.segment_count(); ++s) {
    auto si = static_cast<std::int32_t>(s);
    Addr base = heap.segment(si).base;
    if (!heap.segment(si).live || !reservations_.count(base)) continue;  // a cudaMalloc segment: not ours
    for (std::int32_t b = heap.segment(si).first; b != SegmentHeap::kNil;) {
      const auto& bl = heap.block(b);
      std::int32_t next = bl.next;
      if (!bl.in_use && bl.x.mapped) {
        Addr lo = base + round_up(bl.addr - base, page);
        Addr hi = base + round_down(bl.addr + bl.size - base, page);
        if (hi > lo) {
          for (Addr a = lo; a < hi; a += page) {
            unmap(a);
            ++out.pages;
          }
          out.bytes += hi - lo;
          heap.unmap_range(b, lo, hi);
          next = heap.segment(si).first;  // blocks changed: rescan
          continue;
        }
      }
      b = next;
    }
    // release_expandable_segment: nothing left mapped in the reservation.
    const auto& sg = heap.segment(si);
    if (sg.chunks == 1 && !heap.block(sg.first).x.mapped && reservations_.count(base)) {
      out.released.push_back(si);
      reservations_.erase(base);
    }
  }
  return out;
}

}  // namespace fragsim::torch

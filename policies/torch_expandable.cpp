#include "policies/torch_expandable.h"

#include <algorithm>

#include "policies/torch_alloc_config.h"

namespace fragsim::torch {

Bytes ExpandableSegments::page_size(bool small) { return small ? kSmallBuffer : kLargeBuffer; }

ExpandableSegments::Grown ExpandableSegments::grow(SegmentHeap& heap, bool small, Bytes r,
                                                   const std::map<Addr, std::int32_t>& reservations, Bytes room,
                                                   const std::function<std::int32_t(Addr, Bytes)>& reserve) {
  Grown out;
  Bytes page = page_size(small);
  auto allocatable = [&](std::int32_t b) { return b != SegmentHeap::kNil && !heap.block(b).in_use; };
  std::int32_t cand = SegmentHeap::kNil;
  // Unmapped blocks in address order.
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
    Bytes pages = round_up_sat(static_cast<Bytes>(1.125 * static_cast<double>(total_)), page) / page;
    Bytes va = std::max<Bytes>(pages, 1) * page;
    if (r > va) return out;  // larger than a whole reservation: the device cannot hold it
    Addr base = round_up(next_va_, page);
    next_va_ = base + va;
    cand = heap.segment(reserve(base, va)).first;
  }
  // Map what the candidate lacks: its own range if unmapped, else the unmapped block after it.
  Bytes need = heap.block(cand).x.mapped ? r - std::min(r, heap.block(cand).size) : r;
  if (need > 0) {
    std::int32_t target = heap.block(cand).x.mapped ? heap.block(cand).next : cand;
    Bytes bytes = std::min(round_up_sat(need, page), heap.block(target).size);
    if (bytes > room || !map_pages(heap.block(target).addr, bytes, page)) return out;
    out.mapped = bytes;
    out.pages = bytes / page;
    cand = heap.map_prefix(target, bytes);
  }
  out.block = cand;
  return out;
}

bool ExpandableSegments::map_pages(Addr at, Bytes bytes, Bytes page) {
  if (dev_->available() < bytes) return false;
  for (Bytes off = 0; off < bytes; off += page) {
    auto g = dev_->allocate(page);
    if (!g) {  // a device whose granularity does not divide the page: give back what was mapped
      for (Bytes o = 0; o < off; o += page) unmap(at + o);
      return false;
    }
    mapped_bytes_ += g.bytes();
    pages_[at + off] = std::move(g);
  }
  return true;
}

void ExpandableSegments::unmap(Addr page) {
  auto it = pages_.find(page);
  mapped_bytes_ -= it->second.bytes();
  pages_.erase(it);  // the grant gives the page back
}

std::pair<Bytes, std::uint64_t> ExpandableSegments::unmap_free_pages(SegmentHeap& heap, bool small) {
  Bytes page = page_size(small), total = 0;
  std::uint64_t count = 0;
  for (size_t s = 0; s < heap.segment_count(); ++s) {
    const auto& sg = heap.segment(static_cast<std::int32_t>(s));
    if (!sg.live) continue;
    for (std::int32_t b = sg.first; b != SegmentHeap::kNil;) {
      const auto& bl = heap.block(b);
      std::int32_t next = bl.next;
      if (!bl.in_use && bl.x.mapped) {
        Addr lo = sg.base + round_up(bl.addr - sg.base, page);
        Addr hi = sg.base + round_down(bl.addr + bl.size - sg.base, page);
        if (hi > lo) {
          for (Addr a = lo; a < hi; a += page) {
            unmap(a);
            ++count;
          }
          total += hi - lo;
          heap.unmap_range(b, lo, hi);
          next = heap.segment(static_cast<std::int32_t>(s)).first;  // blocks changed: rescan
          continue;
        }
      }
      b = next;
    }
  }
  return {total, count};
}

}  // namespace fragsim::torch

// Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), as PyTorch's
// ExpandableSegment in c10/cuda/CUDACachingAllocator.cpp (specs/torch-caching.md §6).
//
// Per (pool, stream) the allocator reserves a virtual address range of
// ceil(1.125 × total / page) pages (page = 2 MiB small pool, 20 MiB large pool) and maps physical
// pages into it on demand, one device allocation per page. In the pool's SegmentHeap a
// reservation is one segment whose unmapped blocks are free but unindexed (segment_heap.h).
//   grow     — a miss asks for r bytes (not the segment size): the lowest-address unmapped range
//              of the stream's reservations (starting at a free mapped block just before it when
//              there is one) with room, else a new reservation; ceil(need / page) pages mapped.
//   unmap    — empty_cache unmaps every whole page inside free mapped blocks.
// Pages are DeviceMemory grants owned here: they return to the device when unmapped or when the
// policy goes.
#pragma once
#include <functional>
#include <map>

#include "hardware_models/device_memory.h"
#include "policies/segment_heap.h"

namespace fragsim::torch {

class ExpandableSegments {
 public:
  ExpandableSegments(DeviceMemory* dev, Bytes total) : dev_(dev), total_(total) {}
  static Bytes page_size(bool small);

  struct Grown {
    std::int32_t block = SegmentHeap::kNil;  // a free mapped block of ≥ r bytes, kNil when the device is full
    Bytes mapped = 0;                        // bytes newly mapped (reserved grows by this)
    std::uint64_t pages = 0;                 // device allocations made
  };
  // Finds room for r bytes in `reservations` (base → segment of heap, in address order),
  // reserving a new range through `reserve(base, size)` when none has room, and maps the pages it
  // lacks while `room` bytes may still be mapped.
  Grown grow(SegmentHeap& heap, bool small, Bytes r, const std::map<Addr, std::int32_t>& reservations, Bytes room,
             const std::function<std::int32_t(Addr, Bytes)>& reserve);
  // Unmaps every whole page inside the heap's free mapped blocks; returns (bytes, pages) unmapped.
  std::pair<Bytes, std::uint64_t> unmap_free_pages(SegmentHeap& heap, bool small);
  size_t mapped_pages() const { return pages_.size(); }
  Bytes mapped_bytes() const { return mapped_bytes_; }  // Σ device bytes behind the mapped pages

 private:
  bool map_pages(Addr at, Bytes bytes, Bytes page);
  void unmap(Addr page);

  DeviceMemory* dev_;
  Bytes total_;
  Addr next_va_ = Addr(0x600000000000ULL);     // reservations' virtual addresses
  std::map<Addr, DeviceMemory::Grant> pages_;  // mapped page VA → its device memory
  Bytes mapped_bytes_ = 0;
};

}  // namespace fragsim::torch

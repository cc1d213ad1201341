// Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), as PyTorch's
// ExpandableSegment and the allocator's try_allocate_expandable_block / map_block / unmap_block
// (c10/cuda/CUDACachingAllocator.cpp; specs/torch-caching.md §6).
//
// Per (pool, stream) the allocator reserves virtual address space for (total + total/8) bytes,
// rounded up to whole pages (page = 2 MiB small pool, 20 MiB large pool), and maps physical pages
// into it on demand, one device allocation per page. In the pool's SegmentHeap a reservation is
// one segment whose unmapped blocks are free but unindexed (segment_heap.h).
//   grow   — a miss asks for r bytes (not the segment size): the lowest-address unmapped block of
//            the stream's reservations (starting at the free mapped block just before it, when
//            there is one) with r allocatable bytes from there on, else a new reservation; then
//            map_block on it and on each following unmapped block until the candidate holds r.
//            A map_block maps whole pages and either maps all of them or none.
//   unmap  — empty_cache unmaps every whole page inside free mapped blocks; a reservation left
//            with nothing mapped is released.
// Addresses: a reservation takes the recorded base when the trace recorded one (a segment_map
// outside every known reservation: the first map of a reservation is at its base), else the next
// free virtual address of this model; never a range another segment holds (the next free one past
// it then). Pages are DeviceMemory grants owned here.
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "hardware_models/device_memory.h"
#include "policies/segment_heap.h"

namespace fragsim::torch {

class ExpandableSegments {
 public:
  ExpandableSegments(DeviceMemory* dev, Bytes total) : dev_(dev), total_(total) {}
  static Bytes page_size(bool small);
  // The reservation's size: (total + total/8) rounded up to pages, as ExpandableSegment sizes it.
  Bytes reservation_size(bool small) const;

  // A recorded segment_map: when it lies outside every reservation, it is where the next
  // reservation of its pool starts (a map smaller than a large page is the small pool's).
  void observe_map(Addr addr, Bytes size);

  // Registers a reservation segment, or returns SegmentHeap::kNil when another segment lies in
  // [base, base + size) (the reservation then goes elsewhere).
  using Reserve = std::function<std::int32_t(Addr base, Bytes size)>;
  struct Grown {
    std::int32_t block = SegmentHeap::kNil;  // a free mapped block of ≥ r bytes, kNil when the device is full
    Bytes mapped = 0;                        // bytes newly mapped (reserved grows by this)
    std::uint64_t pages = 0;                 // device allocations made
  };
  // PyTorch's try_allocate_expandable_block over `reservations` (base → segment of heap, in
  // address order); maps while the device has room.
  Grown grow(SegmentHeap& heap, bool small, Bytes r, const std::map<Addr, std::int32_t>& reservations,
             const Reserve& reserve);
  // A range mapped before the trace began: maps [addr, addr + size) inside the reservation that
  // holds it, or a new one starting there.
  Grown seed(SegmentHeap& heap, bool small, Addr addr, Bytes size, const std::map<Addr, std::int32_t>& reservations,
             const Reserve& reserve);
  // Maps the whole pages of reservation `seg` under [addr, addr + size) that are not mapped yet
  // (a page starts at base + k·page), all or nothing: what a block the recording placed there
  // needs before it can be carved. out.block: the free mapped block then holding the range, kNil
  // when an in-use block meets the range or the device cannot give the pages (nothing mapped).
  Grown map_range(SegmentHeap& heap, bool small, std::int32_t seg, Addr addr, Bytes size);
  struct Unmapped {
    Bytes bytes = 0;
    std::uint64_t pages = 0;
    std::vector<std::int32_t> released;  // reservation segments left with nothing mapped
  };
  // empty_cache: unmaps every whole page inside the heap's free mapped blocks.
  Unmapped unmap_free_pages(SegmentHeap& heap, bool small);
  // The reservation segment s of `heap` goes (after unmap_free_pages released it).
  void forget_reservation(Addr base) { reservations_.erase(base); }

  size_t mapped_pages() const { return pages_.size(); }
  Bytes mapped_bytes() const { return mapped_bytes_; }  // Σ device bytes behind the mapped pages

 private:
  // Maps the first `size` bytes (whole pages) of unmapped block b; false (nothing mapped) when
  // the device cannot give them all. *b becomes the merged free block.
  bool map_block(SegmentHeap& heap, std::int32_t* b, Bytes size, Bytes page, Grown* out);
  void unmap(Addr page);
  std::int32_t new_reservation(bool small, const Reserve& reserve, std::optional<Addr> at = std::nullopt);

  DeviceMemory* dev_;
  Bytes total_;
  Addr next_va_ = Addr(0x600000000000ULL);     // this model's own reservations
  std::deque<Addr> expected_[2];               // recorded reservation bases: [large, small]
  std::map<Addr, Bytes> reservations_;         // base → size, every pool and stream
  std::map<Addr, DeviceMemory::Grant> pages_;  // mapped page VA → its device memory
  Bytes mapped_bytes_ = 0;
};

}  // namespace fragsim::torch

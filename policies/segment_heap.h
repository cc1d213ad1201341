// SegmentHeap: memory obtained from the device in segments, cut into blocks, with one best-fit
// index over the free blocks of all segments — the state shared by the caching-pool models
// (cuda-async; torch-caching keeps one per pool and stream).
//
//   Segment — one device allocation [base, base+size); blocks never merge across segments.
//   Block   — [addr, addr+size) in a segment; prev/next are physical neighbours.
//   free    — SizeIndex ordered (size, addr) over the *mapped* free blocks: best_fit(r) =
//             smallest free block ≥ r, lowest address on ties. Unmapped blocks (expandable
//             segments' reserved address space) are free but never indexed.
// Invariants (validate): the blocks of a live segment tile it; no two adjacent free blocks
//   (free_block coalesces both ways); the index holds exactly the free blocks;
//   allocated = Σ in-use block sizes; reserved = Σ live segment sizes (address space);
//   free neighbours always differ in mapped state.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "policies/size_index.h"

namespace fragsim {

class SegmentHeap {
 public:
  static constexpr std::int32_t kNil = -1;
  struct Block {
    Addr addr = 0;
    Bytes size = 0, requested = 0;
    std::int32_t prev = kNil, next = kNil, seg = kNil;
    bool in_use = false;
    bool mapped = true;     // false: reserved address space with no memory behind it
    std::uint64_t aux = 0;  // for the owning policy (e.g. a GC age base)
  };
  struct Segment {
    Addr base = 0;
    Bytes size = 0;
    std::int32_t first = kNil;
    std::uint32_t in_use = 0;
    std::uint32_t blocks = 0;  // number of blocks (1 = unsplit)
    Bytes free_bytes = 0;
    bool live = false;
    int region = -1;          // the owning policy's obtain-order id (placements' "region")
    std::int64_t counted = 0;  // the owning policy's bookkeeping (torch: its inactive-split share)
  };

  // Adds a segment as one free block (mapped, or an unmapped reservation); returns its index.
  std::int32_t add_segment(Addr base, Bytes size, bool mapped = true);
  // Expandable segments: maps the first `bytes` of unmapped free block b (the rest stays
  // unmapped), merges it with mapped free neighbours and returns the merged free block.
  std::int32_t map_prefix(std::int32_t b, Bytes bytes);
  // Unmaps [lo, hi) of mapped free block b (page-aligned by the caller).
  void unmap_range(std::int32_t b, Addr lo, Addr hi);
  // Smallest free block with size ≥ r (lowest address on ties), or nullptr.
  const SizeIndex::Entry* best_fit(Bytes r) const { return free_.lower_bound(r); }
  template <class F>
  void scan_from(Bytes r, F f) const {
    free_.scan_from(r, f);
  }
  // Takes free block b for `requested` bytes, keeping [addr, addr+r); when split, the rest
  // becomes a new free block. Returns b.
  std::int32_t take(std::int32_t b, Bytes r, Bytes requested, bool split);
  // Takes [at, at+r) out of free block b (which contains it): the part below `at` stays free,
  // the rest above at+r is split off as free. Returns the block now at `at`.
  std::int32_t carve(std::int32_t b, Addr at, Bytes r, Bytes requested);
  Block& block_mut(std::int32_t b) { return blocks_[b]; }
  // Frees an in-use block and merges it with free neighbours; returns the merged block.
  std::int32_t free_block(std::int32_t b);
  // True when the segment holds no in-use block (it is then a single free block).
  bool segment_unused(std::int32_t s) const { return segments_[s].live && segments_[s].in_use == 0; }
  // Removes an unused segment (caller returns its memory to the device).
  void remove_segment(std::int32_t s);

  const Block& block(std::int32_t b) const { return blocks_[b]; }
  const Segment& segment(std::int32_t s) const { return segments_[s]; }
  Segment& segment_mut(std::int32_t s) { return segments_[s]; }
  size_t segment_count() const { return segments_.size(); }
  Bytes allocated() const { return allocated_; }
  Bytes reserved() const { return reserved_; }
  Bytes largest_free() const { return free_.size() ? free_.largest()->size : 0; }
  size_t free_blocks() const { return free_.size(); }
  void validate(const std::string& owner) const;

 private:
  std::int32_t split_after(std::int32_t b, Bytes keep);  // b keeps `keep` bytes; returns the free rest (indexed if mapped)
  std::int32_t merge_free(std::int32_t b);                // merges free b with same-state neighbours; indexes it
  void index_insert(std::int32_t b) { free_.insert({blocks_[b].size, blocks_[b].addr, static_cast<std::uint32_t>(b)}); }
  void index_erase(std::int32_t b) { free_.erase(blocks_[b].size, blocks_[b].addr); }

  std::vector<Block> blocks_;
  std::vector<std::int32_t> spare_;
  std::vector<Segment> segments_;
  SizeIndex free_;
  Bytes allocated_ = 0, reserved_ = 0;
};

}  // namespace fragsim

// SegmentHeap: memory obtained from the device in segments, cut into blocks, with one best-fit
// index over the free blocks of all segments — the state shared by the caching-pool models
// (cuda-async; torch-caching keeps one per pool and stream).
//
//   segments, blocks — a ChunkList (policies/chunk_list.h): a segment is one device allocation
//             (or an expandable reservation), blocks never merge across segments. A block's
//             extras: the requested size, whether memory is mapped behind it, and an `aux` word
//             for the owning policy; a segment's: the owner's bookkeeping word `counted`.
//   free    — SizeIndex ordered (size, addr) over the *mapped* free blocks: best_fit(r) =
//             smallest free block ≥ r, lowest address on ties. Unmapped blocks (reserved address
//             space with no memory behind it) are free and indexed only after
//             index_unmapped() (cuda-async places into them best-fit; torch's expandable
//             segments walk them by address), in a second SizeIndex: best_fit_unmapped(r).
// Invariants (validate): the ChunkList's; no two adjacent free blocks of the same mapped state
//   (free_block coalesces both ways); the index holds exactly the mapped free blocks (and the
//   unmapped index, when kept, exactly the unmapped ones);
//   allocated = Σ in-use block sizes; reserved = Σ live segment sizes (address space).
#pragma once
#include <cstdint>
#include <string>

#include "policies/chunk_list.h"
#include "policies/memory_map.h"
#include "policies/size_index.h"

namespace fragsim {

struct SegmentBlockExtra {
  Bytes requested = 0;
  bool mapped = true;     // false: reserved address space with no memory behind it
  std::int32_t tag = 0;   // for the owning policy (cuda-async: the stream that freed the block)
  std::uint64_t aux = 0;  // for the owning policy (e.g. a GC age base)
};
struct SegmentExtra {
  std::int64_t counted = 0;  // the owning policy's bookkeeping (torch: its inactive-split share)
  bool expandable = false;   // an expandable reservation (torch)
};

class SegmentHeap {
 public:
  using Chunks = ChunkList<SegmentBlockExtra, SegmentExtra>;
  using Block = Chunks::Chunk;
  using Segment = Chunks::Region;
  static constexpr std::int32_t kNil = Chunks::kNil;

  // Keeps a best-fit index over the unmapped free blocks too. Pre: no segment added yet.
  void index_unmapped() { index_unmapped_ = true; }

  // Adds a segment as one free block (mapped, or an unmapped reservation); returns its index.
  // `id` numbers it in the owner's obtain order across all its heaps (placements' "region").
  std::int32_t add_segment(Addr base, Bytes size, bool mapped, int id);
  // Expandable segments: maps the first `bytes` of unmapped free block b (the rest stays
  // unmapped), merges it with mapped free neighbours and returns the merged free block.
  std::int32_t map_prefix(std::int32_t b, Bytes bytes);
  // Splits unmapped free block b after `keep` bytes (both parts stay unmapped); returns the rest.
  std::int32_t split_unmapped(std::int32_t b, Bytes keep);
  // Unmaps [lo, hi) of mapped free block b (page-aligned by the caller).
  void unmap_range(std::int32_t b, Addr lo, Addr hi);
  // Smallest free block with size ≥ r (lowest address on ties), or nullptr.
  const SizeIndex::Entry* best_fit(Bytes r) const { return free_.lower_bound(r); }
  // Smallest unmapped free block with size ≥ r (lowest address on ties). Pre: index_unmapped().
  const SizeIndex::Entry* best_fit_unmapped(Bytes r) const { return unmapped_.lower_bound(r); }
  template <class F>
  void scan_from(Bytes r, F f) const {
    free_.scan_from(r, f);
  }
  // Takes free block b for `requested` bytes, keeping [addr, addr+r); when split, the rest
  // becomes a new free block. Returns b.
  std::int32_t take(std::int32_t b, Bytes r, Bytes requested, bool may_split);
  // Takes [at, at+r) out of free block b (which contains it): the part below `at` stays free,
  // the rest above at+r is split off as free. Returns the block now at `at`.
  std::int32_t carve(std::int32_t b, Addr at, Bytes r, Bytes requested);
  // In-use block b takes the first `bytes` of the free block right after it (pre: it exists and
  // holds that many): what seeding learns about a block's unsplit remainder.
  void grow_in_use(std::int32_t b, Bytes bytes);
  // Frees an in-use block and merges it with free neighbours; returns the merged block.
  std::int32_t free_block(std::int32_t b);
  // True when the segment holds no in-use block (it is then a single free block).
  bool segment_unused(std::int32_t s) const { return chunks_.region_unused(s); }
  // Removes an unused segment (the caller returns its memory to the device).
  void remove_segment(std::int32_t s);

  // The block of live segment s holding address at (pre: s holds it); a walk in address order
  // until index_addresses() turns on an ordered index (chunk_list.h).
  std::int32_t block_at(std::int32_t s, Addr at) const { return chunks_.chunk_at(s, at); }
  void index_addresses() { chunks_.index_addresses(); }
  const Block& block(std::int32_t b) const { return chunks_.chunk(b); }
  SegmentBlockExtra& block_extra(std::int32_t b) { return chunks_.extra(b); }
  const Segment& segment(std::int32_t s) const { return chunks_.region(s); }
  SegmentExtra& segment_extra(std::int32_t s) { return chunks_.region_extra(s); }
  // Segment slots (check segment(s).live): slots of removed segments are reused.
  size_t segment_count() const { return static_cast<size_t>(chunks_.region_count()); }
  Bytes allocated() const { return allocated_; }
  Bytes reserved() const { return reserved_; }
  Bytes largest_free() const { return free_.largest_size(); }
  const SizeIndex::Entry* largest_free_block() const { return free_.largest(); }
  size_t free_blocks() const { return free_.size(); }
  void validate(const std::string& owner) const;
  void memory_map(MemoryMap* out) const {
    append_memory_map(chunks_, out, [](const Block& b) { return b.x.mapped; });
  }

 private:
  std::int32_t split(std::int32_t b, Bytes keep);  // the new free block keeps b's mapped state and aux
  std::int32_t merge_free(std::int32_t b);         // merges free b with same-state neighbours; indexes it
  // The index free block b belongs in by its mapped state (nullptr: unmapped, not kept).
  SizeIndex* index_of(std::int32_t b) { return block(b).x.mapped ? &free_ : index_unmapped_ ? &unmapped_ : nullptr; }
  void index_insert(std::int32_t b) {
    if (SizeIndex* ix = index_of(b)) ix->insert({block(b).size, block(b).addr, static_cast<std::uint32_t>(b)});
  }
  void index_erase(std::int32_t b) {
    if (SizeIndex* ix = index_of(b)) ix->erase(block(b).size, block(b).addr);
  }
  bool mergeable(std::int32_t a, bool mapped) const {
    return a != kNil && !block(a).in_use && block(a).x.mapped == mapped;
  }

  Chunks chunks_;
  SizeIndex free_;
  SizeIndex unmapped_;  // only with index_unmapped_
  bool index_unmapped_ = false;
  Bytes allocated_ = 0, reserved_ = 0;
};

}  // namespace fragsim

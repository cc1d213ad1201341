// Arena: one contiguous range [base, base + capacity) cut into chunks, the shared state of the
// baseline allocators best-fit and first-fit.
//
//   chunks    — pool of {offset, size, prev, next, free}; prev/next are physical neighbours
//               (kNone at the ends); together they tile [0, capacity) without gaps.
//   by_size   — free chunks except the free tail (the highest chunk), keyed (size, offset); best
//               fit = the smaller of lower_bound((r, 0)) and the tail. Keeping the tail apart
//               makes the largest hole below the extent an O(1) lookup.
//   by_offset — free chunks keyed offset: first fit = first in address order with size ≥ r.
//   owner     — handle → chunk.
// Invariants (validate): chunks tile the range; no two free chunks are adjacent (coalescing);
//   by_size holds exactly the free chunks but the tail, by_offset all of them (first fit only);
//   allocated = Σ in-use chunk sizes.
// Reserved memory is modelled as a brk-style heap: the extent up to the end of the highest
// in-use chunk, rounded up to the space's granularity; holes below it are the fragmentation.
#pragma once
#include <set>
#include <vector>

#include "policies/policy.h"
#include "policies/size_index.h"

namespace fragsim {

class Arena {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  struct Chunk {
    Bytes offset = 0, size = 0;
    std::uint32_t prev = kNone, next = kNone;
    bool free = true;
  };
  // by_offset: keep the address-ordered index (first fit needs it; best fit does not).
  Arena(Bytes capacity, Bytes alignment, Bytes granularity, bool by_offset);

  std::uint32_t best_fit(Bytes r) const;   // kNone when nothing fits
  std::uint32_t first_fit(Bytes r) const;  // kNone when nothing fits
  // Takes the low r bytes of free chunk c (splitting off the rest) for handle h.
  Bytes take(std::uint32_t c, Bytes r, Handle h);
  void release(Handle h);
  Bytes offset_of(Handle h) const { return chunks_[owner_[h]].offset; }
  Bytes round(Bytes n) const { return n == 0 ? alignment_ : round_up(n, alignment_); }
  Usage usage() const;
  void validate() const;

 private:
  void insert_free(std::uint32_t c);
  void erase_free(std::uint32_t c);

  Bytes capacity_, alignment_, granularity_;
  std::vector<Chunk> chunks_;
  std::vector<std::uint32_t> spare_;
  bool keep_by_offset_;
  SizeIndex by_size_;
  std::set<std::pair<Bytes, std::uint32_t>> by_offset_;  // (offset, chunk)
  std::vector<std::uint32_t> owner_;                     // handle → chunk
  std::uint32_t last_ = kNone;                           // the highest chunk
  Bytes allocated_ = 0;
};

}  // namespace fragsim

// Arena: one contiguous range [kBase, kBase + capacity) cut into chunks (a ChunkList of one
// region), the shared state of the baseline allocators best-fit and first-fit.
//
//   chunks    — ChunkList: chunks tile the range, prev/next are physical neighbours.
//   by_size   — best fit's index: free chunks except the free tail (the highest chunk), keyed
//               (size, address); best fit = the smaller of lower_bound((r, 0)) and the tail.
//               Keeping the tail apart makes the largest hole below the extent a lookup.
//   by_addr   — first fit's index instead: the same chunks keyed by address, with block maxima
//               (addr_index.h); first fit = the lowest that fits, else the tail.
//   owner     — handle → chunk.
// Invariants (validate): the ChunkList's; no two free chunks are adjacent (coalescing);
//   the fit's index holds exactly the free chunks but the tail;
//   allocated = Σ in-use chunk sizes.
// Reserved memory is modelled as a brk-style heap: the extent up to the end of the highest
// in-use chunk, rounded up to the space's granularity; holes below it are the fragmentation.
#pragma once
#include <vector>

#include "policies/addr_index.h"
#include "policies/chunk_list.h"
#include "policies/memory_map.h"
#include "policies/policy.h"
#include "policies/size_index.h"

namespace fragsim {

class Arena {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  // by_addr: index free chunks by address (first fit) instead of by size (best fit).
  Arena(Bytes capacity, Bytes alignment, Bytes granularity, bool by_addr);

  [[nodiscard]] std::uint32_t best_fit(Bytes r) const;   // kNone when nothing fits
  [[nodiscard]] std::uint32_t first_fit(Bytes r) const;  // kNone when nothing fits
  // Takes the low r bytes of free chunk c (splitting off the rest) for handle h; returns its address.
  Addr take(std::uint32_t c, Bytes r, Handle h);
  void release(Handle h);
  // Rounded request (kTooLarge when rounding overflows: it never fits).
  Bytes round(Bytes n) const;
  Usage usage() const;
  void validate() const;
  void memory_map(MemoryMap* out) const;

 private:
  using Chunks = ChunkList<>;
  using Index = Chunks::Index;
  void insert_free(Index c);
  void erase_free(Bytes size, Addr addr);
  void rekey_free(Bytes size, Addr addr, Index c);
  Index tail() const { return chunks_.region_count() ? chunks_.region(0).last : Chunks::kNil; }
  Index fitting_tail(Bytes r) const;

  Bytes capacity_, alignment_, granularity_;
  Chunks chunks_;
  bool keep_by_addr_;
  SizeIndex by_size_;
  AddrIndex by_addr_;
  std::vector<Index> owner_;  // handle → chunk
  Bytes allocated_ = 0;
};

}  // namespace fragsim

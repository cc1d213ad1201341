// RecordedLayout: what a recording's addresses say about one BFC allocator's memory when the
// recording began (docs/importers.md, "Before the capture").
//
// A capture that starts mid-run states where its own buffers went, and the frees of some buffers
// allocated before it, but not where the rest of the memory live before it sits (`unknown` bytes,
// from the allocator's bytes_allocated) nor where the allocator's region begins. BFC's rules
// narrow it down (specs/xla-bfc.md §3):
//   - a buffer is always the low end of the free chunk it came from, and free neighbours always
//     merge; so a range no buffer of the recording ever occupied, lying between two that some
//     did, cannot have been free (the buffer right above it would then start inside a larger
//     free chunk, not at its low end): inside one region it was in use all along, by memory
//     live before the recording;
//   - one region (a preallocated BFC, JAX's and TensorFlow's default) holds every address; the
//     unknown bytes not in those gaps lie below the lowest address the recording shows, packed
//     from the region's base (the allocator filled it from the bottom, best fit, low end first).
// So with one region: base = lowest − (unknown − Σ gaps), when Σ gaps ≤ unknown and the span fits
// the limit; otherwise the addresses need several regions (growth on demand: gaps between
// regions are not memory), and the layout stays open.
// Every BFC chunk is a multiple of 256 B: an occupied range is [addr, addr + round256(bytes)).
#pragma once
#include <optional>
#include <vector>

#include "sim/base/units.h"
#include "traces/range_set.h"

namespace fragsim {

// BFC's kMinAllocationSize: every chunk is a multiple of it; a request of n bytes holds this chunk.
inline constexpr Bytes kBfcChunkUnit = 256;
constexpr Bytes bfc_chunk_of(Bytes n) { return round_up_sat(n ? n : 1, kBfcChunkUnit); }

// The one-region explanation of a recording.
struct SingleRegion {
  Addr base;                 // where the region begins
  std::vector<Extent> live;  // memory live before the recording at addresses it never states, ascending
  Bytes in_gaps = 0;         // of which between ranges the recording's buffers occupied
  Bytes below = 0;           // of which below the lowest of them (from the base up)
};

// The memory live before a recording as several buffers (a JAX memory profile taken at that moment,
// traces/capture_profile.h) in the extents the layout inferred for it: each buffer, in the order
// given (the largest first: BFC's best fit leaves big chunks whole), takes the low end of the
// lowest extent piece that still holds it whole; a buffer no piece holds whole takes what is left,
// lowest first, across pieces (the sizes then do not say how the buffers were laid out, and the
// bytes stay where the layout put them). Sizes are rounded to BFC's 256 B chunks; the result is
// one list of extents per buffer (empty for one the layout has no room left for), and together they
// cover `live` when the sizes sum to it.
[[nodiscard]] std::vector<std::vector<Extent>> place_in_extents(const std::vector<Extent>& live,
                                                                const std::vector<Bytes>& sizes);

class RecordedLayout {
 public:
  // A buffer of the recording held [a, a + bytes) at some time.
  void occupied(Addr a, Bytes bytes);
  bool empty() const { return touched_.empty(); }
  // The layout with one region of at most `limit` bytes and `unknown` bytes live before the
  // recording at addresses it never states; nullopt when the addresses need several regions.
  // `unplaced`: sizes of the recording's allocations that carry no address (a trace with some
  // addresses removed). A gap one of them (256 B rounded) fits in may be where such ones went —
  // several of them over time leave gaps of any width above the smallest — so it is left free;
  // only narrower gaps count as memory live before, the lowest first while they fit in `unknown`.
  [[nodiscard]] std::optional<SingleRegion> single_region(Bytes unknown, Bytes limit,
                                                          std::vector<Bytes> unplaced = {}) const;

 private:
  RangeSet touched_;
};

}  // namespace fragsim

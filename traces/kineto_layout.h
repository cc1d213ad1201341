// KinetoLayout: the caching allocator's memory when a profiler trace's window began, as the
// window's own events imply it (docs/importers.md, "PyTorch profiler traces").
//
// A trace recorded with torch.profiler.profile(profile_memory=True) covers a window of a running
// program. Each of its device events gives a block's address and size (Kineto's `Bytes` is the
// block's size: a multiple of 512 B, the allocator's own rounding) and the allocator's totals after
// it; nothing says where the segments lie, which blocks were free when the window began, or where
// the memory live before it sits (specs/kineto.md). What the window does show:
//
//   touched   every range a block of the window occupies was either free when the window began
//             (an allocation is its first event there) or held by a block allocated before it
//             (a free of an address the window never allocated: that block, at its address);
//   pools     blocks of 1 MiB or less are the small pool's, in 2 MiB segments (on every GPU the
//             traces show a 2 MiB-aligned segment holds them); larger blocks are the large pool's,
//             in segments that are multiples of 2 MiB;
//   growth    Total Reserved growing by Δ at an allocation at X: a segment [X, X + Δ) obtained
//             there (its first block starts at its base); falling at one, the cache released first
//             (empty_cache, or the allocator's retry), then a segment obtained when what survived
//             could not have served it (growth_after_release);
//   before    Total Reserved at the first event (less its growth) = the segments held before;
//             Total Allocated − Bytes of the first event = the block bytes live before.
//
// The rest is chosen the way the allocator's own rules decide it (specs/torch-caching.md §3: best
// fit on (size, address), a block split off its free block's low end, free neighbours merged within
// one segment). Large segments start as the 2 MiB-aligned extents of the large blocks (one shorter
// than a large segment can be joined to the large extent next to it); ranges inside segments that
// no block of the window touches are taken as live (memory allocated before the window); the
// reserved memory left over is one segment the window never uses. Then each allocation of the
// window whose address this state would not reproduce suggests a change: a segment boundary at its
// address, or a range freed below it live again, whole (its free block must start there), a
// touched-free range's untouched tail free (a block
// the real allocator preferred was larger), or only the bytes next to that block that make it
// larger — 512, or as many as the block best fit took instead needs to pass it (best fit takes the
// smallest on (size, address): a block passed over at a lower address was larger), or those
// bytes × 4, × 16, ... (what a request leaves of the block is a free block that a later request takes
// unless it is larger than that request's block) — a segment extended from the left-over reserved
// memory (the same, at a segment's end: as far as a miss needs when it is then 10 MiB or more, or
// to 20 MiB, or by all of it that the live bytes not yet placed leave; also past an untouched range
// after its last block, then free), a boundary or a live range cutting a free block the real
// allocator did not take — or, inside an untouched range taken as free, live bytes from the point
// that leaves that block just under the request (or from its end, when the free block must start at
// the address: a block of 512 B before it), since memory allocated before the window need not fill
// a whole untouched range — or two at once: the recorded block smaller and the one taken instead
// larger than that. A change to an untouched range is also tried in every range laid out alike (the
// same offset of a segment of the same size, as long, held the same way: a program repeats itself,
// and one such change at a time trades a miss for another). When none helps, a change that only
// moves a miss is tried with each change the miss it leaves suggests (best fit taking yet another
// block for the same allocation, or that allocation placed as recorded and a later one not: the
// second change only helps after the first). A change is kept when a replay of the window through
// this model of the allocator reproduces more addresses (a replay stops once the allocations left
// cannot make it the best); the search stops when no change helps or its budget (about 2·10^7
// replayed events, at most 2,000 replays) is spent. It runs twice, ranking states first by a
// free-running replay's matches, then by those of a replay that puts every allocation where it was
// recorded (steps the first refuses: the free-running replay drifts until a later change puts it
// right); the state whose free-running replay reproduces more is kept. The search costs seconds on
// a long window: the reader keeps its result with the file's conversion (traces/kept_conversions.h).
//
// The model here (Replay, in kineto_layout.cpp) is the inference's own: blocks, segments, best
// fit and merging only, as the traces show them (one stream; no expandable segments, releases or
// rounding options) — policies/torch_caching.cpp is the allocator that replays the result.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

// One memory event of one device, in the window's order (sorted by time).
struct KinetoMemEvent {
  Addr addr;
  std::int64_t bytes = 0;  // > 0 an allocation of that block, < 0 its free
  Bytes total_allocated = 0, total_reserved = 0;
};

struct KinetoLayout {
  struct Segment {
    Addr base;
    Bytes size = 0;
    std::int64_t stream = 0;  // kIdleStream: reserved memory no allocation of the window can use
  };
  enum class BlockKind : std::uint8_t {
    kFreedInWindow,  // allocated before the window, freed in it: address and size recorded
    kUntouched,      // inferred: a range inside a segment that no block of the window touches
    kUnplaced,       // inferred: live bytes before the window beyond the ranges above
  };
  struct Block {
    Addr addr;
    Bytes size = 0;
    BlockKind kind = BlockKind::kFreedInWindow;
  };
  // A stream the window never allocates on: free memory cached there serves none of its requests.
  static constexpr std::int64_t kIdleStream = -1;

  std::vector<Segment> segments;  // held when the window began, address order
  std::vector<Block> blocks;      // live when it began (address order within each kind)
  // Per event of the window: a segment obtained just before it (size 0: none).
  std::vector<Bytes> growth;
  // Per event: the allocator released cached segments just before it (Total Reserved fell).
  std::vector<bool> release;

  Bytes live_before = 0;      // Total Allocated before the first event
  Bytes reserved_before = 0;  // Total Reserved before the first event
  Bytes freed_in_window = 0;  // of live_before, blocks the window frees (addresses recorded)
  Bytes untouched_live = 0;   // inferred live inside the window's segments
  Bytes unplaced_live = 0;    // live bytes placed in the segment the window never uses
  Bytes idle_free = 0;        // reserved, free, on no stream of the window
  std::uint64_t boundaries = 0, tails_freed = 0, extended = 0, cut = 0;  // changes the search kept
  std::uint64_t replays = 0;                                             // replays the search ran
  std::uint64_t predicted = 0, allocations = 0;                          // addresses the final state reproduces (model)
};

// The layout for one device's events (in time order). Pre: every event has an address.
[[nodiscard]] KinetoLayout infer_kineto_layout(std::span<const KinetoMemEvent> events);

}  // namespace fragsim

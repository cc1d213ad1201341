// BfcGrowth: the regions a growing BFC allocator held before a capture began, as the capture's
// own addresses imply them (docs/importers.md, "Before the capture").
//
// With allow_growth (XLA_PYTHON_CLIENT_PREALLOCATE=false) TSL's BFCAllocator obtains a region from
// the device whenever no free chunk holds a request (specs/xla-bfc.md §3 Extend): the target size
// starts at 2 MiB, is doubled until it holds the request (the region then has that size and the
// target stays), else the region has the target size and the target doubles after it. JAX never
// returns a region (garbage collection is off), so a capture that starts after the program ran a
// while finds regions obtained before it — empty, when no buffer is live — and a target that those
// earlier requests raised. A replay that starts from a fresh allocator then obtains regions of the
// wrong sizes at the capture's addresses: the real one served from an earlier, larger region what
// the model puts into a new small one.
//
// The addresses say which: a region is obtained at the address of the request that needed it (the
// low end of its first chunk), and every later chunk lies inside some region. The inference
// replays the capture through its own model of BFC's classic path (best fit on (size, address),
// split when the chunk is at least twice the request or 128 MiB larger, free neighbours merged
// within a region; the region at the recorded address of the request that obtained it; each
// request its size rounded to 256 B, as the policy asks, not the larger chunk the capture may
// record for it: asking for that chunk finds no room where the policy finds some, and the
// regions inferred from such a replay mislead the policy's) and tries,
// for each region in the order the replay obtained them, that it and those before it existed
// before the capture, it larger by a power of two: each obtained as Extend obtains one for a
// request of its size, so the target after them is what those requests leave. A hypothesis is kept
// when the replay reproduces more recorded addresses; the search stops when none helps or its
// budget is spent.
//
// An allocator with memory live before the capture holds it in those regions too. The replay seeds
// each earlier buffer as the policy does (at its stated address: carved out of the free chunk there,
// or in a region obtained at that address), and the bytes live at addresses the capture never
// states (from bytes_allocated) where BFC's rules put them (traces/recorded_layout.h): inside a
// region held before the capture, a range no buffer of the capture occupied below or between ranges
// that some did was in use all along (a buffer is always the low end of its free chunk), as long
// as those ranges hold no more than the unknown bytes; the rest where best fit puts one request
// that large (a region obtained for it when none holds it). The search then also tries, once the
// regions the replay obtains stop helping, a region at the address of an allocation the replay
// misses or of an earlier buffer (2 MiB below it: the driver's alignment), of each power-of-two size from 2 MiB, at
// each place in the order of those held before: a region whose base no allocation of the capture gave, such as the one
// where its first small buffers lie above memory allocated before it.
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

// One allocation or free of the capture's allocator, in order.
struct BfcEvent {
  bool alloc = true;
  std::uint64_t id = 0;
  Bytes chunk = 0;         // the request rounded to 256 B, as the policy asks (an earlier buffer: its chunk)
  std::optional<Addr> at;  // where the capture placed it (none: its address is not stated)
  bool pre_trace = false;  // live before the capture; without `at`, part of the bytes at unstated addresses
  Bytes held = 0;          // the chunk the capture says it held, when larger than `chunk` (an unsplit remainder)
};

struct BfcPriorRegions {
  std::vector<Extent> regions;       // obtained before the capture, in the order obtained
  std::vector<Extent> live;          // where the bytes live before it at unstated addresses lie (with regions)
  Bytes live_in_gaps = 0;            // of those, in ranges no recorded buffer used (the rest: best fit)
  std::uint64_t matched_before = 0;  // addresses the model reproduces from a fresh allocator
  std::uint64_t matched = 0;         // ... with these regions first
  std::uint64_t compared = 0;        // allocations with a stated address
};

// The regions held before the capture (empty when none explains more addresses than a fresh
// allocator). `limit`: the allocator's memory limit.
[[nodiscard]] BfcPriorRegions infer_bfc_prior_regions(std::span<const BfcEvent> events, Bytes limit);

}  // namespace fragsim

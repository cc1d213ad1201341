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
// within a region; the region at the recorded address of the request that obtained it) and tries,
// for each region in the order the replay obtained them, that it and those before it existed
// before the capture, it larger by a power of two: each obtained as Extend obtains one for a
// request of its size, so the target after them is what those requests leave. A hypothesis is kept
// when the replay reproduces more recorded addresses; the search stops when none helps or its
// budget is spent.
//
// Only an allocator with nothing live before the capture: the regions that held earlier buffers
// are placed by those buffers (traces/recorded_layout.h, policies' seeding), not by this search.
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
  Bytes chunk = 0;         // the chunk it holds (a multiple of 256 B)
  std::optional<Addr> at;  // where the capture placed it (none: its address is not stated)
};

struct BfcPriorRegions {
  std::vector<Extent> regions;       // obtained before the capture, in the order obtained
  std::uint64_t matched_before = 0;  // addresses the model reproduces from a fresh allocator
  std::uint64_t matched = 0;         // ... with these regions first
  std::uint64_t compared = 0;        // allocations with a stated address
};

// The regions held before the capture (empty when none explains more addresses than a fresh
// allocator). `limit`: the allocator's memory limit.
[[nodiscard]] BfcPriorRegions infer_bfc_prior_regions(std::span<const BfcEvent> events, Bytes limit);

}  // namespace fragsim

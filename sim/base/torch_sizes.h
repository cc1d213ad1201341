// PyTorch caching allocator's size constants (c10/cuda/CUDACachingAllocator.cpp; specs/torch-caching.md
// §1): one home for every layer that reasons about PyTorch blocks — the allocator model
// (policies/torch_*), the snapshot importer (traces/torch_snapshot*) and the mid-run anchor
// (sim/recording_anchor).
#pragma once
#include "sim/base/units.h"

namespace fragsim::torch {

inline constexpr Bytes kMinBlockSize = 512;      // every request rounds up to a multiple of it
inline constexpr Bytes kSmallSize = 1 * kMiB;    // requests up to it are served by the small pool
inline constexpr Bytes kSmallBuffer = 2 * kMiB;  // a small-pool segment (and an expandable small page)
inline constexpr Bytes kLargeBuffer =
    20 * kMiB;  // the segment of a request under kMinLargeAlloc (expandable large page)
inline constexpr Bytes kMinLargeAlloc = 10 * kMiB;  // requests from here on get a segment of their own size
inline constexpr Bytes kRoundLarge = 2 * kMiB;      // ... rounded up to a multiple of this

// The segment a miss of rounded size r asks the device for (get_allocation_size): 2 MiB (small),
// 20 MiB (r < 10 MiB), else r rounded up to 2 MiB. The per-process memory fraction is checked on it.
constexpr Bytes segment_size(Bytes r) {
  if (r <= kSmallSize) return kSmallBuffer;
  if (r < kMinLargeAlloc) return kLargeBuffer;
  return round_up_sat(r, kRoundLarge);
}

}  // namespace fragsim::torch

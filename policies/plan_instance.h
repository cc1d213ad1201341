// A static planning instance: buffers whose whole lives are known, to be given offsets in one
// heap so that no two that live at once overlap (dynamic storage allocation, DSA). This is the
// problem a compiler's buffer assignment solves (XLA's heap simulator, MiniMalloc, TelaMalloc) and
// the one `fragsim plan` solves for a recording (policies/planner.h).
//
//   buffer   — [lower, upper) in time (upper > lower), `size` bytes at one offset for its life
//              (MiniMalloc's CSV: id,lower,upper,size).
//   overlap  — a and b live at once ⟺ a.lower < b.upper ∧ b.lower < a.upper; a plan is valid ⟺
//              every such pair has [off_a, off_a + size_a) ∩ [off_b, off_b + size_b) = ∅.
//   height   — max over buffers of off + size: the memory the plan needs.
//   bound    — the most bytes live at once, max_t Σ {size : lower ≤ t < upper}: no plan is lower
//              (every buffer live at t needs its own bytes), and no allocator, online or offline,
//              needs less (the `ideal` policy's figure).
// A buffer of size 0 takes no memory and overlaps nothing; it is given offset 0.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

using PlanClock = std::chrono::steady_clock;  // time limits of planning

struct PlanBuffer {
  std::uint64_t lower = 0, upper = 0;  // lives over [lower, upper)
  Bytes size = 0;
};

inline bool lives_with(const PlanBuffer& a, const PlanBuffer& b) {
  return a.size && b.size && a.lower < b.upper && b.lower < a.upper;
}

// The most bytes live at once (saturating at kTooLarge). O(n log n).
[[nodiscard]] Bytes live_bytes_bound(const std::vector<PlanBuffer>& buffers);

// max(off + size) over the buffers (0 for none).
[[nodiscard]] Bytes plan_height(const std::vector<PlanBuffer>& buffers, const std::vector<Bytes>& offsets);

// Two buffers that live at once and overlap in the plan (indices, a < b).
struct PlanClash {
  size_t a = 0, b = 0;
};
// The first clash of the plan, or none: a sweep over time keeping the live buffers by offset, each
// new one compared with its neighbours there. O(n log n). Pre: offsets.size() == buffers.size().
[[nodiscard]] std::optional<PlanClash> find_clash(const std::vector<PlanBuffer>& buffers,
                                                  const std::vector<Bytes>& offsets);

}  // namespace fragsim

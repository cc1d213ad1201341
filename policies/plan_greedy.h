// Greedy placement of a planning instance (policies/plan_instance.h) in a given order: each buffer
// in turn goes into a gap left by the buffers already placed that live at the same time — the
// lowest that fits (first fit) or the smallest (best fit, lowest on ties; XLA's heap simulator with
// its size order) — else on top of them. The gap comes from a BusyIndex (policies/busy_index.h:
// unions of the placed chunks per block of time, walked without visiting each buffer; a pass over
// 40,000-62,000 compiler-like buffers took a fifth of the time), or where the index cannot say, from
// the placed buffers that live with it, found in an IntervalTree (policies/interval_tree.h) and
// scanned by offset: O(k log k) for k of them. Both give the same offset.
//
// The orders the planner (policies/planner.h) tries are the classic ones: size, area (size × life),
// life, and the most bytes live during the buffer's life ("load"), each largest first; and the
// orders its local search derives from the best of them.
#pragma once
#include <cstdint>
#include <vector>

#include "policies/plan_instance.h"

namespace fragsim {

enum class PlanFit { kFirst, kBest };

// Places every buffer of `order` (indices into buffers; each once) and writes its offset. Returns
// the height, or stops early and returns a height above `give_up_above` as soon as one buffer's
// top exceeds it (offsets are then incomplete).
Bytes place_in_order(const std::vector<PlanBuffer>& buffers, const std::vector<std::uint32_t>& order, PlanFit fit,
                     std::vector<Bytes>& offsets, Bytes give_up_above = kTooLarge);

// Per buffer: the most bytes live at once during its life (itself included). O(n log n).
std::vector<Bytes> load_during_life(const std::vector<PlanBuffer>& buffers);

// The greedy orders: buffer indices sorted by keys, each descending, ties by index.
enum class PlanOrder { kSize, kArea, kLife, kLoad };
std::vector<std::uint32_t> greedy_order(const std::vector<PlanBuffer>& buffers, const std::vector<Bytes>& load,
                                        PlanOrder order);

}  // namespace fragsim

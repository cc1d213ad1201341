// PlanSearch: exact depth-first search for a plan (policies/plan_instance.h) within a capacity —
// MiniMalloc's branch and bound (Moffitt, "MiniMalloc: A Lightweight Memory Allocator for
// Hardware-Accelerated Machine Learning", ASPLOS'23; google/minimalloc src/solver.cc describes the
// same rules), written for fragsim.
//
// Canonical plans. Any valid plan can be pushed down until each buffer rests at the top of a
// buffer below it that lives at the same time (or at 0), without raising its height. Listing such
// a plan's buffers by (offset, rank) — rank: a fixed preorder — each one's offset is exactly its
// floor, the highest top among the buffers before it that live with it. So the search builds plans
// in that order only: a node places one more buffer at its floor, with (floor, rank) no smaller
// than the last placed one's; the floors of the unplaced buffers that live with it rise to its top.
//   dominance — a candidate whose floor is at or above some unplaced buffer's floor + size would
//               leave room under it that buffer could take: skipped (a plan with that buffer moved
//               down exists, and is built from another node).
//   inference — time is cut into sections at every buffer's ends; in each, the unplaced buffers
//               must stack above max(the section's floor, the last placed offset), so
//               max(floor_s, offset) + Σ unplaced sizes_s ≤ capacity, or the node fails. A
//               section's floor is the top of the last buffer placed in it, raised to the lowest
//               floor of its unplaced buffers.
//   decomposition — once no unplaced buffer crosses the boundary between two sections, the two
//               sides share nothing: each is searched on its own, and the node fails when one does.
//   ordering  — candidates by (floor, rank); the rank is one of three preorders (by the most bytes
//               unplaced in any of the buffer's sections, its area size × life, its life), tried in
//               turn with a node budget that doubles each round, so that whichever order suits
//               the instance finishes first.
// Answers: a plan within the capacity, or the proof that none exists (a search that ran out of
// candidates without hitting a node budget), or nothing by the deadline.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "policies/plan_instance.h"

namespace fragsim {

enum class SearchOutcome {
  kFound,       // offsets hold a plan with height ≤ capacity
  kInfeasible,  // proven: no plan fits the capacity
  kGaveUp,      // the deadline came (or `stop` was set) first
};

struct SearchResult {
  SearchOutcome outcome = SearchOutcome::kGaveUp;
  std::vector<Bytes> offsets;  // kFound: one per buffer
  std::uint64_t nodes = 0;     // search nodes visited
};

struct SearchLimits {
  Bytes capacity = 0;
  PlanClock::time_point deadline = PlanClock::time_point::max();
  const std::atomic<bool>* stop = nullptr;  // set from elsewhere to give up early
  std::uint64_t max_nodes = UINT64_MAX;     // give up past this many nodes
};

[[nodiscard]] SearchResult search_plan(const std::vector<PlanBuffer>& buffers, const SearchLimits& limits);

}  // namespace fragsim

// The planner behind `fragsim plan` and every report's waste split: the lowest heap that holds a
// planning instance (policies/plan_instance.h) — the memory a perfect placement of the same
// buffers needs, which no allocator, online or offline, can beat — found within a time budget.
//
//   bound      — the most bytes live at once (plan_instance.h); a plan at the bound is optimal.
//   decomposition — a buffer that lives over the whole of its group's time goes to the bottom of
//                the group (any plan can be rearranged so: everything else lives with it, so lies
//                wholly above or below it, and what is below can move up by its size); the rest
//                splits wherever no buffer crosses an instant, into groups planned apart, each
//                above its peeled base. Repeated, this leaves *leaves* with bases; the height is
//                the highest base + leaf height, and a leaf proven optimal bounds the whole.
//   greedy     — each leaf is placed in every order of plan_greedy.h (size, area, load, life) by
//                first fit and by best fit, the passes in parallel; the lowest wins.
//   improvement — while the budget lasts, the leaf that sets the height is improved: by exact
//                search (plan_search.h) where it has at most kSearchBuffers buffers — first at its
//                bound, then between the lowest height not yet ruled out and the best found — else
//                by greedy restarts: the best greedy order again with its keys scaled by random
//                noise, in half of them by life^β too (β random in [0, 0.3]: long-lived buffers
//                earlier), and in half the buffers whose tops set the height moved earlier;
//                a batch of restarts at a time, one per thread, the lowest plan kept.
//   capacity   — with a height to meet, the planner stops as soon as a plan meets it.
// Every plan returned is checked (find_clash) before it leaves: a clash is a bug (InternalError).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "policies/plan_instance.h"

namespace fragsim {

// The restarts' default greatest exponent of a buffer's life (PlanOptions::life_exponent): on
// compiler-like instances of 18,000-62,000 buffers, first fit by size × life^β came 0.1-1.4 points
// of the bound closer than by size alone for some β in 0.05-0.3 on each, but for no one β on all.
inline constexpr double kMaxLifeExponent = 0.3;

struct PlanOptions {
  Bytes capacity = 0;      // a height to meet; 0: minimise
  double time_limit = 0;   // seconds; ≤ 0: default_plan_time(buffers)
  std::uint64_t seed = 1;  // the local search's random choices (same seed, same plan when not cut by time)
  const std::atomic<bool>* stop = nullptr;  // set from elsewhere to stop early (best plan so far)
  // The improvement's effort, in search nodes (a local-search step costs one per buffer): 0 = no
  // bound but time. A bound makes the plan the same however busy the machine (reports use one).
  std::uint64_t work_limit = 0;
  // Greedy restarts on leaves too large for the exact search (each is a whole greedy pass): off,
  // only the greedy orders and the exact search on small leaves improve the plan.
  bool local_search = true;
  // The restarts' greatest exponent of a buffer's life: half of them scale each key by life^β, β
  // drawn from [0, this] (planner.cpp says why); 0: the keys of the order alone.
  double life_exponent = kMaxLifeExponent;
  // Threads for the greedy passes (each order, each restart on its own): 0 = the machine's cores
  // (at most 8). The plan does not depend on it, only how soon it comes.
  size_t threads = 0;
};

struct PlanResult {
  std::vector<Bytes> offsets;  // one per buffer
  Bytes height = 0;
  Bytes lower_bound = 0;      // the most bytes live at once (raised where a leaf was proven optimal)
  Bytes greedy_height = 0;    // the best greedy plan's height, before any improvement
  bool optimal = false;       // no plan is lower: height == lower_bound
  bool capacity_met = false;  // a capacity was given and height ≤ it
  bool cut_short = false;     // the time limit (or stop) ended the improvement before optimal or met
  double seconds = 0;         // time taken
  size_t buffers = 0, leaves = 0, largest_leaf = 0;  // the decomposition
  std::string method;  // what found the plan: "greedy", "search", "greedy restarts", "decomposition"
};

// The default budget: a few seconds per 10^4 buffers, at least kMinPlanSeconds.
inline constexpr double kMinPlanSeconds = 5.0, kPlanSecondsPer10k = 3.0;
double default_plan_time(size_t buffers);

// Plans the instance. Never fails for valid input (the greedy plan always exists).
[[nodiscard]] PlanResult plan_buffers(const std::vector<PlanBuffer>& buffers, const PlanOptions& options);

}  // namespace fragsim

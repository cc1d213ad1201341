// first-fit: baseline contiguous-arena allocator — the lowest-address free chunk that fits
// (policies/arena_policy.h).
#include "policies/arena_policy.h"

namespace fragsim {

void register_first_fit(Registry& r) {
  r.add({"first-fit", "baseline: lowest-address fitting hole of one contiguous arena",
         [](ConfigReader& cfg, const ConfigContext& ctx) { return configure_arena_policy(Fit::kFirst, cfg, ctx); },
         false, arena_options()});
}

}  // namespace fragsim

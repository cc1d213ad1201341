// best-fit: baseline contiguous-arena allocator — the smallest free chunk that fits, lowest
// address on ties (policies/arena_policy.h).
#include "policies/arena_policy.h"

namespace fragsim {

void register_best_fit(Registry& r) {
  PolicyInfo info{
      "best-fit", "baseline: smallest fitting hole of one contiguous arena",
      [](ConfigReader& cfg, const ConfigContext& ctx) { return configure_arena_policy(Fit::kBest, cfg, ctx); }, false,
      arena_options()};
  info.defaults = {
      {std::nullopt, "", "best-fit", "the trace names no allocator, so a plain best-fit arena replays it"}};
  info.what_ifs = [](const nlohmann::json&, const Vocabulary&) { return std::vector<WhatIf>{{"first-fit", ""}}; };
  r.add(std::move(info));
}

}  // namespace fragsim

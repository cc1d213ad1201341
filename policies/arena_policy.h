// ArenaPolicy: best-fit and first-fit over one Arena of the space's usable capacity
// (baselines of architecture.md). Requests round up to `alignment` (default 256 B); the low end
// of the chosen free chunk is handed out and the rest split off; frees coalesce both ways.
// Addresses start at DeviceMemory::kBase. No device calls: the arena is the whole space.
#pragma once
#include "policies/arena.h"
#include "sim/base/error.h"

namespace fragsim {

enum class Fit { kBest, kFirst };
PolicyBuilder configure_arena_policy(Fit fit, ConfigReader& cfg, const ConfigContext& ctx);
std::vector<PolicyOption> arena_options();

}  // namespace fragsim

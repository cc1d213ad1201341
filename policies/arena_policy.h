// ArenaPolicy: best-fit and first-fit over one Arena of the space's usable capacity
// (baselines of architecture.md). Requests round up to `alignment` (default 256 B); the low end
// of the chosen free chunk is handed out and the rest split off; frees coalesce both ways.
// Addresses are DeviceMemory::kBase + offset. No device calls: the arena is the whole space.
#pragma once
#include "policies/arena.h"
#include "sim/error.h"

namespace fragsim {

enum class Fit { kBest, kFirst };
std::unique_ptr<AllocatorPolicy> make_arena_policy(Fit fit, ConfigReader& cfg, const PolicyContext& ctx);

}  // namespace fragsim

// The history of a run (sim/engine/history.h) as the HTML viewer reads it (docs/viewer.md): the
// per-buffer timelines, keyframes and deltas, with the live bytes by call site at each keyframe.
#pragma once
#include <nlohmann/json.hpp>

#include "sim/engine/history.h"
#include "sim/engine/run_result.h"

namespace fragsim {

[[nodiscard]] nlohmann::json history_json(const RunHistory& h, const RunResult& r);

}  // namespace fragsim

// The history of a run (sim/history.h) as the HTML viewer reads it (docs/viewer.md): the
// per-buffer timelines, keyframes and deltas, with the live bytes by call site at each keyframe.
#pragma once
#include <nlohmann/json.hpp>

#include "sim/history.h"
#include "sim/run_result.h"

namespace fragsim {

[[nodiscard]] nlohmann::json history_json(const RunHistory& h, const RunResult& r);

}  // namespace fragsim

// The history of a run (sim/engine/history.h) as the HTML viewer reads it (docs/viewer.md): the
// per-buffer timelines, keyframes and deltas, with the live bytes by call site at each keyframe.
#pragma once
#include <nlohmann/json.hpp>

#include "sim/engine/history.h"
#include "sim/engine/run_result.h"

namespace fragsim {

// What the allocation log may take of a page, deflated and in base64 (issue 51: a 10 M-event page
// stays under 50 MB): past it, the page keeps the log up to the event where it fits.
inline constexpr size_t kPageAllocationBytes = size_t{36} << 20;

[[nodiscard]] nlohmann::json history_json(const RunHistory& h, const RunResult& r);

}  // namespace fragsim

// A self-contained HTML report (no scripts, no external files): memory over time as an SVG
// chart (requested, allocated, reserved; one reserved line per policy when comparing), OOM
// markers, and the summary table.
#pragma once
#include <string>
#include <vector>

#include "sim/engine.h"

namespace fragsim {

std::string report_html(const std::vector<RunResult>& runs);

}  // namespace fragsim

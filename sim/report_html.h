// The interactive HTML report: one self-contained file (no network, no external files) holding the
// run's figures as JSON and the viewer (sim/report_viewer.js, compiled in): memory over time per run
// with shared zoom and hover, the trace's marks and OOMs on it, the address maps at the peak of
// allocated memory and at the first OOMs (hover a block: the buffer, its padding, its stack), and
// every OOM in a table. docs/report.md describes what each part shows.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/engine.h"

namespace fragsim {

// The data the viewer reads (documented in docs/report.md, "HTML").
nlohmann::json viewer_data(const std::vector<RunResult>& runs);
std::string report_html(const std::vector<RunResult>& runs);
// The page for viewer data.
std::string viewer_html(const nlohmann::json& data);

}  // namespace fragsim

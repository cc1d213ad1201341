// The interactive HTML report: one self-contained file (no network, no external files) holding the
// run's figures as JSON and the viewer (sim/viewer/report_viewer.js, compiled in): memory over time per run
// with shared zoom and hover, the trace's marks and OOMs on it, the address maps at the peak of
// allocated memory and at the first OOMs (hover a block: the buffer, its padding, its stack), and
// every OOM in a table. docs/report.md describes what each part shows.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sim/engine/engine.h"

namespace fragsim {

// The data the viewer reads (documented in docs/report.md, "HTML").
nlohmann::json viewer_data(const std::vector<RunResult>& runs);
// `diff`: a `fragsim diff` result (sim/report/diff.h) shown above the runs, null for none.
std::string report_html(const std::vector<RunResult>& runs, const nlohmann::json& diff = nullptr);
// The page for reports read from files (name, report): their figures and the diff, no timelines.
std::string reports_html(const std::vector<std::pair<std::string, nlohmann::json>>& reports,
                         const nlohmann::json& diff = nullptr);
// The page for viewer data (runs may lack timelines, moments and history: a diff of two reports).
std::string viewer_html(const nlohmann::json& data);

}  // namespace fragsim

// `fragsim info`: one streaming pass over a trace — counts, devices, spaces, time span, peak
// live requested bytes per device, and a power-of-two size histogram.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "traces/trace_reader.h"

namespace fragsim {

// `source`: the trace held in memory (`path` then only names it), else the file is read.
nlohmann::json trace_info(const std::string& path, bool lenient, const ReaderFactory& source = nullptr);
std::string trace_info_text(const nlohmann::json& info);

}  // namespace fragsim

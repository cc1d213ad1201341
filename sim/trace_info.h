// `fragsim info`: one streaming pass over a trace — counts, devices, spaces, time span, peak
// live requested bytes per device, and a power-of-two size histogram.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace fragsim {

nlohmann::json trace_info(const std::string& path, bool lenient);
std::string trace_info_text(const nlohmann::json& info);

}  // namespace fragsim

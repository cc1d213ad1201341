// `fragsim info`: one streaming pass over a trace — counts, devices, spaces, time span, peak
// live requested bytes per device, and a power-of-two size histogram.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace fragsim {

nlohmann::json trace_info(const std::string& path, bool lenient);
std::string trace_info_text(const nlohmann::json& info);

}  // namespace fragsim

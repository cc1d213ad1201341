// `fragsim validate`: a simulator report against a real-device replay (fragsim-cuda-replay):
// the same first OOM (or none), device memory in use at peak (simulated peak reserved vs the
// replay's cudaMemGetInfo peak), address-granularity evidence from the replay's calls, and
// optionally a fitted latency model written as a hardware preset `--hw` accepts.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fragsim {

struct ValidateOptions {
  std::string sim, real;
  double tolerance_pct = 5.0;  // allowed |peak difference| in percent
  std::string fit_out;         // write a fitted cost-model preset here ("" = no)
  std::string json_out;        // where the caller writes the comparison ("" = nowhere): checked, not written
};

struct ValidateResult {
  bool pass = true;
  std::vector<std::string> lines;
  nlohmann::json json;
};

// Throws InputError for malformed inputs, a calls file the summary names that is missing, or an
// output that would overwrite an input (the replay's calls file included).
ValidateResult run_validate(const ValidateOptions& o);
// The replay summary's calls_file as a path that exists (as written, else beside the summary), ""
// when it names none; InputError when it names one that is in neither place.
[[nodiscard]] std::string calls_path(const nlohmann::json& real, const std::string& real_path);

}  // namespace fragsim

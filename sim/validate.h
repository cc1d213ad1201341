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
};

struct ValidateResult {
  bool pass = true;
  std::vector<std::string> lines;
  nlohmann::json json;
};

ValidateResult run_validate(const ValidateOptions& o);

}  // namespace fragsim

#include "traces/gpu_preset.h"

#include <utility>

namespace fragsim {

std::string gpu_preset(bool amd, int cc_major, int cc_minor, Bytes memory) {
  constexpr Bytes kGiB = Bytes{1} << 30;
  const auto cc = std::make_pair(cc_major, cc_minor);
  if (amd) return cc == std::make_pair(9, 4) ? "mi300x" : "";
  if (cc == std::make_pair(8, 0) && memory > 32 * kGiB) return memory > 48 * kGiB ? "a100-80g" : "a100-40g";
  if (cc == std::make_pair(9, 0)) return memory > 100 * kGiB ? "h200-141g" : "h100-80g";
  if (cc == std::make_pair(10, 0)) return "b200";
  return "";
}

std::string gpu_base_preset(bool amd) { return amd ? "mi300x" : "h100-80g"; }

}  // namespace fragsim

// The hardware preset of a GPU a recording names (XProf device planes, Kineto deviceProperties).
#pragma once
#include <string>

#include "sim/base/units.h"

namespace fragsim {

// The preset of the GPU's family by compute capability (NVIDIA 8.0 → a100-40g/a100-80g by memory,
// 9.0 → h100-80g/h200-141g, 10.0 → b200; AMD 9.4, gfx942 → mi300x), or "" when no preset models it
// (an A30's 24 GB, a T4, an L40, a V100).
[[nodiscard]] std::string gpu_preset(bool amd, int cc_major, int cc_minor, Bytes memory);
// The preset whose allocation granularity and device-call costs stand in for a GPU without one.
[[nodiscard]] std::string gpu_base_preset(bool amd);

}  // namespace fragsim

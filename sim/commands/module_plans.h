// The compiled modules of a recording for the page (issue 51): XLA's buffers of each module
// (traces/xla_modules.h) and, for each heap-simulator trace, fragsim's static-heap plan of the
// same buffers beside XLA's own: where it put each buffer and how big a heap it needed.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "sim/engine/engine.h"

namespace fragsim {

inline constexpr size_t kModuleBuffers = 20000;  // buffers listed per module
inline constexpr size_t kPlannedModules = 64;    // modules planned (the rest listed only)

// Null when `trace` is not an XProf capture or HloProto, or holds no module. Throws what reading
// the modules throws (InputError, EnvError).
[[nodiscard]] std::shared_ptr<const std::vector<ModuleView>> module_plans(const std::string& trace,
                                                                          const Registry& reg);

}  // namespace fragsim

// What `fragsim list`, `fragsim layout` and the help texts print, from the registry, the presets
// and the workloads: nothing about a policy is written here, it is read from its registry entry.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "policies/policy.h"

namespace fragsim {

// Every policy, hardware preset and workload, one line each.
[[nodiscard]] std::string catalog_text(const Registry& reg);
// One policy: what it models, where it is the default, its framework, fraction and options.
[[nodiscard]] std::string policy_text(const PolicyInfo& info);
// "torch-caching for a PyTorch memory snapshot; ...; else best-fit": where each default applies.
[[nodiscard]] std::string defaults_text(const Registry& reg);

// The padded bytes and tile of an array (`SHAPE` as XLA prints it) on a TPU preset, as JSON
// ({shape, dtype, tile, unpadded_bytes, padded_bytes[, memory_space]}) and as text.
[[nodiscard]] nlohmann::json layout_json(const std::string& shape, const std::string& hw);
[[nodiscard]] std::string layout_text(const std::string& shape, const std::string& hw);

}  // namespace fragsim

// HardwareModel: a device as a list of memory spaces plus a cost model (architecture.md,
// "Hardware models"). Presets are JSON files in hardware_models/presets/ (compiled in as well);
// `--hw FILE.json` loads a user's own with the same schema:
//
//   {"name": "...", "kind": "gpu"|"tpu", "vendor": "nvidia"|"amd", "compute_capability": "9.0", "generation": 5,
//    "spaces": [{"name": "hbm", "capacity_bytes": N, "reserve_bytes": N, "alignment": 256,
//                "granularity": 2097152, "scoped_limit_bytes": N, "runtime_limit_bytes": N}],
//    "cost_model": {"alloc_base_ns": N, "alloc_ns_per_mib": N, "free_base_ns": N, "free_ns_per_mib": N}}
//
// capacity_bytes is the total the device reports (what JAX's memory fraction multiplies);
// reserve_bytes is held by the runtime (CUDA context) and never reaches an allocator. The vendor
// names the platform a framework builds for the device (CUDA, ROCm): what its settings may select.
#pragma once
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/framework.h"
#include "sim/base/recording.h"
#include "sim/base/units.h"

namespace fragsim {

struct SpaceSpec {
  Space space = Space::kHbm;
  Bytes capacity = 0;      // bytes, device-reported total
  Bytes reserve = 0;       // bytes held by the runtime before any allocation
  Bytes alignment = 256;   // bytes, minimum address alignment of a device allocation
  Bytes granularity = 1;   // bytes, physical allocation unit (device allocations are padded to it)
  Bytes scoped_limit = 0;  // bytes, per-kernel scoped limit (TPU VMEM); 0 = none
  // The TPU runtime allocator's own limit, where it differs from what the compiler may use
  // (capacity − reserve); 0 = the same. Runtime placement (tpu-padded) uses it, compile-time
  // checks (static-heap, the compiler's "of X hbm") use usable().
  Bytes runtime_limit = 0;
  Bytes usable() const { return capacity > reserve ? capacity - reserve : 0; }
  Bytes runtime_usable() const { return runtime_limit ? std::min(runtime_limit, capacity) : usable(); }
  // How far the runtime's limit stays below the capacity (0 when it has none of its own).
  Bytes runtime_holdback() const {
    if (holdback) return holdback;
    return runtime_limit && capacity > runtime_limit ? capacity - runtime_limit : 0;
  }
  // Another capacity for the same device: the runtime's limit keeps its holdback below it (a
  // capacity within the holdback leaves the runtime 1 byte, and the holdback stays what it was, so
  // that a capacity set after that one keeps the preset's holdback too).
  void set_capacity(Bytes c) {
    holdback = runtime_holdback();
    capacity = c;
    if (runtime_limit) runtime_limit = c > holdback ? c - holdback : 1;
  }
  Bytes holdback = 0;  // set_capacity's: the holdback the limit had before any capacity was set
};

struct CostModel {
  double alloc_base_ns = 0, alloc_ns_per_mib = 0;  // simulated device-allocation latency
  double free_base_ns = 0, free_ns_per_mib = 0;    // simulated device-free latency
  double alloc_ns(Bytes b) const { return alloc_base_ns + alloc_ns_per_mib * static_cast<double>(b) / kMiB; }
  double free_ns(Bytes b) const { return free_base_ns + free_ns_per_mib * static_cast<double>(b) / kMiB; }
};

struct HardwareModel {
  std::string name;
  std::string kind = "gpu";
  Platform platform =
      Platform::kUnknown;  // TPU for a TPU; else by vendor (nvidia: CUDA, amd: ROCm); unknown: none named
  int generation = 0;
  // A GPU's compute capability, major version ("compute_capability": "8.0" in a preset; the
  // recording's for its own device): TensorFlow's default limit depends on it. -1: not known.
  int compute_major = -1;
  std::vector<SpaceSpec> spaces;
  CostModel cost;
  nlohmann::json source;  // the JSON it was built from

  const SpaceSpec* space(Space s) const;
  SpaceSpec* space(Space s);
  nlohmann::json to_json() const;  // report's "hardware" object
};

// What fragsim models of a memory space: a capacity (and every limit within it) of at most 256 TiB,
// an alignment that is a power of two and a granularity, each of at most 1 GiB. Larger numbers are
// no device's, and would leave no room for the address arithmetic of the policies (a block's end
// must not wrap).
inline constexpr Bytes kMaxSpaceBytes = Bytes{1} << 48;
inline constexpr Bytes kMaxSpaceAlignment = Bytes{1} << 30;
// Throws InputError("ORIGIN: spaces[NAME].KEY: ...") when a space is outside those bounds.
void check_space(const SpaceSpec& s, const std::string& origin);
// Throws InputError("ORIGIN: ...") when a reserve someone gave (a hardware file's reserve_bytes,
// --reserve) leaves the space nothing: the reserve is what the runtime holds before any allocator
// (the CUDA context), so one at or above the capacity describes no device. (A capacity tried by a
// sweep may fall below a preset's reserve: such a device gives nothing, and the replay says so.)
void check_reserve(const SpaceSpec& s, const std::string& origin);

// A GPU's total memory as the driver reports it (what PyTorch's set_per_process_memory_fraction and
// JAX's memory fraction multiply) lies above what its allocator can obtain by the CUDA context and
// other processes' memory: half a GiB to a GiB on an H100 or H200 (the H200 recording in
// tests/data/torch: 139.07 GiB reserved plus free at its OOM, 139.80 GiB total in PyTorch's message).
// A recording that shows only the usable memory (a snapshot's OOM: reserved plus the free memory the
// driver reported) is explained by a preset whose total lies at most this far above it.
inline constexpr Bytes kMaxUnseenDeviceMemory = Bytes{2} << 30;
[[nodiscard]] inline bool total_explains_usable(Bytes total, Bytes usable) {
  return total >= usable && total - usable <= kMaxUnseenDeviceMemory;
}

// The major version of a compute capability as device planes and presets write it ("7.5" -> 7),
// -1 for text of another form.
[[nodiscard]] int compute_major(const std::string& capability);

// The hbm space of the device a recording names: its preset's, with the memory the recording
// states where it does (`device`: that device's own, in a set of recordings whose devices differ);
// nullopt when neither says how much memory it had.
[[nodiscard]] std::optional<SpaceSpec> recorded_hbm(const RecordedHardware& hw,
                                                    std::optional<std::uint32_t> device = std::nullopt);

// A preset name (see list_presets) or a path to a JSON file. Throws InputError naming `what` (the
// option that named it) for an unknown preset.
[[nodiscard]] HardwareModel load_hardware(const std::string& name_or_file, std::string_view what = "--hw");
[[nodiscard]] HardwareModel parse_hardware(const nlohmann::json& j, const std::string& origin);
std::vector<std::string> list_presets();
// Compiled-in presets (generated from hardware_models/presets/*.json): (name, JSON text).
const std::vector<std::pair<std::string, std::string>>& builtin_presets();

}  // namespace fragsim

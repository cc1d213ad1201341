// What a JAX release does with its GPU memory settings (specs/xla-bfc.md §4,
// specs/xla-bfc-spatial.md §2 and §4): one place for the version table, the limit arithmetic and
// the allocator options, shared by xla-bfc, platform, cuda-async and the sweep.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "sim/base/config.h"
#include "sim/base/units.h"

namespace fragsim {

struct JaxlibBehaviour {
  std::string version;           // as given, e.g. "0.11.0"
  bool limit_from_free = false;  // < 0.4.1: fraction of *free* memory, not total
  bool round_limit = false;      // ≥ 0.10.2: limit rounded up to 2 MiB
  bool vmm_padding = false;      // ≥ 0.10.2: device allocations padded to the VMM granularity
  bool spatial_default = false;  // ≥ 0.11.0: spatial partitioning on by default (with preallocate)
  bool f32_fraction = true;      // the fraction reaches the allocator as PJRT's 32-bit float (TensorFlow: a double)
  bool async_prealloc = true;    // the cudaMallocAsync pool is grown to its threshold at start unless told not to
                                 // (TensorFlow: only when told to, TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC=-1)
  bool tf_limit = false;         // TensorFlow: with no fraction given, the limit is the device's free memory less
                                 // its reserve for the system (tensorflow_default_limit), not a share of it
};

inline constexpr const char* kNewestJaxlib = "0.11.0";
// JAX passes any float on; above 1 the limit exceeds the device and preallocation backs off.
// Larger values are rejected rather than multiplied into a size that does not fit.
inline constexpr double kMaxMemFraction = 64.0;
inline constexpr Range kMemFractionRange = open_closed(0, kMaxMemFraction);

// Parses "0.4.30", "0.11.0" ... Throws InputError naming key on malformed versions.
[[nodiscard]] JaxlibBehaviour jaxlib_behaviour(const std::string& version, const std::string& key);

struct ConfigContext;
class ConfigReader;
// The behaviour a JAX GPU allocator policy models: the config's jaxlib=VERSION; else, replaying a
// TensorFlow capture, TensorFlow's (gpu_device.cc: limit = total × per_process_gpu_memory_fraction
// as a double, never rounded, regions allocated at the size asked, no spatial partitioning; its
// cudaMallocAsync pool not preallocated); else the newest jaxlib's.
[[nodiscard]] JaxlibBehaviour gpu_behaviour(ConfigReader& cfg, const ConfigContext& ctx);

// The memory fraction after its trip through the PJRT C API: a 32-bit float widened to double.
double pjrt_fraction(double fraction);

// A byte limit as the release applies it: rounded up to 2 MiB from jaxlib 0.10.2.
[[nodiscard]] Bytes rounded_limit(Bytes limit, const JaxlibBehaviour& b);

// TensorFlow's limit with no per_process_gpu_memory_fraction (gpu_device.cc,
// SingleVirtualDeviceMemoryLimit): this device's free memory (its usable memory here) less the
// reserve TensorFlow keeps for the system, which its compute capability picks (MinSystemMemory);
// with a note saying so.
[[nodiscard]] Bytes tensorflow_default_limit(ConfigReader& cfg, const ConfigContext& ctx);

// The memory fraction in force where no fraction given made the limit (a capture's limit, TensorFlow's
// default), as the config echoes it under mem_fraction so that `diff` and `check` compare it rather
// than the key's default: JAX's the share the limit is of the total, to 4 decimals (the program's
// XLA_PYTHON_CLIENT_MEM_FRACTION); TensorFlow's none (null: its limit is free memory less its reserve).
[[nodiscard]] nlohmann::json fraction_in_force(Bytes limit, Bytes total, const JaxlibBehaviour& b);

// How the framework made a BFC limit it recorded, in words for a note: JAX's the program's memory
// fraction of the device's total (of its free memory before jaxlib 0.4.1); TensorFlow's the device's
// free memory less its reserve for the system, unless the program set per_process_gpu_memory_fraction
// (gpu_device.cc, SingleVirtualDeviceMemoryLimit).
[[nodiscard]] std::string limit_origin(const JaxlibBehaviour& b);

struct RecordedAllocator;
// What an XProf capture recorded about this device's BFC (traces/xprof_capture.h): its limit and
// whether its addresses show one preallocated region or regions obtained on demand; null when the
// run replays no capture or the capture logged no limit for this device and space.
[[nodiscard]] const RecordedAllocator* recorded_bfc(const ConfigContext& ctx);
// That allocator's limit on this run's device: as recorded on the device the capture ran on, else
// what the framework's rule makes of this run's device memory (--capacity, --hw): JAX's the same
// share of it (its memory fraction), TensorFlow's its free memory less TensorFlow's reserve for the
// system; with a note saying so.
struct DeviceLimit {
  Bytes bytes = 0;
  std::string basis;  // "": the capture's own; else how the rule made this device's ("its share of this device")
};
[[nodiscard]] DeviceLimit recorded_limit(const RecordedAllocator& rec, ConfigReader& cfg, const ConfigContext& ctx,
                                         const JaxlibBehaviour& b);
// JAX's pinned host memory (the `host` space) is XLA's own host BFC whichever allocator serves
// device memory (XLA_PYTHON_CLIENT_ALLOCATOR concerns the device): the builder of that BFC
// (xla-bfc on the host space), with a note saying so. Call it after reading the policy's own keys.
[[nodiscard]] std::function<std::unique_ptr<class AllocatorPolicy>(const struct PolicyContext&)> jax_host_allocator(
    ConfigReader& cfg, const ConfigContext& ctx);

struct FractionKnob;
// The memory fraction of JAX's GPU allocators (XLA_PYTHON_CLIENT_MEM_FRACTION), which TensorFlow
// sets as GPUOptions.per_process_gpu_memory_fraction instead: config key mem_fraction.
[[nodiscard]] FractionKnob jax_memory_fraction();

// BFC memory limit for the device: size_t(total × f32(fraction)), rounded up to 2 MiB where the
// release does. `total` is the device-reported total (or free memory before jaxlib 0.4.1).
[[nodiscard]] Bytes xla_memory_limit(Bytes total, double fraction, const JaxlibBehaviour& b);

}  // namespace fragsim

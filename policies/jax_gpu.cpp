#include "policies/jax_gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "policies/policy.h"
#include "sim/base/checked.h"
#include "sim/base/error.h"
#include "sim/base/recording.h"

namespace fragsim {

PolicyOption jaxlib_option() {
  return {"jaxlib", std::string(kNewestJaxlib) + " (for a TensorFlow capture: TensorFlow's own)", "0.4.30",
          "the jaxlib version whose behaviour to model: before 0.4.1 the fraction applies to free memory, from "
          "0.10.2 limits are rounded to 2 MiB (VMM), from 0.11.0 spatial partitioning is on by default"};
}

JaxlibBehaviour jaxlib_behaviour(const std::string& version, const std::string& key) {
  int a = 0, b = 0, c = 0;
  char tail = 0;
  int n = std::sscanf(version.c_str(), "%d.%d.%d%c", &a, &b, &c, &tail);
  if (n < 2 || n > 3 || a < 0 || b < 0 || c < 0)
    throw InputError(fmt::format("{}: '{}' is not a jaxlib version like 0.11.0", key, version));
  auto v = std::make_tuple(a, b, c);
  JaxlibBehaviour r;
  r.version = version;
  r.limit_from_free = v < std::make_tuple(0, 4, 1);
  r.round_limit = r.vmm_padding = v >= std::make_tuple(0, 10, 2);
  r.spatial_default = v >= std::make_tuple(0, 11, 0);
  return r;
}

JaxlibBehaviour gpu_behaviour(ConfigReader& cfg, const ConfigContext& ctx) {
  const bool tf = ctx.recording && ctx.recording->framework_of() == Framework::kTensorFlow;
  if (cfg.has("jaxlib") || !tf) return jaxlib_behaviour(cfg.text("jaxlib", kNewestJaxlib), "jaxlib");
  JaxlibBehaviour b;
  b.version = "TensorFlow";
  b.f32_fraction = false;
  b.async_prealloc = false;
  b.tf_limit = true;
  cfg.record("resolved_behaviour", "TensorFlow's (the capture's framework)");
  return b;
}

double pjrt_fraction(double fraction) { return static_cast<double>(static_cast<float>(fraction)); }

Bytes rounded_limit(Bytes limit, const JaxlibBehaviour& b) {
  return b.round_limit ? checked_round_up(limit, 2 * kMiB, "memory limit") : limit;
}

Bytes xla_memory_limit(Bytes total, double fraction, const JaxlibBehaviour& b) {
  return rounded_limit(
      static_cast<Bytes>(static_cast<double>(total) * (b.f32_fraction ? pjrt_fraction(fraction) : fraction)), b);
}

FractionKnob jax_memory_fraction() {
  return {"mem_fraction",
          {{Framework::kJax, "XLA_PYTHON_CLIENT_MEM_FRACTION", true, ""},
           {Framework::kTensorFlow, "per_process_gpu_memory_fraction", false,
            "tf.compat.v1.GPUOptions(per_process_gpu_memory_fraction={})"}},
          ""};
}

PolicyBuilder jax_host_allocator(ConfigReader& cfg, const ConfigContext& ctx) {
  const bool tf = ctx.recording && ctx.recording->framework_of() == Framework::kTensorFlow;
  cfg.note(fmt::format("pinned host memory: {}'s host BFC ({}), whichever allocator serves device memory",
                       tf ? "TensorFlow" : "XLA", tf ? "gpu_host_bfc" : "xla_gpu_host_bfc"));
  ConfigReader host(nlohmann::json::object(), "policy xla-bfc (pinned host memory)");
  PolicyBuilder b = ctx.registry->find("xla-bfc").configure(host, ctx);
  host.finish();
  return b;
}

const RecordedAllocator* recorded_bfc(const ConfigContext& ctx) {
  if (!ctx.recording || ctx.recording->source != RecordingSource::kXprof) return nullptr;
  const RecordedAllocator* a = ctx.recording->allocator(ctx.device_index, ctx.space->space);
  return a && a->limit ? a : nullptr;
}

namespace {

// TensorFlow's default limit (no per_process_gpu_memory_fraction) is the device's free memory less
// a reserve for the system, MinSystemMemory in tensorflow/core/common_runtime/gpu/gpu_device.cc
// (SingleVirtualDeviceMemoryLimit): 225 MiB with less than 2 GiB free, else by the major version of
// the compute capability: 500 MiB up to 6, 1050 MiB for 7, 1536 MiB for 8, 1800 MiB from 9 (the
// last row in newer releases; older ones keep 1536 MiB). A device with no CUDA capability (ROCm, or
// one fragsim does not know: -1) takes the first row. A reserve not below the free memory leaves
// the whole of it.
Bytes tf_system_reserve(Bytes free, int cc_major) {
  if (free < (Bytes{1} << 31)) return 225 * kMiB;
  return cc_major <= 6 ? 500 * kMiB : cc_major == 7 ? 1050 * kMiB : cc_major == 8 ? 1536 * kMiB : 1800 * kMiB;
}
Bytes tf_default_limit(Bytes free, int cc_major) {
  const Bytes r = tf_system_reserve(free, cc_major);
  return r < free ? free - r : free;
}
std::string tf_reserve_basis(Bytes free, int cc_major) {
  if (free < (Bytes{1} << 31)) return "below 2 GiB free";
  return cc_major < 0 ? "no CUDA compute capability known" : fmt::format("compute capability {}.x", cc_major);
}

}  // namespace

Bytes tensorflow_default_limit(ConfigReader& cfg, const ConfigContext& ctx) {
  const int cc = ctx.hw ? ctx.hw->compute_major : -1;
  const Bytes free = ctx.space->usable(), limit = tf_default_limit(free, cc);
  cfg.note(fmt::format(
      "device {}: TensorFlow's default limit (no per_process_gpu_memory_fraction): this device's {} free less the "
      "{} MiB it keeps for the system ({}): {}",
      ctx.device_index, human_bytes(free), (free - limit) / kMiB, tf_reserve_basis(free, cc), human_bytes(limit)));
  return limit;
}

nlohmann::json fraction_in_force(Bytes limit, Bytes total, const JaxlibBehaviour& b) {
  if (b.tf_limit || !total) return nullptr;
  return std::round(static_cast<double>(limit) / static_cast<double>(total) * 1e4) / 1e4;
}

std::string limit_origin(const JaxlibBehaviour& b) {
  if (b.tf_limit)
    return "TensorFlow's: the device's free memory less its reserve for the system, unless the program set "
           "per_process_gpu_memory_fraction";
  return b.limit_from_free ? "the program's memory fraction of the device's free memory"
                           : "the program's memory fraction of the device";
}

DeviceLimit recorded_limit(const RecordedAllocator& rec, ConfigReader& cfg, const ConfigContext& ctx,
                           const JaxlibBehaviour& b) {
  const Bytes limit = *rec.limit;
  const RecordedHardware* hw = ctx.recording && ctx.recording->hardware ? &*ctx.recording->hardware : nullptr;
  if (!hw || ctx.space->space != Space::kHbm) return {limit, ""};  // (pinned host memory's limit is XLA's own)
  // The recorded device's memory: as the recording states it (in a set, or a profile directory of
  // hosts with other GPUs, the device's own), else its preset's (a TPU's).
  const std::optional<SpaceSpec> then = recorded_hbm(*hw, ctx.device_index);
  if (!then || then->capacity == ctx.space->capacity) return {limit, ""};
  // The program made the limit from the device it ran on, so on another device the same rule makes
  // another limit, from that device alone (never from this run's reserve applied to the recorded one).
  if (ctx.recording->framework_of() == Framework::kTensorFlow) {
    // TensorFlow: free memory less its reserve. The recorded device's free memory is the limit plus
    // the reserve its compute capability implies; free memory here is this device's usable memory.
    const int cc_then = compute_major(hw->compute_capability);
    const int cc_now = ctx.hw ? ctx.hw->compute_major : -1;
    const Bytes reserve_then = tf_system_reserve(limit + 225 * kMiB, cc_then);
    const Bytes free_now = ctx.space->usable(), here = tf_default_limit(free_now, cc_now);
    cfg.note(fmt::format(
        "device {}: TensorFlow set the capture's limit {} as its device's free memory less the {} MiB it keeps for "
        "the system ({}): {} free; this run's device has {} free, less {} MiB ({}): {}",
        ctx.device_index, human_bytes(limit), reserve_then / kMiB, tf_reserve_basis(limit + reserve_then, cc_then),
        human_bytes(limit + reserve_then), human_bytes(free_now), (free_now - here) / kMiB,
        tf_reserve_basis(free_now, cc_now), human_bytes(here)));
    return {here, "this device's free memory less TensorFlow's reserve for the system"};
  }
  // JAX: a share of the device's total memory (before jaxlib 0.4.1 of its free memory, read as the
  // usable memory: the recorded device's as its preset's reserve leaves it).
  const Bytes recorded = b.limit_from_free ? then->usable() : then->capacity;
  const Bytes now = b.limit_from_free ? ctx.space->usable() : ctx.space->capacity;
  if (!recorded) return {limit, ""};
  const double share = static_cast<double>(limit) / static_cast<double>(recorded);
  const Bytes here = rounded_limit(static_cast<Bytes>(std::min(share * static_cast<double>(now), 1.8e19)), b);
  cfg.note(fmt::format(
      "device {}: the capture's limit {} is {:.4g} of the {} its device had{}; this run's device has {}: the same "
      "share, {}",
      ctx.device_index, human_bytes(limit), share, human_bytes(recorded), b.limit_from_free ? " free" : "",
      human_bytes(now), human_bytes(here)));
  return {here, "its share of this device"};
}

}  // namespace fragsim

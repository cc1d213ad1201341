#include "policies/jax_gpu.h"

#include <fmt/format.h>

#include <algorithm>
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
            "tf.compat.v1.GPUOptions(per_process_gpu_memory_fraction={})"}}};
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

Bytes recorded_limit(const RecordedAllocator& rec, ConfigReader& cfg, const ConfigContext& ctx,
                     const JaxlibBehaviour& b) {
  const Bytes limit = *rec.limit;
  const RecordedHardware* hw = ctx.recording && ctx.recording->hardware ? &*ctx.recording->hardware : nullptr;
  if (!hw || ctx.space->space != Space::kHbm) return limit;  // (pinned host memory's limit is XLA's own)
  // The recorded device's memory: as the recording states it (in a set, or a profile directory of
  // hosts with other GPUs, the device's own), else its preset's (a TPU's).
  Bytes recorded = hw->capacity_of(ctx.device_index).value_or(0);
  if (!recorded) try {
      const HardwareModel preset = load_hardware(hw->preset);
      if (const SpaceSpec* s = preset.space(Space::kHbm)) recorded = s->capacity;
    } catch (const InputError&) {
    }
  if (!recorded || recorded == ctx.space->capacity) return limit;
  // The program made the limit from the device it ran on: JAX from its total memory (before jaxlib
  // 0.4.1 its free memory), TensorFlow without a fraction from its free memory less a reserve. On
  // another device the same share of the same measure makes another limit; free memory is read
  // here as the usable memory, the recorded device's as its memory less this device's reserve.
  const bool from_free = b.limit_from_free || ctx.recording->framework_of() == Framework::kTensorFlow;
  const Bytes reserve = ctx.space->capacity - ctx.space->usable();
  const Bytes then = from_free && recorded > reserve ? recorded - reserve : recorded;
  const Bytes now = from_free ? ctx.space->usable() : ctx.space->capacity;
  const double share = static_cast<double>(limit) / static_cast<double>(then);
  const Bytes here = rounded_limit(static_cast<Bytes>(std::min(share * static_cast<double>(now), 1.8e19)), b);
  cfg.note(fmt::format(
      "device {}: the capture's limit {} is {:.4g} of the {} its device had{}; this run's device has {}: the same "
      "share, {}",
      ctx.device_index, human_bytes(limit), share, human_bytes(then), from_free ? " free" : "", human_bytes(now),
      human_bytes(here)));
  return here;
}

}  // namespace fragsim

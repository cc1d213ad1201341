// Who speaks a setting: the framework whose allocator made a recording, and the platform it ran
// on. A setting is only advice when the program's framework reads it and builds what it selects
// on that platform: TensorFlow ignores XLA_PYTHON_CLIENT_*, and XLA builds its cudaMallocAsync
// allocator only for CUDA (on ROCm JAX fails to start with XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async).
// Readers fill Recording::recorded_by and Recording::platform; hardware presets name their vendor
// (HardwareModel::platform); policies speak through Vocabulary (policies/policy.h).
#pragma once
#include <cstdint>
#include <string_view>

namespace fragsim {

enum class Framework : std::uint8_t { kUnknown, kJax, kTensorFlow, kPyTorch };

// "JAX", "TensorFlow", "PyTorch" ("" for kUnknown), as the header's recorded_framework holds it.
constexpr std::string_view framework_name(Framework f) {
  switch (f) {
    case Framework::kJax:
      return "JAX";
    case Framework::kTensorFlow:
      return "TensorFlow";
    case Framework::kPyTorch:
      return "PyTorch";
    default:
      return "";
  }
}
// The inverse of framework_name; kUnknown for any other text.
constexpr Framework framework_named(std::string_view name) {
  for (Framework f : {Framework::kJax, Framework::kTensorFlow, Framework::kPyTorch})
    if (framework_name(f) == name) return f;
  return Framework::kUnknown;
}

// The software platform of a device: NVIDIA GPUs run CUDA, AMD GPUs ROCm (HIP).
enum class Platform : std::uint8_t { kUnknown, kCuda, kRocm, kTpu };

// "CUDA", "ROCm", "TPU" ("" for kUnknown), as the header's recorded_platform holds it.
constexpr std::string_view platform_name(Platform p) {
  switch (p) {
    case Platform::kCuda:
      return "CUDA";
    case Platform::kRocm:
      return "ROCm";
    case Platform::kTpu:
      return "TPU";
    default:
      return "";
  }
}
constexpr Platform platform_named(std::string_view name) {
  for (Platform p : {Platform::kCuda, Platform::kRocm, Platform::kTpu})
    if (platform_name(p) == name) return p;
  return Platform::kUnknown;
}

}  // namespace fragsim

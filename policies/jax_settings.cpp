// JAX's GPU memory settings, read as jaxlib reads them (`generate_pjrt_gpu_plugin_options`,
// specs/xla-bfc.md §4):
//   XLA_PYTHON_CLIENT_ALLOCATOR  .lower() ∈ default|bfc|platform|cuda_async, else ValueError
//   XLA_CLIENT_MEM_FRACTION / deprecated XLA_PYTHON_CLIENT_MEM_FRACTION: Python float(); both
//                                set (non-empty) → ValueError; empty = unset
//   XLA_PYTHON_CLIENT_PREALLOCATE  non-empty and not in ('false','False','0') → true
//   XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB  Python int() × 2^20
//   XLA_FLAGS  --xla_gpu_enable_allocator_spatial_partitioning=true|false (other flags ignored)
//   TF_GPU_ALLOCATOR=cuda_malloc_async  documented by JAX as selecting cuda_async
// XLA builds its cudaMallocAsync allocator only for CUDA (se_gpu_pjrt_client.cc,
// CreateCudaAsyncAllocator: "CUDA async allocator requires CUDA >= 11.2" elsewhere), so on ROCm
// JAX fails to start with cuda_async.
//
// TensorFlow's, read as TensorFlow reads them (gpu_process_state.cc, gpu_bfc_allocator.cc), by
// exact comparison:
//   TF_GPU_ALLOCATOR           cuda_malloc_async: cudaMallocAsync (a CUDA 11.2+ build; elsewhere an
//                              error is logged and the BFC kept); cuda_malloc: one cuMemAlloc per
//                              buffer (CUDA only); memory_guard: a debugging wrapper (not modelled);
//                              any other value: ignored, the BFC allocator
//   TF_FORCE_GPU_ALLOW_GROWTH  "true" / "false" override GPUOptions.allow_growth (grow on demand, or
//                              one region of the whole limit); anything else: an error is logged
//                              and the configured value kept. Read by the BFC allocator only
//                              (GPUBFCAllocator's GetAllowGrowthValue): cuda_malloc_async and
//                              cuda_malloc do not look at it
//   TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC  read by the cudaMallocAsync allocator only, as an int64
//                              (ReadInt64FromEnvVar; a malformed value fails TF_CHECK_OK): -1 grows the
//                              pool to its whole size at start, 0 (the default) not at all, N bytes
//                              allocates and frees N once (not modelled: refused)
// The memory fraction has no variable: GPUOptions.per_process_gpu_memory_fraction (--set mem_fraction).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/framework.h"

namespace fragsim {

namespace {

std::string strip(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\n\r\f\v"), b = s.find_last_not_of(" \t\n\r\f\v");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// Python's literal rules: an underscore may separate two digits ("1_0.5").
std::string python_digits(const std::string& text) {
  std::string s = strip(text), clean;
  for (size_t i = 0; i < s.size(); ++i)
    if (!(s[i] == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
          std::isdigit(static_cast<unsigned char>(s[i + 1]))))
      clean += s[i];
  return clean;
}

// Python's float() for the forms people write (".83", "0.5", "1e-1", " 0.5 ", "1_0.5").
double python_float(const std::string& opt, const std::string& var, const std::string& text) {
  std::string clean = python_digits(text);
  char* end = nullptr;
  double v = clean.empty() ? NAN : std::strtod(clean.c_str(), &end);
  if (clean.empty() || *end || std::isnan(v))
    throw InputError(
        fmt::format("{} {}: could not convert string to float: '{}' (JAX raises ValueError)", opt, var, text));
  return v;
}

std::int64_t python_int(const std::string& opt, const std::string& var, const std::string& text) {
  std::string clean = python_digits(text);
  char* end = nullptr;
  long long v = clean.empty() ? 0 : std::strtoll(clean.c_str(), &end, 10);
  if (clean.empty() || *end)
    throw InputError(
        fmt::format("{} {}: invalid literal for int() with base 10: '{}' (JAX raises ValueError)", opt, var, text));
  return v;
}

bool parse_xla_bool(const std::string& opt, const std::string& flag, const std::string& v) {
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "true" || l == "1" || l.empty()) return true;
  if (l == "false" || l == "0") return false;
  throw InputError(fmt::format("{} XLA_FLAGS: {}: expected true or false, got '{}'", opt, flag, v));
}

// XLA builds no cudaMallocAsync allocator for ROCm: a program that asks for it does not start.
void refuse_async_on_rocm(const SettingsContext& ctx, const std::string& setting, const std::string& what) {
  if (ctx.platform == Platform::kRocm)
    throw InputError(fmt::format(
        "{} {}: {} builds its cudaMallocAsync allocator only for CUDA; on ROCm {} ({} names a CUDA device to model "
        "one)",
        ctx.names("--env"), setting, what,
        what == "XLA" ? "JAX fails to start (\"CUDA async allocator requires CUDA >= 11.2\")"
                      : "it logs an error and keeps its BFC allocator",
        ctx.names("--hw")));
}

// Keys that only some of the allocators JAX and TensorFlow offer read: dropped, with a note, for the others.
void drop_unread_keys(const std::string& policy, FrameworkSettings& out, std::vector<std::string>* notes) {
  nlohmann::json& cfg = out.config;
  if (policy == "platform") {
    for (const char* k : {"mem_fraction", "preallocate", "spatial_partitioning", "collective_memory_size"})
      if (cfg.erase(k)) notes->push_back(fmt::format("{} does not affect the platform allocator", k));
  } else if (policy == "cuda-async") {
    for (const char* k : {"spatial_partitioning", "collective_memory_size"}) cfg.erase(k);
  }
}

FrameworkSettings interpret_jax(const std::map<std::string, std::string>& env, const SettingsContext& ctx) {
  const std::string& named = ctx.policy;
  const std::string opt = ctx.names("--env");
  std::vector<std::string>* notes = ctx.notes;
  FrameworkSettings out;
  nlohmann::json& cfg = out.config;
  auto get = [&](const char* k) -> std::string {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  // JAX reads these for its GPU client only (jax/_src/xla_bridge.py, the GPU backend's factory): on a
  // TPU the runtime's own allocator serves every buffer and they would change nothing.
  // (TF_GPU_ALLOCATOR is TensorFlow's variable, which JAX's GPU client reads too.)
  if (ctx.platform == Platform::kTpu && named.empty())
    throw InputError(fmt::format(
        "{} {}: {} for its GPU client only; on a TPU it changes nothing ({} names a GPU to model one)", opt,
        env.begin()->first,
        env.begin()->first == "TF_GPU_ALLOCATOR" ? "TensorFlow's variable, which JAX reads" : "JAX reads it",
        ctx.names("--hw")));
  bool jax = false;  // a variable that configures JAX's allocator (JAX's default one, unless it names another)
  if (env.count("XLA_PYTHON_CLIENT_ALLOCATOR")) {
    jax = true;
    std::string alloc = get("XLA_PYTHON_CLIENT_ALLOCATOR"), l = alloc;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    if (l == "default" || l == "bfc")
      out.policy = "xla-bfc";
    else if (l == "platform")
      out.policy = "platform";
    else if (l == "cuda_async")
      refuse_async_on_rocm(ctx, "XLA_PYTHON_CLIENT_ALLOCATOR=" + alloc, "XLA"), out.policy = "cuda-async";
    else
      throw InputError(
          fmt::format("{} XLA_PYTHON_CLIENT_ALLOCATOR: must be \"default\", \"platform\", \"bfc\", or "
                      "\"cuda_async\", got \"{}\"",
                      opt, l));
  }
  std::string frac = get("XLA_CLIENT_MEM_FRACTION"), dep = get("XLA_PYTHON_CLIENT_MEM_FRACTION");
  if (!dep.empty() && !frac.empty())
    throw InputError(
        opt +
        ": XLA_CLIENT_MEM_FRACTION is specified together with XLA_PYTHON_CLIENT_MEM_FRACTION. Remove the latter "
        "one, it is deprecated. (JAX raises ValueError)");
  // The variable the fraction came from: an error names the one the user gave.
  const char* frac_var = frac.empty() ? "XLA_PYTHON_CLIENT_MEM_FRACTION" : "XLA_CLIENT_MEM_FRACTION";
  if (frac.empty()) frac = dep;
  if (!frac.empty()) {
    jax = true;
    double f = python_float(opt, frac_var, frac);
    if (!(f > 0) || std::isinf(f)) throw InputError(fmt::format("{}: memory fraction must be > 0, got {}", opt, frac));
    cfg["mem_fraction"] = f;
    notes->push_back(fmt::format("memory fraction {} (as the f32 PJRT passes on: {:.9g})", frac,
                                 static_cast<double>(static_cast<float>(f))));
  }
  std::string pre = get("XLA_PYTHON_CLIENT_PREALLOCATE");
  if (!pre.empty()) {
    jax = true;
    bool p = !(pre == "false" || pre == "False" || pre == "0");
    cfg["preallocate"] = p;
    notes->push_back(
        fmt::format("XLA_PYTHON_CLIENT_PREALLOCATE={} -> preallocate={}{}", pre, p ? "true" : "false",
                    (p && (pre == "FALSE" || pre == "no" || pre == "off")) ? " (JAX only accepts false/False/0)" : ""));
  }
  std::string coll = get("XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB");
  if (!coll.empty()) {
    jax = true;
    std::int64_t mb = python_int(opt, "XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB", coll);
    if (mb < 0) throw InputError(opt + " XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB: must be >= 0");
    cfg["collective_memory_size"] = static_cast<std::uint64_t>(mb) << 20;
  }
  if (env.count("XLA_FLAGS")) {
    std::string flags = get("XLA_FLAGS");
    size_t pos = 0;
    while (pos < flags.size()) {
      size_t end = flags.find_first_of(" \t", pos);
      std::string f = flags.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      pos = end == std::string::npos ? flags.size() : end + 1;
      if (f.empty()) continue;
      std::string name = f, value;
      auto eq = f.find('=');
      if (eq != std::string::npos) name = f.substr(0, eq), value = f.substr(eq + 1);
      if (name == "--xla_gpu_enable_allocator_spatial_partitioning") {
        jax = true;
        cfg["spatial_partitioning"] = parse_xla_bool(opt, name, value);
      } else {
        notes->push_back(fmt::format("XLA_FLAGS: {} does not affect allocation; ignored", name));
      }
    }
  }
  if (env.count("TF_GPU_ALLOCATOR")) {
    if (get("TF_GPU_ALLOCATOR") != "cuda_malloc_async")
      throw InputError(opt + " TF_GPU_ALLOCATOR: only cuda_malloc_async is understood");
    refuse_async_on_rocm(ctx, "TF_GPU_ALLOCATOR=cuda_malloc_async", "XLA");
    if (out.policy.empty()) out.policy = "cuda-async";
    notes->push_back("TF_GPU_ALLOCATOR=cuda_malloc_async -> cuda-async (as JAX documents it)");
  }
  if (jax && out.policy.empty()) out.policy = "xla-bfc";  // JAX's default allocator
  drop_unread_keys(named.empty() ? out.policy : named, out, notes);
  return out;
}

FrameworkSettings interpret_tensorflow(const std::map<std::string, std::string>& env, const SettingsContext& ctx) {
  const std::string opt = ctx.names("--env");
  FrameworkSettings out;
  out.policy = "xla-bfc";  // TensorFlow's GPU allocator: the BFC (GPU_N_bfc)
  if (auto it = env.find("TF_GPU_ALLOCATOR"); it != env.end()) {
    const std::string& v = it->second;
    if (v == "cuda_malloc_async") {
      if (ctx.platform == Platform::kRocm)
        ctx.notes->push_back(
            "TF_GPU_ALLOCATOR=cuda_malloc_async on ROCm: TensorFlow builds its cudaMallocAsync allocator only for "
            "CUDA 11.2+, logs an error and keeps its BFC allocator");
      else
        out.policy = "cuda-async";
    } else if (v == "cuda_malloc") {
      if (ctx.platform == Platform::kRocm)
        throw InputError(opt +
                         " TF_GPU_ALLOCATOR=cuda_malloc: TensorFlow's cuMemAlloc allocator is CUDA's; a ROCm build "
                         "allocates nothing with it");
      out.policy = "platform";  // one cuMemAlloc / cuMemFree per buffer
    } else if (v == "memory_guard") {
      throw InputError(opt + " TF_GPU_ALLOCATOR=memory_guard: TensorFlow's debugging allocator is not modelled");
    } else {
      ctx.notes->push_back(fmt::format(
          "TF_GPU_ALLOCATOR={}: TensorFlow knows cuda_malloc_async, cuda_malloc and memory_guard only, and keeps its "
          "BFC allocator",
          v));
    }
  }
  const std::string& policy = ctx.policy.empty() ? out.policy : ctx.policy;
  if (auto it = env.find("TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC"); it != env.end()) {
    const std::string& v = it->second;
    if (v != "-1" && v != "0")
      throw InputError(fmt::format(
          "{} TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC={}: only -1 (the whole pool) and 0 (none) are modelled", opt, v));
    if (policy == "cuda-async") {
      out.config["preallocate"] = v == "-1";
      ctx.notes->push_back(
          fmt::format("TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC={} -> preallocate={}", v, v == "-1" ? "true" : "false"));
    } else {
      ctx.notes->push_back(
          fmt::format("TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC={} changes nothing: only TensorFlow's cudaMallocAsync "
                      "allocator (TF_GPU_ALLOCATOR=cuda_malloc_async) reads it",
                      v));
    }
  }
  if (auto it = env.find("TF_FORCE_GPU_ALLOW_GROWTH"); it != env.end()) {
    if (policy != "xla-bfc") {
      ctx.notes->push_back(fmt::format(
          "TF_FORCE_GPU_ALLOW_GROWTH={} changes nothing: only TensorFlow's BFC allocator reads it, not {}", it->second,
          policy == "cuda-async" ? "its cudaMallocAsync allocator (TF_GPU_ALLOCATOR=cuda_malloc_async)"
                                 : "policy " + policy));
    } else if (it->second == "true" || it->second == "false") {
      out.config["preallocate"] = it->second == "false";
      ctx.notes->push_back(fmt::format("TF_FORCE_GPU_ALLOW_GROWTH={} -> preallocate={} (allow_growth={})", it->second,
                                       it->second == "false" ? "true" : "false", it->second));
    } else {
      ctx.notes->push_back(fmt::format(
          "TF_FORCE_GPU_ALLOW_GROWTH={}: TensorFlow takes only \"true\" or \"false\", logs an error and keeps the "
          "configured allow_growth",
          it->second));
    }
  }
  drop_unread_keys(policy, out, ctx.notes);
  return out;
}

}  // namespace

void register_jax_settings(Registry& r) {
  r.add_framework(
      {"JAX",
       Framework::kJax,
       {"XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB", "XLA_FLAGS", "TF_GPU_ALLOCATOR"},
       interpret_jax});
}

void register_tensorflow_settings(Registry& r) {
  r.add_framework({"TensorFlow",
                   Framework::kTensorFlow,
                   {"TF_GPU_ALLOCATOR", "TF_FORCE_GPU_ALLOW_GROWTH", "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC"},
                   interpret_tensorflow});
}

}  // namespace fragsim

// Framework environment variables, read as the framework reads them.
//
// JAX (jaxlib `generate_pjrt_gpu_plugin_options`, specs/xla-bfc.md §4):
//   XLA_PYTHON_CLIENT_ALLOCATOR  .lower() ∈ default|bfc|platform|cuda_async, else ValueError
//   XLA_CLIENT_MEM_FRACTION / deprecated XLA_PYTHON_CLIENT_MEM_FRACTION: Python float(); both
//                                set (non-empty) → ValueError; empty = unset
//   XLA_PYTHON_CLIENT_PREALLOCATE  non-empty and not in ('false','False','0') → true
//   XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB  Python int() × 2^20
//   XLA_FLAGS  --xla_gpu_enable_allocator_spatial_partitioning=true|false (other flags ignored)
//   TF_GPU_ALLOCATOR=cuda_malloc_async  documented by JAX as selecting cuda_async
// PyTorch: PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_ALLOC_CONF) is handed to torch-caching verbatim.
#include "sim/settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "sim/base/config.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

std::string strip(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\n\r\f\v"), b = s.find_last_not_of(" \t\n\r\f\v");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// Python's float() for the forms people write (".83", "0.5", "1e-1", " 0.5 ", "1_0.5").
double python_float(const std::string& var, const std::string& text) {
  std::string s = strip(text), clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 1])))
      continue;
    clean += s[i];
  }
  char* end = nullptr;
  double v = clean.empty() ? NAN : std::strtod(clean.c_str(), &end);
  if (clean.empty() || *end || std::isnan(v))
    throw InputError(
        fmt::format("--env {}: could not convert string to float: '{}' (JAX raises ValueError)", var, text));
  return v;
}

std::int64_t python_int(const std::string& var, const std::string& text) {
  std::string s = strip(text), clean;
  for (size_t i = 0; i < s.size(); ++i)
    if (!(s[i] == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
          std::isdigit(static_cast<unsigned char>(s[i + 1]))))
      clean += s[i];
  char* end = nullptr;
  long long v = clean.empty() ? 0 : std::strtoll(clean.c_str(), &end, 10);
  if (clean.empty() || *end)
    throw InputError(
        fmt::format("--env {}: invalid literal for int() with base 10: '{}' (JAX raises ValueError)", var, text));
  return v;
}

bool parse_xla_bool(const std::string& flag, const std::string& v) {
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "true" || l == "1" || l.empty()) return true;
  if (l == "false" || l == "0") return false;
  throw InputError(fmt::format("--env XLA_FLAGS: {}: expected true or false, got '{}'", flag, v));
}

}  // namespace

std::string default_policy_for(const nlohmann::json& header, const std::string& hw_kind, std::string* why) {
  std::string source = header.is_object() ? header.value("source", std::string()) : std::string();
  if (source == "torch-snapshot") {
    *why = "policy torch-caching: the trace is a PyTorch memory snapshot (--policy chooses another)";
    return "torch-caching";
  }
  if (source == "xprof" && hw_kind == "tpu") {
    *why =
        "policy tpu-padded[inner=tpu-runtime]: the trace is an XProf capture of the TPU runtime's allocator "
        "(--policy chooses another)";
    return "tpu-padded[inner=tpu-runtime]";
  }
  if (source == "xprof" && hw_kind != "tpu") {
    *why = "policy xla-bfc: the trace is an XProf capture of XLA's BFC allocator (--policy chooses another)";
    return "xla-bfc";
  }
  if (hw_kind == "tpu") {
    *why = "policy tpu-padded: the hardware is a TPU (--policy chooses another)";
    return "tpu-padded";
  }
  why->clear();
  return "best-fit";
}

PolicySpec parse_policy_ref(const std::string& text, const std::string& what) {
  PolicySpec ref;
  auto br = text.find('[');
  ref.name = text.substr(0, br);
  auto bad = [&](const std::string& why) {
    return InputError(fmt::format("{}: {} in '{}' (expected POLICY or POLICY[key=value,...])", what, why, text));
  };
  if (ref.name.empty()) throw bad("no policy name");
  if (ref.name.find_first_of("],=") != std::string::npos) throw bad("unexpected character in the name");
  if (br == std::string::npos) return ref;
  if (text.back() != ']')
    throw bad(text.find(']') == std::string::npos ? "no closing ']'" : "text after the closing ']'");
  // Split the inside on commas outside nested brackets.
  std::string inside = text.substr(br + 1, text.size() - br - 2);
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : inside) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) throw bad("unbalanced ']'");
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw bad("unbalanced '['");
  items.push_back(cur);
  for (const auto& item : items) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq != std::string::npos && item.find('[') != std::string::npos && item.find('[') > eq) {
      // key=NAME[...]: a policy-valued option and its options (tpu-padded[inner=xla-bfc[preallocate=false]]).
      std::string key = item.substr(0, eq);
      PolicySpec nested = parse_policy_ref(item.substr(eq + 1), what);
      ref.config[key] = nested.name;
      ref.config[key + "_config"] = nested.config;
      continue;
    }
    auto [k, v] = parse_setting(item, what);
    ref.config[k] = v;
  }
  return ref;
}

PolicySpec resolve_settings(const SettingsInput& in, std::vector<std::string>* notes) {
  const PolicySpec named = in.policy.empty() ? PolicySpec{} : parse_policy_ref(in.policy, "--policy");
  std::map<std::string, std::string> env;
  for (const auto& e : in.envs) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError(fmt::format("--env: expected VAR=VALUE, got '{}'", e));
    env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  auto get = [&](const char* k) -> std::string {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  static const char* kKnown[] = {"XLA_PYTHON_CLIENT_ALLOCATOR",
                                 "XLA_CLIENT_MEM_FRACTION",
                                 "XLA_PYTHON_CLIENT_MEM_FRACTION",
                                 "XLA_PYTHON_CLIENT_PREALLOCATE",
                                 "XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB",
                                 "XLA_FLAGS",
                                 "TF_GPU_ALLOCATOR",
                                 "PYTORCH_CUDA_ALLOC_CONF",
                                 "PYTORCH_ALLOC_CONF"};
  for (const auto& [k, v] : env) {
    bool known = false;
    for (auto n : kKnown) known |= (k == n);
    if (!known) {
      throw InputError(fmt::format("--env: unknown variable '{}' (understood: {})", k, fmt::join(kKnown, ", ")));
    }
  }

  PolicySpec spec;
  nlohmann::json cfg = nlohmann::json::object();
  std::string from_env;  // policy chosen by an environment variable
  bool jax = false;

  // --- JAX ---
  std::string alloc = get("XLA_PYTHON_CLIENT_ALLOCATOR");
  if (env.count("XLA_PYTHON_CLIENT_ALLOCATOR")) {
    jax = true;
    std::string l = alloc;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    if (l == "default" || l == "bfc")
      from_env = "xla-bfc";
    else if (l == "platform")
      from_env = "platform";
    else if (l == "cuda_async")
      from_env = "cuda-async";
    else
      throw InputError(
          fmt::format("--env XLA_PYTHON_CLIENT_ALLOCATOR: must be \"default\", \"platform\", \"bfc\", or "
                      "\"cuda_async\", got \"{}\"",
                      l));
    notes->push_back(fmt::format("XLA_PYTHON_CLIENT_ALLOCATOR={} -> policy {}", alloc, from_env));
  }
  std::string frac = get("XLA_CLIENT_MEM_FRACTION"), dep = get("XLA_PYTHON_CLIENT_MEM_FRACTION");
  if (!dep.empty() && !frac.empty())
    throw InputError(
        "--env: XLA_CLIENT_MEM_FRACTION is specified together with XLA_PYTHON_CLIENT_MEM_FRACTION. Remove the latter "
        "one, it is deprecated. (JAX raises ValueError)");
  if (frac.empty()) frac = dep;
  if (!frac.empty()) {
    jax = true;
    double f = python_float("XLA_CLIENT_MEM_FRACTION", frac);
    if (!(f > 0) || std::isinf(f)) throw InputError(fmt::format("--env: memory fraction must be > 0, got {}", frac));
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
    std::int64_t mb = python_int("XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB", coll);
    if (mb < 0) throw InputError("--env XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB: must be >= 0");
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
        cfg["spatial_partitioning"] = parse_xla_bool(name, value);
      } else {
        notes->push_back(fmt::format("XLA_FLAGS: {} does not affect allocation; ignored", name));
      }
    }
  }
  if (env.count("TF_GPU_ALLOCATOR")) {
    if (get("TF_GPU_ALLOCATOR") != "cuda_malloc_async")
      throw InputError("--env TF_GPU_ALLOCATOR: only cuda_malloc_async is understood");
    if (from_env.empty()) from_env = "cuda-async";
    notes->push_back("TF_GPU_ALLOCATOR=cuda_malloc_async -> cuda-async (as JAX documents it)");
  }

  // --- PyTorch ---
  for (const char* k : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    if (!env.count(k)) continue;
    if (jax) throw InputError(fmt::format("--env: {} is PyTorch's; it cannot be combined with JAX variables", k));
    if (cfg.contains("alloc_conf"))
      throw InputError("--env: give PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF, not both");
    cfg["alloc_conf"] = get(k);
    from_env = "torch-caching";
  }
  if (jax && from_env.empty()) from_env = "xla-bfc";  // JAX's default allocator

  if (!named.name.empty() && !from_env.empty() && named.name != from_env)
    throw InputError(fmt::format("--env selects policy {} but --policy says {}", from_env, named.name));
  spec.name = !named.name.empty() ? named.name : !from_env.empty() ? from_env : in.default_policy;
  if (named.name.empty() && from_env.empty()) {  // the default may carry options: "tpu-padded[inner=tpu-runtime]"
    PolicySpec def = parse_policy_ref(in.default_policy, "default policy");
    spec.name = def.name;
    for (const auto& [k, v] : def.config.items()) cfg[k] = v;
  }
  // Keys that only some JAX allocators read.
  if (spec.name == "platform") {
    for (const char* k : {"mem_fraction", "preallocate", "spatial_partitioning", "collective_memory_size"})
      if (cfg.erase(k)) notes->push_back(fmt::format("{} does not affect the platform allocator", k));
  } else if (spec.name == "cuda-async") {
    for (const char* k : {"spatial_partitioning", "collective_memory_size"}) cfg.erase(k);
  }
  for (const auto& s : in.sets) {
    auto [k, v] = parse_setting(s, "--set");
    cfg[k] = v;
  }
  for (const auto& [k, v] : named.config.items()) cfg[k] = v;  // POLICY[k=v]: the entry's own options win
  spec.config = cfg;
  return spec;
}

}  // namespace fragsim

#include "policies/torch_alloc_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <vector>

#include "policies/policy.h"
#include "sim/base/error.h"

namespace fragsim::torch {

namespace {

bool pow2(std::uint64_t v) { return v && !(v & (v - 1)); }
int log2_floor(std::uint64_t v) { return 63 - __builtin_clzll(v); }

}  // namespace

Bytes Config::round_size(Bytes n) const {
  if (n < kMinBlockSize) return kMinBlockSize;
  int lg = log2_floor(n);
  std::uint64_t d = divisions[std::clamp(lg - 20, 0, kIntervals - 1)];
  if (d > 1 && n > kMinBlockSize * d) {
    if (pow2(n)) return n;
    Bytes floor2 = Bytes{1} << lg;
    Bytes step = floor2 >> log2_floor(d);
    if (step == 0) return lg == 63 ? kTooLarge : floor2 << 1;
    Bytes f = n & ~(step - 1);
    return f == n ? n : (f > kTooLarge - step ? kTooLarge : f + step);
  }
  return round_up_sat(n, kMinBlockSize);
}

Bytes Config::alloc_size(Bytes r) { return segment_size(r); }

// PYTORCH_CUDA_ALLOC_CONF as PyTorch tokenizes it: key:value pairs separated by ',', with
// bracketed lists for roundup_power2_divisions.
void parse_alloc_conf(const std::string& conf, Config& c) {
  auto bad = [&](const std::string& m) { return InputError("PYTORCH_CUDA_ALLOC_CONF: " + m); };
  std::vector<std::string> tok;
  std::string cur;
  for (char ch : conf) {
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (!cur.empty()) tok.push_back(cur);
      cur.clear();
      tok.emplace_back(1, ch);
    } else if (ch != ' ') {
      cur += ch;
    }
  }
  if (!cur.empty()) tok.push_back(cur);
  size_t i = 0;
  // The next token, which must exist (PyTorch: "Error parsing ... missing value").
  auto next = [&](const std::string& key) -> const std::string& {
    if (i >= tok.size()) throw bad(key + ": missing value");
    return tok[i++];
  };
  auto number = [&](const std::string& s, const std::string& key) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end || !(v >= 0) || v > 1e15) throw bad(fmt::format("{}: '{}' is not a number", key, s));
    return v;
  };
  auto megabytes = [&](double v, const std::string& key) {
    if (v >= 8796093022208.0) throw bad(key + ": too large");  // 2^43 MiB = 8 EiB
    return static_cast<Bytes>(v) * kMiB;
  };
  auto expect = [&](const char* t) {
    if (i >= tok.size() || tok[i] != t) throw bad(fmt::format("expected '{}'", t));
    ++i;
  };
  while (i < tok.size()) {
    if (tok[i] == ",") {
      ++i;
      continue;
    }
    std::string key = tok[i++];
    expect(":");
    if (key == "max_split_size_mb") {
      double v = number(next(key), key);
      if (v <= static_cast<double>(kLargeBuffer / kMiB))
        throw bad(fmt::format("max_split_size_mb too small, must be > {}", kLargeBuffer / kMiB));
      c.max_split_size = megabytes(v, key);
    } else if (key == "max_non_split_rounding_mb") {
      c.max_non_split_rounding = megabytes(number(next(key), key), key);
    } else if (key == "garbage_collection_threshold") {
      double v = number(next(key), key);
      if (!(v > 0 && v < 1)) throw bad("garbage_collection_threshold must be in (0.0, 1.0)");
      c.gc_threshold = v;
    } else if (key == "roundup_power2_divisions") {
      if (next(key) == "[") {
        size_t last = 0;
        bool first = true;
        for (;;) {
          const std::string& t = next(key);
          if (t == "]") break;
          if (t == ",") continue;
          std::string k = t;
          expect(":");
          auto d = static_cast<std::uint64_t>(number(next(key), key));
          if (d != 0 && !pow2(d)) throw bad("For roundups, the divisions has to be power of 2");
          if (k == ">") {
            std::fill(c.divisions + std::min<size_t>(last + 1, kIntervals), c.divisions + kIntervals, d);
          } else {
            auto mb = static_cast<std::uint64_t>(number(k, key));
            if (!pow2(mb)) throw bad("For roundups, the intervals have to be power of 2");
            size_t idx = std::min<size_t>(log2_floor(mb), kIntervals - 1);
            if (first) std::fill(c.divisions, c.divisions + idx, d);
            c.divisions[idx] = d;
            last = idx;
            first = false;
          }
        }
      } else {
        auto d = static_cast<std::uint64_t>(number(tok[i - 1], key));
        if (d != 0 && !pow2(d)) throw bad("For roundups, the divisions has to be power of 2");
        std::fill(c.divisions, c.divisions + kIntervals, d);
      }
    } else if (key == "expandable_segments") {
      const std::string& v = next(key);
      if (v != "True" && v != "False") throw bad("Expected a single True/False argument for expandable_segments");
      c.expandable = v == "True";
    } else if (key == "backend") {
      const std::string& v = next(key);
      if (v == "cudaMallocAsync") throw bad("backend:cudaMallocAsync is modelled by --policy cuda-async");
      if (v != "native") throw bad("Unknown allocator backend, options are native and cudaMallocAsync");
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_num_register_threads" || key == "pinned_use_background_threads" ||
               key == "pinned_reserve_segment_size_mb") {
      next(key);  // host-side options: no effect on device placement
    } else {
      throw bad(fmt::format("Unrecognized key '{}' in CUDA allocator config", key));
    }
  }
}

void apply_recorded_settings(const RecordedTorchSettings& s, Config& c) {
  if (s.max_split_size) c.max_split_size = *s.max_split_size;
  if (s.garbage_collection_threshold) c.gc_threshold = *s.garbage_collection_threshold;
  if (s.expandable_segments) c.expandable = *s.expandable_segments;
  for (auto [mb, d] : s.roundup_power2_divisions) c.divisions[std::min<size_t>(log2_floor(mb), kIntervals - 1)] = d;
}

std::vector<std::string> conf_parts(const std::string& conf) {
  std::vector<std::string> parts;
  std::string part;
  int depth = 0;
  for (char ch : conf) {
    depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
    if (ch == ',' && depth == 0) {
      if (!part.empty()) parts.push_back(part);
      part.clear();
    } else {
      part += ch;
    }
  }
  if (!part.empty()) parts.push_back(part);
  return parts;
}

std::string conf_key(const std::string& part) { return part.substr(0, part.find(':')); }

std::string alloc_conf_text(const Config& c) {
  std::vector<std::string> keys;
  if (c.max_split_size != kTooLarge) keys.push_back(fmt::format("max_split_size_mb:{}", c.max_split_size / kMiB));
  if (c.max_non_split_rounding != kLargeBuffer)
    keys.push_back(fmt::format("max_non_split_rounding_mb:{}", c.max_non_split_rounding / kMiB));
  if (c.gc_threshold > 0) keys.push_back(fmt::format("garbage_collection_threshold:{}", c.gc_threshold));
  if (std::any_of(c.divisions, c.divisions + kIntervals, [](std::uint64_t d) { return d != 0; })) {
    if (std::all_of(c.divisions, c.divisions + kIntervals, [&](std::uint64_t d) { return d == c.divisions[0]; })) {
      keys.push_back(fmt::format("roundup_power2_divisions:{}", c.divisions[0]));
    } else {
      std::vector<std::string> parts;
      for (int i = 0; i < kIntervals; ++i) parts.push_back(fmt::format("{}:{}", std::uint64_t{1} << i, c.divisions[i]));
      keys.push_back(fmt::format("roundup_power2_divisions:[{}]", fmt::join(parts, ",")));
    }
  }
  if (c.expandable) keys.push_back("expandable_segments:True");
  return fmt::format("{}", fmt::join(keys, ","));
}

nlohmann::json snapshot_settings(const Config& c) {
  nlohmann::json div = nlohmann::json::object();
  for (int i = 0; i < kIntervals; ++i) div[std::to_string(std::uint64_t{1} << i)] = c.divisions[i];
  return {{"PYTORCH_CUDA_ALLOC_CONF", alloc_conf_text(c)},
          {"max_split_size",
           c.max_split_size == kTooLarge ? std::int64_t{-1} : static_cast<std::int64_t>(c.max_split_size)},
          {"garbage_collection_threshold", c.gc_threshold},
          {"expandable_segments", c.expandable},
          {"pinned_num_register_threads", 1},
          {"release_lock_on_cudamalloc", false},
          {"pinned_use_cuda_host_register", false},
          {"roundup_power2_divisions", div}};
}

std::string format_size(Bytes b) {
  if (b <= 1024) return fmt::format("{} bytes", b);
  if (b <= 1048576) return fmt::format("{:.2f} KiB", static_cast<double>(b) / 1024.0);
  if (b <= 1073741824) return fmt::format("{:.2f} MiB", static_cast<double>(b) / 1048576.0);
  return fmt::format("{:.2f} GiB", static_cast<double>(b) / 1073741824.0);
}

}  // namespace fragsim::torch

namespace fragsim {

// PyTorch reads PYTORCH_CUDA_ALLOC_CONF (or its newer name PYTORCH_ALLOC_CONF) once, at the
// allocator's start, and a ROCm build PYTORCH_HIP_ALLOC_CONF when that is unset
// (c10/cuda/CUDAAllocatorConfig.h, CUDAAllocatorConfig::instance: the HIP name is read under
// USE_ROCM only, "convenience for ROCm users"). The variable is read whole: it replaces the
// snapshot's recorded settings (torch-caching's alloc_conf, parse_alloc_conf). A CUDA build never
// reads PYTORCH_HIP_ALLOC_CONF: given alone for a device that is not AMD's it would change nothing,
// so it is refused, naming the variable that build reads; beside a variable that is read, it is
// ignored with a note, on ROCm as well.
void register_torch_settings(Registry& r) {
  r.add_framework(
      {"PyTorch",
       Framework::kPyTorch,
       {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"},
       [](const std::map<std::string, std::string>& env, const SettingsContext& ctx) {
         if (env.count("PYTORCH_CUDA_ALLOC_CONF") && env.count("PYTORCH_ALLOC_CONF"))
           throw InputError(ctx.names("--env") + ": give PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF, not both");
         FrameworkSettings s;
         s.policy = "torch-caching";
         for (const char* var : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"})
           if (auto it = env.find(var); it != env.end()) s.config["alloc_conf"] = it->second;
         if (auto hip = env.find("PYTORCH_HIP_ALLOC_CONF"); hip != env.end()) {
           if (s.config.contains("alloc_conf"))
             ctx.notes->push_back(
                 "PYTORCH_HIP_ALLOC_CONF is ignored: PyTorch reads it only when PYTORCH_CUDA_ALLOC_CONF and "
                 "PYTORCH_ALLOC_CONF are unset, and a CUDA build never");
           else if (ctx.platform != Platform::kRocm)
             throw InputError(fmt::format(
                 "{} PYTORCH_HIP_ALLOC_CONF: only PyTorch's ROCm builds read it and the run's device is {}, whose "
                 "build reads PYTORCH_CUDA_ALLOC_CONF: give PYTORCH_CUDA_ALLOC_CONF={}",
                 ctx.names("--env"),
                 ctx.platform == Platform::kUnknown ? std::string("not an AMD GPU")
                                                    : "a " + std::string(platform_name(ctx.platform)) + " device",
                 hip->second));
           else
             s.config["alloc_conf"] = hip->second;
         }
         return s;
       }});
}

}  // namespace fragsim

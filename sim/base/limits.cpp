#include "sim/base/limits.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <vector>

#include "sim/base/checked.h"
#include "sim/base/error.h"
#include "sim/base/text.h"
#include "sim/base/units.h"

namespace fragsim {

namespace {

struct LimitSpec {
  std::string_view key;
  bool bytes;                // a size (--limit takes a unit) or a count
  std::uint64_t floor;       // allowed whatever the input's size
  std::uint64_t num, den;    // plus num / den per byte of input
  std::uint64_t unit_bytes;  // memory one unit takes: capped at half the memory fragsim may use (0: no cap)
  std::string_view what;     // what is counted
};

// Factors: real inputs use a fraction of each (tests/data: pickles decompress to at most 56x
// their .zst and captures to 5x; a snapshot decodes into about 1 object per compressed byte
// (6 for the smallest) and its conversion copies up to 340 bytes of frames per compressed byte).
constexpr std::array<LimitSpec, static_cast<size_t>(Limit::kCount)> kSpecs = {{
    {"decompressed", true, 64 * kMiB, 128, 1, 0, "bytes after decompression (zstd, gzip)"},
    {"objects", false, 1 << 20, 2, 1, 128, "objects decoded into memory"},
    {"strings", true, 64 * kMiB, 1024, 1, 0, "bytes copied out of an input"},
    {"devices", false, 256, 1, 512, 64 * kKiB, "devices"},
    {"names", true, 64 * kMiB, 4, 1, 2, "bytes of distinct names"},
    {"marks", true, 16 * kMiB, 1, 1, 1, "bytes of mark names"},
    {"plan_steps", false, std::uint64_t{1} << 30, 0, 1, 0, "steps of an offline plan"},
}};

std::array<std::optional<std::uint64_t>, static_cast<size_t>(Limit::kCount)> g_override;

const LimitSpec& spec(Limit l) { return kSpecs[static_cast<size_t>(l)]; }

// The memory this process may use: the machine's, or less where the process is held to less — its
// address space (ulimit -v, prlimit --as) or its control group (a container's memory.max). A cap
// of half the machine's memory under a 2 GiB address space let one small input claim 64 GiB.
std::uint64_t machine_memory() {
  static const std::uint64_t memory = [] {
    long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    std::uint64_t m =
        pages <= 0 || page <= 0
            ? std::uint64_t{64} << 30
            : mul_u64(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page)).value_or(~std::uint64_t{0});
    struct rlimit r {};
    if (::getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) m = std::min<std::uint64_t>(m, r.rlim_cur);
    std::uint64_t group = 0;
    if (std::FILE* f = std::fopen("/sys/fs/cgroup/memory.max", "r")) {  // "max" when unlimited
      if (std::fscanf(f, "%" SCNu64, &group) == 1 && group > 0) m = std::min(m, group);
      std::fclose(f);
    }
    return m;
  }();
  return memory;
}

std::string amount(const LimitSpec& s, std::uint64_t v) {
  if (v == ~std::uint64_t{0}) return "none";
  return s.bytes ? human_bytes(v) : fmt::format("{}", v);
}

std::string default_text(const LimitSpec& s) {
  std::string f = s.bytes ? human_bytes(s.floor) : fmt::format("{}", s.floor);
  if (s.num == 0) return f;
  std::string per = s.den == 1 ? fmt::format("{} x", s.num) : fmt::format("1 per {} bytes of", s.den);
  return fmt::format("{} + {} the input's size{}", f, per,
                     s.unit_bytes ? " (capped by half the memory fragsim may use)" : "");
}

}  // namespace

std::uint64_t limit_value(Limit l, std::uint64_t input_bytes) {
  if (auto o = g_override[static_cast<size_t>(l)]) return *o;
  const LimitSpec& s = spec(l);
  std::uint64_t v = s.floor;
  if (s.num)
    v = add_u64(v, mul_u64(input_bytes / s.den, s.num).value_or(~std::uint64_t{0})).value_or(~std::uint64_t{0});
  if (s.unit_bytes) v = std::min(v, std::max(s.floor, machine_memory() / 2 / s.unit_bytes));
  return v;
}

void set_limit(std::string_view key_value) {
  auto eq = key_value.find('=');
  std::string_view key = key_value.substr(0, eq);
  std::vector<std::string_view> keys;
  for (const auto& s : kSpecs) keys.push_back(s.key);
  for (size_t i = 0; i < kSpecs.size(); ++i) {
    const LimitSpec& s = kSpecs[i];
    if (s.key != key) continue;
    if (eq == std::string_view::npos)
      throw InputError(fmt::format("--limit: '{}': expected KEY=VALUE", escape_terminal(key_value)));
    std::string_view v = key_value.substr(eq + 1);
    std::string what = fmt::format("--limit {}", s.key);
    g_override[i] = v == "none" ? ~std::uint64_t{0} : s.bytes ? parse_size(v, what) : parse_u64(v, what);
    return;
  }
  throw InputError(fmt::format("--limit: unknown limit '{}'{} (limits: {})", escape_terminal(key),
                               did_you_mean(key, keys), limit_keys()));
}

std::string limit_keys() {
  std::string list;
  for (const auto& s : kSpecs) list += (list.empty() ? "" : ", ") + std::string(s.key);
  return list;
}

void reset_limits() { g_override.fill(std::nullopt); }

std::string limits_help() {
  std::string out;
  for (const auto& s : kSpecs) out += fmt::format("  {:<13} {}: {}\n", s.key, s.what, default_text(s));
  return out;
}

void check_device_lists(std::uint64_t largest, const std::string& where, std::uint64_t input_bytes) {
  LimitCounter lists(Limit::kDevices,
                     fmt::format("{}: --export-snapshot lists every device number up to {}", where, largest),
                     input_bytes);
  lists.spend(largest == UINT64_MAX ? largest : largest + 1);
}

LimitCounter::LimitCounter(Limit l, std::string file, std::uint64_t input_bytes)
    : limit_(l), file_(std::move(file)), input_bytes_(input_bytes), max_(limit_value(l, input_bytes)) {}

namespace {
std::atomic<bool> g_python{false};
}  // namespace

void limits_speak_python() { g_python = true; }

void LimitCounter::exceeded() const {
  const LimitSpec& s = spec(limit_);
  const bool py = g_python;
  std::string basis = g_override[static_cast<size_t>(limit_)] ? (py ? "set by fragsim.set_limit" : "set by --limit")
                      : s.num == 0
                          ? "the default"
                          : fmt::format("default {}, the input being {}", default_text(s), human_bytes(input_bytes_));
  const std::string raise =
      fmt::format("{}{}={}{}", py ? "fragsim.set_limit('" : "--limit ", s.key, s.bytes ? "SIZE" : "N", py ? "')" : "");
  throw InputError(fmt::format("{}more {} than the limit allows: {} is limit {} ({}); {} raises it",
                               file_.empty() ? "" : file_ + ": ", s.what, amount(s, max_), s.key, basis, raise));
}

}  // namespace fragsim

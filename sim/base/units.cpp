#include "sim/base/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "sim/base/checked.h"
#include "sim/base/error.h"
#include "sim/base/option_names.h"

namespace fragsim {

namespace {
constexpr std::string_view kSpaceNames[] = {"hbm", "collective", "vmem", "smem", "cmem", "host"};
}

std::string_view space_name(Space s) { return kSpaceNames[static_cast<int>(s)]; }

bool parse_space(std::string_view s, Space* out) {
  int i = name_index(kSpaceNames, s);
  if (i >= 0) *out = static_cast<Space>(i);
  return i >= 0;
}

Bytes parse_size(std::string_view text, std::string_view what) {
  auto bad = [&] {
    return InputError(
        fmt::format("{}: '{}' is not a size (plain bytes or a number with KiB/MiB/GiB/TiB/KB/MB/GB/TB)", what, text));
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string num(text.substr(0, i));
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (num.empty() || num == ".") throw bad();
  struct Unit {
    std::string_view name;
    double mult;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},     {"B", 1},    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},     {"TB", 1e12}};
  for (const auto& u : kUnits) {
    if (u.name != unit) continue;
    if (num.find('.') == std::string::npos) {
      errno = 0;
      char* end = nullptr;
      unsigned long long v = std::strtoull(num.c_str(), &end, 10);
      if (*end) throw bad();
      // Every unit is a whole number of bytes: exact in 64 bits up to 2^64 - 1 B, else an error
      // that says so (not "not a size").
      auto r = mul_u64(v, static_cast<Bytes>(u.mult));
      if (errno == ERANGE || !r)
        throw InputError(fmt::format("{}: '{}' is more than 2^64 - 1 bytes, the largest size there is", what, text));
      return *r;
    }
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (*end || !std::isfinite(v)) throw bad();
    double r = std::round(v * u.mult);
    if (r < 0 || r > 1.8e19) throw bad();
    return static_cast<Bytes>(r);
  }
  throw bad();
}

Bytes parse_size_arg(std::string_view text, std::string_view flag) { return parse_size_arg(text, flag, OptionNames{}); }

Bytes parse_size_arg(std::string_view text, std::string_view flag, const OptionNames& names) {
  bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits && text.find_first_not_of('0') != std::string_view::npos)
    throw InputError(
        names.python
            ? fmt::format("{}: '{}' has no unit: write {} (an int counts bytes; '{}B' is {} bytes)", names(flag), text,
                          names.size_fix(flag, text), text, text)
            : fmt::format(
                  "{}: '{}' has no unit: sizes on the command line take one ({}GiB, {}GB, {}MiB; {}B for bytes)", flag,
                  text, text, text, text, text));
  return parse_size(text, names(flag));
}

std::string size_arg(Bytes b) {
  static constexpr std::pair<Bytes, const char*> kUnits[] = {
      {kTiB, "TiB"}, {kGiB, "GiB"}, {kMiB, "MiB"}, {kKiB, "KiB"}};
  for (auto [u, name] : kUnits)
    if (b && b % u == 0) return fmt::format("{}{}", b / u, name);
  return fmt::format("{}B", b);
}

std::uint64_t ns_per_tick(std::string_view unit) {
  return unit == "s" ? 1'000'000'000 : unit == "ms" ? 1'000'000 : unit == "us" ? 1'000 : 1;
}

std::string human_bytes(Bytes b) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", b);
  return fmt::format("{:.2f} {}", v, kNames[u]);
}

std::pair<std::string, std::string> human_bytes_apart(Bytes a, Bytes b) {
  std::string x = human_bytes(a), y = human_bytes(b);
  if (a != b && x == y) return {fmt::format("{} B", a), fmt::format("{} B", b)};
  return {x, y};
}

std::string signed_bytes(Bytes from, Bytes to) {
  return (to < from ? "-" : to > from ? "+" : "±") + human_bytes(to < from ? from - to : to - from);
}

std::string signed_bytes(std::int64_t d) {
  return d < 0 ? signed_bytes(static_cast<Bytes>(-(d + 1)) + 1, 0) : signed_bytes(0, static_cast<Bytes>(d));
}

std::string signed_percent(double pct, int decimals) {
  const double unit = std::pow(10.0, -decimals);
  if (pct == 0 || !std::isfinite(pct) || std::fabs(pct) >= unit / 2) return fmt::format("{:+.{}f}%", pct, decimals);
  // Enough decimals for two significant digits, in fixed notation (never "1e-11").
  const int d = std::min(15, 1 - static_cast<int>(std::floor(std::log10(std::fabs(pct)))));
  return fmt::format("{:+.{}f}%", pct, d);
}

std::string tsl_bytes(Bytes b) {
  if (b < 1024) return fmt::format("{}B", b);
  static constexpr char kUnits[] = "KMGTPE";
  int u = 0;
  while (b >= 1024 * 1024) {
    b /= 1024;  // integer division: the truncation TSL's output shows
    ++u;
  }
  double v = static_cast<double>(b) / 1024.0;
  return u == 0 ? fmt::format("{:.1f}{}iB", v, kUnits[u]) : fmt::format("{:.2f}{}iB", v, kUnits[u]);
}

std::string xla_tpu_bytes(Bytes b) {
  std::string s = tsl_bytes(b);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, "iB") == 0) s.resize(s.size() - 2);
  return s;
}

}  // namespace fragsim

#include "sim/base/checked.h"

#include <fmt/format.h>

#include "sim/base/error.h"

namespace fragsim {

void internal_error(const char* file, int line, const std::string& what) {
  std::string_view f(file);
  // Keep the path from the repository root ("policies/xla_bfc.cpp:120").
  for (std::string_view top : {"/sim/", "/policies/", "/traces/", "/hardware_models/", "/tests/"})
    if (auto p = f.rfind(top); p != std::string_view::npos) {
      f = f.substr(p + 1);
      break;
    }
  throw InternalError(fmt::format("internal error at {}:{}: {}", f, line, what));
}

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  auto r = mul_u64(a, b);
  if (!r) throw InputError(fmt::format("{}: {} x {} does not fit in 64 bits", what, a, b));
  return *r;
}

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  auto r = add_u64(a, b);
  if (!r) throw InputError(fmt::format("{}: {} + {} does not fit in 64 bits", what, a, b));
  return *r;
}

Bytes checked_round_up(Bytes n, Bytes a, std::string_view what) {
  if (a <= 1) return n;
  Bytes r = n % a;
  return r == 0 ? n : checked_add(n, a - r, what);
}

std::uint64_t parse_u64(std::string_view text, std::string_view what) {
  if (text.empty()) throw InputError(fmt::format("{}: expected a number", what));
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') throw InputError(fmt::format("{}: '{}' is not a non-negative integer", what, text));
    auto m = mul_u64(v, 10);
    auto s = m ? add_u64(*m, static_cast<unsigned>(c - '0')) : std::nullopt;
    if (!s) throw InputError(fmt::format("{}: {} does not fit in 64 bits", what, text));
    v = *s;
  }
  return v;
}

}  // namespace fragsim

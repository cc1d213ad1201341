// Checked arithmetic for sizes computed from input (shapes, knobs, counts): an overflow is an
// input error naming what was being computed, never a silently wrapped size.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "sim/base/units.h"

namespace fragsim {

// a × b, or nullopt when it does not fit in 64 bits.
[[nodiscard]] constexpr std::optional<std::uint64_t> mul_u64(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
[[nodiscard]] constexpr std::optional<std::uint64_t> add_u64(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a × b; throws InputError("what: ... does not fit in 64 bits") on overflow.
[[nodiscard]] std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what);
[[nodiscard]] std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what);
// Round n up to a multiple of a; throws on overflow.
[[nodiscard]] Bytes checked_round_up(Bytes n, Bytes a, std::string_view what);
// A decimal integer that must fit in 64 bits (no sign, no spaces); throws InputError naming what.
[[nodiscard]] std::uint64_t parse_u64(std::string_view text, std::string_view what);

}  // namespace fragsim

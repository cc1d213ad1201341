// Core value types of fragsim.
//
//   Bytes   — a size in bytes                     (u64)
//   Addr    — a simulated device address          (u64)
//   Tick    — a time stamp in the trace's unit    (u64)
//   AllocId — the id a trace gives an allocation  (u64)
//   Handle  — dense index of a live allocation, assigned by the trace reader and recycled
//             after the free, so that engine and policies index vectors instead of hashing ids.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace fragsim {

using Bytes = std::uint64_t;
using Addr = std::uint64_t;
using Tick = std::uint64_t;
using AllocId = std::uint64_t;
using Handle = std::uint32_t;

inline constexpr Handle kNoHandle = std::numeric_limits<Handle>::max();
inline constexpr Bytes kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

// Powers of two (the common case: alignments, granularities) avoid a 64-bit division.
constexpr Bytes round_up(Bytes n, Bytes a) {
  if (a <= 1) return n;
  if ((a & (a - 1)) == 0) return (n + a - 1) & ~(a - 1);
  return (n + a - 1) / a * a;
}
constexpr Bytes round_down(Bytes n, Bytes a) {
  if (a <= 1) return n;
  if ((a & (a - 1)) == 0) return n & ~(a - 1);
  return n / a * a;
}

// Index of s in a table of names, or -1 (entries before `from` are skipped).
template <size_t N>
int name_index(const std::string_view (&names)[N], std::string_view s, int from = 0) {
  for (int i = from; i < static_cast<int>(N); ++i)
    if (names[i] == s) return i;
  return -1;
}

// Memory spaces of the trace contract. kCount bounds per-device arrays.
enum class Space : std::uint8_t { kHbm, kCollective, kVmem, kSmem, kCmem, kHost, kCount };
std::string_view space_name(Space s);
bool parse_space(std::string_view s, Space* out);

// "512", "64KiB", "2MiB", "1.5GiB", "80GB". Throws InputError (key = what) on bad text.
Bytes parse_size(std::string_view text, std::string_view what);
// 1536 -> "1.50 KiB"
std::string human_bytes(Bytes b);

}  // namespace fragsim

// Units every layer shares (architecture.md, "sim/base").
//
//   Bytes   — a size or a byte count                        (u64; the arithmetic unit)
//   Addr    — a simulated or recorded device address         (distinct type)
//   Tick    — a time stamp in the trace's unit               (distinct type)
//   AllocId — the id a trace gives an allocation             (distinct type)
//   Handle  — dense index of a live allocation, assigned by the trace reader and recycled
//             after the free, so that engine and policies index vectors instead of hashing ids.
//
// Addr, Tick and AllocId convert to and from integers only explicitly, so a size cannot be
// passed where an address, a time or an id is expected, nor the other way round. Their
// arithmetic is the meaningful one only: Addr ± Bytes → Addr, Addr − Addr → Bytes,
// Tick + n → Tick, Tick − Tick → ticks elapsed.
#pragma once
#include <fmt/format.h>

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace fragsim {

using Bytes = std::uint64_t;
using Handle = std::uint32_t;

// An integer with a unit: explicit in and out, ordered, hashable, printable, JSON-able.
template <class Tag>
class Unit {
 public:
  constexpr Unit() = default;
  constexpr explicit Unit(std::uint64_t v) : v_(v) {}
  [[nodiscard]] constexpr std::uint64_t value() const { return v_; }
  constexpr auto operator<=>(const Unit&) const = default;

 protected:
  std::uint64_t v_ = 0;
};

class Addr : public Unit<struct AddrTag> {
 public:
  using Unit::Unit;
  constexpr Addr& operator+=(Bytes b) {
    v_ += b;
    return *this;
  }
  constexpr Addr& operator-=(Bytes b) {
    v_ -= b;
    return *this;
  }
  friend constexpr Addr operator+(Addr a, Bytes b) { return Addr(a.v_ + b); }
  friend constexpr Addr operator-(Addr a, Bytes b) { return Addr(a.v_ - b); }
  // Distance from b up to a (pre: a ≥ b).
  friend constexpr Bytes operator-(Addr a, Addr b) { return a.v_ - b.v_; }
};

class Tick : public Unit<struct TickTag> {
 public:
  using Unit::Unit;
  friend constexpr Tick operator+(Tick t, std::uint64_t n) { return Tick(t.v_ + n); }
  // Ticks elapsed from b to a (pre: a ≥ b).
  friend constexpr std::uint64_t operator-(Tick a, Tick b) { return a.v_ - b.v_; }
};

class AllocId : public Unit<struct AllocIdTag> {
 public:
  using Unit::Unit;
};

// A range of address space [addr, addr + bytes).
struct Extent {
  Addr addr;
  Bytes bytes = 0;
  Addr end() const { return addr + bytes; }
  auto operator<=>(const Extent&) const = default;
};

inline constexpr Handle kNoHandle = std::numeric_limits<Handle>::max();
inline constexpr Bytes kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;

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
// Rounding a request that may be as large as the format allows: kTooLarge when the rounded size
// does not fit in 64 bits (such a request never fits anywhere).
inline constexpr Bytes kTooLarge = ~Bytes{0};
constexpr Bytes round_up_sat(Bytes n, Bytes a) {
  if (a <= 1) return n;
  Bytes r = n % a;
  return r == 0 ? n : (n > kTooLarge - (a - r) ? kTooLarge : n + (a - r));
}
// a + b, kTooLarge when the sum does not fit in 64 bits.
constexpr Bytes sat_add(Bytes a, Bytes b) { return a > kTooLarge - b ? kTooLarge : a + b; }
constexpr Addr round_up(Addr n, Bytes a) { return Addr(round_up(n.value(), a)); }
constexpr Addr round_down(Addr n, Bytes a) { return Addr(round_down(n.value(), a)); }

// Index of s in a table of names, or -1 (entries before `from` are skipped).
template <size_t N>
int name_index(const std::string_view (&names)[N], std::string_view s, int from = 0) {
  for (int i = from; i < static_cast<int>(N); ++i)
    if (names[i] == s) return i;
  return -1;
}

// External fragmentation of the free reserved memory (docs/metrics.md; the figure XLA's BFC
// reports): (free − largest free) / free with free = reserved − allocated, 0 when nothing is free.
// The one formula every figure of fragsim uses.
inline double external_fragmentation(Bytes reserved, Bytes allocated, Bytes largest_free) {
  Bytes free = reserved > allocated ? reserved - allocated : 0;
  if (free == 0) return 0.0;
  Bytes lf = largest_free < free ? largest_free : free;
  return static_cast<double>(free - lf) / static_cast<double>(free);
}

// Memory spaces of the trace contract. kCount bounds per-device arrays.
enum class Space : std::uint8_t { kHbm, kCollective, kVmem, kSmem, kCmem, kHost, kCount };
std::string_view space_name(Space s);
bool parse_space(std::string_view s, Space* out);

// "512", "64KiB", "2MiB", "1.5GiB", "80GB". Throws InputError (key = what) on bad text.
[[nodiscard]] Bytes parse_size(std::string_view text, std::string_view what);
// A size on the command line (contracts §5): it takes a unit ("16GiB", "80GB", "512B"), and only 0
// may go without one — a plain number such as "16" is refused, never read as bytes. `flag` is the
// option's command-line name; names (sim/base/option_names.h) words the refusal for the caller.
struct OptionNames;
[[nodiscard]] Bytes parse_size_arg(std::string_view text, std::string_view flag);
[[nodiscard]] Bytes parse_size_arg(std::string_view text, std::string_view flag, const OptionNames& names);
// A size as the command line takes it, exact: "16GiB", "81050MiB", "1536B".
[[nodiscard]] std::string size_arg(Bytes b);
// A trace's time unit (its header's time_unit: ns, us, ms or s; anything else reads as ns) in ns,
// and in seconds.
[[nodiscard]] std::uint64_t ns_per_tick(std::string_view time_unit);
[[nodiscard]] inline double seconds_per_tick(std::string_view time_unit) {
  return static_cast<double>(ns_per_tick(time_unit)) * 1e-9;
}
// 1536 -> "1.50 KiB"
[[nodiscard]] std::string human_bytes(Bytes b);
// Two sizes that differ, said so: human_bytes, or both exact in bytes when they would read the same
// ("51.95 GiB vs 51.95 GiB" says nothing).
[[nodiscard]] std::pair<std::string, std::string> human_bytes_apart(Bytes a, Bytes b);
// A change of d bytes: "+4.00 MiB", "-896.00 KiB", "±0 B"; or from `from` to `to` bytes, exact over
// the whole range of Bytes.
[[nodiscard]] std::string signed_bytes(std::int64_t d);
[[nodiscard]] std::string signed_bytes(Bytes from, Bytes to);
// A signed percentage with `decimals` decimals ("+0.07%"); one that is not zero but would round to
// zero there keeps two significant digits ("+0.0049%").
[[nodiscard]] std::string signed_percent(double pct, int decimals);
// Sizes as each real tool prints them, for the texts that mimic that tool:
//   tsl_bytes: TSL's HumanReadableNumBytes (XLA/TF BFC logs): whole-unit integer division while
//     ≥ 1 MiB, then "%.2f" ("%.1f" for KiB) of the last step: 4,000,000,000 B → "3.72GiB" (not
//     3.73), 1536 → "1.5KiB", 512 → "512B";
//   xla_tpu_bytes: the same without "iB", as XLA:TPU's memory reports print ("41.74G", "4.0K", "0B").
[[nodiscard]] std::string tsl_bytes(Bytes b);
[[nodiscard]] std::string xla_tpu_bytes(Bytes b);

inline void to_json(nlohmann::json& j, Addr a) { j = a.value(); }
inline void to_json(nlohmann::json& j, Tick t) { j = t.value(); }
inline void to_json(nlohmann::json& j, AllocId i) { j = i.value(); }
inline void from_json(const nlohmann::json& j, Addr& a) { a = Addr(j.get<std::uint64_t>()); }
inline void from_json(const nlohmann::json& j, Tick& t) { t = Tick(j.get<std::uint64_t>()); }
inline void from_json(const nlohmann::json& j, AllocId& i) { i = AllocId(j.get<std::uint64_t>()); }

}  // namespace fragsim

// Printed as the integer they hold ("{}", "{:#x}").
#define FRAGSIM_UNIT_FORMATTER(T)                                   \
  template <>                                                       \
  struct fmt::formatter<T> : fmt::formatter<std::uint64_t> {        \
    template <class Ctx>                                            \
    auto format(T v, Ctx& ctx) const {                              \
      return fmt::formatter<std::uint64_t>::format(v.value(), ctx); \
    }                                                               \
  };
FRAGSIM_UNIT_FORMATTER(fragsim::Addr)
FRAGSIM_UNIT_FORMATTER(fragsim::Tick)
FRAGSIM_UNIT_FORMATTER(fragsim::AllocId)
#undef FRAGSIM_UNIT_FORMATTER

template <>
struct std::hash<fragsim::Addr> {
  size_t operator()(fragsim::Addr a) const noexcept { return std::hash<std::uint64_t>()(a.value()); }
};
template <>
struct std::hash<fragsim::AllocId> {
  size_t operator()(fragsim::AllocId a) const noexcept { return std::hash<std::uint64_t>()(a.value()); }
};

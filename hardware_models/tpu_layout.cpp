#include "hardware_models/tpu_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <numeric>

#include "sim/base/checked.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

// Bytes of dims × bits, rounded up to a byte as a whole; kTooLarge when it does not fit in 64 bits.
Bytes array_bytes(const std::vector<std::uint64_t>& dims, int bits) {
  std::uint64_t n = 1;
  for (auto d : dims) {
    auto m = mul_u64(n, d);
    if (!m) return kTooLarge;
    n = *m;
  }
  unsigned __int128 b = (static_cast<unsigned __int128>(n) * static_cast<unsigned>(bits) + 7) / 8;
  return b >= kTooLarge ? kTooLarge : static_cast<Bytes>(b);
}

std::string tile_text(const std::vector<std::vector<std::uint64_t>>& tiles) {
  std::string s;
  for (const auto& t : tiles) {
    std::vector<std::string> dims;
    for (auto d : t) dims.push_back(d == kCombineTileDim ? std::string("*") : std::to_string(d));
    s += fmt::format("({})", fmt::join(dims, ","));
  }
  return s;
}

std::uint64_t next_pow2(std::uint64_t n) {
  std::uint64_t p = 1;
  while (p < n && p < (1ULL << 62)) p <<= 1;
  return p;
}

// XLA:TPU's default tiles for a physical shape (major to minor); see tpu_layout.h.
std::vector<std::vector<std::uint64_t>> default_tiles(const std::vector<std::uint64_t>& phys, int bits, int gen,
                                                      int space) {
  const std::uint64_t pack = bits >= 32 ? 1 : static_cast<std::uint64_t>(32 / std::max(bits, 1));  // per 32-bit word
  size_t rank = phys.size();
  if (rank == 0) {
    if (pack == 1) return {{space == 1 ? 128u : 256u}};
    return {{256 * pack}, {pack, 1}};
  }
  if (rank == 1) {
    if (pack == 1) return {{std::clamp<std::uint64_t>(next_pow2(phys[0]), 256, 1024)}};
    return {{1024}, {128}, {pack, 1}};
  }
  std::uint64_t m = phys[rank - 2];
  std::uint64_t sub = pack == 1 ? 8 : pack == 2 ? (gen >= 7 ? 16 : 8) : 8 * pack;
  if (pack == 1 && m <= 2)
    sub = 2;
  else if (pack <= 2 && m <= 4)
    sub = 4;
  if (pack == 1) return {{sub, 128}};
  return {{sub, 128}, {pack, 1}};
}

// A cursor over the text for error messages with a position.
struct Cursor {
  std::string_view text, what;
  size_t pos = 0;
  [[noreturn]] void fail(const std::string& m) const {
    throw InputError(fmt::format(
        "{}: '{}': {} at column {} (expected e.g. bf16[1000,129] or f32[8,128]{{1,0:T(8,128)}}, tpu_layout.h "
        "lists the layout annotations)",
        what, text, m, pos + 1));
  }
  bool done() const { return pos >= text.size(); }
  char peek() const { return done() ? '\0' : text[pos]; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos;
    return true;
  }
  void expect(char c) {
    if (!eat(c)) fail(fmt::format("expected '{}'", c));
  }
  void spaces() {
    while (peek() == ' ') ++pos;
  }
  std::uint64_t number() {
    spaces();
    size_t start = pos;
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos;
    if (pos == start) fail("expected a number");
    std::uint64_t v = parse_u64(text.substr(start, pos - start), fmt::format("{}: '{}'", what, text));
    spaces();
    return v;
  }
  // "(n)" with n in [lo, hi].
  std::uint64_t paren_number(std::uint64_t lo, std::uint64_t hi, const char* name) {
    expect('(');
    std::uint64_t v = number();
    if (v < lo || v > hi) fail(fmt::format("{} must be in {}..{}", name, lo, hi));
    expect(')');
    return v;
  }
  // Skips a balanced "( ... )".
  void skip_parens() {
    expect('(');
    int depth = 1;
    while (depth > 0) {
      if (done()) fail("unclosed '('");
      char c = text[pos++];
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    }
  }
};

}  // namespace

ArraySpec parse_array_spec(std::string_view text, std::string_view what) {
  Cursor c{text, what};
  ArraySpec a;
  size_t lb = text.find('[');
  if (lb == std::string_view::npos) c.fail("no [dims]");
  std::string_view dt = text.substr(0, lb);
  while (!dt.empty() && dt.back() == ' ') dt.remove_suffix(1);
  if (!parse_dtype(dt, &a.dtype)) c.fail(fmt::format("unknown dtype '{}'", dt));
  c.pos = lb + 1;
  c.spaces();
  while (!c.eat(']')) {
    a.dims.push_back(c.number());
    if (c.peek() != ']') c.expect(',');
  }
  if (c.done()) return a;
  c.expect('{');
  c.spaces();
  while (c.peek() != ':' && c.peek() != '}') {
    a.minor_to_major.push_back(static_cast<int>(std::min<std::uint64_t>(c.number(), 1 << 20)));
    if (c.peek() != ':' && c.peek() != '}') c.expect(',');
  }
  if (!a.minor_to_major.empty() || !a.dims.empty()) {
    std::vector<int> sorted = a.minor_to_major;
    std::sort(sorted.begin(), sorted.end());
    bool perm = sorted.size() == a.dims.size();
    for (size_t i = 0; perm && i < sorted.size(); ++i) perm = sorted[i] == static_cast<int>(i);
    if (!perm) c.fail("minor_to_major must be a permutation of the dims");
  }
  if (c.eat(':')) {
    while (c.peek() != '}') {
      if (c.done()) c.fail("unclosed '{'");
      size_t at = c.pos;
      char k = c.text[c.pos++];
      if (k == 'T') {  // one or more tiles
        if (c.peek() != '(') c.fail("expected '(' after T");
        while (c.eat('(')) {
          std::vector<std::uint64_t> tile;
          while (!c.eat(')')) {
            c.spaces();
            if (c.eat('*'))
              tile.push_back(kCombineTileDim);
            else if (std::uint64_t v = c.number(); v == 0)
              c.fail("tile dims must be > 0");
            else
              tile.push_back(v);
            c.spaces();
            if (c.peek() != ')') c.expect(',');
          }
          if (tile.empty()) c.fail("empty tile");
          a.tiles.push_back(std::move(tile));
        }
      } else if (k == 'L') {
        a.tail_alignment = c.paren_number(1, 1ULL << 40, "L(n)");
      } else if (k == 'E') {
        a.element_bits = static_cast<int>(c.paren_number(1, 1024, "E(n)"));
      } else if (k == 'S' && c.peek() == 'C') {  // split configs
        ++c.pos;
        if (c.peek() != '(') c.fail("expected '(' after SC");
        while (c.eat('(')) {
          std::pair<int, std::vector<std::uint64_t>> sc;
          sc.first = static_cast<int>(std::min<std::uint64_t>(c.number(), 1 << 20));
          if (static_cast<size_t>(sc.first) >= a.dims.size()) c.fail("split config names a dim the shape lacks");
          c.expect(':');
          while (!c.eat(')')) {
            sc.second.push_back(c.number());
            if (c.peek() != ')') c.expect(',');
          }
          a.splits.push_back(std::move(sc));
        }
      } else if (k == 'S') {
        a.memory_space = static_cast<int>(c.paren_number(0, 1 << 20, "S(n)"));
      } else if (k == 'M') {
        (void)c.paren_number(0, UINT64_MAX, "M(n)");
      } else if (k == 'D' || k == '#' || k == '*' || k == 'P') {
        c.skip_parens();
      } else {
        c.pos = at;
        c.fail(fmt::format("unknown layout annotation '{}' (XLA prints D, T, L, #, *, E, S, SC, P, M)", k));
      }
    }
  }
  c.expect('}');
  if (!c.done()) c.fail("text after the layout");
  return a;
}

TpuLayout tpu_layout(const ArraySpec& a, int generation) {
  size_t rank = a.dims.size();
  // A split dim counts as its largest piece (XLA LayoutUtil::MaxSplitSize).
  auto dim_size = [&](size_t d) {
    for (const auto& [dim, idx] : a.splits)
      if (static_cast<size_t>(dim) == d) {
        std::uint64_t prev = 0, best = 0;
        for (auto i : idx) best = std::max(best, i > prev ? i - prev : 0), prev = std::max(prev, i);
        return std::max(best, a.dims[d] > prev ? a.dims[d] - prev : 0);
      }
    return a.dims[d];
  };
  std::vector<std::uint64_t> phys(rank);
  for (size_t k = 0; k < rank; ++k)
    phys[k] = dim_size(a.minor_to_major.empty() ? k : static_cast<size_t>(a.minor_to_major[rank - 1 - k]));
  int bits = a.element_bits ? a.element_bits : dtype_bits(a.dtype);
  auto tiles = a.tiles.empty() ? default_tiles(phys, bits, generation, a.memory_space) : a.tiles;
  const auto& t = tiles.front();
  // Tile dim i covers the i-th most-minor physical dim; missing shape dims count as 1.
  size_t n = std::max(rank, t.size());
  std::vector<std::uint64_t> padded(n, 1);
  for (size_t k = 0; k < rank; ++k) padded[n - rank + k] = phys[k];
  for (size_t i = 0; i < t.size(); ++i) {
    auto& d = padded[n - 1 - i];
    if (t[t.size() - 1 - i] != kCombineTileDim) d = round_up_sat(d, t[t.size() - 1 - i]);
  }
  std::uint64_t elements = 1;
  for (auto d : padded) {
    auto m = mul_u64(elements, d);
    elements = m ? *m : kTooLarge;
    if (!m) break;
  }
  if (a.tail_alignment > 1) elements = round_up_sat(elements, a.tail_alignment);
  TpuLayout l;
  l.tile = tile_text(tiles);
  l.padded = elements >= kTooLarge ? kTooLarge : array_bytes({elements}, bits);
  l.unpadded = array_bytes(a.dims, dtype_bits(a.dtype));
  l.memory_space = a.memory_space;
  return l;
}

TpuLayout tpu_layout(const std::vector<std::uint64_t>& dims, Dtype dtype, int generation) {
  ArraySpec a;
  a.dtype = dtype;
  a.dims = dims;
  return tpu_layout(a, generation);
}

}  // namespace fragsim

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
  for (const auto& t : tiles) s += fmt::format("({})", fmt::join(t, ","));
  return s;
}

// XLA:TPU's default tiles for a row-major physical shape.
std::vector<std::vector<std::uint64_t>> default_tiles(const std::vector<std::uint64_t>& phys, int bits, int gen) {
  size_t rank = phys.size();
  if (rank == 0) return {{256}};
  if (rank == 1) {
    if (bits >= 32) return {{256}};
    if (bits == 16) return {{1024}, {128}, {2, 1}};
    return {{1024}, {128}, {4, 1}};
  }
  std::uint64_t m = phys[rank - 2];
  std::uint64_t sub = bits >= 32 ? 8 : bits == 16 ? (gen >= 7 ? 16 : 8) : 32;
  if (bits >= 32 && m <= 2)
    sub = 2;
  else if (bits >= 16 && m <= 4)
    sub = 4;
  if (bits >= 32) return {{sub, 128}};
  if (bits == 16) return {{sub, 128}, {2, 1}};
  return {{sub, 128}, {4, 1}};
}

}  // namespace

ArraySpec parse_array_spec(std::string_view text, std::string_view what) {
  auto bad = [&](const std::string& m) {
    return InputError(
        fmt::format("{}: '{}': {} (expected e.g. bf16[1000,129] or f32[8,128]{{1,0:T(8,128)}})", what, text, m));
  };
  ArraySpec a;
  size_t lb = text.find('[');
  if (lb == std::string_view::npos) throw bad("no [dims]");
  std::string_view dt = text.substr(0, lb);
  while (!dt.empty() && dt.back() == ' ') dt.remove_suffix(1);
  if (!parse_dtype(dt, &a.dtype)) throw bad(fmt::format("unknown dtype '{}'", dt));
  size_t rb = text.find(']', lb);
  if (rb == std::string_view::npos) throw bad("unclosed [");
  auto parse_list = [&](std::string_view s, auto push) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && s[i] == ' ') ++i;
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j == i) throw bad("expected a number");
      push(parse_u64(s.substr(i, j - i), fmt::format("{}: '{}'", what, text)));
      while (j < s.size() && s[j] == ' ') ++j;
      if (j < s.size() && s[j] != ',') throw bad("expected ','");
      i = j + 1;
    }
  };
  parse_list(text.substr(lb + 1, rb - lb - 1), [&](std::uint64_t v) { a.dims.push_back(v); });
  std::string_view rest = text.substr(rb + 1);
  if (!rest.empty()) {
    if (rest.front() != '{' || rest.back() != '}') throw bad("layout must be {minor_to_major[:T(...)]}");
    rest = rest.substr(1, rest.size() - 2);
    size_t colon = rest.find(':');
    std::string_view m2m = rest.substr(0, colon);
    if (!m2m.empty()) parse_list(m2m, [&](std::uint64_t v) { a.minor_to_major.push_back(static_cast<int>(v)); });
    if (!a.minor_to_major.empty()) {
      std::vector<int> sorted = a.minor_to_major;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < sorted.size(); ++i)
        if (sorted[i] != static_cast<int>(i) || sorted.size() != a.dims.size())
          throw bad("minor_to_major must be a permutation of the dims");
    }
    if (colon != std::string_view::npos) {
      std::string_view t = rest.substr(colon + 1);
      if (t.empty() || t.front() != 'T') throw bad("tiles must start with T");
      t.remove_prefix(1);
      while (!t.empty()) {
        if (t.front() != '(') throw bad("expected '(' in tiles");
        size_t close = t.find(')');
        if (close == std::string_view::npos) throw bad("unclosed tile");
        std::vector<std::uint64_t> tile;
        parse_list(t.substr(1, close - 1), [&](std::uint64_t v) { tile.push_back(v); });
        for (auto v : tile)
          if (v == 0) throw bad("tile dims must be > 0");
        a.tiles.push_back(tile);
        t.remove_prefix(close + 1);
      }
    }
  }
  return a;
}

TpuLayout tpu_layout(const ArraySpec& a, int generation) {
  size_t rank = a.dims.size();
  std::vector<std::uint64_t> phys(rank);
  for (size_t k = 0; k < rank; ++k)
    phys[k] = a.minor_to_major.empty() ? a.dims[k] : a.dims[static_cast<size_t>(a.minor_to_major[rank - 1 - k])];
  int bits = dtype_bits(a.dtype);
  auto tiles = a.tiles.empty() ? default_tiles(phys, bits, generation) : a.tiles;
  const auto& t = tiles.front();
  // Tile dim i covers the i-th most-minor physical dim; missing shape dims count as 1.
  size_t n = std::max(rank, t.size());
  std::vector<std::uint64_t> padded(n, 1);
  for (size_t k = 0; k < rank; ++k) padded[n - rank + k] = phys[k];
  for (size_t i = 0; i < t.size(); ++i) {
    auto& d = padded[n - 1 - i];
    d = round_up_sat(d, t[t.size() - 1 - i]);
  }
  TpuLayout l;
  l.tile = tile_text(tiles);
  l.padded = array_bytes(padded, bits);
  l.unpadded = array_bytes(a.dims, bits);
  return l;
}

TpuLayout tpu_layout(const std::vector<std::uint64_t>& dims, Dtype dtype, int generation) {
  ArraySpec a;
  a.dtype = dtype;
  a.dims = dims;
  return tpu_layout(a, generation);
}

}  // namespace fragsim

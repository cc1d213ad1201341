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
  // Rows of 128 lanes a 32-bit scalar or vector tile holds at least: two before TPU v4, one from
  // v4 on (Mosaic's getTilingFactor, which mirrors XLA: min_tiling = (1 + (gen < 4)) x packing).
  const std::uint64_t min_rows = gen < 4 ? 2 : 1;
  size_t rank = phys.size();
  if (rank == 0) {
    if (pack == 1) return {{space == 1 ? 128u : 128 * min_rows}};
    return {{256 * pack}, {pack, 1}};
  }
  if (rank == 1) {
    if (pack == 1) return {{std::clamp<std::uint64_t>(next_pow2(phys[0]), 128 * min_rows, 1024)}};
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

}  // namespace

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
  // XLA:TPU stores pred as 32 bits and prints it so: pred[67108864]{0:T(1024)E(32)},
  // pred[64,512,2048]{2,1,0:T(8,128)E(32)} (google/trax#525).
  bool pred_as_word = a.dtype == Dtype::kPred && !a.element_bits;
  int bits = a.element_bits ? a.element_bits : pred_as_word ? 32 : dtype_bits(a.dtype);
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
  l.tile = tile_text(tiles) + (pred_as_word ? "E(32)" : "");
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

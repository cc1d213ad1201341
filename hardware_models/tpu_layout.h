// TPU tiled layout → padded bytes (specs/hardware.md §3).
//
// Size rule (XLA ShapeUtil::ArraySize): only the first tile matters; tile dim i covers the i-th
// most-minor *physical* dim, which is rounded up to it (a tile dim with no matching shape dim
// counts that dim as 1, so it still pads). Bytes = padded elements × bits / 8, rounded up as a
// whole. Tile choice as XLA:TPU makes it (rank ≥ 2):
//   32-bit (8,128), compact (2,128) for a second-minor dim ≤ 2 and (4,128) for ≤ 4;
//   16-bit (8,128)(2,1) — (16,128)(2,1) on TPU7x — and (4,128)(2,1) for a second-minor dim ≤ 4;
//   8-bit and below (32,128)(4,1); 64-bit types as 32-bit (not in the sources: low confidence).
// Rank 1: 32-bit T(256), 16-bit T(1024)(128)(2,1), 8-bit T(1024) (low confidence).
// Scalars: T(256). A layout given with the shape (minor_to_major, tiles) is honoured.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/event.h"

namespace fragsim {

struct ArraySpec {
  Dtype dtype = Dtype::kNone;
  std::vector<std::uint64_t> dims;                // logical, major to minor
  std::vector<int> minor_to_major;                // empty = row-major {rank-1, ..., 0}
  std::vector<std::vector<std::uint64_t>> tiles;  // empty = XLA:TPU's choice
};

struct TpuLayout {
  std::string tile;    // e.g. "(8,128)(2,1)"
  Bytes unpadded = 0;  // kTooLarge when the array's size does not fit in 64 bits
  Bytes padded = 0;    // kTooLarge when the padded size does not fit in 64 bits
};

// Parses "bf16[1000,129]", "f32[3,5]{0,1}", "bf16[2048,1,2048,128]{0,1,3,2:T(4,128)(2,1)}".
// Throws InputError naming `what` on bad text.
[[nodiscard]] ArraySpec parse_array_spec(std::string_view text, std::string_view what);
[[nodiscard]] TpuLayout tpu_layout(const ArraySpec& a, int generation);
[[nodiscard]] TpuLayout tpu_layout(const std::vector<std::uint64_t>& dims, Dtype dtype, int generation);

}  // namespace fragsim

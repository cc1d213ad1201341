// TPU tiled layout → padded bytes (specs/hardware.md §3), for shapes as XLA prints them.
//
// Layout grammar (XLA's Layout::Print, xla/layout.cc): after the dims,
//   {minor_to_major[:annotations]}   annotations in XLA's order, each optional:
//   D(...)   dim level types (sparse arrays)        — read, no effect on size
//   T(a,b)(c,d)...  tiles; a tile dim may be '*'    — the first tile pads (below)
//   L(n)     tail padding: element count rounded up to n
//   #(type)  index type, *(type) pointer type       — read, no effect on size
//   E(n)     element size in bits (pred stored as 32 bits: E(32))
//   S(n)     memory space: 0 HBM, 1 VMEM (alternate memory), 5 host
//   SC(d:i,j)...  split configs: dim d split at i, j — a split dim counts as its largest piece
//   P(shape) physical shape                         — read, no effect on size
//   M(n)     dynamic-shape metadata prefix bytes    — read, no effect on size
// A scalar prints as {:T(256)}. Anything else is an input error naming the text and the position.
//
// Size rule (XLA ShapeUtil::ArraySize): only the first tile matters; tile dim i covers the i-th
// most-minor *physical* dim, which is rounded up to it (a tile dim with no matching shape dim
// counts that dim as 1, so it still pads; '*' pads nothing). Then L(n) rounds the element count,
// and bytes = elements × (E(n) or the dtype's bits) / 8, rounded up as a whole.
//
// XLA:TPU's default tiles when the layout gives none (TPU backend rules are not public; from the
// docs and the real reports in tests/test_tpu.cpp):
//   rank ≥ 2: 32/64-bit (8,128), compact (2,128) for a second-minor dim ≤ 2, (4,128) for ≤ 4;
//             16-bit (8,128)(2,1) — (16,128)(2,1) from TPU7x — and (4,128)(2,1) for ≤ 4;
//             8-bit (32,128)(4,1); 4-bit (64,128)(8,1) (low confidence).
//   rank 1:   32/64-bit T(n) with n the next power of two of the dim, clamped to 256..1024
//             (f32[512]{0:T(512)}, f32[1280]{0:T(1024)}, T(256) for small ones); 16-bit
//             T(1024)(128)(2,1); 8-bit T(1024)(128)(4,1); 4-bit T(1024)(128)(8,1).
//   scalars:  32/64-bit T(256), T(128) in VMEM (S(1)); 16-bit T(512)(2,1); 8-bit T(1024)(4,1);
//             4-bit T(2048)(8,1) — 1 KiB each in HBM.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/event.h"

namespace fragsim {

inline constexpr std::uint64_t kCombineTileDim = 0;  // '*' in a tile

struct ArraySpec {
  Dtype dtype = Dtype::kNone;
  std::vector<std::uint64_t> dims;                                 // logical, major to minor
  std::vector<int> minor_to_major;                                 // empty = row-major {rank-1, ..., 0}
  std::vector<std::vector<std::uint64_t>> tiles;                   // empty = XLA:TPU's choice
  std::uint64_t tail_alignment = 1;                                // L(n)
  int element_bits = 0;                                            // E(n); 0 = the dtype's
  int memory_space = 0;                                            // S(n)
  std::vector<std::pair<int, std::vector<std::uint64_t>>> splits;  // SC(dim:indices)
};

struct TpuLayout {
  std::string tile;    // e.g. "(8,128)(2,1)"
  Bytes unpadded = 0;  // logical size (dtype bits); kTooLarge when it does not fit in 64 bits
  Bytes padded = 0;    // after tiling, L and E; kTooLarge when it does not fit in 64 bits
  int memory_space = 0;
};

// Parses "bf16[1000,129]", "float32[3,5]{0,1}", "bf16[2048,1,2048,128]{0,1,3,2:T(4,128)(2,1)}",
// "pred[64,512,2048]{2,1,0:T(8,128)E(32)}", "f32[]{:T(256)S(1)}". Throws InputError naming `what`.
[[nodiscard]] ArraySpec parse_array_spec(std::string_view text, std::string_view what);
[[nodiscard]] TpuLayout tpu_layout(const ArraySpec& a, int generation);
[[nodiscard]] TpuLayout tpu_layout(const std::vector<std::uint64_t>& dims, Dtype dtype, int generation);

}  // namespace fragsim

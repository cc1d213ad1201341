// Arrays as XLA prints them: "bf16[1000,129]", "f32[8,128]{1,0:T(8,128)}". Read here, at the
// base, because traces carry them (XProf captures, HLO) as well as the TPU layout rule
// (hardware_models/tpu_layout.h) that sizes them.
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
#pragma once
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

// Parses "bf16[1000,129]", "float32[3,5]{0,1}", "bf16[2048,1,2048,128]{0,1,3,2:T(4,128)(2,1)}",
// "pred[64,512,2048]{2,1,0:T(8,128)E(32)}", "f32[]{:T(256)S(1)}". Throws InputError naming `what`.
[[nodiscard]] ArraySpec parse_array_spec(std::string_view text, std::string_view what);

}  // namespace fragsim

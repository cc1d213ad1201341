// TPU tiled layout → padded bytes (specs/hardware.md §3), for shapes as XLA prints them
// (sim/base/array_spec.h reads them).
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
//   rank 1:   32/64-bit T(n) with n the next power of two of the dim, clamped to 256..1024 before
//             TPU v4 and 128..1024 from v4 on (f32[512]{0:T(512)}, f32[1280]{0:T(1024)}); 16-bit
//             T(1024)(128)(2,1); 8-bit T(1024)(128)(4,1); 4-bit T(1024)(128)(8,1).
//   scalars:  32/64-bit T(256) before TPU v4 (u32[]{:T(256)} on v3), T(128) from v4 on
//             (f32[]{:T(128)} on v6e) and in VMEM (S(1)); 16-bit T(512)(2,1); 8-bit
//             T(1024)(4,1); 4-bit T(2048)(8,1).
//   The v4 boundary for 32-bit is Mosaic's (jax-ml/jax jaxlib/mosaic/dialect/tpu/transforms/
//   infer_memref_layout.cc, getTilingFactor: min_tiling = (1 + (gen < 4)) x packing rows of 128).
//   pred: stored as 32 bits, tiled as 32-bit, printed with E(32).
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/array_spec.h"

namespace fragsim {

struct TpuLayout {
  std::string tile;    // e.g. "(8,128)(2,1)"
  Bytes unpadded = 0;  // logical size (dtype bits); kTooLarge when it does not fit in 64 bits
  Bytes padded = 0;    // after tiling, L and E; kTooLarge when it does not fit in 64 bits
  int memory_space = 0;
};

[[nodiscard]] TpuLayout tpu_layout(const ArraySpec& a, int generation);
[[nodiscard]] TpuLayout tpu_layout(const std::vector<std::uint64_t>& dims, Dtype dtype, int generation);

}  // namespace fragsim

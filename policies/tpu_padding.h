// PaddingRule: what one TPU device stores for an allocation — the tiled-layout padding of
// specs/hardware.md §3 (hardware_models/tpu_layout.h), after an optional sharding what-if that
// divides each allocation across `shard` devices along its major or minor dim. Shared by
// tpu-padded and static-heap.
#pragma once
#include <string>

#include "policies/policy.h"

namespace fragsim {

struct PaddedSize {
  Bytes unpadded = 0;  // per-device logical bytes
  Bytes padded = 0;    // per-device bytes after tiling (kTooLarge when it does not fit in 64 bits)
};

struct PaddingRule {
  int generation = 0;
  std::uint64_t shard = 1;
  bool shard_minor = false;
  bool pad = true;  // false: sizes as they are (sharding still applies)

  // Reads generation (default: the hardware's), shard, shard_dim, pad.
  static PaddingRule from_config(ConfigReader& cfg, const ConfigContext& ctx);
  PaddedSize apply(const AllocRequest& req) const;
};

}  // namespace fragsim

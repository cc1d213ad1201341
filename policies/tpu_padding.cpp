#include "policies/tpu_padding.h"

#include "hardware_models/tpu_layout.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {
constexpr Range kGenerationRange = integers(0, 100);
constexpr Range kShardRange = integers(1, 1 << 20);
}  // namespace

std::vector<PolicyOption> padding_options() {
  return {{"generation", "the hardware's", 5, "TPU generation whose default tiles apply (specs/hardware.md §3)",
           kGenerationRange},
          {"pad", "true on a TPU (false for an XLA module's trace: its sizes are padded), false on a GPU", true,
           "apply the tiled-layout padding to shaped allocations"},
          {"shard", "1", 4, "sharding what-if: each shaped allocation divided across this many devices", kShardRange},
          {"shard_dim", "major", "minor", "the dim that shard divides: major or minor"}};
}

void set_sharding(nlohmann::json& config, std::int64_t shard, const std::string& dim) {
  config["shard"] = shard;
  config["shard_dim"] = dim;
}

PaddingRule PaddingRule::from_config(ConfigReader& cfg, const ConfigContext& ctx) {
  PaddingRule r;
  r.generation = static_cast<int>(cfg.integer_in("generation", ctx.hw->generation, kGenerationRange));
  r.shard = static_cast<std::uint64_t>(cfg.integer_in("shard", 1, kShardRange));
  r.shard_minor = cfg.choice("shard_dim", "major", {"major", "minor"}) == "minor";
  // GPUs have no tiled layout; an XLA module's sizes are its target's own (padded already).
  bool device_sizes = ctx.recording && ctx.recording->device_sizes;
  r.pad = cfg.flag("pad", ctx.hw->kind == "tpu" && !device_sizes);
  return r;
}

PaddedSize PaddingRule::apply(const AllocRequest& req) const {
  bool shaped = req.has_shape && req.dtype != Dtype::kNone;
  if (shaped && !req.shape.empty()) {
    std::vector<std::uint64_t> dims(req.shape.begin(), req.shape.end());
    if (shard > 1) {
      auto& d = shard_minor ? dims.back() : dims.front();
      d = d / shard + (d % shard != 0);
    }
    PaddedSize p;
    if (!unpadded_bytes(dims, req.dtype, &p.unpadded)) p.unpadded = kTooLarge;
    p.padded = pad ? tpu_layout(dims, req.dtype, generation).padded : p.unpadded;
    return p;
  }
  Bytes per = req.size / shard + (req.size % shard != 0);
  if (shaped && pad) return {per, tpu_layout(std::vector<std::uint64_t>{}, req.dtype, generation).padded};  // a scalar
  return {per, per};
}

}  // namespace fragsim

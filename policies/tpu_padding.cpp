#include "policies/tpu_padding.h"

#include "hardware_models/tpu_layout.h"
#include "sim/error.h"

namespace fragsim {

PaddingRule PaddingRule::from_config(ConfigReader& cfg, const PolicyContext& ctx) {
  PaddingRule r;
  r.generation = static_cast<int>(cfg.integer("generation", ctx.hw->generation));
  std::int64_t shard = cfg.integer("shard", 1);
  if (shard < 1) throw InputError("shard: must be >= 1");
  r.shard = static_cast<std::uint64_t>(shard);
  r.shard_minor = cfg.choice("shard_dim", "major", {"major", "minor"}) == "minor";
  r.pad = cfg.flag("pad", ctx.hw->kind == "tpu");  // GPUs have no tiled layout
  return r;
}

PaddedSize PaddingRule::apply(const AllocRequest& req) const {
  const Event* ev = req.event;
  if (ev && ev->has(key::kShape) && ev->has(key::kDtype) && !ev->shape.empty()) {
    std::vector<std::uint64_t> dims = ev->shape;
    if (shard > 1) {
      auto& d = shard_minor ? dims.back() : dims.front();
      d = (d + shard - 1) / shard;
    }
    PaddedSize p;
    unpadded_bytes(dims, ev->dtype, &p.unpadded);
    p.padded = pad ? tpu_layout(dims, ev->dtype, generation).padded : p.unpadded;
    return p;
  }
  Bytes per = (req.size + shard - 1) / shard;
  if (ev && ev->has(key::kDtype) && ev->has(key::kShape) && pad)  // a scalar: rank 0
    return {per, tpu_layout(std::vector<std::uint64_t>{}, ev->dtype, generation).padded};
  return {per, per};
}

}  // namespace fragsim

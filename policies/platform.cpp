// platform: JAX's XLA_PYTHON_CLIENT_ALLOCATOR=platform — no caching; every buffer is one device
// allocation and every free one device free (specs/xla-bfc.md §4, "platform").
//
// Model: DeviceMemory does the work. From jaxlib 0.10.2 XLA allocates device memory through
// VMM, padded to the allocation granularity (xla-bfc-spatial.md §2); earlier releases call
// cuMemAlloc, modelled as 512-byte rounding (the alignment cudaMalloc is observed to keep;
// its internal page rounding is undocumented). Addresses are the driver's, so they are not
// comparable with a recording; the figure this policy is for is the simulated allocator time
// (per-call latency of the hardware cost model), reported as allocator_time_ms.
//   allocated = reserved = Σ live padded sizes ≤ usable device memory
#include <stdexcept>
#include <vector>

#include "policies/jax_gpu.h"
#include "policies/policy.h"

namespace fragsim {

namespace {

class PlatformPolicy : public AllocatorPolicy {
 public:
  PlatformPolicy(DeviceMemory* dev, Bytes unit) : dev_(dev), unit_(unit) {}
  Placement allocate(const AllocRequest& req) override {
    Placement p;
    if (req.size == 0) {  // a null buffer, no device call
      p.ok = true;
      return p;
    }
    auto g = dev_->allocate(req.size, unit_);
    if (!g) return p;
    if (req.handle >= live_.size()) live_.resize(req.handle + 1, {0, 0});
    live_[req.handle] = {g->addr, g->bytes};
    allocated_ += g->bytes;
    p.ok = p.has_addr = true;
    p.addr = g->addr;
    p.block = g->bytes;
    return p;
  }
  void release(Handle h) override {
    auto [a, b] = live_[h];
    if (b == 0) return;
    dev_->release(a);
    allocated_ -= b;
    live_[h] = {0, 0};
  }
  Usage usage() const override {
    return {allocated_, allocated_, 0, dev_->available(), dev_->available()};
  }
  Bytes rounded_size(const AllocRequest& req) const override {
    return unit_ ? round_up(req.size, unit_) : dev_->padded(req.size);
  }
  nlohmann::json extra_report() const override {
    return {{"allocator_time_ms", dev_->time_ns() / 1e6}};
  }
  void validate() const override {
    if (allocated_ != dev_->used()) throw std::logic_error("platform: allocated != device memory in use");
  }

 private:
  DeviceMemory* dev_;
  Bytes unit_;  // padding of each device allocation (0 = the device granularity)
  Bytes allocated_ = 0;
  std::vector<std::pair<Addr, Bytes>> live_;
};

}  // namespace

void register_platform(Registry& r) {
  r.add({"platform",
         "JAX XLA_PYTHON_CLIENT_ALLOCATOR=platform: one device malloc/free per buffer, simulated call time (jaxlib)",
         [](ConfigReader& cfg, const PolicyContext& ctx) -> std::unique_ptr<AllocatorPolicy> {
           JaxlibBehaviour jb = jaxlib_behaviour(cfg.text("jaxlib", kNewestJaxlib), "jaxlib");
           return std::make_unique<PlatformPolicy>(ctx.device, jb.vmm_padding ? 0 : 512);
         }});
}

}  // namespace fragsim

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
#include <vector>

#include "policies/jax_gpu.h"
#include "policies/policy.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

class PlatformPolicy : public AllocatorPolicy {
 public:
  PlatformPolicy(DeviceMemory* dev, Bytes unit) : dev_(dev), unit_(unit) {}
  Placement allocate(const AllocRequest& req) override {
    auto g = dev_->allocate(req.size, unit_);
    if (!g) return Placement::failed();
    if (req.handle >= live_.size()) live_.resize(req.handle + 1);
    allocated_ += g.bytes();
    Placement p = Placement::at(g.addr(), g.bytes());
    live_[req.handle] = std::move(g);
    return p;
  }
  void release(Handle h) override {
    allocated_ -= live_[h].bytes();
    live_[h].release();
  }
  void memory_map(MemoryMap* out) const override {  // every buffer is its own device allocation
    for (const auto& g : live_)
      if (g) {
        out->regions.push_back({g.addr(), g.bytes(), static_cast<int>(out->regions.size())});
        out->blocks.push_back({g.addr(), g.bytes(), true, true});
      }
  }
  std::string empty_cache() override { return "the platform allocator caches nothing: nothing to release"; }
  Usage usage() const override { return {allocated_, allocated_, 0, dev_->available(), dev_->available()}; }
  Bytes rounded_size(const AllocRequest& req) const override {
    return unit_ ? round_up_sat(req.size, unit_) : dev_->padded(req.size);
  }
  nlohmann::json extra_report() const override { return {{"allocator_time_ms", dev_->time_ns() / 1e6}}; }
  void validate() const override {
    FRAGSIM_CHECK(allocated_ == dev_->used(), "platform: allocated != device memory in use");
  }

 private:
  DeviceMemory* dev_;
  Bytes unit_;  // padding of each device allocation (0 = the device granularity)
  Bytes allocated_ = 0;
  std::vector<DeviceMemory::Grant> live_;  // per handle
};

}  // namespace

void register_platform(Registry& r) {
  PolicyInfo info{"platform",
                  "JAX XLA_PYTHON_CLIENT_ALLOCATOR=platform: one device malloc/free per buffer, simulated call time",
                  [](ConfigReader& cfg, const ConfigContext& ctx) -> PolicyBuilder {
                    JaxlibBehaviour jb = gpu_behaviour(cfg, ctx);
                    Bytes unit = jb.vmm_padding ? 0 : 512;
                    if (ctx.space->space == Space::kHost) return jax_host_allocator(cfg, ctx);
                    return
                        [unit](const PolicyContext& pc) { return std::make_unique<PlatformPolicy>(pc.device, unit); };
                  },
                  false,
                  {jaxlib_option()}};
  info.frameworks = {Framework::kJax, Framework::kTensorFlow};
  r.add(std::move(info));
}

}  // namespace fragsim

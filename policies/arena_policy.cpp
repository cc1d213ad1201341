#include "policies/arena_policy.h"

namespace fragsim {

namespace {

class ArenaPolicy : public AllocatorPolicy {
 public:
  ArenaPolicy(Fit fit, Bytes capacity, Bytes alignment, Bytes granularity)
      : fit_(fit), arena_(capacity, alignment, granularity, fit == Fit::kFirst) {}
  Placement allocate(const AllocRequest& req) override {
    Bytes r = arena_.round(req.size);
    std::uint32_t c = fit_ == Fit::kBest ? arena_.best_fit(r) : arena_.first_fit(r);
    Placement p;
    if (c == Arena::kNone) return p;
    Bytes off = arena_.take(c, r, req.handle);
    p.ok = p.has_addr = true;
    p.addr = DeviceMemory::kBase + off;
    p.block = r;
    return p;
  }
  void release(Handle h) override { arena_.release(h); }
  Usage usage() const override { return arena_.usage(); }
  Bytes rounded_size(const AllocRequest& req) const override { return arena_.round(req.size); }
  void validate() const override { arena_.validate(); }

 private:
  Fit fit_;
  Arena arena_;
};

}  // namespace

std::unique_ptr<AllocatorPolicy> make_arena_policy(Fit fit, ConfigReader& cfg, const PolicyContext& ctx) {
  Bytes alignment = cfg.size("alignment", 256);
  if (alignment == 0 || (alignment & (alignment - 1))) throw InputError("alignment: must be a power of two");
  return std::make_unique<ArenaPolicy>(fit, ctx.space->usable(), alignment, ctx.space->granularity);
}

}  // namespace fragsim

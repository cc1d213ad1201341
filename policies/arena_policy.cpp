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
    if (c == Arena::kNone) return Placement::failed();
    return Placement::at(arena_.take(c, r, req.handle), r);
  }
  void release(Handle h) override { arena_.release(h); }
  Usage usage() const override { return arena_.usage(); }
  Bytes rounded_size(const AllocRequest& req) const override { return arena_.round(req.size); }
  void validate() const override { arena_.validate(); }
  void memory_map(MemoryMap* out) const override { arena_.memory_map(out); }

 private:
  Fit fit_;
  Arena arena_;
};

}  // namespace

std::vector<PolicyOption> arena_options() {
  return {{"alignment", "256", 512, "every block's size and address are rounded up to this many bytes (> 0)"}};
}

PolicyBuilder configure_arena_policy(Fit fit, ConfigReader& cfg, const ConfigContext& ctx) {
  Bytes alignment = cfg.size("alignment", 256);
  if (alignment == 0 || (alignment & (alignment - 1))) throw InputError("alignment: must be a power of two");
  Bytes capacity = ctx.space->usable(), granularity = ctx.space->granularity;
  return [=](const PolicyContext&) { return std::make_unique<ArenaPolicy>(fit, capacity, alignment, granularity); };
}

}  // namespace fragsim

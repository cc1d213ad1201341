// ideal: the lower bound. Every request fits while the live requested bytes stay within the
// space's usable capacity; nothing is placed, rounded or fragmented.
//   allocated = reserved = Σ live requested sizes ≤ usable
#include <vector>

#include "policies/policy.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

class IdealPolicy : public AllocatorPolicy {
 public:
  explicit IdealPolicy(Bytes capacity, bool recording_allocator = false)
      : capacity_(capacity), recording_allocator_(recording_allocator) {}
  bool seeds_recording() const override { return recording_allocator_; }
  Placement allocate(const AllocRequest& req) override {
    if (req.size > capacity_ - live_) return Placement::failed();
    if (req.handle >= sizes_.size()) sizes_.resize(req.handle + 1, 0);
    sizes_[req.handle] = req.size;
    live_ += req.size;
    return Placement::unplaced(req.size);
  }
  void release(Handle h) override { live_ -= sizes_[h]; }
  Usage usage() const override { return {live_, live_, 0, capacity_ - live_, capacity_ - live_}; }
  Footprint footprint() const override { return {live_, live_, 0}; }
  void validate() const override { FRAGSIM_CHECK(live_ <= capacity_, "ideal: live bytes exceed capacity"); }

 private:
  Bytes capacity_;
  bool recording_allocator_;
  Bytes live_ = 0;
  std::vector<Bytes> sizes_;
};

}  // namespace

PolicyBuilder uncached_allocator(const ConfigContext& ctx, bool recording_allocator) {
  const Bytes capacity = ctx.space->usable();
  return [capacity, recording_allocator](const PolicyContext&) {
    return std::make_unique<IdealPolicy>(capacity, recording_allocator);
  };
}

void register_ideal(Registry& r) {
  PolicyInfo info{
      "ideal",
      "the live-bytes bound: fits while live requested bytes <= capacity; places nothing (the best "
      "placement, `fragsim plan`, may need more)",
      [](ConfigReader&, const ConfigContext& ctx) -> PolicyBuilder { return uncached_allocator(ctx, false); },
      false,
      {}};
  info.lower_bound = true;
  r.add(std::move(info));
}

}  // namespace fragsim

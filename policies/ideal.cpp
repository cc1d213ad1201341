// ideal: the lower bound. Every request fits while the live requested bytes stay within the
// space's usable capacity; nothing is placed, rounded or fragmented.
//   allocated = reserved = Σ live requested sizes ≤ usable
#include <stdexcept>
#include <vector>

#include "policies/policy.h"

namespace fragsim {

namespace {

class IdealPolicy : public AllocatorPolicy {
 public:
  explicit IdealPolicy(Bytes capacity) : capacity_(capacity) {}
  Placement allocate(const AllocRequest& req) override {
    Placement p;
    if (req.size > capacity_ - live_) return p;
    if (req.handle >= sizes_.size()) sizes_.resize(req.handle + 1, 0);
    sizes_[req.handle] = req.size;
    live_ += req.size;
    p.ok = true;
    p.block = req.size;
    return p;
  }
  void release(Handle h) override { live_ -= sizes_[h]; }
  Usage usage() const override { return {live_, live_, 0, capacity_ - live_, capacity_ - live_}; }
  void validate() const override {
    if (live_ > capacity_) throw std::logic_error("ideal: live bytes exceed capacity");
  }

 private:
  Bytes capacity_;
  Bytes live_ = 0;
  std::vector<Bytes> sizes_;
};

}  // namespace

void register_ideal(Registry& r) {
  r.add({"ideal", "lower bound: fits while live requested bytes <= capacity; places nothing",
         [](ConfigReader&, const PolicyContext& ctx) { return std::make_unique<IdealPolicy>(ctx.space->usable()); }});
}

}  // namespace fragsim

// tpu-runtime: the TPU runtime's device-memory allocator as XProf captures show it placing
// buffers (its rule is not public; inferred from openxla/xprof's tpu_inference_2 capture, TPU
// v6e, 453 allocations on 4 devices):
//   - addresses are offsets in [0, limit), limit = the runtime's HBM limit (the capture's
//     bytes_available + bytes_reserved + bytes_allocated; SpaceSpec::runtime_limit);
//   - blocks are rounded up to 128 bytes (a 32-byte request holds 128, 1472 holds 1536);
//   - placement is top-down: the smallest free hole that fits (ties: the higher one), and the
//     block takes the hole's top, so the first buffer sits at limit − block;
//   - frees coalesce with free neighbours.
// Usable as tpu-padded's inner policy (`tpu-padded[inner=tpu-runtime]`, the default for a TPU
// capture) or alone. The whole range counts as reserved (the runtime owns all HBM).
#include <fmt/format.h>

#include <map>
#include <vector>

#include "policies/policy.h"
#include "policies/size_index.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

constexpr Bytes kTpuRuntimeUnit = 128;

class TpuRuntimePolicy : public AllocatorPolicy {
 public:
  Bytes limit() const override { return limit_; }
  explicit TpuRuntimePolicy(Bytes limit) : limit_(round_down(limit, kTpuRuntimeUnit)) {
    if (limit_) add_hole(0, limit_);
  }

  Placement allocate(const AllocRequest& req) override {
    Bytes r = rounded_size(req);
    if (r == kTooLarge || r > limit_) return Placement::failed();
    // Smallest hole >= r; among equal sizes the highest address (indexed by (size, ~addr)).
    const SizeIndex::Entry* e = by_size_.lower_bound(r);
    if (!e) return Placement::failed();
    Bytes size = e->size;
    Bytes start = ~e->addr.value();  // stored inverted so that higher addresses come first
    Bytes addr = start + size - r;
    // The hole keeps its start: its size changes in place (no map node made or freed).
    by_size_.erase(size, Addr(~start));
    auto hole = holes_.find(start);
    if (size > r) {
      hole->second = size - r;
      by_size_.insert({size - r, Addr(~start), 0});
    } else {
      holes_.erase(hole);
    }
    if (req.handle >= live_.size()) live_.resize(req.handle + 1, {0, 0});
    live_[req.handle] = {addr, r};
    allocated_ += r;
    return Placement::at(Addr(addr), r, 0, Addr(0));
  }

  void release(Handle h) override {
    auto [addr, size] = live_[h];
    live_[h] = {0, 0};
    allocated_ -= size;
    // The freed block joins the holes that touch it; a hole that grows keeps its map node.
    const Bytes end = addr + size;
    auto next = holes_.lower_bound(end);  // holes never overlap a live block
    const bool join_next = next != holes_.end() && next->first == end;
    auto prev = next == holes_.begin() ? holes_.end() : std::prev(next);
    const bool join_prev = prev != holes_.end() && prev->first + prev->second == addr;
    Bytes grown = size;
    if (join_next) {
      grown += next->second;
      by_size_.erase(next->second, Addr(~next->first));
    }
    if (join_prev) {
      by_size_.erase(prev->second, Addr(~prev->first));
      prev->second += grown;
      by_size_.insert({prev->second, Addr(~prev->first), 0});
      if (join_next) holes_.erase(next);
    } else if (join_next) {  // the next hole now starts at addr: its node rekeyed
      auto node = holes_.extract(next);
      node.key() = addr;
      node.mapped() = grown;
      holes_.insert(std::move(node));
      by_size_.insert({grown, Addr(~addr), 0});
    } else {
      add_hole(addr, grown);
    }
  }

  Bytes rounded_size(const AllocRequest& req) const override { return round_up_sat(req.size, kTpuRuntimeUnit); }

  Usage usage() const override {
    Bytes largest = by_size_.size() ? by_size_.largest()->size : 0;
    return {allocated_, limit_, largest, limit_ - allocated_, largest};
  }

  nlohmann::json stats() const override {
    return {{"limit_bytes", limit_}, {"bytes_in_use", allocated_}, {"free_holes", holes_.size()}};
  }

  void memory_map(MemoryMap* out) const override {
    if (!limit_) return;
    out->regions.push_back({Addr(0), limit_, 0});
    std::map<Bytes, std::pair<Bytes, bool>> blocks;  // addr → (size, in use)
    for (const auto& [a, s] : holes_) blocks[a] = {s, false};
    for (const auto& [a, s] : live_)
      if (s) blocks[a] = {s, true};
    for (const auto& [a, v] : blocks) out->blocks.push_back({Addr(a), v.first, v.second, true});
  }

  std::string describe_oom(const AllocRequest& req) const override {
    Usage u = usage();
    return fmt::format(
        "    (tpu-runtime) {} B requested, {} B rounded; {} B free in {} holes, the largest {} B; limit {} B\n",
        req.size, rounded_size(req), u.available, holes_.size(), u.largest_free, limit_);
  }

  void validate() const override {
    Bytes free = 0, prev_end = 0;
    bool first = true;
    for (const auto& [a, s] : holes_) {
      FRAGSIM_CHECK(s > 0 && a + s <= limit_, "tpu-runtime: a hole outside the limit");
      FRAGSIM_CHECK(first || a > prev_end, "tpu-runtime: adjacent or overlapping holes");
      FRAGSIM_CHECK(by_size_.contains(s, Addr(~a)), "tpu-runtime: hole index stale");
      free += s;
      prev_end = a + s;
      first = false;
    }
    FRAGSIM_CHECK(by_size_.size() == holes_.size(), "tpu-runtime: hole index size stale");
    FRAGSIM_CHECK(free + allocated_ == limit_, "tpu-runtime: free + allocated != limit");
  }

 private:
  void add_hole(Bytes a, Bytes s) {
    holes_[a] = s;
    by_size_.insert({s, Addr(~a), 0});
  }
  Bytes limit_;
  Bytes allocated_ = 0;
  std::map<Bytes, Bytes> holes_;               // start → size
  SizeIndex by_size_;                          // (size, ~start)
  std::vector<std::pair<Bytes, Bytes>> live_;  // handle → (addr, block)
};

}  // namespace

void register_tpu_runtime(Registry& r) {
  PolicyInfo info{"tpu-runtime",
                  "TPU runtime allocator as XProf captures show it: top-down best fit in [0, runtime limit), 128-byte "
                  "blocks (tpu-padded's inner policy for TPU captures)",
                  [](ConfigReader&, const ConfigContext& ctx) -> PolicyBuilder {
                    Bytes limit = ctx.space->runtime_usable();
                    return [limit](const PolicyContext&) { return std::make_unique<TpuRuntimePolicy>(limit); };
                  },
                  false,
                  {}};
  info.hardware_kind = "tpu";
  r.add(std::move(info));
}

}  // namespace fragsim

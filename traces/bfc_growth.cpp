#include "traces/bfc_growth.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>

#include "traces/recorded_layout.h"

namespace fragsim {

namespace {

constexpr Bytes kFirstRegionTarget = 2 * kMiB;             // allow_growth: the first region's target
constexpr Bytes kSplitAbove = 128 * kMiB;                  // a chunk this much larger is split
constexpr int kMaxDoublings = 12;                          // a prior region at most 4096 times the replay's
constexpr size_t kMaxRegionsTried = 64;                    // regions (in the order obtained) a hypothesis may reach
constexpr std::uint64_t kGrowthReplayBudget = 20'000'000;  // replayed events, all hypotheses together

// The inference's model of one BFC allocator with allow_growth (classic path, no GC).
class GrowthReplay {
 public:
  explicit GrowthReplay(Bytes limit) : limit_(limit) {}

  // Extend as for a request of r bytes, the region at `at` (the driver's choice, where the
  // recording states it); false when the limit refuses it. A stated address that a region of the
  // model already covers (the model went wrong before: its region there is not the real one), or
  // none, puts the region above all others, where no recorded address will match it.
  bool extend(Bytes r, std::optional<std::uint64_t> at) {
    const Bytes available = (limit_ - std::min(limit_, pool_)) / kBfcChunkUnit * kBfcChunkUnit;
    if (r > available) return false;
    bool increased = false;
    while (r > target_) target_ *= 2, increased = true;
    const Bytes bytes = std::min(target_, available);
    if (!increased) target_ *= 2;
    const bool stated = at && !overlaps(*at, bytes);
    if (!stated) made_up_ = std::min(made_up_, regions_.size());
    const std::uint64_t base = stated ? *at : fresh_address();
    pool_ += bytes;
    const auto g = static_cast<std::int32_t>(regions_.size());
    regions_.push_back({Addr(base), bytes});
    chunks_[base] = {bytes, false, g};
    free_.insert({bytes, base});
    return true;
  }
  // BFC's allocation of an r-byte chunk; `hint` the recorded address (a new region starts there).
  std::optional<std::uint64_t> alloc(Bytes r, std::optional<std::uint64_t> hint) {
    auto f = free_.lower_bound({r, 0});
    if (f == free_.end()) {
      if (!extend(r, hint)) return std::nullopt;
      f = free_.lower_bound({r, 0});
      if (f == free_.end()) return std::nullopt;
    }
    auto [size, at] = *f;
    free_.erase(f);
    Chunk& c = chunks_[at];
    c.used = true;
    if (size >= 2 * r || size - r >= kSplitAbove) {
      c.size = r;
      chunks_[at + r] = {size - r, false, c.region};
      free_.insert({size - r, at + r});
    }
    return at;
  }
  void free(std::uint64_t at) {
    auto it = chunks_.find(at);
    if (it == chunks_.end() || !it->second.used) return;
    it->second.used = false;
    if (auto next = std::next(it); next != chunks_.end() && !next->second.used &&
                                   next->second.region == it->second.region && at + it->second.size == next->first) {
      free_.erase({next->second.size, next->first});
      it->second.size += next->second.size;
      chunks_.erase(next);
    }
    if (it != chunks_.begin()) {
      auto prev = std::prev(it);
      if (!prev->second.used && prev->second.region == it->second.region && prev->first + prev->second.size == at) {
        free_.erase({prev->second.size, prev->first});
        prev->second.size += it->second.size;
        chunks_.erase(it);
        it = prev;
      }
    }
    free_.insert({it->second.size, it->first});
  }
  const std::vector<Extent>& regions() const { return regions_; }
  // The first region whose base no recorded address gave (regions().size() when none).
  size_t first_made_up() const { return std::min(made_up_, regions_.size()); }

 private:
  struct Chunk {
    Bytes size = 0;
    bool used = false;
    std::int32_t region = 0;
  };
  bool overlaps(std::uint64_t at, Bytes size) const {
    for (const Extent& g : regions_)
      if (at < g.addr.value() + g.bytes && g.addr.value() < at + size) return true;
    return false;
  }
  // A region whose request states no address: above every region so far (its chunks compare
  // with no recorded address).
  std::uint64_t fresh_address() const {
    std::uint64_t top = std::uint64_t{1} << 47;
    for (const Extent& g : regions_) top = std::max(top, g.addr.value() + g.bytes);
    return (top + kFirstRegionTarget) / kFirstRegionTarget * kFirstRegionTarget;
  }
  Bytes limit_, pool_ = 0, target_ = kFirstRegionTarget;
  std::vector<Extent> regions_;
  size_t made_up_ = SIZE_MAX;
  std::map<std::uint64_t, Chunk> chunks_;
  std::set<std::pair<Bytes, std::uint64_t>> free_;  // (size, address): BFC's bins in order
};

struct GrowthOutcome {
  std::uint64_t matched = 0;
  std::vector<Extent> regions;  // in the order obtained, the prior ones first, up to the first made-up base
  bool valid = false;
};

// The capture replayed after the prior regions were obtained, each for a request of its size.
GrowthOutcome replay_growth(std::span<const BfcEvent> events, const std::vector<Extent>& prior, Bytes limit) {
  GrowthOutcome o;
  GrowthReplay m(limit);
  for (const Extent& g : prior)
    if (!m.extend(g.bytes, g.addr.value())) return o;
  if (m.first_made_up() < prior.size()) return o;       // prior regions over one another
  std::unordered_map<std::uint64_t, std::uint64_t> at;  // id → the model's address
  for (const BfcEvent& e : events) {
    if (!e.alloc) {
      if (auto it = at.find(e.id); it != at.end()) m.free(it->second), at.erase(it);
      continue;
    }
    std::optional<std::uint64_t> hint;
    if (e.at) hint = e.at->value();
    auto got = m.alloc(e.chunk, hint);
    if (!got) return o;  // the model ran out where the real one did not
    if (e.at && *got == e.at->value()) ++o.matched;
    at[e.id] = *got;
  }
  // Only regions at recorded bases, and those before them, can be said to exist before the capture.
  o.regions.assign(m.regions().begin(), m.regions().begin() + static_cast<std::ptrdiff_t>(m.first_made_up()));
  o.valid = true;
  return o;
}

}  // namespace

BfcPriorRegions infer_bfc_prior_regions(std::span<const BfcEvent> events, Bytes limit) {
  BfcPriorRegions out;
  for (const BfcEvent& e : events) out.compared += e.alloc && e.at ? 1 : 0;
  GrowthOutcome best = replay_growth(events, {}, limit);
  if (!best.valid) return out;
  out.matched_before = out.matched = best.matched;
  std::vector<Extent> prior;
  std::uint64_t spent = events.size();
  // Steepest ascent: from the current hypothesis, every region (in the order obtained) with those
  // before it held before the capture and it larger by a power of two.
  while (best.matched < out.compared && spent < kGrowthReplayBudget) {
    std::optional<std::pair<GrowthOutcome, std::vector<Extent>>> step;
    const size_t n = std::min(best.regions.size(), kMaxRegionsTried);
    for (size_t i = 0; i < n && spent < kGrowthReplayBudget; ++i) {
      std::vector<Extent> h(best.regions.begin(), best.regions.begin() + static_cast<std::ptrdiff_t>(i + 1));
      const Bytes own = h.back().bytes;
      for (int k = 1; k <= kMaxDoublings && own << k <= limit && spent < kGrowthReplayBudget; ++k) {
        h.back().bytes = own << k;
        GrowthOutcome o = replay_growth(events, h, limit);
        spent += events.size();
        const std::uint64_t bar = step ? step->first.matched : best.matched;
        if (o.valid && o.matched > bar) step.emplace(std::move(o), h);
      }
    }
    if (!step) break;
    best = std::move(step->first);
    prior = std::move(step->second);
  }
  out.matched = best.matched;
  if (out.matched > out.matched_before) out.regions = std::move(prior);
  return out;
}

}  // namespace fragsim

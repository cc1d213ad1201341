#include "traces/bfc_growth.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>

#include "traces/range_set.h"
#include "traces/recorded_layout.h"

namespace fragsim {

namespace {

constexpr Bytes kFirstRegionTarget = 2 * kMiB;             // allow_growth: the first region's target
constexpr Bytes kSplitAbove = 128 * kMiB;                  // a chunk this much larger is split
constexpr int kMaxDoublings = 12;                          // a prior region at most 4096 times the replay's
constexpr size_t kMaxRegionsTried = 64;                    // regions (in the order obtained) a hypothesis may reach
constexpr size_t kMaxBasesTried = 64;                      // bases below earlier buffers and missed allocations tried
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
  // A buffer live before the capture at its stated address, as the policy seeds one: carved out of
  // the free chunk holding it, else out of a region obtained at that address when none holds it,
  // else placed as a request. Where it went (nullopt: the limit refused it).
  std::optional<std::uint64_t> seed(Bytes r, std::uint64_t at) {
    if (carve(r, at)) return at;
    if (!overlaps(at, 1)) {
      if (!extend(r, at)) return std::nullopt;
      if (carve(r, at)) return at;
    }
    return alloc(r, at);
  }
  // Takes [at, at + r) out of the free chunk that holds it (the parts below and above stay free).
  bool carve(Bytes r, std::uint64_t at) {
    auto it = chunks_.upper_bound(at);
    if (it == chunks_.begin()) return false;
    --it;
    const auto [base, c] = *it;
    if (c.used || at + r > base + c.size) return false;
    free_.erase({c.size, base});
    if (at > base) {
      it->second.size = at - base;
      free_.insert({at - base, base});
    }
    chunks_[at] = {r, true, c.region};
    if (base + c.size > at + r) {
      chunks_[at + r] = {base + c.size - at - r, false, c.region};
      free_.insert({base + c.size - at - r, at + r});
    }
    return true;
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

// What every replay of one capture shares.
struct GrowthInput {
  std::span<const BfcEvent> events;
  Bytes limit = 0;
  Bytes unknown = 0;  // live before the capture at unstated addresses (its pre-trace allocations without `at`)
  RangeSet occupied;  // every range a buffer with a stated address held
};

struct GrowthOutcome {
  std::uint64_t matched = 0;
  std::vector<Extent> regions;        // in the order obtained, the prior ones first, up to the first made-up base
  std::vector<Extent> live;           // where the unknown bytes went
  Bytes in_gaps = 0;                  // of which in ranges no recorded buffer used
  std::vector<std::uint64_t> missed;  // stated addresses the replay did not reproduce, in order
  bool valid = false;
};

// The ranges of `region` that no buffer with a stated address held, below or between ranges that
// some did: memory in use all along (traces/recorded_layout.h); none when they exceed `budget`.
std::vector<Extent> held_all_along(const Extent& region, const RangeSet& occupied, Bytes budget) {
  std::vector<Extent> out;
  Bytes sum = 0;
  for (const auto& [lo, hi] : occupied.holes(region.addr.value(), region.end().value())) {
    out.push_back({Addr(lo), hi - lo});
    sum += hi - lo;
  }
  if (sum > budget) return {};
  return out;
}

// The capture replayed after the prior regions were obtained, each for a request of its size.
GrowthOutcome replay_growth(const GrowthInput& in, const std::vector<Extent>& prior) {
  GrowthOutcome o;
  GrowthReplay m(in.limit);
  for (const Extent& g : prior)
    if (!m.extend(g.bytes, g.addr.value())) return o;
  if (m.first_made_up() < prior.size()) return o;       // prior regions over one another
  std::unordered_map<std::uint64_t, std::uint64_t> at;  // id → the model's address
  bool unknown_placed = false;
  for (const BfcEvent& e : in.events) {
    if (!e.alloc) {
      if (auto it = at.find(e.id); it != at.end()) m.free(it->second), at.erase(it);
      continue;
    }
    if (e.pre_trace && e.at) {  // an earlier buffer where the capture states it
      auto got = m.seed(e.chunk, e.at->value());
      if (!got) return o;
      if (*got != e.at->value()) o.missed.push_back(e.at->value());
      at[e.id] = *got;
      continue;
    }
    if (e.pre_trace) {  // the unknown bytes, all at the first of their allocations
      if (unknown_placed) continue;
      unknown_placed = true;
      Bytes left = in.unknown;
      for (const Extent& g : prior)
        for (const Extent& x : held_all_along(g, in.occupied, left)) {
          if (!m.carve(x.bytes, x.addr.value())) return o;
          o.live.push_back(x);
          o.in_gaps += x.bytes;
          left -= x.bytes;
        }
      if (left) {
        auto got = m.alloc(left, std::nullopt);
        if (!got) return o;
        o.live.push_back({Addr(*got), left});
      }
      continue;
    }
    std::optional<std::uint64_t> hint;
    if (e.at) hint = e.at->value();
    auto got = m.alloc(e.chunk, hint);
    if (!got) return o;  // the model ran out where the real one did not
    if (e.at && *got == e.at->value())
      ++o.matched;
    else if (e.at)
      o.missed.push_back(e.at->value());
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
  GrowthInput in{events, limit, 0, {}};
  std::vector<std::uint64_t> earlier;  // the stated addresses of buffers live before the capture
  for (const BfcEvent& e : events) {
    if (!e.alloc) continue;
    if (e.pre_trace && e.at) earlier.push_back(e.at->value());
    if (e.at)
      in.occupied.add(e.at->value(), e.at->value() + std::max(e.chunk, e.held));
    else if (e.pre_trace)
      in.unknown += e.chunk;
    out.compared += e.at && !e.pre_trace ? 1 : 0;
  }
  GrowthOutcome best = replay_growth(in, {});
  if (!best.valid) return out;
  out.matched_before = out.matched = best.matched;
  std::vector<Extent> prior;
  std::uint64_t spent = events.size();
  auto budget_left = [&] { return spent < kGrowthReplayBudget; };
  // Keeps h when its replay reproduces more than the best step so far.
  std::optional<std::pair<GrowthOutcome, std::vector<Extent>>> step;
  auto consider = [&](const std::vector<Extent>& h) {
    GrowthOutcome o = replay_growth(in, h);
    spent += events.size();
    const std::uint64_t bar = step ? step->first.matched : best.matched;
    if (o.valid && o.matched > bar) step.emplace(std::move(o), h);
  };
  // Steepest ascent: from the current hypothesis, every region (in the order obtained) with those
  // before it held before the capture and it larger by a power of two; when none helps, a region
  // 2 MiB below an earlier buffer's or a missed allocation's address, of each size, at each place
  // among those held before.
  while (best.matched < out.compared && budget_left()) {
    step.reset();
    const size_t n = std::min(best.regions.size(), kMaxRegionsTried);
    for (size_t i = 0; i < n && budget_left(); ++i) {
      std::vector<Extent> h(best.regions.begin(), best.regions.begin() + static_cast<std::ptrdiff_t>(i + 1));
      const Bytes own = h.back().bytes;
      for (int k = 1; k <= kMaxDoublings && own << k <= limit && budget_left(); ++k) {
        h.back().bytes = own << k;
        consider(h);
      }
    }
    // 2 MiB below each earlier buffer's address, then each missed one's, that no region held before holds.
    std::vector<std::uint64_t> bases, at = earlier;
    at.insert(at.end(), best.missed.begin(), best.missed.end());
    for (size_t i = 0; !step && i < at.size() && bases.size() < kMaxBasesTried; ++i) {
      const std::uint64_t b = at[i] / kFirstRegionTarget * kFirstRegionTarget;
      auto holds = [&](const Extent& g) { return g.addr.value() <= b && b < g.end().value(); };
      if (std::none_of(prior.begin(), prior.end(), holds) && std::find(bases.begin(), bases.end(), b) == bases.end())
        bases.push_back(b);
    }
    for (std::uint64_t b : bases)
      for (size_t p = 0; p <= prior.size() && budget_left(); ++p)
        for (int k = 0; k <= kMaxDoublings && (kFirstRegionTarget << k) <= limit && budget_left(); ++k) {
          std::vector<Extent> h = prior;
          h.insert(h.begin() + static_cast<std::ptrdiff_t>(p), Extent{Addr(b), kFirstRegionTarget << k});
          consider(h);
        }
    if (!step) break;
    best = std::move(step->first);
    prior = std::move(step->second);
  }
  out.matched = best.matched;
  if (out.matched > out.matched_before) {
    out.regions = std::move(prior);
    out.live = std::move(best.live);
    out.live_in_gaps = best.in_gaps;
  }
  return out;
}

}  // namespace fragsim

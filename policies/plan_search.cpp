#include "policies/plan_search.h"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace fragsim {

namespace {

constexpr Bytes kUnplaced = kTooLarge;
constexpr std::uint32_t kNone = 0xffffffffu;

enum class Status { kFound, kNotFound, kAborted, kTimeout };

// The three preorders, each a list of keys compared in turn, largest first: T the most bytes
// unplaced in any section of the buffer, A its area, W its life (MiniMalloc's "TAW", "WAT", "TWA").
constexpr std::string_view kPreorders[] = {"TAW", "WAT", "TWA"};

class Search {
 public:
  Search(const std::vector<PlanBuffer>& bufs, const SearchLimits& lim) : b_(bufs), lim_(lim) {}

  SearchResult run() {
    SearchResult out;
    const size_t n = b_.size();
    out.offsets.assign(n, 0);
    for (size_t i = 0; i < n; ++i)
      if (b_[i].size) live_.push_back(static_cast<std::uint32_t>(i));
    if (live_.empty()) {
      out.outcome = SearchOutcome::kFound;
      return out;
    }
    build();
    for (Bytes t : total_)
      if (t > lim_.capacity) {
        out.outcome = SearchOutcome::kInfeasible;
        return out;
      }
    sol_.assign(n, 0);
    // Round robin over the preorders with a node budget that doubles each round (the first
    // preorder to finish within it wins); a preorder that runs out of candidates within its budget
    // proves that no plan fits.
    std::uint64_t budget = live_.size();
    for (;;) {
      budget = budget > UINT64_MAX / 4 ? UINT64_MAX / 2 : budget * 2;
      for (std::string_view order : kPreorders) {
        order_ = order;
        left_ = budget;
        Status st = solve_all();
        out.nodes = nodes_;
        if (st == Status::kFound) {
          out.outcome = SearchOutcome::kFound;
          for (std::uint32_t i : live_) out.offsets[i] = sol_[i];
          return out;
        }
        if (st == Status::kNotFound) {
          out.outcome = SearchOutcome::kInfeasible;
          return out;
        }
        if (st == Status::kTimeout) return out;
      }
    }
  }

 private:
  struct Partition {
    std::vector<std::uint32_t> bufs;
    std::uint32_t s0 = 0, s1 = 0;  // sections [s0, s1)
  };
  struct Cand {
    Bytes off;
    std::uint32_t rank, i;
    bool operator<(const Cand& o) const { return off != o.off ? off < o.off : rank < o.rank; }
  };

  // Sections, overlaps and the per-section lists, once.
  void build() {
    std::vector<std::uint64_t> pts;
    for (std::uint32_t i : live_) pts.push_back(b_[i].lower), pts.push_back(b_[i].upper);
    std::sort(pts.begin(), pts.end());
    pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
    const size_t n = b_.size(), sections = pts.size() - 1;
    slo_.assign(n, 0);
    shi_.assign(n, 0);
    auto at = [&](std::uint64_t t) {
      return static_cast<std::uint32_t>(std::lower_bound(pts.begin(), pts.end(), t) - pts.begin());
    };
    for (std::uint32_t i : live_) slo_[i] = at(b_[i].lower), shi_[i] = at(b_[i].upper);
    total_.assign(sections, 0);
    top_.assign(sections, 0);
    low_.assign(sections, 0);  // every buffer's floor starts at 0
    arg_.assign(sections, kNone);
    cuts_.assign(sections, 0);
    std::vector<std::uint32_t> count(sections + 1, 0);
    for (std::uint32_t i : live_)
      for (std::uint32_t s = slo_[i]; s < shi_[i]; ++s) {
        total_[s] += b_[i].size;
        ++count[s + 1];
        if (s + 1 < shi_[i]) ++cuts_[s];
      }
    sec_start_.assign(sections + 1, 0);
    for (size_t s = 0; s < sections; ++s) sec_start_[s + 1] = sec_start_[s] + count[s + 1];
    sec_bufs_.resize(sec_start_[sections]);
    std::vector<std::uint32_t> fill(sec_start_.begin(), sec_start_.end() - 1);
    for (std::uint32_t i : live_)
      for (std::uint32_t s = slo_[i]; s < shi_[i]; ++s) {
        if (arg_[s] == kNone) arg_[s] = i;
        sec_bufs_[fill[s]++] = i;
      }
    // Overlaps: buffers sharing a section, by a sweep over the sorted starts.
    std::vector<std::uint32_t> by_start = live_;
    std::sort(by_start.begin(), by_start.end(), [&](auto a, auto c) { return slo_[a] < slo_[c]; });
    std::vector<std::vector<std::uint32_t>> ov(n);
    for (size_t x = 0; x < by_start.size(); ++x)
      for (size_t y = x + 1; y < by_start.size() && slo_[by_start[y]] < shi_[by_start[x]]; ++y) {
        ov[by_start[x]].push_back(by_start[y]);
        ov[by_start[y]].push_back(by_start[x]);
      }
    ov_start_.assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) ov_start_[i + 1] = ov_start_[i] + static_cast<std::uint32_t>(ov[i].size());
    ov_.reserve(ov_start_[n]);
    for (auto& v : ov) ov_.insert(ov_.end(), v.begin(), v.end());
    off_.assign(n, kUnplaced);
    minoff_.assign(n, 0);
    rank_.assign(n, 0);
    stamp_.assign(sections, 0);
  }

  Status solve_all() {
    // The whole instance is a partition; it splits where no buffer crosses a section boundary.
    Partition all{live_, 0, static_cast<std::uint32_t>(total_.size())};
    return split_and_solve(all);
  }

  // Solves each part of p between the cut points (boundaries no unplaced buffer crosses).
  Status split_and_solve(const Partition& p) {
    std::vector<std::uint32_t> cuts = {p.s0};
    for (std::uint32_t s = p.s0; s + 1 < p.s1; ++s)
      if (cuts_[s] == 0) cuts.push_back(s + 1);
    cuts.push_back(p.s1);
    if (cuts.size() == 2) return sub_solve(p);
    for (size_t c = 1; c < cuts.size(); ++c) {
      Partition sub{{}, cuts[c - 1], cuts[c]};
      for (std::uint32_t i : p.bufs)
        if (off_[i] == kUnplaced && slo_[i] < sub.s1 && sub.s0 < shi_[i]) sub.bufs.push_back(i);
      if (sub.bufs.empty()) continue;
      Status st = sub_solve(sub);
      if (st != Status::kFound) return st;
    }
    return Status::kFound;
  }

  // One partition: its preorder, then the search. Ranks of an enclosing partition are kept.
  Status sub_solve(const Partition& p) {
    struct Key {
      Bytes total, area, width;
      std::uint32_t i;
    };
    std::vector<Key> keys;
    keys.reserve(p.bufs.size());
    for (std::uint32_t i : p.bufs) {
      if (off_[i] != kUnplaced) continue;
      Bytes t = 0;
      for (std::uint32_t s = slo_[i]; s < shi_[i]; ++s) t = std::max(t, total_[s]);
      const Bytes w = b_[i].upper - b_[i].lower;
      keys.push_back({t, sat_mul(b_[i].size, w), w, i});
    }
    std::sort(keys.begin(), keys.end(), [&](const Key& a, const Key& c) {
      for (char k : order_) {
        const Bytes x = k == 'T' ? a.total : k == 'A' ? a.area : a.width;
        const Bytes y = k == 'T' ? c.total : k == 'A' ? c.area : c.width;
        if (x != y) return x > y;
      }
      return a.i < c.i;
    });
    std::vector<std::uint32_t> saved;
    saved.reserve(keys.size());
    Partition q{{}, p.s0, p.s1};
    for (std::uint32_t r = 0; r < keys.size(); ++r) {
      saved.push_back(rank_[keys[r].i]);
      rank_[keys[r].i] = r;
      q.bufs.push_back(keys[r].i);
    }
    Status st = dfs(q, 0, 0);
    for (std::uint32_t r = 0; r < keys.size(); ++r) rank_[keys[r].i] = saved[r];
    return st;
  }

  static Bytes sat_mul(Bytes a, Bytes b) { return b && a > kTooLarge / b ? kTooLarge : a * b; }

  // Depth: one frame of cands_ per nested call, sub-partitions included.
  Status dfs(const Partition& p, Bytes min_off, std::uint32_t min_rank) {
    ++depth_;
    Status st = dfs_at(p, min_off, min_rank, depth_);
    --depth_;
    return st;
  }

  Status dfs_at(const Partition& p, Bytes min_off, std::uint32_t min_rank, size_t depth) {
    if (left_ == 0) return Status::kAborted;
    --left_;
    if (nodes_ >= lim_.max_nodes) return timed_out_ = true, Status::kTimeout;
    if ((++nodes_ & 255) == 0 &&
        (PlanClock::now() >= lim_.deadline || (lim_.stop && lim_.stop->load(std::memory_order_relaxed))))
      return timed_out_ = true, Status::kTimeout;
    if (timed_out_) return Status::kTimeout;
    if (cands_.size() <= depth) cands_.resize(depth + 1), heavy_.resize(depth + 1);
    std::vector<Cand>& cands = cands_[depth];
    cands.clear();
    Bytes min_height = kTooLarge;
    for (std::uint32_t i : p.bufs)
      if (off_[i] == kUnplaced) min_height = std::min(min_height, minoff_[i] + b_[i].size);
    if (min_height == kTooLarge) return Status::kFound;  // every buffer of the partition placed
    for (std::uint32_t i : p.bufs) {
      if (off_[i] != kUnplaced) continue;
      const Bytes o = minoff_[i];
      if (o < min_off || (o == min_off && rank_[i] < min_rank)) continue;  // not canonical
      if (o >= min_height) continue;                                       // dominated
      cands.push_back({o, rank_[i], i});
    }
    std::sort(cands.begin(), cands.end());
    // Sections where some candidate's offset plus the unplaced bytes may not fit.
    std::vector<std::uint32_t>& heavy = heavy_[depth];
    heavy.clear();
    if (!cands.empty()) {
      const Bytes room = lim_.capacity - std::min(lim_.capacity, cands.back().off);
      for (std::uint32_t s = p.s0; s < p.s1; ++s)
        if (total_[s] > room) heavy.push_back(s);
    }
    for (size_t k = 0; k < cands_[depth].size(); ++k) {
      const Cand c = cands_[depth][k];  // cands_ may grow (and move) below
      const size_t mark_min = min_undo_.size(), mark_floor = floor_undo_.size(), mark_low = low_undo_.size();
      const bool ok = place(c.i, c.off, heavy_[depth]);
      Status st = Status::kNotFound;
      if (ok) {
        // Cut points this placement opened inside the partition: solve the parts apart.
        bool split = false;
        for (std::uint32_t s = slo_[c.i]; s + 1 < shi_[c.i]; ++s)
          if (--cuts_[s] == 0) split = true;
        st = split ? split_and_solve(p) : dfs(p, c.off, c.rank);
        for (std::uint32_t s = slo_[c.i]; s + 1 < shi_[c.i]; ++s) ++cuts_[s];
      }
      unplace(c.i, mark_min, mark_floor, mark_low);
      if (st != Status::kNotFound) return st;
    }
    return Status::kNotFound;
  }

  // Places i at o, raising floors; false when a section's inference fails (state still changed:
  // the caller undoes it). `heavy`: the sections of p where o + total_s may exceed the capacity.
  //
  // A section's floor is max(top_s, low_s): the top of the last buffer placed in it, and the
  // lowest floor among its unplaced buffers, held with one buffer that has it (low_s changes only
  // when that buffer rises or is placed: only then is the section rescanned). Sections this
  // placement leaves alone passed the parent's check with a lower offset: they need only
  // o + total_s ≤ capacity, which can fail only in `heavy`.
  bool place(std::uint32_t i, Bytes o, const std::vector<std::uint32_t>& heavy) {
    off_[i] = o;
    sol_[i] = o;
    const Bytes size = b_[i].size, top = o + size, cap = lim_.capacity;
    ++epoch_;
    touched_.clear();
    auto lost_low = [&](std::uint32_t s, std::uint32_t j) {
      if (arg_[s] == j && stamp_[s] != epoch_) stamp_[s] = epoch_, touched_.push_back(s);
    };
    for (std::uint32_t k = ov_start_[i]; k < ov_start_[i + 1]; ++k) {
      const std::uint32_t j = ov_[k];
      if (off_[j] != kUnplaced || minoff_[j] >= top) continue;
      min_undo_.push_back({j, minoff_[j]});
      minoff_[j] = top;
      for (std::uint32_t s = slo_[j]; s < shi_[j]; ++s) lost_low(s, j);
    }
    for (std::uint32_t s = slo_[i]; s < shi_[i]; ++s) {
      floor_undo_.push_back({s, top_[s]});
      top_[s] = top;
      total_[s] -= size;
      lost_low(s, i);
    }
    for (std::uint32_t s : touched_) {
      Bytes m = kTooLarge;
      std::uint32_t a = kNone;
      for (std::uint32_t k = sec_start_[s]; k < sec_start_[s + 1]; ++k) {
        const std::uint32_t j = sec_bufs_[k];
        if (off_[j] == kUnplaced && minoff_[j] < m) m = minoff_[j], a = j;
      }
      low_undo_.push_back({s, low_[s], arg_[s]});
      low_[s] = m == kTooLarge ? 0 : m;
      arg_[s] = a;
    }
    for (std::uint32_t s : touched_)
      if (std::max({o, top_[s], low_[s]}) + total_[s] > cap) return false;
    for (std::uint32_t s = slo_[i]; s < shi_[i]; ++s)
      if (std::max(top_[s], low_[s]) + total_[s] > cap) return false;
    for (std::uint32_t s : heavy)
      if (o + total_[s] > cap) return false;
    return true;
  }

  void unplace(std::uint32_t i, size_t mark_min, size_t mark_floor, size_t mark_low) {
    while (low_undo_.size() > mark_low) {
      const LowChange& c = low_undo_.back();
      low_[c.s] = c.low;
      arg_[c.s] = c.arg;
      low_undo_.pop_back();
    }
    while (floor_undo_.size() > mark_floor) {
      top_[floor_undo_.back().first] = floor_undo_.back().second;
      floor_undo_.pop_back();
    }
    for (std::uint32_t s = slo_[i]; s < shi_[i]; ++s) total_[s] += b_[i].size;
    while (min_undo_.size() > mark_min) {
      minoff_[min_undo_.back().first] = min_undo_.back().second;
      min_undo_.pop_back();
    }
    off_[i] = kUnplaced;
  }

  const std::vector<PlanBuffer>& b_;
  const SearchLimits& lim_;
  std::vector<std::uint32_t> live_;                  // buffers of size > 0
  std::vector<std::uint32_t> slo_, shi_;             // per buffer: its sections [slo, shi)
  std::vector<Bytes> total_, top_, low_;             // per section: unplaced bytes, last top, lowest unplaced floor
  std::vector<std::uint32_t> arg_;                   // per section: an unplaced buffer whose floor is low_ (kNone)
  std::vector<std::uint32_t> cuts_;                  // per section boundary s|s+1: unplaced buffers crossing it
  std::vector<std::uint32_t> sec_start_, sec_bufs_;  // per section: its buffers (CSR)
  std::vector<std::uint32_t> ov_start_, ov_;         // per buffer: those it lives with (CSR)
  std::vector<Bytes> off_, minoff_, sol_;            // per buffer: offset (kUnplaced), floor, last placed offset
  std::vector<std::uint32_t> rank_;                  // per buffer: its place in its partition's preorder
  std::vector<std::pair<std::uint32_t, Bytes>> min_undo_, floor_undo_;
  struct LowChange {
    std::uint32_t s;
    Bytes low;
    std::uint32_t arg;
  };
  std::vector<LowChange> low_undo_;
  std::vector<std::uint32_t> stamp_, touched_;
  std::uint32_t epoch_ = 0;
  std::vector<std::vector<Cand>> cands_;           // per depth
  std::vector<std::vector<std::uint32_t>> heavy_;  // per depth
  std::string_view order_;
  std::uint64_t left_ = 0, nodes_ = 0;
  size_t depth_ = 0;
  bool timed_out_ = false;
};

}  // namespace

SearchResult search_plan(const std::vector<PlanBuffer>& buffers, const SearchLimits& limits) {
  return Search(buffers, limits).run();
}

}  // namespace fragsim

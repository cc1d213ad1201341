#include "policies/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "policies/plan_greedy.h"
#include "policies/plan_search.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

// Leaves up to this many buffers are improved by exact search, larger ones by local search: a
// search node costs O(buffers), and a search that finds a plan without backtracking visits one
// node per buffer.
constexpr size_t kSearchBuffers = 3000;
// The decomposition stops peeling (the groups left become leaves) past this many buffer visits
// per buffer: a deep nest of lifetimes would otherwise cost O(n²).
constexpr size_t kSplitWork = 1024;
// Greedy passes over leaves of at least this many buffers run on threads of their own.
constexpr size_t kThreadBuffers = 2000;
// Greedy restarts run in batches of this many (on the threads there are); each batch starts from
// the best plan before it, so the plans do not depend on the threads.
constexpr size_t kRestartBatch = 8;
// A work-bounded search gets at least this many nodes (its share of the work left, else).
constexpr std::uint64_t kMinSearchNodes = 1000;

double seconds_since(PlanClock::time_point t) { return std::chrono::duration<double>(PlanClock::now() - t).count(); }

struct Leaf {
  std::vector<std::uint32_t> ids;      // global indices
  std::vector<PlanBuffer> b;           // the leaf as an instance of its own
  Bytes base = 0;                      // where it sits: the buffers peeled below it
  Bytes bound = 0;                     // its most bytes live at once
  Bytes lowest = 0;                    // no plan of it is lower (bound, or raised by a proof)
  Bytes best = kTooLarge;              // its best plan's height
  std::vector<Bytes> off;              // that plan (local)
  std::vector<Bytes> load;             // per buffer: the most bytes live during its life
  PlanOrder order = PlanOrder::kSize;  // the greedy order and fit of the best greedy plan
  PlanFit fit = PlanFit::kBest;
  std::uint64_t restarts = 0;    // restarts of the greedy run so far (each its own random choices)
  Bytes gave_up_at = kTooLarge;  // the lowest capacity at which a search gave up
  bool searched_bound = false;   // a search at `lowest` ran
  bool exhausted = false;        // nothing more to try
  const char* how = "greedy";    // what found `best`
  bool proven() const { return best <= lowest; }
  Bytes top() const { return base + best; }
};

// Peels and splits (see planner.h); the buffers peeled get their offsets in `offsets`.
std::vector<Leaf> decompose(const std::vector<PlanBuffer>& bufs, std::vector<Bytes>& offsets, Bytes* peeled_top) {
  struct Group {
    std::vector<std::uint32_t> ids;  // sorted by lower
    Bytes base;
  };
  std::vector<Group> stack(1);
  for (std::uint32_t i = 0; i < bufs.size(); ++i)
    if (bufs[i].size) stack[0].ids.push_back(i);
  std::sort(stack[0].ids.begin(), stack[0].ids.end(), [&](std::uint32_t a, std::uint32_t b) {
    return bufs[a].lower != bufs[b].lower ? bufs[a].lower < bufs[b].lower : a < b;
  });
  std::vector<Leaf> leaves;
  size_t work = 0;
  const size_t budget = kSplitWork * bufs.size() + 100000;
  auto leaf = [&](std::vector<std::uint32_t> ids, Bytes base) {
    Leaf l;
    l.ids = std::move(ids);
    l.base = base;
    leaves.push_back(std::move(l));
  };
  while (!stack.empty()) {
    Group g = std::move(stack.back());
    stack.pop_back();
    if (work > budget) {
      leaf(std::move(g.ids), g.base);
      continue;
    }
    work += g.ids.size();
    for (size_t first = 0; first < g.ids.size();) {  // one time-connected component at a time
      std::uint64_t t1 = bufs[g.ids[first]].upper;
      size_t last = first + 1;
      while (last < g.ids.size() && bufs[g.ids[last]].lower < t1) t1 = std::max(t1, bufs[g.ids[last++]].upper);
      // A buffer that lives with every other of the component: it starts before the first of the
      // others ends and ends after the last of them starts.
      std::uint64_t up1 = UINT64_MAX, up2 = UINT64_MAX, lo1 = 0, lo2 = 0;  // two smallest uppers, two largest lowers
      for (size_t k = first; k < last; ++k) {
        const PlanBuffer& b = bufs[g.ids[k]];
        if (b.upper < up1)
          up2 = up1, up1 = b.upper;
        else
          up2 = std::min(up2, b.upper);
        if (b.lower > lo1)
          lo2 = lo1, lo1 = b.lower;
        else
          lo2 = std::max(lo2, b.lower);
      }
      Group rest{{}, g.base};
      for (size_t k = first; k < last; ++k) {
        const std::uint32_t i = g.ids[k];
        const PlanBuffer& b = bufs[i];
        const std::uint64_t others_up = b.upper == up1 ? up2 : up1, others_lo = b.lower == lo1 ? lo2 : lo1;
        if (last - first == 1 || (b.lower < others_up && b.upper > others_lo)) {
          offsets[i] = rest.base;
          rest.base += b.size;
          *peeled_top = std::max(*peeled_top, rest.base);
        } else {
          rest.ids.push_back(i);
        }
      }
      if (rest.ids.size() == last - first)
        leaf(std::move(rest.ids), g.base);  // nothing peeled: a leaf
      else if (!rest.ids.empty())
        stack.push_back(std::move(rest));
      first = last;
    }
  }
  return leaves;
}

class Planner {
 public:
  Planner(const std::vector<PlanBuffer>& bufs, const PlanOptions& o)
      : bufs_(bufs),
        o_(o),
        start_(PlanClock::now()),
        threads_(o.threads ? o.threads : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8)) {
    const double limit = o.time_limit > 0 ? o.time_limit : default_plan_time(bufs.size());
    deadline_ = start_ + std::chrono::duration_cast<PlanClock::duration>(std::chrono::duration<double>(limit));
  }

  PlanResult run() {
    PlanResult r;
    r.buffers = bufs_.size();
    r.offsets.assign(bufs_.size(), 0);
    r.lower_bound = live_bytes_bound(bufs_);
    Bytes peeled_top = 0;
    // An instance the search can take whole is not decomposed: the search splits it itself, at
    // better moments (a buffer peeled to the bottom in advance can make a tight plan harder to find).
    if (bufs_.size() <= kSearchBuffers) {
      leaves_.emplace_back();
      for (std::uint32_t i = 0; i < bufs_.size(); ++i)
        if (bufs_[i].size) leaves_.back().ids.push_back(i);
    } else {
      leaves_ = decompose(bufs_, r.offsets, &peeled_top);
    }
    r.leaves = leaves_.size();
    for (Leaf& l : leaves_) {
      r.largest_leaf = std::max(r.largest_leaf, l.ids.size());
      for (std::uint32_t i : l.ids) l.b.push_back(bufs_[i]);
      l.bound = l.lowest = live_bytes_bound(l.b);
      r.lower_bound = std::max(r.lower_bound, l.base + l.bound);  // equal to the global bound, or below it
    }
    // Largest leaves first: they take the most time and most likely set the height.
    std::vector<size_t> by_size(leaves_.size());
    for (size_t k = 0; k < by_size.size(); ++k) by_size[k] = k;
    std::sort(by_size.begin(), by_size.end(),
              [&](size_t a, size_t b) { return leaves_[a].ids.size() > leaves_[b].ids.size(); });
    for (size_t k : by_size) greedy(leaves_[k]);
    Bytes height = std::max(peeled_top, highest());
    r.greedy_height = height;
    // Improve the leaf that sets the height while it can be improved and time is left.
    for (;;) {
      height = std::max(peeled_top, highest());
      if (done(height, r.lower_bound)) break;
      Leaf* crit = nullptr;
      for (Leaf& l : leaves_)
        if (!crit || l.top() > crit->top()) crit = &l;
      if (!crit || crit->proven() || crit->exhausted || out_of_time()) break;
      const Bytes target = o_.capacity && o_.capacity > crit->base ? o_.capacity - crit->base : 0;
      if (crit->ids.size() <= kSearchBuffers)
        search(*crit, target);
      else if (o_.local_search)
        restart(*crit, target);
      else
        crit->exhausted = true;
    }
    height = std::max(peeled_top, highest());
    for (const Leaf& l : leaves_) {
      for (size_t k = 0; k < l.ids.size(); ++k) r.offsets[l.ids[k]] = l.base + l.off[k];
      if (l.top() == height && l.proven()) r.lower_bound = std::max(r.lower_bound, height);
    }
    r.height = plan_height(bufs_, r.offsets);
    FRAGSIM_CHECK(r.height == height, "plan: the assembled plan's height differs from its leaves'");
    if (auto c = find_clash(bufs_, r.offsets))
      throw InternalError(fmt::format("plan: buffers {} and {} live at once and overlap (offsets {} and {})", c->a,
                                      c->b, r.offsets[c->a], r.offsets[c->b]));
    r.optimal = r.height <= r.lower_bound;
    r.capacity_met = o_.capacity && r.height <= o_.capacity;
    r.cut_short = !r.optimal && !r.capacity_met && out_of_time();
    r.method = "decomposition";  // the buffers peeled below the leaves set the height
    for (const Leaf& l : leaves_)
      if (l.top() == height) r.method = l.how;
    r.seconds = seconds_since(start_);
    return r;
  }

 private:
  bool out_of_time() const {
    return past_deadline_ || PlanClock::now() >= deadline_ || (o_.stop && o_.stop->load(std::memory_order_relaxed)) ||
           (o_.work_limit && work_ >= o_.work_limit);
  }
  bool done(Bytes height, Bytes bound) const { return height <= bound || (o_.capacity && height <= o_.capacity); }
  Bytes highest() const {
    Bytes h = 0;
    for (const Leaf& l : leaves_) h = std::max(h, l.top());
    return h;
  }

  void keep(Leaf& l, Bytes h, const std::vector<Bytes>& off, const char* how) {
    if (h >= l.best) return;
    l.best = h;
    l.off = off;
    l.how = how;
  }

  // Runs job(0) … job(count − 1) on up to threads_ threads (one, for a leaf of fewer than
  // kThreadBuffers buffers: a thread costs more than its pass); each job writes only its own results.
  template <class F>
  void parallel(size_t count, size_t buffers, F job) const {
    const size_t t = buffers < kThreadBuffers ? 1 : std::min(threads_, count);
    if (t <= 1) {
      for (size_t k = 0; k < count; ++k) job(k);
      return;
    }
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t i = 0; i < t; ++i)
      pool.emplace_back([&] {
        for (size_t k; (k = next.fetch_add(1)) < count;) job(k);
      });
    for (std::thread& th : pool) th.join();
  }

  // A pass stops as soon as it is higher than the lowest plan any pass found (it cannot win).
  struct Pass {
    Bytes height = kTooLarge;
    std::vector<Bytes> off;
  };
  static void lower_to(std::atomic<Bytes>& lowest, Bytes h) {
    for (Bytes cur = lowest.load(); h < cur && !lowest.compare_exchange_weak(cur, h);) {
    }
  }

  // Every order of plan_greedy.h by first fit and by best fit, in parallel; the lowest wins (the
  // first in this list on a tie). The first always runs, so that a plan exists; a pass is skipped
  // only once an earlier one in the list has reached the leaf's bound (it cannot beat that one),
  // so that the winner, and so the plan, is the same however many threads run the passes.
  void greedy(Leaf& l) {
    l.load = load_during_life(l.b);
    struct Try {
      PlanOrder order;
      PlanFit fit;
    };
    std::vector<Try> tries;
    for (PlanOrder order : {PlanOrder::kSize, PlanOrder::kArea, PlanOrder::kLoad, PlanOrder::kLife})
      for (PlanFit fit : {PlanFit::kFirst, PlanFit::kBest}) tries.push_back({order, fit});
    std::vector<Pass> passes(tries.size());
    std::atomic<Bytes> lowest{kTooLarge};
    std::atomic<size_t> first_at_bound{tries.size()};  // the earliest pass that reached l.lowest
    parallel(tries.size(), l.b.size(), [&](size_t k) {
      if (k && (out_of_time() || first_at_bound.load() < k)) return;
      Pass& p = passes[k];
      p.height = place_in_order(l.b, greedy_order(l.b, l.load, tries[k].order), tries[k].fit, p.off, lowest.load());
      lower_to(lowest, p.height);
      if (p.height <= l.lowest)
        for (size_t cur = first_at_bound.load(); k < cur && !first_at_bound.compare_exchange_weak(cur, k);) {
        }
    });
    for (size_t k = 0; k < tries.size(); ++k)
      if (passes[k].height < l.best) {
        l.best = passes[k].height;
        l.off = std::move(passes[k].off);
        l.order = tries[k].order;
        l.fit = tries[k].fit;
      }
  }

  // Exact search at the next capacity worth trying, for a share of the time left: the bound
  // first; after a give-up at c, halfway between c and the best height (a search that gives up
  // says nothing of c, but one that finds a plan near the best ends sooner); after a proof that c
  // cannot be met, from c + 1.
  void search(Leaf& l, Bytes target) {
    Bytes cap;
    if (target) {
      cap = target;  // the capacity to meet
    } else if (!l.searched_bound) {
      cap = l.lowest;
    } else {
      const Bytes from = l.gave_up_at == kTooLarge ? l.lowest : std::max(l.lowest, l.gave_up_at + 1);
      cap = from + (l.best - 1 - from) / 2;
    }
    const double left = std::chrono::duration<double>(deadline_ - PlanClock::now()).count();
    // The same shares of the work bound, when there is one: a search at the bound that gives up
    // must leave work for the capacities above it.
    const double part = target ? 1.0 : !l.searched_bound ? 0.5 : 0.25;
    const double share = target || !l.searched_bound ? left * part : std::max(left * part, 0.2);
    SearchLimits lim;
    lim.capacity = cap;
    lim.stop = o_.stop;
    lim.deadline = std::min(deadline_, PlanClock::now() + std::chrono::duration_cast<PlanClock::duration>(
                                                              std::chrono::duration<double>(share)));
    if (o_.work_limit) {
      const std::uint64_t work_left = o_.work_limit - std::min(o_.work_limit, work_);
      lim.max_nodes = part == 1.0
                          ? work_left
                          : std::min(work_left, std::max<std::uint64_t>(
                                                    static_cast<std::uint64_t>(static_cast<double>(work_left) * part),
                                                    kMinSearchNodes));
    }
    if (cap == l.lowest) l.searched_bound = true;
    SearchResult s = search_plan(l.b, lim);
    work_ += s.nodes + 1;
    switch (s.outcome) {
      case SearchOutcome::kFound:
        keep(l, plan_height(l.b, s.offsets), s.offsets, "search");
        break;
      case SearchOutcome::kInfeasible:
        l.lowest = std::max(l.lowest, cap + 1);
        if (target) l.exhausted = true;  // the capacity cannot be met: what is found stands
        break;
      case SearchOutcome::kGaveUp:
        l.gave_up_at = cap;
        if (target) l.exhausted = true;
        break;
    }
    // Every capacity below the best was ruled out or given up on: start again from the bound
    // with the time left (a longer search may finish where a short one gave up).
    if (!target && l.gave_up_at != kTooLarge && l.gave_up_at + 1 >= l.best) {
      l.gave_up_at = kTooLarge;
      l.searched_bound = false;
    }
  }

  // Iterated greedy for a slice of the time left, a batch of kRestartBatch restarts at a time:
  // each places the leaf again in the best greedy plan's order and fit, its keys scaled by random
  // noise (of a scale drawn per restart, 1 % to 30 %: buffers of about the same key trade places);
  // in half the restarts, by life^β too, β drawn from [0, options' life_exponent] (between the order by
  // size and the order by area: a long-lived buffer goes before a short-lived one of about its
  // size, so that it finds room low down instead of over everything placed around it); and in half
  // of them, the buffers whose tops were near the best height moved forward (squeaky wheel: what
  // set the height goes earlier). The lowest plan is kept. Restart k draws from seed + k alone and
  // starts from the best plan before its batch: the same plans however many threads run them.
  void restart(Leaf& l, Bytes target) {
    const double left = std::chrono::duration<double>(deadline_ - PlanClock::now()).count();
    const auto until = PlanClock::now() + std::chrono::duration_cast<PlanClock::duration>(
                                              std::chrono::duration<double>(std::max(left / 4, 0.05)));
    const size_t n = l.b.size();
    std::vector<double> base(n);
    for (size_t i = 0; i < n; ++i) {
      const PlanBuffer& b = l.b[i];
      const double size = static_cast<double>(b.size), life = static_cast<double>(b.upper - b.lower);
      switch (l.order) {
        case PlanOrder::kSize:
          base[i] = size;
          break;
        case PlanOrder::kArea:
          base[i] = size * life;
          break;
        case PlanOrder::kLoad:
          base[i] = static_cast<double>(l.load[i]);
          break;
        case PlanOrder::kLife:
          base[i] = life;
          break;
      }
    }
    std::vector<Pass> passes(kRestartBatch);
    std::vector<PlanFit> fits(kRestartBatch);
    while (PlanClock::now() < until && !out_of_time() && !l.proven() && !(target && l.best <= target)) {
      // A batch runs to its end: one that the last batch's time says would end past the deadline
      // is not started (the time limit holds however long a pass takes), and none after it.
      const auto batch_start = PlanClock::now();
      if (batch_start + last_batch_ > deadline_) {
        past_deadline_ = true;
        break;
      }
      const Bytes band = std::max<Bytes>(1, (l.best - l.lowest) / 4);
      std::atomic<Bytes> lowest{l.best};
      parallel(kRestartBatch, n, [&](size_t j) {
        std::mt19937_64 rng(o_.seed * 0x9E3779B97F4A7C15ULL + l.restarts + j);
        const double scale = std::array<double, 4>{0.01, 0.03, 0.1, 0.3}[rng() % 4];
        const bool squeaky = rng() % 2;
        std::uniform_real_distribution<double> noise(1 - scale, 1 + scale), boost(1, 2);
        const double beta =
            rng() % 2 && o_.life_exponent > 0 ? std::uniform_real_distribution<double>(0, o_.life_exponent)(rng) : 0.0;
        std::vector<std::pair<double, std::uint32_t>> keyed(n);
        for (std::uint32_t i = 0; i < n; ++i) {
          double k = base[i] * noise(rng);
          if (beta > 0) k *= std::pow(static_cast<double>(l.b[i].upper - l.b[i].lower), beta);
          if (squeaky && l.off[i] + l.b[i].size + band > l.best) k *= boost(rng);
          keyed[i] = {k, i};
        }
        std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
          return a.first != b.first ? a.first > b.first : a.second < b.second;
        });
        std::vector<std::uint32_t> order(n);
        for (size_t k = 0; k < n; ++k) order[k] = keyed[k].second;
        fits[j] = rng() % 5 ? l.fit : l.fit == PlanFit::kBest ? PlanFit::kFirst : PlanFit::kBest;
        passes[j].height = place_in_order(l.b, order, fits[j], passes[j].off, lowest.load());
        lower_to(lowest, passes[j].height);
      });
      l.restarts += kRestartBatch;
      work_ += kRestartBatch * n;
      last_batch_ = PlanClock::now() - batch_start;
      for (size_t j = 0; j < kRestartBatch; ++j)
        if (passes[j].height < l.best) {
          keep(l, passes[j].height, passes[j].off, "greedy restarts");
          l.fit = fits[j];
        }
    }
    if (target && l.best > target && out_of_time()) l.exhausted = true;
  }

  const std::vector<PlanBuffer>& bufs_;
  const PlanOptions& o_;
  PlanClock::time_point start_, deadline_;
  size_t threads_;
  std::vector<Leaf> leaves_;
  std::uint64_t work_ = 0;            // search nodes and local-search steps (a buffer placed each) so far
  PlanClock::duration last_batch_{};  // how long the last batch of restarts took
  bool past_deadline_ = false;        // a batch was not started: it would have ended past the deadline
};

}  // namespace

double default_plan_time(size_t buffers) {
  return std::max(kMinPlanSeconds, kPlanSecondsPer10k * static_cast<double>(buffers) / 1e4);
}

PlanResult plan_buffers(const std::vector<PlanBuffer>& buffers, const PlanOptions& options) {
  // Offsets and heights are sums of sizes: sizes that add up past 2^63 bytes have no plan fragsim
  // can state (a trace's buffers include those the replay refused, of up to 2^64 - 1 bytes each).
  Bytes total = 0;
  for (const PlanBuffer& b : buffers)
    if (__builtin_add_overflow(total, b.size, &total) || total > (Bytes{1} << 63))
      throw InputError(
          fmt::format("{} buffers whose sizes add up past 2^63 bytes: no plan places them all", buffers.size()));
  return Planner(buffers, options).run();
}

}  // namespace fragsim

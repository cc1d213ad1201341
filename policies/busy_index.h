// BusyIndex: the offsets that committed buffers occupy at some time within an interval, kept so
// that static-heap's best fit (policies/static_heap.cpp) finds the smallest free gap that fits
// without visiting every buffer that overlaps the new one in time (and the planner's greedy
// passes, policies/plan_greedy.cpp, the lowest: the first fit).
//
// The question, for a buffer living over [s, e] with `size` bytes: let U be the union of the
// chunks [lo, hi) of committed buffers whose [start, end] overlaps [s, e]; among the maximal free
// intervals ("gaps") of [0, ∞) \ U, which is the smallest of length ≥ size (lowest on ties), or
// where does U end. XLA's HeapSimulator (and the plan's oracle, static_heap.cpp) lists every
// overlapping buffer, sorts them by offset and scans: O(k log k) for k overlapping buffers, and k
// is the number of buffers live at once (tens of thousands in a large program).
//
// RunList — a union of intervals as sorted runs (disjoint, not touching), split into blocks of a
// few hundred runs, each block knowing a bound on the gaps before its runs. Insert merges, in
// O(block + log); next_fitting(p, size) — the first gap of length ≥ size that ends after p — skips
// whole blocks whose bound is smaller, so gaps too small for the buffer (the slivers a best fit
// leaves) are passed over in bulk. The list only grows, so every gap it has lies inside a gap it
// had: a block's bound stays true through inserts, merges and splits without looking at its runs
// (only a run appended above every other opens a gap, and raises the last block's bound), and a
// search that walks a whole block without a fit makes it exact. (Finding the exact largest again
// after every change cost, in a many-live plan, as many reads as the searches themselves.)
//
// BusyIndex — time is cut into blocks of `block` consecutive distinct instants (the buffers'
// start and end times, ranked; static-heap lets the index choose the length from the mean
// lifetime, block_for below); a segment tree over the blocks holds, at each node, the RunList
// of every committed chunk whose interval meets one of the node's blocks. For a query whose
// interval contains whole blocks, U is exactly
//     the union of the lists of the canonical nodes of those inner blocks (every chunk there
//       meets an inner block, hence [s, e]; every chunk meeting an inner block is in one), and
//     the chunks meeting [s, e] but no inner block: those that end in the part of [s, e] before
//       the first inner block, or start in the part after the last one (looked up by end and by
//       start: at most `block` instants each side) — one more RunList, built per query.
// A query that contains no whole block (a short lifetime, within two blocks) still overlaps
// every chunk live at its start — tens of thousands when many live — so each block also keeps a
// cover list: the chunks whose interval holds every instant of the block. With B the block of
// s, U is exactly
//     cover(B) (each such chunk holds s), and
//     the chunks overlapping [s, e] that do not cover B: they start after B's first instant (and
//       at most at e) or end before its last (and at least at s) — at most three blocks of
//       instants, looked up by start and by end as above: the per-query RunList.
// The cover lists have a budget of their own (as below); past it they are dropped until the
// blocks next coarsen, and such queries are left to the caller (best_fit says so), which lists
// the overlapping buffers as the oracle does.
//
// Gap search over K lists L_1..L_K with U = ∪ L_k: a gap of U of length ≥ size lies inside a gap of
// every list, each of length ≥ size; so with F_k the union of L_k's gaps of length ≥ size, the
// gaps of U that fit are exactly the maximal intervals of ∩ F_k of length ≥ size (such an
// interval is free in U; a larger free interval around it would lie in fitting gaps of every
// list, so in ∩ F_k). A leapfrog walks ∩ F_k in offset order, each list answering next_fitting;
// an exact fit ends the search (nothing smaller fits, nothing lower ties); a first fit ends at the
// first interval that fits. The last interval of ∩ F_k is [end of U, ∞). Cost per query:
// O(K · (fitting intervals + 1) · log) plus the edge buffers, instead of O(k log k);
// K ≤ 2 log(blocks) + 1 (2 for a short query). Commit: one insert
// into each node meeting the buffer's blocks and each cover list of a block it holds,
// O(duration / block + log blocks).
//
// Memory: where chunks merge into runs (equal or rounded sizes, a packed heap) the lists stay
// small; where they do not (arbitrary sizes leave slivers between neighbours), each chunk would
// stay a run in every node it meets, about 2 · duration / block of them. So the index holds at
// most kRunsPerInterval runs per interval (128 bytes) in its tree, and as many in its cover
// lists. Past that (the tree's) it coarsens: blocks twice as long, each chunk in about half as
// many nodes — the tree loses its leaf level (every node above covers the same instants, so its
// list stands) and the cover lists are filled again — until the runs fit the budget; the answers do not depend on the
// block length (only which queries hold a whole block, and how many edge buffers they collect). Only when fewer than
// kMinBlocks blocks would remain does it give up for the rest of the plan, free its lists, and leave the caller to scan
// — memory stays O(buffers) either way. Coarsening rather than giving up is what keeps the many-live pattern (tens of
// thousands live, arbitrary sizes) on the index: at 200k events the 512-instant blocks exceed the budget within the
// first sixth of the plan, 2048-instant ones by the middle, 4096-instant ones do not. The budget is a speed choice
// too: a tighter one (8 runs rather than 16) costs each query more edge chunks but keeps the lists small enough to
// stay in cache — the many-live spatial plan at 200k took 17 % less time with it (4 runs were no faster; 2 made the
// 50k run twice as slow).
//
// What a best fit here costs most is the walk itself: every gap of U that fits, in each list U
// is cut into, until an exact fit. On the bench's many-live pattern (30 k live, log-uniform sizes)
// that is 64 % of a temporal plan's time at 200 k events (a profile), and the calls per buffer grow with the
// buffers live at once (1,105 at 50 k events, 2,412 at 200 k), each slower once the lists outgrow
// the cache: 4x the events cost that pattern 7.8x (issue 50 item 2, scripts/bench --scaling). Two
// exact alternatives were measured on that shape (2026-12-06) and not taken. A segment tree over the
// instants whose nodes keep the chunks they hold whole (at the chunk's canonical nodes) and the
// chunks with an endpoint in them (at every node above each endpoint), which needs no time blocks
// and no edge lookups, took 2.8x (spatial) and 4.3x (temporal) as long at 50 k events: a query's U
// comes from the covers of every node above its canonical ones and their endpoint lists, more lists
// and each nearly as cut up as U. In the temporal order every committed buffer lives at least as long
// as the one placed, so a buffer it overlaps holds its start or its end and U is two cover lists
// and their edges; their fitting gaps interleave, and it took 1.8x as long. A budget of 12 runs per
// interval rather than 8 (above) keeps the temporal plan at 800 k events from doubling its blocks
// (edge instants per buffer 4,777 -> 2,982) but was no faster side by side (load 6-8: 291 s, 296 s).
// Nor is the walk a matter of the tree's depth: blocks 0.5x, 1x and 2x block_for's length planned
// that pattern at 200 k events within 6 % of one another (temporal 9.2-9.5 s, spatial 11.9-12.6 s
// of CPU, 2026-12-07, load 5-7), 4x 1.2-1.4x slower. What grows from 50 k to 200 k events there is
// the workload: its mean lifetime (60 k events) is longer than a 50 k trace, so 4x the events also
// means more buffers live at each placement and more fitting gaps each; the same sizes with 3 k
// live (a 50 k trace spans eight mean lifetimes) planned 4.4x (temporal) and 4.6x (spatial) as long
// for 4x the events (scripts/bench's header).
//
// Empty chunks (lo == hi, only where offsets saturate at kTooLarge) are not indexed; the caller
// drops the index once one exists (an empty chunk splits a gap in the scan, not in a union).
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

// Sorts chunks by their low offset lo(c) (the order of equal offsets matters neither to a gap
// search nor to a union): a least-significant-digit radix sort for the hundreds or thousands of
// chunks a buffer overlaps when many live at once (11-bit digits, over the bits in which the
// offsets differ only: equal sizes give offsets that share their low bits), std::sort below that.
// `tmp` is scratch space, reused between calls.
template <class T, class Lo>
void sort_by_offset(std::vector<T>& v, std::vector<T>& tmp, Lo lo) {
  if (v.size() < 512) {
    std::sort(v.begin(), v.end(), [&](const T& a, const T& b) { return lo(a) < lo(b); });
    return;
  }
  Bytes differ = 0;
  for (const T& c : v) differ |= lo(c) ^ lo(v.front());
  if (differ == 0) return;
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t(1) << kBits;
  const int low = std::countr_zero(differ), high = 64 - std::countl_zero(differ);
  tmp.resize(v.size());
  for (int shift = low; shift < high; shift += kBits) {
    std::array<size_t, kBuckets + 1> count{};
    for (const T& c : v) ++count[((lo(c) >> shift) & (kBuckets - 1)) + 1];
    for (size_t b = 1; b <= kBuckets; ++b) count[b] += count[b - 1];
    for (const T& c : v) tmp[count[(lo(c) >> shift) & (kBuckets - 1)]++] = c;
    v.swap(tmp);
  }
}

class RunList {
 public:
  static constexpr Bytes kEnd = kTooLarge;  // the end of the gap above the last run ("∞")
  struct Run {
    Bytes lo, hi;  // [lo, hi), lo < hi
  };
  struct Gap {
    Bytes lo, hi;  // [lo, hi); hi == kEnd for the gap above every run
  };

  bool empty() const { return blocks_.empty(); }
  size_t size() const { return size_; }
  // Makes [lo, hi) (lo < hi) part of the union.
  void insert(Bytes lo, Bytes hi) {
    // The first run that ends at or after lo (touching counts: runs never touch).
    size_t b = static_cast<size_t>(std::lower_bound(last_hi_.begin(), last_hi_.end(), lo) - last_hi_.begin());
    if (b == blocks_.size()) {  // above every run (or none): a new gap below it
      if (blocks_.empty()) add_block(0, {}, 0);
      b = blocks_.size() - 1;
      const Bytes below = blocks_[b].runs.empty() ? 0 : last_hi_[b];  // the top run's end (none yet: 0)
      blocks_[b].gap_bound = std::max(blocks_[b].gap_bound, lo - below);
      blocks_[b].runs.push_back({lo, hi});
      ++size_;
      changed(b);
      split(b);
      return;
    }
    auto& runs = blocks_[b].runs;
    size_t j = static_cast<size_t>(
        std::lower_bound(runs.begin(), runs.end(), lo, [](const Run& r, Bytes v) { return r.hi < v; }) - runs.begin());
    if (runs[j].lo > hi) {  // a new run before run j
      runs.insert(runs.begin() + static_cast<std::ptrdiff_t>(j), Run{lo, hi});
      ++size_;
      changed(b);
      split(b);
      return;
    }
    // Merge run j and every later run that starts at or before the merged end.
    Run m{std::min(lo, runs[j].lo), std::max(hi, runs[j].hi)};
    size_t k = j + 1;
    while (k < runs.size() && runs[k].lo <= m.hi) m.hi = std::max(m.hi, runs[k++].hi);
    bool reached_end = k == runs.size();
    runs[j] = m;
    runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(j + 1), runs.begin() + static_cast<std::ptrdiff_t>(k));
    size_ -= k - j - 1;
    // It may reach into the next blocks: their runs that start at or before its end join it.
    while (reached_end && b + 1 < blocks_.size()) {
      auto& next = blocks_[b + 1].runs;
      size_t d = 0;
      while (d < next.size() && next[d].lo <= runs[j].hi) runs[j].hi = std::max(runs[j].hi, next[d++].hi);
      next.erase(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(d));
      size_ -= d;
      if (!next.empty()) {
        changed(b + 1);
        break;
      }
      blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(b + 1));
      last_hi_.erase(last_hi_.begin() + static_cast<std::ptrdiff_t>(b + 1));
    }
    changed(b);
  }

  // Makes the list the union of `runs`, which are sorted by lo (they may overlap or touch): in one
  // pass, re-using the blocks' storage (a list rebuilt for every query allocates once).
  void assign_sorted(const std::vector<Run>& runs) {
    size_t nb = 0;
    auto block_for_next = [&]() -> std::vector<Run>& {
      if (nb == blocks_.size()) {
        blocks_.emplace_back();
        last_hi_.push_back(0);
      }
      blocks_[nb].runs.clear();
      blocks_[nb].gap_bound = kEnd;  // found by the first search that walks the block
      return blocks_[nb++].runs;
    };
    size_ = 0;
    std::vector<Run>* cur = nullptr;
    for (const Run& r : runs) {
      if (cur && r.lo <= cur->back().hi) {
        cur->back().hi = std::max(cur->back().hi, r.hi);
        continue;
      }
      if (!cur || cur->size() == kBlockRuns) {
        if (cur) last_hi_[nb - 1] = cur->back().hi;
        cur = &block_for_next();
      }
      cur->push_back(r);
      ++size_;
    }
    if (cur) last_hi_[nb - 1] = cur->back().hi;
    blocks_.resize(nb);
    last_hi_.resize(nb);
  }

  // Where a search through the list stands (offsets only grow within one search).
  struct Cursor {
    size_t block = 0, run = 0;
    const Run* at = nullptr;   // blocks_[block].runs[run] after a call that found a finite gap,
    const Run* end = nullptr;  // and the end of that block's runs (the list does not change during a search)
  };
  // Asks the memory a search from cursor c reads first to be fetched (several lists' cursors are
  // fetched at once before any of them is read: their cache misses overlap).
  void prefetch(const Cursor& c) const {
    if (!c.at) return;
    __builtin_prefetch(c.at + 1);
    __builtin_prefetch(&last_hi_[c.block]);
  }
  // The first gap that ends after p and is at least `size` long (the gap above the last run
  // always is). Pre: p never decreases between calls with the same cursor.
  Gap next_fitting(Bytes p, Bytes size, Cursor& c) const {
    // Mostly p has moved a run or two past the cursor's run, and a gap that fits follows in the
    // same block: found from the cursor's pointers alone, without the block's summaries.
    if (c.at && c.at->lo <= p) {
      const Run* r = c.at + 1;
      for (const Run* stop = std::min(c.end, r + 4); r < stop && r->lo <= p;) ++r;
      if (r < c.end && r->lo > p) {
        for (; r < c.end; ++r)
          if (r->lo - (r - 1)->hi >= size) {
            c.run += static_cast<size_t>(r - c.at);
            c.at = r;
            return {(r - 1)->hi, r->lo};
          }
        c = {c.block + 1, 0, nullptr, nullptr};  // none left in this block: on from the next
      }
    }
    // The first run with lo > p (the gap before it ends after p): in the first block ending
    // after p. Both searches gallop from the cursor: between calls p mostly moves a few runs on.
    if (c.block < blocks_.size() && last_hi_[c.block] <= p) {
      c.block = gallop(last_hi_.data(), c.block + 1, last_hi_.size(), [p](Bytes hi) { return hi <= p; });
      c.run = 0;
    }
    if (c.block < blocks_.size()) {
      const auto& runs = blocks_[c.block].runs;
      if (c.run == 0)  // a block the search enters: its lines are fetched at once, not one gallop step after another
        for (size_t j = 0; j < runs.size(); j += 64 / sizeof(Run)) __builtin_prefetch(runs.data() + j);
      c.run = gallop(runs.data(), c.run, runs.size(), [p](const Run& r) { return r.lo <= p; });
      if (c.run == runs.size()) {  // p lies in the block's last run
        ++c.block;
        c.run = 0;
      }
    }
    // From there, the first gap of at least `size`.
    for (size_t b = c.block, j = c.run; b < blocks_.size(); ++b, j = 0) {
      const Block& blk = blocks_[b];
      if (blk.gap_bound < size) continue;
      const bool whole = j == 0;
      Bytes largest = 0;
      for (; j < blk.runs.size(); ++j) {
        Bytes before = gap_start(b, j), gap = blk.runs[j].lo - before;
        if (gap >= size) {
          c = {b, j, &blk.runs[j], blk.runs.data() + blk.runs.size()};  // the next call's p is at or past this run
          // A search mostly leaves a block for the next one: its first runs are fetched now.
          if (b + 1 < blocks_.size()) __builtin_prefetch(blocks_[b + 1].runs.data());
          return {before, blk.runs[j].lo};
        }
        largest = std::max(largest, gap);
      }
      if (whole) blk.gap_bound = largest;  // every gap seen: the bound is exact now
    }
    c = {blocks_.size(), 0, nullptr, nullptr};
    return {blocks_.empty() ? 0 : last_hi_.back(), kEnd};
  }

  // Every run in order (tests and checks).
  std::vector<Run> all() const {
    std::vector<Run> v;
    for (const auto& b : blocks_) v.insert(v.end(), b.runs.begin(), b.runs.end());
    return v;
  }

 private:
  // A block splits in two above 2 × this. Searches cross fewer blocks (each crossing a likely cache miss) when blocks
  // are long; inserts move more runs: on the bench's many-live plan (200k events) 128 took 15 % less time than 32, with
  // equal and churn no slower.
  static constexpr size_t kBlockRuns = 128;
  // The first index in [from, to) where `before` is false (it holds on a prefix of the range):
  // steps that double from `from` until one lands past the prefix, then a binary search inside
  // the last step — O(log distance) rather than O(log size).
  template <class T, class Before>
  static size_t gallop(const T* v, size_t from, size_t to, Before before) {
    size_t lo = from;
    for (size_t step = 1; lo < to && before(v[lo]); step *= 2) {
      size_t next = lo + step;
      if (next < to && before(v[next])) {
        lo = next;
        continue;
      }
      size_t hi = std::min(next, to);  // v[lo] is before, v[hi] (if any) is not
      ++lo;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (before(v[mid]))
          lo = mid + 1;
        else
          hi = mid;
      }
      return lo;
    }
    return lo;
  }
  struct Block {
    std::vector<Run> runs;        // never empty (but while being filled)
    mutable Bytes gap_bound = 0;  // no gap before one of these runs is longer (see the top)
  };
  Bytes gap_start(size_t b, size_t j) const {
    if (j > 0) return blocks_[b].runs[j - 1].hi;
    return b > 0 ? last_hi_[b - 1] : 0;
  }
  void add_block(size_t at, std::vector<Run> runs, Bytes gap_bound) {
    blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(at), Block{std::move(runs), gap_bound});
    last_hi_.insert(last_hi_.begin() + static_cast<std::ptrdiff_t>(at), 0);
  }
  // Block b's runs changed: its last end follows (the gaps only shrank: the bounds stand).
  void changed(size_t b) { last_hi_[b] = blocks_[b].runs.back().hi; }
  void split(size_t b) {
    if (blocks_[b].runs.size() <= 2 * kBlockRuns) return;
    std::vector<Run> tail(blocks_[b].runs.begin() + kBlockRuns, blocks_[b].runs.end());
    blocks_[b].runs.resize(kBlockRuns);
    add_block(b + 1, std::move(tail), blocks_[b].gap_bound);
    changed(b);
    changed(b + 1);
  }

  std::vector<Block> blocks_;
  std::vector<Bytes> last_hi_;  // each block's last run's end (searched without touching the blocks)
  size_t size_ = 0;             // runs
};

class BusyIndex {
 public:
  // `block` for a length chosen from the intervals (see block_for).
  static constexpr size_t kAutoBlock = 0;
  // Interval i is [starts[i], ends[i]] (closed, starts[i] ≤ ends[i]); `block` instants per time block.
  BusyIndex(const std::vector<std::uint64_t>& starts, const std::vector<std::uint64_t>& ends, size_t block)
      : block_(std::max<size_t>(block, 1)), n_(starts.size()) {
    std::vector<std::uint64_t> times(starts);
    times.insert(times.end(), ends.begin(), ends.end());
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    auto rank = [&](std::uint64_t t) {
      return static_cast<std::uint32_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
    };
    start_.resize(n_);
    end_.resize(n_);
    for (size_t i = 0; i < n_; ++i) {
      start_[i] = rank(starts[i]);
      end_[i] = rank(ends[i]);
    }
    instants_ = std::max<size_t>(times.size(), 1);
    if (block == kAutoBlock) block_ = edge_per_ = block_for(start_, end_);
    by_start_ = sorted_by(start_, end_, at_start_, instants_);
    by_end_ = sorted_by(end_, start_, at_end_, instants_);
    make_lists();
    lo_.assign(n_, 0);
    hi_.assign(n_, 0);
    committed_.assign(n_, 0);
  }

  // Commits interval i with its chunk [lo, hi) (lo < hi): into the list of every node that
  // meets its blocks; over the memory budget, coarser blocks (see the top) or none.
  void commit(size_t i, Bytes lo, Bytes hi) {
    committed_[i] = 1;
    lo_[i] = lo;
    hi_[i] = hi;
    for (Endpoint* p : {&by_start_.at[at_start_[i]], &by_end_.at[at_end_[i]]}) {
      p->lo = lo;
      p->hi = hi;
    }
    if (!enabled_) return;
    insert_tree(i);
    insert_cover(i);
    while (runs_ > kRunsPerInterval * n_ + 64 * lists_.size()) {
      if (instants_ / (2 * block_) < kMinBlocks) {
        enabled_ = false;
        std::vector<RunList>().swap(lists_);
        std::vector<RunList>().swap(cover_);
        return;
      }
      block_ *= 2;
      ++coarsened_;
      // Every node above the leaves covers the same instants in blocks twice as long, so its list
      // stands: the leaf level goes and the one above it becomes the leaves. The cover lists are
      // found again (a block's is not the union of its halves').
      for (size_t node = leaves_; node < 2 * leaves_; ++node) runs_ -= lists_[node].size();
      lists_.resize(leaves_);
      leaves_ /= 2;
      make_covers();
      for (size_t j = 0; j < n_; ++j)
        if (committed_[j]) insert_cover(j);
    }
  }
  size_t coarsened() const { return coarsened_; }  // times the blocks doubled
  // The work of the last best_fit that could say: the edge instants it looked up and the steps
  // its lists took (plan_steps counts these).
  std::uint64_t last_work() const { return work_; }

  // The best fit for interval i: the lowest offset of the smallest gap of at least `size`, or
  // U's end when no finite gap fits. False when the index cannot say: it is not enabled, or the
  // interval holds no whole time block and the cover lists are over their budget.
  bool best_fit(size_t i, Bytes size, Bytes* offset) { return fit(i, size, false, offset); }
  // The first fit: the lowest offset of the lowest such gap (the same walk, ended at its first fit).
  bool first_fit(size_t i, Bytes size, Bytes* offset) { return fit(i, size, true, offset); }

 private:
  bool fit(size_t i, Bytes size, bool first, Bytes* offset) {
    if (!enabled_) return false;
    const size_t s = start_[i], e = end_[i];
    size_t f = (s + block_ - 1) / block_, past = (e + 1) / block_;
    used_.clear();
    edge_.clear();
    looked_up_ = 0;
    auto any = [](size_t) { return true; };
    if (past == 0 || f > past - 1) {
      // No whole block: U is the chunks covering s's block B (its cover list) and those that
      // overlap [s, e] without covering B, which start after B's first instant or end before its
      // last — within the two blocks around [s, e].
      if (!covers_) return false;
      size_t b = s / block_;
      if (!cover_[b].empty()) used_.push_back(&cover_[b]);
      collect(by_start_, b * block_ + 1, e + 1, edge_, [&](size_t end) { return end >= s; });
      collect(by_end_, s, last_instant(b), edge_, [&](size_t start) { return start <= e; });
    } else {
      size_t l = past - 1;
      canonical(f, l, [&](size_t node) {
        if (!lists_[node].empty()) used_.push_back(&lists_[node]);
      });
      // Chunks that meet [s, e] but no inner block: ending before the first inner block, or
      // starting after the last one.
      collect(by_end_, s, f * block_, edge_, any);
      collect(by_start_, (l + 1) * block_, e + 1, edge_, any);
    }
    sort_by_offset(edge_, edge_scratch_, [](const RunList::Run& r) { return r.lo; });
    edge_list_.assign_sorted(edge_);
    if (!edge_list_.empty()) used_.push_back(&edge_list_);
    work_ = 0;
    *offset = leapfrog(size, first);
    work_ += looked_up_ * kStepBlock / edge_per_;
    return true;
  }

 private:
  // The block length for intervals of these ranks: a commit inserts into about 3 · duration / block
  // lists, a query collects the edge chunks of up to two blocks each side and sorts them, so the
  // sum of both over a plan, n · (duration / block + block), is least near block = √duration.
  // Long lifetimes (many live at once) thus get longer blocks, and a plan's cost grows with
  // √(mean duration) instead of with the mean duration: the bench's equal pattern (20 k live)
  // took 0.66 s and 5.3 s at 50 k and 200 k events with 512-instant blocks (mean duration 18.6 k
  // and 32.7 k instants), 0.43 s and 2.45 s with these (1,635 and 2,170; blocks of 1 k-4 k were
  // within 10 % of that at 200 k, of 8 k 1.9x slower). Short lifetimes get short blocks, down to
  // kMinBlock: the churn pattern (200 live, mean duration 400: blocks of 240) planned its 200 k and
  // 800 k events in 2.1 s and 10.2 s user with them, 2.6 s and 13.9 s with 512-instant blocks (each
  // query collected three blocks of edge instants around a lifetime shorter than one).
  static size_t block_for(const std::vector<std::uint32_t>& start, const std::vector<std::uint32_t>& end) {
    if (start.empty()) return kMinBlock;
    double sum = 0;
    for (size_t i = 0; i < start.size(); ++i) sum += end[i] - start[i];
    return std::max(kMinBlock, static_cast<size_t>(12 * std::sqrt(sum / static_cast<double>(start.size()))));
  }
  static constexpr size_t kMinBlock = 128;
  static constexpr size_t kStepBlock = 512;      // the block length plan steps are counted on (last_work)
  static constexpr size_t kRunsPerInterval = 8;  // the memory bound (see the top)
  static constexpr size_t kMinBlocks = 8;        // no coarser than this many blocks: give up instead
  // Empty lists for the current block length.
  void make_lists() {
    size_t blocks = (instants_ + block_ - 1) / block_;
    leaves_ = 1;
    while (leaves_ < blocks) leaves_ *= 2;
    std::vector<RunList>(2 * leaves_).swap(lists_);
    runs_ = 0;
    make_covers();
  }
  // Empty cover lists, one per block.
  void make_covers() {
    std::vector<RunList>((instants_ + block_ - 1) / block_).swap(cover_);
    cover_runs_ = 0;
    covers_ = true;
  }
  // Committed interval i's chunk into the list of every node meeting its blocks (and below, of
  // every block it holds whole).
  void insert_tree(size_t i) {
    size_t p = start_[i] / block_ + leaves_, q = end_[i] / block_ + leaves_;
    for (;; p /= 2, q /= 2) {
      for (size_t node = p; node <= q; ++node) {
        runs_ -= lists_[node].size();
        lists_[node].insert(lo_[i], hi_[i]);
        runs_ += lists_[node].size();
      }
      if (p == 1) break;
    }
  }
  void insert_cover(size_t i) {
    if (!covers_) return;
    // The cover list of every block it covers whole; over their own budget, none for this block length.
    for (size_t b = (start_[i] + block_ - 1) / block_; b < cover_.size() && last_instant(b) <= end_[i]; ++b) {
      cover_runs_ -= cover_[b].size();
      cover_[b].insert(lo_[i], hi_[i]);
      cover_runs_ += cover_[b].size();
    }
    if (cover_runs_ > kRunsPerInterval * n_ + 64 * cover_.size()) {
      covers_ = false;
      std::vector<RunList>().swap(cover_);
    }
  }
  size_t last_instant(size_t b) const { return std::min((b + 1) * block_, instants_) - 1; }
  // Calls f(node) for the canonical nodes of the blocks [first, last].
  template <class F>
  void canonical(size_t first, size_t last, F f) {
    for (size_t a = first + leaves_, b = last + leaves_ + 1; a < b; a /= 2, b /= 2) {
      if (a & 1) f(a++);
      if (b & 1) f(--b);
    }
  }
  // One endpoint of an interval, in a list of them by `key` (that endpoint's rank): the other's
  // rank and the chunk, lo == hi until committed — what a lookup reads, in sequential memory.
  struct Endpoint {
    std::uint32_t key, other;
    Bytes lo, hi;
  };
  // The intervals' endpoints by key, and where the first with each key is (first[k]: the first
  // whose key is ≥ k, for k ≤ the number of instants): a lookup by instant reads one entry, not
  // a binary search's dozen scattered ones.
  struct Endpoints {
    std::vector<Endpoint> at;
    std::vector<std::uint32_t> first;
  };
  // at_of[i]: where interval i's endpoint is.
  static Endpoints sorted_by(const std::vector<std::uint32_t>& key, const std::vector<std::uint32_t>& other,
                             std::vector<std::uint32_t>& at_of, size_t instants) {
    std::vector<std::uint32_t> v(key.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint32_t>(i);
    std::stable_sort(v.begin(), v.end(), [&](std::uint32_t a, std::uint32_t b) { return key[a] < key[b]; });
    Endpoints out;
    out.at.resize(v.size());
    out.first.assign(instants + 1, static_cast<std::uint32_t>(v.size()));
    at_of.resize(v.size());
    for (size_t r = v.size(); r-- > 0;) {
      out.at[r] = {key[v[r]], other[v[r]], 0, 0};
      out.first[key[v[r]]] = static_cast<std::uint32_t>(r);
      at_of[v[r]] = static_cast<std::uint32_t>(r);
    }
    for (size_t k = instants; k-- > 0;) out.first[k] = std::min(out.first[k], out.first[k + 1]);
    return out;
  }
  // The chunks of committed intervals whose endpoint's key lies in [from, to) and whose other
  // endpoint's rank `keep` accepts. Every endpoint in range is written and the end moves on only
  // past those taken: whether one is taken is a coin toss to a branch predictor.
  template <class Keep>
  void collect(const Endpoints& by, size_t from, size_t to, std::vector<RunList::Run>& out, Keep keep) {
    if (to <= from) return;
    looked_up_ += to - from;
    const Endpoint* p = by.at.data() + by.first[std::min(from, instants_)];
    const Endpoint* end = by.at.data() + by.first[std::min(to, instants_)];
    size_t n = out.size();
    out.resize(n + static_cast<size_t>(end - p));
    RunList::Run* o = out.data() + n;
    for (; p != end; ++p) {
      *o = {p->lo, p->hi};
      o += static_cast<size_t>(p->hi > p->lo) & static_cast<size_t>(keep(p->other));
    }
    out.resize(static_cast<size_t>(o - out.data()));
  }
  Bytes leapfrog(Bytes size, bool first) {
    size_t k = used_.size();
    if (k == 0) return 0;
    cursors_.assign(k, {});
    gaps_.assign(k, {0, 0});
    Bytes p = 0, best_lo = 0, best_size = kTooLarge;
    bool found = false;
    for (;;) {
      // p into every F_k: each list's current fitting gap must hold p.
      for (size_t ok = 0, j = 0; ok < k; j = j + 1 == k ? 0 : j + 1) {
        RunList::Gap& g = gaps_[j];
        if (g.hi <= p) {
          g = used_[j]->next_fitting(p, size, cursors_[j]);
          ++work_;
        }
        if (g.lo > p) {
          p = g.lo;
          ok = 1;
        } else {
          ++ok;
        }
      }
      Bytes q = RunList::kEnd;
      for (const auto& g : gaps_) q = std::min(q, g.hi);
      if (q == RunList::kEnd) break;  // [end of U, ∞)
      if (first && q - p >= size) return p;
      if (q - p >= size && q - p < best_size) {
        best_size = q - p;
        best_lo = p;
        found = true;
        if (best_size == size) return best_lo;  // nothing smaller fits, nothing lower ties
      }
      p = q;
      for (size_t j = 0; j < k; ++j)
        if (gaps_[j].hi <= p) used_[j]->prefetch(cursors_[j]);
    }
    return found ? best_lo : p;
  }

  size_t block_, n_, leaves_ = 1;  // block_: instants per time block (doubles as the index coarsens)
  size_t instants_ = 1;            // distinct instants
  size_t coarsened_ = 0;
  std::vector<std::uint32_t> start_, end_;        // ranks of each interval's start and end
  Endpoints by_start_, by_end_;                   // the intervals' starts / ends, by rank
  std::vector<std::uint32_t> at_start_, at_end_;  // interval → its place in by_start_ / by_end_
  std::vector<RunList> lists_;  // segment tree over time blocks: the chunks that meet the node's blocks
  std::vector<RunList> cover_;  // per block: the chunks whose interval holds every instant of the block
  size_t cover_runs_ = 0;       // in all cover lists
  bool covers_ = true;          // cover_ within its budget (for the current block length)
  size_t runs_ = 0;             // in all lists
  bool enabled_ = true;
  std::vector<Bytes> lo_, hi_;  // committed chunks
  std::vector<char> committed_;
  // Per query (reused):
  std::vector<RunList::Run> edge_, edge_scratch_;
  RunList edge_list_;
  std::vector<const RunList*> used_;
  std::vector<RunList::Cursor> cursors_;
  std::vector<RunList::Gap> gaps_;
  std::uint64_t work_ = 0, looked_up_ = 0;
  // last_work() counts an edge instant as kStepBlock / edge_per_ of a step: with a block length of
  // its own choosing, the index looks up more edge instants per query where blocks are longer (a
  // sequential read each) and inserts into fewer lists (not counted), fewer where shorter, so a
  // plan's steps stay on the scale the plan_steps limit was set on (512-instant blocks). Given a
  // block length, one step each.
  size_t edge_per_ = kStepBlock;
};

}  // namespace fragsim

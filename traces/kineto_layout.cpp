#include "traces/kineto_layout.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "sim/base/torch_sizes.h"
#include "traces/range_set.h"

namespace fragsim {

namespace {

constexpr Bytes kMiB = Bytes{1} << 20;
constexpr Bytes kSmallSize = kMiB;             // blocks of at most this are the small pool's
constexpr Bytes kSegmentUnit = 2 * kMiB;       // every segment is a multiple of it, small ones exactly it
constexpr Bytes kLargeBuffer = 20 * kMiB;      // the segment a large request under 10 MiB obtains
constexpr Bytes kMinLargeSegment = 10 * kMiB;  // larger requests obtain their size rounded up to 2 MiB
constexpr Bytes kMinBlock = 512;
// Events each of the layout's two searches may replay (a replay of n events costs 2n: free-running,
// then following the recording), a few seconds at most; and replays, for a short window (a step
// tries every change its misses suggest: a few hundred replays in a window of the T4 ResNet-50).
constexpr std::uint64_t kReplayBudget = 20'000'000;
constexpr std::uint64_t kMaxReplays = 2'000;
// The free bytes the search tries next to a block grow by this factor (see grow in candidates).
constexpr Bytes kGrowStep = 4;
// Addresses a state reproduces: free-running, then with every allocation put where it was recorded.
using Score = std::pair<std::uint64_t, std::uint64_t>;

std::uint64_t down(std::uint64_t x, Bytes a) { return x / a * a; }
std::uint64_t up(std::uint64_t x, Bytes a) { return (x + a - 1) / a * a; }

// The inference's model of one stream of the caching allocator: segments cut into blocks, best fit
// on (size, address) per pool, the low end of a free block handed out, the rest split off when
// the pool's rule allows (small: ≥ 512 B left; large: more than 1 MiB left), free neighbours
// merged within their segment.
class Replay {
 public:
  void add_segment(std::uint64_t base, Bytes size, bool small) {
    auto s = static_cast<std::int32_t>(small_.size());
    small_.push_back(small);
    bases_.push_back(base);
    blocks_[base] = {size, false, s};
    free_[small].insert({size, base});
  }
  // A segment the recording obtained that the model did not (it found a free block instead).
  void ensure_segment(std::uint64_t base, Bytes size, bool small) {
    if (!overlaps(base, size)) add_segment(base, size, small);
  }
  // Marks [at, at + size) in use inside one free block; false when the range is not free.
  bool carve(std::uint64_t at, Bytes size) {
    auto it = containing(at);
    if (it == blocks_.end() || it->second.used || at + size > it->first + it->second.size) return false;
    Block b = it->second;
    std::uint64_t lo = it->first;
    free_[small_[b.seg]].erase({b.size, lo});
    if (at > lo) {
      it->second.size = at - lo;
      free_[small_[b.seg]].insert({at - lo, lo});
    } else {
      blocks_.erase(it);
    }
    blocks_[at] = {size, true, b.seg};
    if (lo + b.size > at + size) insert_free(at + size, lo + b.size - (at + size), b.seg);
    return true;
  }
  // PyTorch's malloc of a block of `size` bytes (Kineto's Bytes: already rounded): the address,
  // or none. A segment obtained just before (the recording's growth) is added first.
  std::optional<std::uint64_t> malloc(Bytes size, std::uint64_t grow_at, Bytes grow) {
    const bool small = size <= kSmallSize;
    auto f = free_[small].lower_bound({size, 0});
    if (f == free_[small].end()) {
      if (!grow || overlaps(grow_at, grow)) return std::nullopt;
      add_segment(grow_at, grow, small);
      f = free_[small].find({grow, grow_at});
    }
    auto [bsize, at] = *f;
    Bytes rest = bsize - size;
    bool split = small ? rest >= kMinBlock : rest > kSmallSize;
    carve(at, split ? size : bsize);
    return at;
  }
  void free(std::uint64_t at) {
    auto it = blocks_.find(at);
    if (it == blocks_.end() || !it->second.used) return;
    std::int32_t seg = it->second.seg;
    std::uint64_t lo = at;
    Bytes size = it->second.size;
    blocks_.erase(it);
    auto next = blocks_.find(lo + size);
    if (next != blocks_.end() && !next->second.used && next->second.seg == seg) {
      free_[small_[seg]].erase({next->second.size, next->first});
      size += next->second.size;
      blocks_.erase(next);
    }
    auto prev = blocks_.lower_bound(lo);
    if (prev != blocks_.begin()) {
      --prev;
      if (!prev->second.used && prev->second.seg == seg && prev->first + prev->second.size == lo) {
        free_[small_[seg]].erase({prev->second.size, prev->first});
        size += prev->second.size;
        lo = prev->first;
        blocks_.erase(prev);
      }
    }
    insert_free(lo, size, seg);
  }
  // empty_cache: every segment that is one free block goes.
  void release() {
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      auto s = it->second.seg;
      auto next = std::next(it);
      bool whole = !it->second.used && it->first == bases_[s] && (next == blocks_.end() || next->second.seg != s);
      if (whole) {
        free_[small_[s]].erase({it->second.size, it->first});
        it = blocks_.erase(it);
      } else {
        it = next;
      }
    }
  }
  struct View {
    std::uint64_t addr = 0;
    Bytes size = 0;
    bool used = false, found = false;
    std::int32_t seg = -1;
  };
  View block_at(std::uint64_t at) const {
    auto it = containing(at);
    if (it == blocks_.end()) return {};
    return {it->first, it->second.size, it->second.used, true, it->second.seg};
  }
  // The free block best fit would hand out for `size` (before any growth).
  View best(Bytes size) const {
    const bool small = size <= kSmallSize;
    auto f = free_[small].lower_bound({size, 0});
    if (f == free_[small].end()) return {};
    return block_at(f->second);
  }

 private:
  struct Block {
    Bytes size = 0;
    bool used = false;
    std::int32_t seg = 0;
  };
  std::map<std::uint64_t, Block>::const_iterator containing(std::uint64_t at) const {
    auto it = blocks_.upper_bound(at);
    if (it == blocks_.begin()) return blocks_.end();
    --it;
    return at < it->first + it->second.size ? it : blocks_.end();
  }
  std::map<std::uint64_t, Block>::iterator containing(std::uint64_t at) {
    auto it = blocks_.upper_bound(at);
    if (it == blocks_.begin()) return blocks_.end();
    --it;
    return at < it->first + it->second.size ? it : blocks_.end();
  }
  bool overlaps(std::uint64_t at, Bytes size) const {
    auto it = blocks_.lower_bound(at);
    if (it != blocks_.end() && it->first < at + size) return true;
    return it != blocks_.begin() && std::prev(it)->first + std::prev(it)->second.size > at;
  }
  void insert_free(std::uint64_t at, Bytes size, std::int32_t seg) {
    blocks_[at] = {size, false, seg};
    free_[small_[seg]].insert({size, at});
  }
  std::map<std::uint64_t, Block> blocks_;
  std::set<std::pair<Bytes, std::uint64_t>> free_[2];  // large [0], small [1]: (size, address)
  std::vector<bool> small_;
  std::vector<std::uint64_t> bases_;
};

// What the search may change (docs: the header comment).
struct Hypothesis {
  std::set<std::uint64_t> bounds;      // segment boundaries inside a large extent
  std::set<std::uint64_t> freed;       // untouched ranges (by start) taken as free, not live
  std::map<std::uint64_t, Bytes> ext;  // segment base → bytes added at its end (free)
  // A freed untouched range (by start) whose first and last bytes are still live: (head, tail).
  std::map<std::uint64_t, std::pair<Bytes, Bytes>> kept;
};

struct Change {
  enum Kind : std::uint8_t { kBound, kFree, kLive, kExtend, kKeepHead, kKeepTail, kFreeHead, kFreeTail } kind;
  std::uint64_t at = 0;
  Bytes bytes = 0;
  bool operator<(const Change& o) const { return std::tie(kind, at, bytes) < std::tie(o.kind, o.at, o.bytes); }
};

// One step of the search: a change, or two that help only together (x's block smaller and the
// block taken instead larger than that), or one change to an untouched range made to every range
// laid out alike (`alike`: their starts).
struct Move {
  Change first;
  std::optional<Change> second;
  std::vector<std::uint64_t> alike;
  Move(Change c, std::optional<Change> then = std::nullopt) : first(c), second(then) {}  // implicit: one change
  bool operator<(const Move& o) const { return std::tie(first, second, alike) < std::tie(o.first, o.second, o.alike); }
};

// A miss of the replay with every allocation put where it was recorded.
struct Miss {
  std::uint64_t x = 0;
  Bytes size = 0;
  Replay::View at_x, chosen;  // the block holding x, and the free block best fit took instead
};

struct Built {
  bool valid = false;
  std::vector<KinetoLayout::Segment> segments;                     // the window's (stream 0)
  std::vector<std::pair<std::uint64_t, std::uint64_t>> untouched;  // [lo, hi) inside them
  std::vector<bool> small;                                         // per segment
  Bytes segment_bytes = 0, untouched_live = 0;
};

class Inference {
 public:
  explicit Inference(std::span<const KinetoMemEvent> ev) : ev_(ev) {
    const KinetoMemEvent& first = ev.front();
    // Total Allocated is after the event: before it, less the block it allocated or plus the one it freed.
    const std::int64_t before = static_cast<std::int64_t>(first.total_allocated) - first.bytes;
    out_.live_before = before > 0 ? static_cast<Bytes>(before) : 0;
    out_.growth.assign(ev.size(), 0);
    out_.release.assign(ev.size(), false);
    Bytes reserved = first.total_reserved;
    RangeSet grown;
    std::map<std::uint64_t, Bytes> segments;        // obtained in the window: base → bytes
    std::unordered_map<std::uint64_t, Bytes> live;  // allocated in the window: address → bytes
    for (size_t i = 0; i < ev.size(); ++i) {
      const KinetoMemEvent& e = ev[i];
      const std::uint64_t x = e.addr.value();
      if (i > 0) {
        if (e.total_reserved > reserved && e.bytes > 0) {
          out_.growth[i] = e.total_reserved - reserved;
        } else if (e.total_reserved < reserved) {
          out_.release[i] = true;
          if (e.bytes > 0) out_.growth[i] = growth_after_release(e, ev[i - 1].total_allocated, segments, live);
        }
        reserved = e.total_reserved;
      }
      if (out_.growth[i]) grown.add(x, x + out_.growth[i]), segments[x] = out_.growth[i];
      const Bytes b = e.bytes > 0 ? static_cast<Bytes>(e.bytes) : static_cast<Bytes>(-e.bytes);
      const bool inside_grown = in(grown, x, x + b);
      if (e.bytes > 0) {
        live[x] = b;
        if (!inside_grown) touched_.push_back({x, x + b, false});
      } else if (!live.erase(x) && !inside_grown && !pre_.count(x)) {
        pre_[x] = b;  // allocated before the window
        out_.freed_in_window += b;
        touched_.push_back({x, x + b, true});
      }
    }
    out_.reserved_before = first.total_reserved - out_.growth[0];
    grown_ = grown;
    for (const auto& t : touched_) {
      (t.hi - t.lo <= kSmallSize ? small_ranges_ : large_ranges_).add(t.lo, t.hi);
      if (t.hi - t.lo > kSmallSize) extents_.add(down(t.lo, kSegmentUnit), up(t.hi, kSegmentUnit));
    }
    for (const auto& [lo, hi] : small_ranges_.ranges())
      for (std::uint64_t w = down(lo, kSegmentUnit); w < hi; w += kSegmentUnit)
        if (!overlaps(extents_, w, w + kSegmentUnit)) windows_.insert(w);
    for (const auto& t : touched_) all_touched_.add(t.lo, t.hi);
    for (size_t i = 0; i < ev.size(); ++i)
      if (ev[i].bytes > 0) ++allocs_;
  }

  // The segment an allocation obtained at the event where Total Reserved fell: the release came
  // first (torch.cuda.empty_cache() just before it, or the allocator's own retry inside this malloc:
  // either frees every cached segment that holds no live block), then the malloc, which obtained a
  // segment when no block of what was left served it. What was left holds the blocks live before the
  // event (`live_before` bytes): with none, nothing was left and the whole of Total Reserved is the
  // new segment. Else a new segment's first block starts at its base, which the driver aligns to
  // 2 MiB (every segment of the real traces is): a block elsewhere, or in a segment of the window
  // that still holds a live block, was served by what survived the release. Otherwise the request's
  // segment (torch::segment_size), when Total Reserved has room for it beside the live blocks.
  static Bytes growth_after_release(const KinetoMemEvent& e, Bytes live_before,
                                    const std::map<std::uint64_t, Bytes>& segments,
                                    const std::unordered_map<std::uint64_t, Bytes>& live) {
    if (live_before == 0) return e.total_reserved;
    const std::uint64_t x = e.addr.value();
    if (x % kSegmentUnit) return 0;
    if (auto s = segments.upper_bound(x); s != segments.begin()) {
      --s;
      const std::uint64_t lo = s->first, hi = lo + s->second;
      if (x < hi && std::any_of(live.begin(), live.end(), [&](const auto& b) { return b.first >= lo && b.first < hi; }))
        return 0;
    }
    const Bytes seg = torch::segment_size(static_cast<Bytes>(e.bytes));
    return e.total_reserved >= live_before + seg ? seg : 0;
  }

  KinetoLayout run() {
    // Two searches: one ranks states by the addresses a free-running replay reproduces first, the
    // other by those of the replay that follows the recording. The second takes steps the first
    // refuses — two changes that help only together, where the first lets the free-running replay
    // drift before the next one puts it right — and the first keeps what the second may give up.
    // The state whose free-running replay reproduces more is kept.
    auto [score, h] = search(false);
    if (score.first < allocs_) {
      auto [score2, h2] = search(true);
      if (score2 > score) std::tie(score, h) = std::make_pair(score2, std::move(h2));
    }
    finish(h, score.first);
    return std::move(out_);
  }

 private:
  // Steepest ascent from the state the window's addresses alone give: every change the misses
  // suggest is tried from the current state, and the best that does better is kept (taking the
  // first that helps gets stuck: a tail freed for one miss is what another, earlier one needed
  // live). `follow_first`: states ranked by the following replay's matches, then the free-running
  // one's (else the other way round). Each search has its own replay budget.
  std::pair<Score, Hypothesis> search(bool follow_first) {
    Hypothesis h;
    auto [score, misses] = evaluate(h);
    const std::uint64_t budget =
        out_.replays + std::clamp<std::uint64_t>(kReplayBudget / (2 * ev_.size() + 1), 4, kMaxReplays);
    auto key = [&](const Score& s) { return follow_first ? Score{s.second, s.first} : s; };
    std::set<Move> tried;  // from the current state
    while (!misses.empty() && out_.replays < budget) {
      std::optional<std::tuple<Score, Hypothesis, std::vector<Miss>>> best;
      auto consider = [&](Hypothesis h2) {
        auto [s2, m2] = evaluate(h2, Bar{follow_first, key(best ? std::get<0>(*best) : score)});
        if (key(s2) > key(score) && (!best || key(s2) > key(std::get<0>(*best))))
          best.emplace(s2, std::move(h2), std::move(m2));
      };
      for (const Miss& m : misses) {
        for (const Move& c : candidates(m, h)) {
          if (tried.count(c)) continue;
          Hypothesis h2 = h;
          if (!apply(c, &h2)) continue;
          tried.insert(c);
          consider(std::move(h2));
          if (out_.replays >= budget) break;
        }
        if (out_.replays >= budget) break;
      }
      // None helps: a change that only moves a miss may help with one that the miss it leaves
      // suggests — best fit taking another block for the same allocation (the block taken made
      // larger, the next one taken larger still: alike blocks and a third), or the allocation
      // placed as recorded and a later one not (a segment made longer, and the one a later request
      // then passes over longer still).
      auto same = [](const Miss& a, const Miss& b) { return a.x == b.x && a.size == b.size; };
      for (size_t i = 0; !best && i < misses.size() && out_.replays < budget; ++i) {
        const Miss& m = misses[i];
        for (const Move& c : candidates(m, h)) {
          Hypothesis h2 = h;
          if (!apply(c, &h2)) continue;
          auto [s2, m2] = evaluate(h2);
          auto next = std::find_if(m2.begin(), m2.end(), [&](const Miss& n) { return same(n, m); });
          if (next == m2.end())
            next = std::find_if(m2.begin(), m2.end(), [&](const Miss& n) {
              return std::none_of(misses.begin(), misses.end(), [&](const Miss& o) { return same(n, o); });
            });
          else if (!next->chosen.found || next->chosen.addr == m.chosen.addr)
            continue;
          if (next == m2.end()) continue;
          for (const Move& c2 : candidates(*next, h2)) {
            Hypothesis h3 = h2;
            if (apply(c2, &h3)) consider(std::move(h3));
            if (out_.replays >= budget) break;
          }
          if (out_.replays >= budget) break;
        }
      }
      if (!best) break;
      std::tie(score, h, misses) = std::move(*best);
      tried.clear();
    }
    return {score, std::move(h)};
  }

  struct Touch {
    std::uint64_t lo, hi;
    bool pre;  // a block live before the window (else free then)
  };
  // Whether [lo, hi) lies inside one range of s; whether it meets any.
  static bool in(const RangeSet& s, std::uint64_t lo, std::uint64_t hi) {
    auto it = s.ranges().upper_bound(lo);
    return it != s.ranges().begin() && std::prev(it)->second >= hi;
  }
  static bool overlaps(const RangeSet& s, std::uint64_t lo, std::uint64_t hi) {
    auto it = s.ranges().lower_bound(hi);
    return it != s.ranges().begin() && std::prev(it)->second > lo;
  }

  // The bytes of the untouched range [lo, hi) that the hypothesis holds live.
  static Bytes live_in(const Hypothesis& h, std::uint64_t lo, std::uint64_t hi) {
    if (!h.freed.count(lo)) return hi - lo;
    auto k = h.kept.find(lo);
    return k == h.kept.end() ? 0 : k->second.first + k->second.second;
  }
  Built build(const Hypothesis& h) const {
    Built b;
    // A boundary may not cut a block of the window.
    for (const auto& t : touched_)
      if (auto it = h.bounds.upper_bound(t.lo); it != h.bounds.end() && *it < t.hi) return b;
    std::vector<std::pair<std::uint64_t, std::pair<Bytes, bool>>> segs;  // base → (size, small)
    for (auto w : windows_) segs.push_back({w, {kSegmentUnit, true}});
    for (const auto& [lo, hi] : extents_.ranges()) {
      std::uint64_t at = lo;
      for (auto it = h.bounds.upper_bound(lo); it != h.bounds.end() && *it < hi; ++it) {
        segs.push_back({at, {*it - at, false}});
        at = *it;
      }
      segs.push_back({at, {hi - at, false}});
    }
    std::sort(segs.begin(), segs.end());
    // A large segment is never under 10 MiB (20 MiB for a request under 10 MiB, else the request
    // rounded up to 2 MiB): a shorter extent lies in a segment that reaches into address space the
    // window never touches, up to 20 MiB, above it when there is room, else below.
    Bytes total = 0;
    for (const auto& [base, v] : segs) total += v.first;
    Bytes slack = out_.reserved_before > total ? out_.reserved_before - total : 0;
    for (size_t i = 0; i < segs.size(); ++i) {
      auto& [base, v] = segs[i];
      if (v.second || v.first >= kMinLargeSegment) continue;
      const std::uint64_t floor = i ? segs[i - 1].first + segs[i - 1].second.first : 0;
      std::uint64_t ceiling = i + 1 < segs.size() ? segs[i + 1].first : UINT64_MAX - kLargeBuffer;
      if (auto g = grown_.ranges().upper_bound(base); g != grown_.ranges().end()) ceiling = std::min(ceiling, g->first);
      Bytes want = std::min(kLargeBuffer - v.first, slack);
      Bytes above = std::min<Bytes>(want, ceiling - (base + v.first));
      Bytes below = std::min<Bytes>(want - above, base - floor);
      if (v.first + above + below < kMinLargeSegment) continue;
      base -= below;
      v.first += above + below;
      slack -= above + below;
    }
    // One still too short for a large segment, with no room to widen, shares a segment with the
    // large extent next to it: the range between them, which the window never touches, is that
    // segment's too (held live, as any untouched range).
    for (size_t i = 0; i + 1 < segs.size();) {
      auto& [base, v] = segs[i];
      const auto& [next, w] = segs[i + 1];
      const bool short_one = (!v.second && v.first < kMinLargeSegment) || (!w.second && w.first < kMinLargeSegment);
      if (!short_one || v.second || w.second || h.bounds.count(next) || overlaps(grown_, base + v.first, next)) {
        ++i;
        continue;
      }
      v.first = next + w.first - base;
      segs.erase(segs.begin() + static_cast<std::ptrdiff_t>(i + 1));
    }
    for (const auto& [base, v] : segs) {
      // A boundary may not leave a large segment too short to be one.
      if (!v.second && v.first < kMinLargeSegment && (h.bounds.count(base) || h.bounds.count(base + v.first))) return b;
      b.segments.push_back({Addr(base), v.first, 0});
      // The pool a replay seeds a segment in is the one its size implies (2 MiB: the small pool's),
      // whatever blocks it holds (a large one, where the window's addresses leave no room for more).
      b.small.push_back(v.first == kSegmentUnit);
      b.segment_bytes += v.first;
    }
    for (size_t i = 0; i < b.segments.size(); ++i) {
      auto& s = b.segments[i];
      const std::uint64_t lo = s.base.value(), hi = lo + s.size;
      std::uint64_t at = lo;
      const auto& rs = all_touched_.ranges();
      auto it = rs.upper_bound(lo);
      if (it != rs.begin()) --it;
      for (; it != rs.end() && it->first < hi; ++it) {
        if (it->second <= lo) continue;
        if (it->first > at) b.untouched.push_back({at, it->first});
        at = std::max(at, it->second);
      }
      if (at < hi) b.untouched.push_back({at, hi});
      if (auto e = h.ext.find(lo); e != h.ext.end()) {
        if (i + 1 < b.segments.size() && hi + e->second > b.segments[i + 1].base.value()) return b;
        if (overlaps(all_touched_, hi, hi + e->second) || overlaps(grown_, hi, hi + e->second)) return b;
        s.size += e->second;
        b.segment_bytes += e->second;
      }
    }
    if (b.segment_bytes > out_.reserved_before) return b;
    for (const auto& [lo, hi] : b.untouched) b.untouched_live += live_in(h, lo, hi);
    b.valid = true;
    return b;
  }

  Replay initial(const Built& b, const Hypothesis& h) const {
    Replay r;
    for (size_t i = 0; i < b.segments.size(); ++i)
      r.add_segment(b.segments[i].base.value(), b.segments[i].size, b.small[i]);
    for (const auto& [x, size] : pre_) r.carve(x, size);
    for (const auto& [lo, hi] : b.untouched) {
      if (!h.freed.count(lo)) {
        r.carve(lo, hi - lo);
      } else if (auto k = h.kept.find(lo); k != h.kept.end()) {
        if (k->second.first) r.carve(lo, k->second.first);
        if (k->second.second) r.carve(hi - k->second.second, k->second.second);
      }
    }
    return r;
  }

  // What a state must beat to be kept: its score, ranked first by the replay that follows the
  // recording (`follow_first`) or by the free-running one.
  struct Bar {
    bool follow_first = false;
    Score key{0, 0};  // (the first ranked, the second)
  };
  // Replays the window from the hypothesis: (free-running matches, matches when every allocation
  // is put where it was recorded), and the misses of the second. With a bar, the replay that ranks
  // first runs first, and a replay stops as soon as the allocations left cannot lift it over the
  // bar (its score is then {0, 0}: the state is not kept, whatever the rest would have given).
  std::pair<Score, std::vector<Miss>> evaluate(const Hypothesis& h, std::optional<Bar> bar = std::nullopt) {
    ++out_.replays;
    Built b = build(h);
    if (!b.valid) return {{0, 0}, {}};
    Score score{0, 0};
    std::vector<Miss> misses;
    const bool follow_first = bar && bar->follow_first;
    for (int pass = 0; pass < 2; ++pass) {
      const int follow = follow_first ? 1 - pass : pass;
      std::uint64_t& matched = follow ? score.second : score.first;
      // The most this pass may reach and still not pass the bar (none: it passes whatever it reaches).
      std::optional<std::uint64_t> under;
      if (bar && pass == 0) under = bar->key.first ? std::optional(bar->key.first - 1) : std::nullopt;
      if (bar && pass == 1 && (follow_first ? score.second : score.first) == bar->key.first) under = bar->key.second;
      std::uint64_t left = allocs_;
      Replay r = initial(b, h);
      std::unordered_map<std::uint64_t, std::uint64_t> at;  // recorded address → the model's
      for (const auto& [x, size] : pre_) at[x] = x;
      for (size_t i = 0; i < ev_.size(); ++i) {
        const KinetoMemEvent& e = ev_[i];
        const std::uint64_t x = e.addr.value();
        if (out_.release[i]) r.release();
        if (e.bytes < 0) {
          if (auto it = at.find(x); it != at.end()) {
            r.free(it->second);
            at.erase(it);
          }
          continue;
        }
        const Bytes size = static_cast<Bytes>(e.bytes);
        if (under && matched + left <= *under) return {{0, 0}, {}};
        --left;
        Miss m{x, size, r.block_at(x), r.best(size)};
        auto got = r.malloc(size, x, out_.growth[i]);
        if (got == x) {
          ++matched;
          at[x] = x;
          continue;
        }
        if (!follow) {
          if (got) at[x] = *got;
          continue;
        }
        if (misses.size() < 64) misses.push_back(m);
        if (got) r.free(*got);
        if (out_.growth[i]) r.ensure_segment(x, out_.growth[i], size <= kSmallSize);
        if (r.carve(x, size)) at[x] = x;
      }
      if (under && matched <= *under) return {{0, 0}, {}};
    }
    return {score, std::move(misses)};
  }

  std::vector<Move> candidates(const Miss& m, const Hypothesis& h) const {
    std::vector<Move> c;
    Built b = build(h);
    if (!b.valid) return c;
    auto untouched_in = [&](std::uint64_t lo, std::uint64_t hi, bool freed, auto&& f) {
      for (const auto& [a, z] : b.untouched)
        if (a >= lo && z <= hi && h.freed.count(a) == (freed ? 1u : 0u)) f(a);
    };
    // The block v larger: an untouched range beside it free, whole or only some bytes next to v
    // (kept in the change: the bytes that stay live) — 512, `want`, or `want` × 4, × 16, ... — or a
    // freed range beside it with `want` fewer of its live bytes next to v. What a request leaves
    // of v is a free block in its turn, which a later request takes unless it is larger than the
    // block that request was given (a 512 B one takes the next 512 B request): how much larger the
    // real block was, only replays tell, so the search tries growing amounts.
    auto grow = [&](const Replay::View& v, Bytes want) {
      std::vector<Change> g;
      const std::uint64_t end = v.addr + v.size;
      for (const auto& [a, z] : b.untouched) {
        if (!h.freed.count(a)) {
          if (a != end && z != v.addr) continue;
          g.push_back({Change::kFree, a, 0});
          const auto kind = a == end ? Change::kFreeHead : Change::kFreeTail;
          if (z - a > kMinBlock) g.push_back({kind, a, z - a - kMinBlock});
          for (Bytes w = want; w > 0 && w < z - a; w *= kGrowStep)
            if (w != kMinBlock) g.push_back({kind, a, z - a - w});
          continue;
        }
        auto k = h.kept.find(a);
        if (k == h.kept.end()) continue;
        const auto [head, tail] = k->second;
        if (tail && z - tail == end) g.push_back({Change::kKeepTail, a, tail > want ? tail - want : 0});
        if (head && a + head == v.addr) g.push_back({Change::kKeepHead, a, head > want ? head - want : 0});
      }
      return g;
    };
    // A freed range that ends at x (or starts where a block ends) keeps its last (first) bytes live.
    auto keep_ending_at = [&](std::uint64_t x) {
      for (const auto& [a, z] : b.untouched)
        if (z == x && h.freed.count(a) && z - a > kMinBlock) c.push_back(Change{Change::kKeepTail, a, kMinBlock});
    };
    auto keep_inside = [&](const Replay::View& v) {
      for (const auto& [a, z] : b.untouched)
        if (a >= v.addr && z <= v.addr + v.size && h.freed.count(a) && z - a > kMinBlock) {
          c.push_back(Change{Change::kKeepHead, a, kMinBlock});
          c.push_back(Change{Change::kKeepTail, a, kMinBlock});
        }
    };
    auto large = [&](const Replay::View& v) {
      return v.seg >= 0 && v.size > 0 && v.found && v.seg < static_cast<int>(b.small.size()) && !b.small[v.seg];
    };
    const Replay::View& bx = m.at_x;
    const Bytes placed = out_.freed_in_window + b.untouched_live;
    const Bytes unplaced = up(out_.live_before - std::min(out_.live_before, placed), kSegmentUnit);
    const Bytes spare =
        down(out_.reserved_before - std::min(out_.reserved_before, b.segment_bytes + unplaced), kSegmentUnit);
    if (bx.found && !bx.used) {
      if (bx.addr < m.x) {  // its free block must start at x
        if (m.x % kSegmentUnit == 0 && large(bx)) c.push_back(Change{Change::kBound, m.x, 0});
        // A freed range with bytes below x in that block live again, whole: also one that starts
        // below the block, its first bytes kept live (a change that made the block above it larger
        // by freeing below it, where it was larger above it: keeping only 512 B below x live leaves
        // the rest of that range a free block that small requests take).
        for (const auto& [a, e] : b.untouched)
          if (e > bx.addr && a < m.x && h.freed.count(a)) c.push_back(Change{Change::kLive, a, 0});
        keep_ending_at(m.x);
      }
      // x's block smaller, or larger.
      untouched_in(m.x + m.size, bx.addr + bx.size, true, [&](std::uint64_t a) {
        c.push_back(Change{Change::kLive, a, 0});
      });
      if (large(bx))
        for (std::uint64_t p = up(m.x + m.size, kSegmentUnit); p < bx.addr + bx.size; p += kSegmentUnit)
          c.push_back(Change{Change::kBound, p, 0});
      // x's block, where it starts at x, large enough for the request.
      for (const Change& g : grow(bx, bx.addr == m.x && bx.size < m.size ? m.size - bx.size : kMinBlock))
        c.push_back(g);
    }
    const Replay::View& z = m.chosen;
    if (z.found) {
      // The block taken instead: smaller than the request, or larger than x's — best fit takes the
      // smallest block on (size, address), so z must exceed x's block by 512 B at least.
      untouched_in(z.addr, z.addr + z.size, true, [&](std::uint64_t a) { c.push_back(Change{Change::kLive, a, 0}); });
      const bool x_free = bx.found && !bx.used && bx.addr == m.x;
      for (const Change& g : grow(z, x_free && bx.size >= z.size ? bx.size - z.size + kMinBlock : kMinBlock))
        c.push_back(g);
      // Or x's block smaller (a freed range in it above the request live) and z larger than that.
      if (x_free)
        for (const auto& [a, e] : b.untouched)
          if (a >= m.x + m.size && e <= bx.addr + bx.size && h.freed.count(a) && a - m.x >= z.size)
            for (const Change& g : grow(z, a - m.x - z.size + kMinBlock)) c.push_back({Change{Change::kLive, a, 0}, g});
      keep_inside(z);
      // z no larger than just under the request: the part of a freed range inside it past that point live.
      const std::uint64_t cut = z.addr + m.size - kMinBlock;
      for (const auto& [a, e] : b.untouched)
        if (a >= z.addr && e <= z.addr + z.size && h.freed.count(a) && a < cut && cut < e)
          c.push_back(Change{Change::kKeepTail, a, e - cut});
      if (large(z)) {
        for (std::uint64_t p = up(z.addr + 1, kSegmentUnit); p < z.addr + z.size; p += kSegmentUnit)
          c.push_back(Change{Change::kBound, p, 0});
        // z's segment longer (z at its end, or only an untouched range held live between them,
        // then free with it: a segment obtained for an earlier, smaller request is 20 MiB).
        for (size_t i = 0; i < b.segments.size(); ++i) {
          const auto& s = b.segments[i];
          const std::uint64_t end = s.base.value() + s.size, z_end = z.addr + z.size;
          std::optional<Change> tail;
          if (end != z_end) {
            auto u =
                std::find_if(b.untouched.begin(), b.untouched.end(), [&](const auto& r) { return r.first == z_end; });
            if (z_end > end || u == b.untouched.end() || u->second != end || h.freed.count(z_end)) continue;
            tail = Change{Change::kFree, z_end, 0};
          }
          Bytes need = bx.found && bx.size > z.size ? bx.size - z.size + 1 : kSegmentUnit;
          need = up(need, kSegmentUnit);
          // As far as that, when the segment is then a large one (obtained for a request of 10 MiB
          // or more: its size rounded up to 2 MiB), or to 20 MiB (for an earlier, smaller one).
          if (s.size + need >= kMinLargeSegment) c.push_back({Change{Change::kExtend, s.base.value(), need}, tail});
          if (s.size + need < kLargeBuffer) {
            need = kLargeBuffer - s.size;
            c.push_back({Change{Change::kExtend, s.base.value(), need}, tail});
          }
          // Or by all the reserved memory no segment of the window holds yet, less what the live
          // bytes not yet placed need: the segment the window saw only the start of.
          if (spare > need) c.push_back({Change{Change::kExtend, s.base.value(), spare}, tail});
        }
      }
    }
    add_alike(b, h, &c);
    return c;
  }

  // A program repeats itself (layer after layer), and so does the allocator's memory: segments of
  // one size whose blocks lie alike. A change that one of them needs, the others may need too, and
  // one at a time each trades a miss for another (the block made larger is no longer the smallest,
  // and one left alike takes its request). So each change to an untouched range is also tried in
  // every range that starts at the same offset of a segment of the same size, is as long and is
  // held as it is (free or live, the same bytes kept).
  void add_alike(const Built& b, const Hypothesis& h, std::vector<Move>* moves) const {
    using Shape = std::tuple<Bytes, std::uint64_t, Bytes, bool, std::pair<Bytes, Bytes>>;
    auto shape = [&](std::uint64_t a, std::uint64_t z) -> std::optional<Shape> {
      auto s = std::upper_bound(b.segments.begin(), b.segments.end(), a,
                                [](std::uint64_t x, const KinetoLayout::Segment& g) { return x < g.base.value(); });
      if (s == b.segments.begin()) return std::nullopt;
      --s;
      auto k = h.kept.find(a);
      return Shape{s->size, a - s->base.value(), z - a, h.freed.count(a) > 0,
                   k == h.kept.end() ? std::pair<Bytes, Bytes>{} : k->second};
    };
    std::map<Shape, std::vector<std::uint64_t>> by_shape;
    std::map<std::uint64_t, Shape> of;
    for (const auto& [a, z] : b.untouched)
      if (auto sh = shape(a, z)) {
        by_shape[*sh].push_back(a);
        of.emplace(a, *sh);
      }
    const size_t n = moves->size();
    for (size_t i = 0; i < n; ++i) {
      const Move& mv = (*moves)[i];
      if (mv.second || mv.first.kind == Change::kBound || mv.first.kind == Change::kExtend) continue;
      auto sh = of.find(mv.first.at);
      if (sh == of.end()) continue;
      const auto& same = by_shape[sh->second];
      if (same.size() < 2) continue;
      Move all = mv;
      for (std::uint64_t a : same)
        if (a != mv.first.at) all.alike.push_back(a);
      moves->push_back(std::move(all));
    }
  }

  bool apply(const Move& m, Hypothesis* h) const {
    if (!apply(m.first, h) || (m.second && !apply(*m.second, h))) return false;
    for (std::uint64_t a : m.alike)
      if (!apply(Change{m.first.kind, a, m.first.bytes}, h)) return false;
    return true;
  }

  bool apply(const Change& c, Hypothesis* h) const {
    switch (c.kind) {
      case Change::kBound:
        return h->bounds.insert(c.at).second;
      case Change::kFree:
        return h->freed.insert(c.at).second;
      case Change::kLive:
        h->kept.erase(c.at);
        return h->freed.erase(c.at) > 0;
      case Change::kFreeHead:
      case Change::kFreeTail:
        if (!h->freed.insert(c.at).second) return false;
        h->kept[c.at] =
            c.kind == Change::kFreeHead ? std::pair<Bytes, Bytes>{0, c.bytes} : std::pair<Bytes, Bytes>{c.bytes, 0};
        return true;
      case Change::kKeepHead:
      case Change::kKeepTail: {
        if (!h->freed.count(c.at)) return false;
        auto& k = h->kept[c.at];
        Bytes& b = c.kind == Change::kKeepHead ? k.first : k.second;
        if (b == c.bytes) return false;
        b = c.bytes;
        return true;
      }
      case Change::kExtend:
        if (h->ext.count(c.at)) return false;
        h->ext[c.at] = c.bytes;
        return true;
    }
    return false;
  }

  void finish(const Hypothesis& h, std::uint64_t predicted) {
    Built b = build(h);
    if (!b.valid) b = build(Hypothesis{});
    out_.predicted = predicted;
    out_.allocations = allocs_;
    out_.boundaries = h.bounds.size();
    out_.tails_freed = h.freed.size();
    out_.extended = h.ext.size();
    for (const auto& [x, size] : pre_) out_.blocks.push_back({Addr(x), size, KinetoLayout::BlockKind::kFreedInWindow});
    for (const auto& [lo, hi] : b.untouched) {
      if (!h.freed.count(lo)) {
        out_.blocks.push_back({Addr(lo), hi - lo, KinetoLayout::BlockKind::kUntouched});
        out_.untouched_live += hi - lo;
      } else if (auto k = h.kept.find(lo); k != h.kept.end()) {
        if (k->second.first) out_.blocks.push_back({Addr(lo), k->second.first, KinetoLayout::BlockKind::kUntouched});
        if (k->second.second)
          out_.blocks.push_back({Addr(hi - k->second.second), k->second.second, KinetoLayout::BlockKind::kUntouched});
        out_.untouched_live += k->second.first + k->second.second;
      }
    }
    out_.segments = b.segments;
    // The reserved memory the window never touches: the live bytes not yet placed in one segment,
    // whole 2 MiB, the rest free; every byte of it on a stream the window never allocates on (a
    // free remainder beside those bytes could otherwise serve the window's requests). The block is
    // those bytes exactly: Total Allocated counts no more.
    const Bytes slack = out_.reserved_before - std::min(out_.reserved_before, b.segment_bytes);
    const Bytes placed = out_.freed_in_window + out_.untouched_live;
    const Bytes unplaced = out_.live_before > placed ? out_.live_before - placed : 0;
    const Bytes live_seg = std::min(slack, up(unplaced, kSegmentUnit));
    const Bytes idle = slack - live_seg;
    if (slack) {
      std::uint64_t lo = UINT64_MAX, hi = 0;
      for (size_t i = 0; i < ev_.size(); ++i) {
        const std::uint64_t x = ev_[i].addr.value();
        const Bytes b = ev_[i].bytes > 0 ? static_cast<Bytes>(ev_[i].bytes) : static_cast<Bytes>(-ev_[i].bytes);
        lo = std::min(lo, x);
        hi = std::max(hi, x + std::max(b, out_.growth[i]));
      }
      for (const auto& s : out_.segments) {
        lo = std::min(lo, s.base.value());
        hi = std::max(hi, s.base.value() + s.size);
      }
      // Below every address the trace states when there is room, else above them.
      std::uint64_t base = down(lo, kSegmentUnit);
      if (base >= slack + 2 * kSegmentUnit + (std::uint64_t{1} << 32))
        base = base - kSegmentUnit - slack;
      else
        base = up(hi, kSegmentUnit) + kSegmentUnit;
      if (live_seg) {
        out_.segments.push_back({Addr(base), live_seg, KinetoLayout::kIdleStream});
        out_.blocks.push_back({Addr(base), std::min(unplaced, live_seg), KinetoLayout::BlockKind::kUnplaced});
        out_.unplaced_live = std::min(unplaced, live_seg);
      }
      if (idle) out_.segments.push_back({Addr(base + live_seg), idle, KinetoLayout::kIdleStream});
      out_.idle_free = slack - out_.unplaced_live;
    }
    std::sort(out_.segments.begin(), out_.segments.end(), [](const auto& x, const auto& y) { return x.base < y.base; });
  }

  std::span<const KinetoMemEvent> ev_;
  KinetoLayout out_;
  std::vector<Touch> touched_;
  std::map<std::uint64_t, Bytes> pre_;  // blocks live before the window that it frees
  RangeSet small_ranges_, large_ranges_, extents_, all_touched_, grown_;
  std::set<std::uint64_t> windows_;  // small segments
  std::uint64_t allocs_ = 0;
};

}  // namespace

KinetoLayout infer_kineto_layout(std::span<const KinetoMemEvent> events) {
  if (events.empty()) return {};
  return Inference(events).run();
}

}  // namespace fragsim

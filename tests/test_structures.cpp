// The shared data structures against straightforward references on seeded random operations.
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "hardware_models/device_memory.h"
#include "policies/addr_index.h"
#include "policies/busy_index.h"
#include "policies/chunk_list.h"
#include "policies/interval_tree.h"
#include "policies/size_index.h"
#include "policies/static_heap.h"
#include "sim/base/error.h"
#include "sim/engine/batch_stream.h"
#include "test_util.h"
#include "traces/live_table.h"
#include "traces/range_set.h"

using namespace fragsim;

TEST_CASE("SizeIndex behaves as an ordered set of (size, address)") {
  SizeIndex idx;
  std::set<std::pair<Bytes, Addr>> ref;
  std::uint64_t s = 1;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int step = 0; step < 20000; ++step) {
    if (ref.empty() || rnd() % 3) {
      Bytes size = 1 + (rnd() % 4 == 0 ? rnd() % 64 : (1ULL << (rnd() % 40)) + rnd() % 4096);
      Addr addr(rnd());
      if (ref.insert({size, addr}).second) idx.insert({size, addr, 0});
    } else {
      auto it = ref.begin();
      std::advance(it, static_cast<long>(rnd() % ref.size()));
      idx.erase(it->first, it->second);
      ref.erase(it);
    }
    REQUIRE(idx.size() == ref.size());
    REQUIRE(idx.largest_size() == (ref.empty() ? 0 : ref.rbegin()->first));  // kept, not looked up
    if (!ref.empty()) {
      REQUIRE(idx.largest()->size == ref.rbegin()->first);
      REQUIRE(idx.largest()->addr == ref.rbegin()->second);
    }
    Bytes q = 1 + (1ULL << (rnd() % 41)) + rnd() % 1000;
    auto want = ref.lower_bound({q, Addr()});
    const auto* got = idx.lower_bound(q);
    REQUIRE((got == nullptr) == (want == ref.end()));
    if (got) REQUIRE(std::make_pair(got->size, got->addr) == *want);
    if (rnd() % 4 == 0) {  // pop the best fit: the same entry, then gone (the next class's front when q's is short)
      SizeIndex::Entry e{};
      REQUIRE(idx.pop_lower_bound(q, &e) == (want != ref.end()));
      if (want != ref.end()) {
        REQUIRE(std::make_pair(e.size, e.addr) == *want);
        ref.erase(want);
        REQUIRE(!idx.contains(e.size, e.addr));
      }
      REQUIRE(idx.size() == ref.size());
      REQUIRE(idx.largest_size() == (ref.empty() ? 0 : ref.rbegin()->first));  // kept, not looked up
    }
  }
}

TEST_CASE("SizeIndex with thousands of blocks of a few sizes (classes cut into pieces and joined again)") {
  SizeIndex idx;
  std::set<std::pair<Bytes, Addr>> ref;
  std::uint64_t s = 3;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  const Bytes sizes[] = {1 << 20, (1 << 20) + 256, 2 << 20};  // two share a class, one has its own
  for (int step = 0; step < 60000; ++step) {
    bool grow = step < 30000 ? rnd() % 4 != 0 : rnd() % 4 == 0;  // fill to thousands, then drain
    if (ref.empty() || grow) {
      Bytes size = sizes[rnd() % 3];
      Addr addr(rnd() % 100000 * 4096);
      if (ref.insert({size, addr}).second) idx.insert({size, addr, 0});
    } else {
      auto it = ref.lower_bound({sizes[rnd() % 3], Addr(rnd() % 100000 * 4096)});
      if (it == ref.end()) it = ref.begin();
      idx.erase(it->first, it->second);
      ref.erase(it);
    }
    REQUIRE(idx.size() == ref.size());
    REQUIRE(idx.largest_size() == (ref.empty() ? 0 : ref.rbegin()->first));  // kept, not looked up
    Bytes q = sizes[rnd() % 3] - rnd() % 2;
    auto want = ref.lower_bound({q, Addr()});
    const auto* got = idx.lower_bound(q);
    REQUIRE((got == nullptr) == (want == ref.end()));
    if (got) REQUIRE(std::make_pair(got->size, got->addr) == *want);
    if (step >= 30000 && rnd() % 8 == 0 && want != ref.end()) {  // pops out of classes held as pieces
      SizeIndex::Entry e{};
      REQUIRE(idx.pop_lower_bound(q, &e));
      REQUIRE(std::make_pair(e.size, e.addr) == *want);
      ref.erase(want);
      REQUIRE(idx.size() == ref.size());
      REQUIRE(idx.largest_size() == (ref.empty() ? 0 : ref.rbegin()->first));  // kept, not looked up
      if (!ref.empty()) REQUIRE(idx.largest()->addr == ref.rbegin()->second);
    }
    if (step % 997 == 0) {  // a full ordered scan from the smallest size
      std::vector<std::pair<Bytes, Addr>> seen;
      idx.scan_from(0, [&](const SizeIndex::Entry& e) {
        seen.emplace_back(e.size, e.addr);
        return true;
      });
      REQUIRE(seen == std::vector<std::pair<Bytes, Addr>>(ref.begin(), ref.end()));
      if (!ref.empty()) {
        REQUIRE(idx.contains(ref.begin()->first, ref.begin()->second));
        REQUIRE(idx.largest()->addr == ref.rbegin()->second);
      }
    }
  }
  REQUIRE(ref.size() < 3000);  // the drain phase ran: pieces were joined back
}

TEST_CASE("IntervalTree reports exactly the committed intervals overlapping a query, in start order") {
  std::uint64_t s = 11;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  const size_t n = 3000;
  std::vector<std::uint64_t> starts(n), ends(n);
  for (size_t i = 0; i < n; ++i) {
    starts[i] = rnd() % 5000;
    ends[i] = starts[i] + (rnd() % 8 == 0 ? rnd() % 5000 : rnd() % 50);  // a few long-lived, many short
  }
  IntervalTree<size_t> tree(starts, ends);
  std::vector<bool> committed(n, false);
  for (size_t step = 0; step < n; ++step) {
    size_t i = (step * 7919) % n;  // every interval once, in a scrambled order
    committed[i] = true;
    tree.commit(i, i);
    std::uint64_t lo = rnd() % 5200, hi = lo + rnd() % 100;
    std::vector<size_t> got, want;
    tree.overlapping(lo, hi, [&](size_t v) { got.push_back(v); });
    for (size_t j = 0; j < n; ++j)
      if (committed[j] && starts[j] <= hi && ends[j] >= lo) want.push_back(j);
    std::stable_sort(want.begin(), want.end(), [&](size_t a, size_t b) { return starts[a] < starts[b]; });
    REQUIRE(got == want);
  }
}

TEST_CASE("ChunkList: chunk_at through the address index finds the chunk the walk finds") {
  std::uint64_t s = 5;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  // Three lists fed the same operations: never indexed (the walk), indexed from the start, and
  // indexed halfway through (built from the chunks there are then).
  ChunkList<> walk, from_start, halfway;
  from_start.index_addresses();
  std::vector<ChunkList<>*> all{&walk, &from_start, &halfway};
  auto each = [&](auto f) {
    for (auto* l : all) f(*l);
  };
  using Index = ChunkList<>::Index;
  std::vector<Index> regions;
  const Bytes kRegion = 1 << 20;
  Addr next_base(0x10000000);
  size_t checked = 0;
  for (int step = 0; step < 6000; ++step) {
    if (step == 3000) halfway.index_addresses();
    std::uint64_t op = rnd() % 10;
    if (regions.size() < 3 || op == 0) {  // a new region (slots of removed ones are reused)
      Index r = ChunkList<>::kNil;
      each([&](ChunkList<>& l) { r = l.add_region(next_base, kRegion); });
      next_base = next_base + 2 * kRegion;
      regions.push_back(r);
      continue;
    }
    Index r = regions[rnd() % regions.size()];
    const auto& rg = walk.region(r);
    Addr at = rg.base + rnd() % rg.size;
    Index c = walk.chunk_at(r, at);
    REQUIRE(from_start.chunk_at(r, at) == c);
    REQUIRE(halfway.chunk_at(r, at) == c);
    ++checked;
    const auto& ch = walk.chunk(c);
    REQUIRE((ch.addr <= at && at < ch.addr + ch.size));
    if (op <= 4 && !ch.in_use && ch.size > 1) {  // split at the address, and take the upper part
      Bytes keep = std::max<Bytes>(1, at - ch.addr);
      if (keep < ch.size) each([&](ChunkList<>& l) { l.set_in_use(l.split(c, keep), true); });
    } else if (op <= 7 && ch.in_use) {  // free it and merge with free neighbours
      each([&](ChunkList<>& l) {
        l.set_in_use(c, false);
        if (l.chunk(c).next != ChunkList<>::kNil && !l.chunk(l.chunk(c).next).in_use) l.merge_next(c);
        if (Index p = l.chunk(c).prev; p != ChunkList<>::kNil && !l.chunk(p).in_use) l.merge_next(p);
      });
    } else if (op == 8 && walk.region_unused(r) && walk.region(r).chunks == 1) {  // retire it
      each([&](ChunkList<>& l) { l.remove_region(r); });
      regions.erase(std::find(regions.begin(), regions.end(), r));
    } else if (op == 9) {  // the region moves
      Addr to = next_base;
      next_base = next_base + 2 * kRegion;
      each([&](ChunkList<>& l) { l.move_region(r, to); });
    }
    each([&](ChunkList<>& l) { l.validate("chunk list"); });  // the index holds exactly the live chunks
  }
  CHECK(checked > 4000);
}

// The runs and gaps of a set of points (covered[x]): the reference for RunList.
namespace {
std::vector<RunList::Run> runs_of(const std::vector<bool>& covered) {
  std::vector<RunList::Run> v;
  for (size_t x = 0; x < covered.size(); ++x) {
    if (!covered[x]) continue;
    if (!v.empty() && v.back().hi == x)
      ++v.back().hi;
    else
      v.push_back({x, x + 1});
  }
  return v;
}
}  // namespace

TEST_CASE("RunList: the union of inserted intervals, and the first gap that fits after a point") {
  // Two shapes: a few blocks, merged often; and thousands of runs in dozens of blocks (blocks hold
  // a few hundred), where searches skip blocks by their gap bounds, find bounds exact, and merges
  // of very long intervals swallow whole blocks — each bound must stay true through all of it.
  struct Shape {
    size_t span;
    int steps, check_every;
    unsigned long_every, long_max, huge_every;  // huge: up to span / 8 (0: none)
  };
  for (const Shape sh : {Shape{60000, 6000, 97, 50, 4000, 0}, Shape{240000, 24000, 397, 200, 4000, 1000}}) {
    std::uint64_t s = 17;
    auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
    const size_t span = sh.span;
    std::vector<bool> covered(span + 5000, false);
    RunList list, rebuilt;  // rebuilt: the same intervals, sorted, given to assign_sorted at once
    std::vector<RunList::Run> inserted;
    for (int step = 0; step < sh.steps; ++step) {
      // Mostly short intervals (many runs, blocks split), some long ones (merges across blocks).
      Bytes lo = rnd() % span, len = rnd() % sh.long_every == 0 ? 1 + rnd() % sh.long_max : 1 + rnd() % 12;
      if (sh.huge_every && rnd() % sh.huge_every == 0) len = std::min<Bytes>(1 + rnd() % (span / 8), span - lo);
      list.insert(lo, lo + len);
      inserted.push_back({lo, lo + len});
      for (Bytes x = lo; x < lo + len; ++x) covered[x] = true;
      if (step % sh.check_every != 0) continue;
      auto want = runs_of(covered);
      auto sorted = inserted;
      std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
      rebuilt.assign_sorted(sorted);
      for (const RunList* l : {&list, &rebuilt}) {
        auto got = l->all();
        REQUIRE(got.size() == want.size());
        REQUIRE(l->size() == want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          REQUIRE(got[i].lo == want[i].lo);
          REQUIRE(got[i].hi == want[i].hi);
        }
      }
      // Searches with growing points, one cursor each, against the gaps listed one by one.
      for (Bytes size : {Bytes{1}, Bytes{3}, Bytes{20}, Bytes{400}}) {
        RunList::Cursor c, c2;
        for (Bytes p = rnd() % 50; p < span; p += 1 + rnd() % 3000) {
          RunList::Gap g = list.next_fitting(p, size, c), h = rebuilt.next_fitting(p, size, c2);
          REQUIRE(h.lo == g.lo);
          REQUIRE(h.hi == g.hi);
          Bytes start = 0, wlo = want.back().hi, whi = RunList::kEnd;
          for (const auto& r : want) {
            if (r.lo > p && r.lo - start >= size) {
              wlo = start;
              whi = r.lo;
              break;
            }
            start = r.hi;
          }
          INFO("p " << p << " size " << size);
          REQUIRE(g.lo == wlo);
          REQUIRE(g.hi == whi);
        }
      }
    }
  }
}

// BusyIndex alone against the definition it answers: the union U of the committed chunks whose
// closed time interval overlaps the query's, its smallest free gap of at least `size` (lowest on
// ties; and for the first fit the planner's greedy passes ask, its lowest such gap), or U's end. Intervals are
// committed in a random order, each queried first (as a plan does) and a few others besides; time blocks from one
// instant to more than the whole span, so that queries hold no whole block, a few or many, and chunk sizes both that
// merge (equal) and that leave slivers (arbitrary: the index coarsens its blocks past its memory budget, or gives up).
TEST_CASE("BusyIndex: the best fit of the chunks overlapping an interval, as a scan of them finds it") {
  struct Shape {
    size_t intervals, span, max_len;
    Bytes min_size, max_size;
    unsigned anywhere;  // one chunk in this many placed anywhere rather than at its best fit
  };
  std::uint64_t s = 91;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  size_t answered = 0, short_answered = 0, refused = 0, coarsened = 0;
  for (const Shape sh :
       {Shape{1200, 3000, 400, 64, 64, 4}, Shape{1200, 2000, 1500, 1, 5000, 4}, Shape{600, 400, 30, 8, 300, 4},
        Shape{1500, 6000, 3000, 16, 1 << 12, 4}, Shape{1000, 1000, 1000, 1, 1 << 12, 1}}) {
    for (size_t block : {size_t{1}, size_t{4}, size_t{16}, size_t{100}, size_t{128}, size_t{100000}}) {
      std::vector<std::uint64_t> starts, ends;
      for (size_t i = 0; i < sh.intervals; ++i) {
        std::uint64_t a = rnd() % sh.span;
        starts.push_back(a);
        // Some live to the end, as buffers a trace never frees: they hold the last block, short or not.
        ends.push_back(rnd() % 8 == 0 ? sh.span + sh.max_len : a + rnd() % sh.max_len);
      }
      BusyIndex index(starts, ends, block);
      std::vector<size_t> order(sh.intervals);
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rnd() % i]);
      std::vector<std::pair<Bytes, Bytes>> chunk(sh.intervals);
      std::vector<char> committed(sh.intervals, 0);
      auto reference = [&](size_t q, Bytes size, bool first = false) {
        std::vector<std::pair<Bytes, Bytes>> busy;
        for (size_t j = 0; j < sh.intervals; ++j)
          if (committed[j] && starts[j] <= ends[q] && starts[q] <= ends[j]) busy.push_back(chunk[j]);
        std::sort(busy.begin(), busy.end());
        Bytes cur = 0, best = 0, best_size = kTooLarge;
        for (const auto& [lo, hi] : busy) {
          if (lo > cur && lo - cur >= size && first) return cur;
          if (lo > cur && lo - cur >= size && lo - cur < best_size) {
            best_size = lo - cur;
            best = cur;
          }
          cur = std::max(cur, hi);
        }
        return best_size == kTooLarge ? cur : best;
      };
      auto check = [&](size_t q, Bytes size) {
        Bytes got = 0;
        if (!index.best_fit(q, size, &got)) {
          ++refused;
          return;
        }
        ++answered;
        short_answered += ends[q] - starts[q] < 2 * block;
        INFO("shape span " << sh.span << ", blocks of " << block << ", interval " << q << ", size " << size);
        REQUIRE(got == reference(q, size));
        REQUIRE(index.first_fit(q, size, &got));  // the same lists answer the first fit (the planner's)
        REQUIRE(got == reference(q, size, true));
      };
      for (size_t i : order) {
        Bytes size = sh.min_size + rnd() % (sh.max_size - sh.min_size + 1);
        check(i, size);
        check(rnd() % sh.intervals, sh.min_size + rnd() % (sh.max_size - sh.min_size + 1));
        // Mostly where the best fit puts it, sometimes anywhere (holes of every size; slivers that
        // never merge, in the last shape).
        Bytes lo = rnd() % sh.anywhere == 0 ? rnd() % (sh.max_size * 40) : reference(i, size);
        chunk[i] = {lo, lo + size};
        committed[i] = 1;
        index.commit(i, lo, lo + size);
      }
      coarsened += index.coarsened();
    }
  }
  CHECK(answered > 20000);         // the index answered nearly every query,
  CHECK(short_answered > 1000);    // many of them for intervals that hold no whole block,
  CHECK(coarsened > 0);            // some after its blocks doubled past the memory budget,
  CHECK(refused < answered / 10);  // and gave up on few
}

// static-heap's indexed search (BusyIndex, and the grouped scan where it cannot say) against the
// scan XLA does, on seeded workloads of every kind the benchmark and real programs have: equal
// sizes (exact fits), arbitrary sizes (slivers: the index coarsens its time blocks, or gives up),
// many or few live, short and long lifetimes, alignment, buffers placed beforehand, offsets that
// saturate.
TEST_CASE("static-heap plans: the indexed search places every buffer where the scan does") {
  struct Workload {
    const char* name;
    size_t events, live;
    Bytes min_size, max_size, alignment;
    int fixed_every;     // every n-th buffer placed beforehand (0: none)
    bool saturate;       // one placed beforehand at kTooLarge (an empty chunk)
    std::uint64_t tick;  // events per time step (> 1: buffers start and end at the same times)
  };
  const Workload workloads[] = {
      {"equal sizes, many live", 4000, 500, 1 << 20, 1 << 20, 1, 0, false, 1},
      {"arbitrary sizes, many live", 4000, 500, 256, 4 << 20, 1, 0, false, 1},
      {"arbitrary sizes, churn", 4000, 40, 4096, 64 << 20, 256, 0, false, 1},
      {"few sizes, aligned, some placed", 4000, 300, 1000, 8000, 512, 13, false, 1},
      {"odd alignment, saturated offsets", 3000, 200, 1, 1 << 16, 3, 0, true, 1},
      {"equal sizes, shared times", 4000, 400, 4096, 4096, 1, 0, false, 5},
      {"few sizes, shared times", 4000, 300, 1, 64, 1, 0, false, 3},
      // The benchmark's many-live pattern, scaled down: thousands live, sizes that never merge.
      {"arbitrary sizes, thousands live", 12000, 3000, 256, 4 << 20, 1, 0, false, 1},
  };
  std::uint64_t s = 23;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  size_t indexed_total = 0, fell_back = 0, coarsened = 0;
  for (const auto& w : workloads) {
    // A random walk around `live` buffers, as `fragsim gen random`: time +1 per event.
    std::vector<HeapBuffer> bufs;
    std::vector<size_t> live;
    for (std::uint64_t e = 0; e < w.events; ++e) {
      std::uint64_t t = e / w.tick;
      if (live.empty() || (live.size() < 2 * w.live && rnd() % (2 * w.live) >= live.size())) {
        Bytes size = w.min_size == w.max_size ? w.min_size : w.min_size + rnd() % (w.max_size - w.min_size);
        bufs.push_back({bufs.size(), size, t, w.events / w.tick, std::nullopt});
        if (w.fixed_every && bufs.size() % w.fixed_every == 0) bufs.back().fixed = (rnd() % 4096) * 4096;
        live.push_back(bufs.size() - 1);
      } else {
        size_t k = rnd() % live.size();
        bufs[live[k]].end = t;
        live[k] = live.back();
        live.pop_back();
      }
    }
    if (w.saturate) {  // a chunk ending at kTooLarge, and a buffer too large for any gap below it
      bufs.push_back({bufs.size(), 100, 20, w.events, kTooLarge - 10});
      bufs.push_back({bufs.size(), kTooLarge - 5, 100, 140, std::nullopt});  // placed empty at kTooLarge
    }
    // order=best makes one plan where both orders are one sequence (equal sizes): the same plan.
    const bool one_order = same_heap_order(bufs);
    CHECK(one_order == (w.min_size == w.max_size));
    if (one_order)
      CHECK(plan_heap(bufs, true, w.alignment, HeapSearch::kScan).offset ==
            plan_heap(bufs, false, w.alignment, HeapSearch::kScan).offset);
    for (bool spatial : {true, false}) {
      HeapPlan want = plan_heap(bufs, spatial, w.alignment, HeapSearch::kScan);
      // And the length static-heap chooses (BusyIndex::block_for, from the mean duration).
      for (size_t block : {size_t{8}, size_t{64}, size_t{256}, kHeapAutoBlock}) {
        HeapPlan got = plan_heap(bufs, spatial, w.alignment, HeapSearch::kIndexed, block);
        INFO(w.name << (spatial ? ", spatial" : ", temporal") << ", time blocks of " << block);
        CHECK(got.heap == want.heap);
        REQUIRE(got.offset.size() == want.offset.size());
        size_t differ = 0;
        for (size_t i = 0; i < want.offset.size(); ++i) differ += got.offset[i] != want.offset[i];
        CHECK(differ == 0);
        indexed_total += got.indexed;
        coarsened += got.coarsened > 0;
        if (w.min_size == w.max_size && block == 8) CHECK(got.indexed > bufs.size() / 2);  // equal sizes merge
        if (w.saturate && !spatial) {  // the index served until the empty chunk came (late: it is short)
          CHECK(got.indexed > 0);
          CHECK(got.indexed < bufs.size() - 1);
        }
        fell_back += got.indexed < bufs.size();
      }
    }
  }
  CHECK(indexed_total > 15000);  // the index placed many buffers
  CHECK(fell_back > 0);          // and the grouped scan the others
  CHECK(coarsened > 0);          // some plans went on with coarser blocks past the memory budget
}

TEST_CASE("AddrIndex: first fit, erase and in-place rekey against a std::map of holes") {
  AddrIndex idx;
  std::map<std::uint64_t, std::pair<Bytes, std::uint32_t>> ref;  // addr → (size, id)
  std::uint64_t s = 5;
  std::uint32_t next_id = 0;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  size_t most = 0;
  std::uint64_t found_at = 0;  // the address of first fit's last answer, when have_found
  bool have_found = false;
  // Phases of inserts (out of 8 steps): balanced, filling to tens of thousands of holes (many
  // leaves and groups of leaves), then draining to none (leaves merged away).
  for (auto [inserts, steps] : {std::pair{2, 40000}, {6, 40000}, {0, 100000}}) {
    for (int step = 0; step < steps; ++step) {
      std::uint64_t a = (rnd() % 100000) * 1024;
      auto it = ref.lower_bound(a);
      // Half the time the entry first fit found last, as an allocator takes (covers its cache).
      if (have_found && rnd() % 2) it = ref.find(found_at);
      auto what = static_cast<int>(rnd() % 8);
      if (what < inserts || it == ref.end()) {
        if (!ref.count(a)) {
          Bytes size = 1 + rnd() % (1 << 20);
          ref[a] = {size, next_id};
          idx.insert(Addr(a), size, next_id++);
        }
      } else if (what < inserts + (8 - inserts) / 2) {
        idx.erase(Addr(it->first));
        ref.erase(it);
      } else {  // the key moves within the gap to its neighbours, as a taken front or a merge moves it
        std::uint64_t at = it->first;
        std::uint64_t lo = it == ref.begin() ? 0 : std::prev(it)->first + 1;
        auto nx = std::next(it);
        std::uint64_t hi = nx == ref.end() ? at + 4096 : nx->first - 1;
        std::uint64_t na = lo + rnd() % (hi - lo + 1);
        Bytes size = 1 + rnd() % (1 << 21);
        ref.erase(it);
        ref[na] = {size, next_id};
        idx.rekey(Addr(at), Addr(na), size, next_id++);
      }
      REQUIRE(idx.size() == ref.size());
      most = std::max(most, ref.size());
      Bytes r = 1 + rnd() % (1 << 21);
      std::uint32_t want = AddrIndex::kNone;
      have_found = false;
      for (const auto& [addr, v] : ref)
        if (v.first >= r) {
          want = v.second;
          found_at = addr;
          have_found = true;
          break;
        }
      REQUIRE(idx.first_fit(r) == want);
      if (step % 64 == 0 || ref.size() < 100) {
        Bytes largest = 0;
        for (const auto& [addr, v] : ref) largest = std::max(largest, v.first);
        REQUIRE(idx.largest() == largest);
        auto probe = ref.lower_bound((rnd() % 100000) * 1024);
        if (probe != ref.end()) REQUIRE(idx.contains(Addr(probe->first)));
        REQUIRE_FALSE(idx.contains(Addr(probe == ref.end() ? 0x7fffffffffffULL : probe->first + 1)));
      }
    }
  }
  CHECK(most > 10000);      // several groups of leaves were in use
  CHECK(ref.size() < 100);  // and the drain emptied most of them
}

TEST_CASE("BatchStream: a consumer reads the short first batches itself, then the reader's thread the rest") {
  // sim/engine/batch_stream.h: until the reader's thread runs, help() decodes a missing batch on the
  // consumer's thread. Batches of 16, 64, 256 and 1,024 events, then 4,096; every event once, in
  // order, and the end carries the digest a reader alone gives.
  const int n = 9000;
  const std::string path = alloc_free_trace("stream.jsonl", n);
  auto solo = open_trace(path);
  Event ev;
  while (solo->next(ev)) {
  }
  auto r = open_trace(path);
  BatchStream s(1, false);
  std::vector<std::uint64_t> seen;
  Event scratch;
  auto take = [&](const Batch& b) {
    for (size_t k = 0; k < b.size; ++k) {
      const Event& e = b.get(k, scratch);
      CHECK(e.id.value() == (e.index % 2 ? e.index - 1 : e.index));
      seen.push_back(e.index);
    }
  };
  for (size_t b = 0; b < 4; ++b) {  // no reader thread yet: the consumer reads each batch
    s.help(*r, b);
    REQUIRE(s.ready(b));
    s.help(*r, b);  // the batch is there: nothing more is read
    REQUIRE_FALSE(s.ready(b + 1));
    auto batch = s.get(0, b);
    REQUIRE(batch);
    CHECK(batch->size == BatchStream::batch_size(b));
    CHECK(batch->size == (size_t{16} << (2 * b)));
    take(*batch);
  }
  std::thread reader([&] { s.produce(*r); });
  for (size_t b = 4;; ++b) {
    auto batch = s.get(0, b);
    if (!batch) break;
    CHECK(batch->size == (b < 5 ? size_t{4096} : size_t{n - 1360 - 4096}));
    take(*batch);
  }
  reader.join();
  REQUIRE(seen.size() == n);
  for (int i = 0; i < n; ++i) CHECK(seen[i] == static_cast<std::uint64_t>(i));
  CHECK_FALSE(s.end().error);
  CHECK(s.end().digest == solo->digest());
}

TEST_CASE("BatchStream: the events read before a reader's error are handed over, then the error") {
  // An engine replays events 80-99 (in the third batch) before it hears of the bad event 100:
  // a policy's error among them is the run's, as when the run reads the trace itself.
  const std::string path = alloc_free_trace("stream_bad.jsonl", 400, 100);
  auto r = open_trace(path);
  BatchStream s(1, false);
  for (size_t b = 0; b < 2; ++b) {
    s.help(*r, b);
    REQUIRE(s.ready(b));
    REQUIRE(s.get(0, b));
  }
  s.help(*r, 2);
  REQUIRE(s.ready(3));  // the end
  auto partial = s.get(0, 2);
  REQUIRE(partial);
  Event scratch;
  CHECK(partial->size == 20);
  CHECK(partial->get(19, scratch).index == 99);
  CHECK_FALSE(s.get(0, 3));
  REQUIRE(s.end().error);
  try {
    std::rethrow_exception(s.end().error);
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("stream_bad.jsonl:101: id: free of id 999999999") != std::string::npos);
  }
  s.help(*r, 3);  // after the end nothing is read again
  CHECK_FALSE(s.get(0, 3));
}

TEST_CASE("LiveTable keeps (device, id) → handle through inserts, erases and growth") {
  LiveTable t;
  std::map<std::pair<std::uint32_t, AllocId>, Handle> ref;
  std::uint64_t s = 7;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int step = 0; step < 50000; ++step) {
    std::uint32_t dev = static_cast<std::uint32_t>(rnd() % 3);
    AllocId id(rnd() % 5000);
    auto key = std::make_pair(dev, id);
    if (rnd() % 2) {
      Handle h = t.insert(dev, id, 1, Space::kHbm);
      REQUIRE((h == kNoHandle) == (ref.count(key) == 1));
      if (h != kNoHandle) ref[key] = h;
    } else {
      LiveTable::Entry e;
      bool ok = t.erase(dev, id, &e);
      REQUIRE(ok == (ref.count(key) == 1));
      if (ok) {
        REQUIRE(e.handle == ref[key]);
        ref.erase(key);
      }
    }
    REQUIRE(t.size() == ref.size());
  }
  for (const auto& [key, h] : ref) REQUIRE(t.find(key.first, key.second)->handle == h);
}

TEST_CASE("DeviceMemory: grants never overlap, recorded addresses are taken when free, released ranges are reused") {
  SpaceSpec spec;
  spec.capacity = Bytes{1} << 40;
  spec.alignment = 512;
  spec.granularity = 2 * kMiB;
  DeviceMemory mem(spec, CostModel{});
  std::vector<DeviceMemory::Grant> live;
  std::map<std::uint64_t, Bytes> ref;  // the live grants: address → padded size
  std::uint64_t s = 7, far = 0;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  auto no_overlap = [&] {
    std::uint64_t end = 0;
    for (auto [a, b] : ref) {
      if (a < end) return false;
      end = a + b;
    }
    return true;
  };
  for (int step = 0; step < 6000; ++step) {
    std::uint64_t r = rnd() % 10;
    if (r < 5 || live.empty()) {
      std::optional<Addr> want;
      if (r == 0) {  // a recorded address, below or above the pointer: taken, or dropped when in use
        want = DeviceMemory::kBase + (rnd() % 4096) * 2 * kMiB;
        mem.expect_address(*want);
      }
      const bool free_there = want && [&] {  // nothing live in the 64 MiB from it (every size drawn fits)
        auto it = ref.upper_bound(want->value() + 64 * kMiB - 1);
        return it == ref.begin() || std::prev(it)->first + std::prev(it)->second <= want->value();
      }();
      Bytes size = (1 + rnd() % 32) * 2 * kMiB - rnd() % 1000;
      DeviceMemory::Grant g = mem.allocate(size);
      REQUIRE(g);
      CHECK(g.addr().value() % spec.alignment == 0);
      if (free_there) CHECK(g.addr() == *want);  // nothing live in its range: the recorded address is taken
      ref[g.addr().value()] = g.bytes();
      live.push_back(std::move(g));
    } else if (r < 9) {
      size_t i = rnd() % live.size();
      ref.erase(live[i].addr().value());
      live[i].release();
      live[i] = std::move(live.back());
      live.pop_back();
    } else {  // a move far above everything: later grants step over it, its release frees it there
      size_t i = rnd() % live.size();
      Addr to = DeviceMemory::kBase + (Bytes{1} << 46) + (++far) * kGiB;
      Bytes b = ref[live[i].addr().value()];
      ref.erase(live[i].addr().value());
      REQUIRE(mem.move(live[i], to));
      CHECK(live[i].addr() == to);
      ref[to.value()] = b;
    }
    REQUIRE(no_overlap());
    REQUIRE(mem.live_grants() == ref.size());
    Bytes used = 0;
    for (auto [a, b] : ref) used += b;
    REQUIRE(mem.used() == used);
  }
  live.clear();
  CHECK(mem.live_grants() == 0);
  CHECK(mem.used() == 0);
}

TEST_CASE("range set: holes are the parts of a span no range covers below or between ranges, none above") {
  // Memory a capture's buffers never used inside a region, below or between ranges they did, was
  // in use all along (traces/recorded_layout.h, traces/bfc_growth.h); above the last it may be free.
  RangeSet r;
  r.add(0x200, 0x300);
  r.add(0x600, 0x800);
  r.add(0x1000, 0x1100);
  using Holes = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  CHECK(r.holes(0, 0x200000) == Holes{{0, 0x200}, {0x300, 0x600}, {0x800, 0x1000}});
  CHECK(r.holes(0x200, 0x1100) == Holes{{0x300, 0x600}, {0x800, 0x1000}});
  CHECK(r.holes(0x280, 0x700) == Holes{{0x300, 0x600}});  // ranges reaching in from either side
  CHECK(r.holes(0x1100, 0x2000).empty());                 // above every range
  CHECK(r.holes(0x100, 0x180).empty());                   // no range reaches into it
}

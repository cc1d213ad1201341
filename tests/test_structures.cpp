// The shared data structures against straightforward references on seeded random operations.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "policies/addr_index.h"
#include "policies/interval_tree.h"
#include "policies/size_index.h"
#include "traces/live_table.h"

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
    if (!ref.empty()) {
      REQUIRE(idx.largest()->size == ref.rbegin()->first);
      REQUIRE(idx.largest()->addr == ref.rbegin()->second);
    }
    Bytes q = 1 + (1ULL << (rnd() % 41)) + rnd() % 1000;
    auto want = ref.lower_bound({q, Addr()});
    const auto* got = idx.lower_bound(q);
    REQUIRE((got == nullptr) == (want == ref.end()));
    if (got) REQUIRE(std::make_pair(got->size, got->addr) == *want);
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
    Bytes q = sizes[rnd() % 3] - rnd() % 2;
    auto want = ref.lower_bound({q, Addr()});
    const auto* got = idx.lower_bound(q);
    REQUIRE((got == nullptr) == (want == ref.end()));
    if (got) REQUIRE(std::make_pair(got->size, got->addr) == *want);
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

TEST_CASE("AddrIndex: first fit, erase and in-place rekey against a std::map of holes") {
  AddrIndex idx;
  std::map<std::uint64_t, std::pair<Bytes, std::uint32_t>> ref;  // addr → (size, id)
  std::uint64_t s = 5;
  std::uint32_t next_id = 0;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int step = 0; step < 30000; ++step) {
    std::uint64_t a = (rnd() % 20000) * 1024;
    auto it = ref.lower_bound(a);
    int what = static_cast<int>(rnd() % 4);
    if (what == 0 || it == ref.end()) {
      if (!ref.count(a)) {
        Bytes size = 1 + rnd() % (1 << 20);
        ref[a] = {size, next_id};
        idx.insert(Addr(a), size, next_id++);
      }
    } else if (what == 1) {
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
    Bytes r = 1 + rnd() % (1 << 21);
    std::uint32_t want = AddrIndex::kNone;
    Bytes largest = 0;
    for (const auto& [addr, v] : ref) {
      if (want == AddrIndex::kNone && v.first >= r) want = v.second;
      largest = std::max(largest, v.first);
    }
    REQUIRE(idx.first_fit(r) == want);
    REQUIRE(idx.largest() == largest);
  }
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

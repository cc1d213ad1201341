// Reading an export (--export-snapshot) back with fragsim's own snapshot reader, for the tests
// that check an export is the run it came from (tests/test_hardening_round4.cpp, the fuzzers).
#pragma once
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "traces/trace_reader.h"

namespace fragsim::test {

// The allocations an export holds, read back by fragsim's own snapshot reader, each checked to lie
// inside a segment (or mapped range) live on its device at that moment: (device, address, requested).
inline std::vector<std::tuple<std::uint32_t, std::uint64_t, Bytes>> exported_allocs(const std::string& pickle) {
  std::vector<std::tuple<std::uint32_t, std::uint64_t, Bytes>> out;
  std::map<std::uint32_t, std::map<std::uint64_t, std::uint64_t>> mapped;  // device → start → end
  auto inside = [&](std::uint32_t dev, std::uint64_t lo, std::uint64_t hi) {
    auto& m = mapped[dev];
    auto it = m.upper_bound(lo);
    if (it == m.begin()) return false;
    --it;
    for (std::uint64_t at = lo; at < hi;) {  // ranges mapped one after another cover it too
      if (it == m.end() || it->first > at || it->second <= at) return false;
      at = it->second;
      ++it;
    }
    return true;
  };
  auto reader = open_trace(pickle);
  Event e;
  while (reader->next(e)) {
    const std::uint64_t a = e.addr.value();
    if (e.op == Op::kSegmentAlloc || e.op == Op::kSegmentMap) {
      mapped[e.device][a] = a + e.size;
    } else if (e.op == Op::kSegmentFree || e.op == Op::kSegmentUnmap) {
      // [a, a + size) is no longer mapped: trim or split what overlaps it.
      auto& m = mapped[e.device];
      const std::uint64_t hi = a + e.size;
      auto it = m.upper_bound(a);
      if (it != m.begin()) --it;
      while (it != m.end() && it->first < hi) {
        const std::uint64_t lo2 = it->first, hi2 = it->second;
        if (hi2 <= a) {
          ++it;
          continue;
        }
        it = m.erase(it);
        if (lo2 < a) m[lo2] = a;
        if (hi2 > hi) m[hi] = hi2;
      }
    } else if (e.op == Op::kAlloc && !e.has(key::kPreTrace)) {
      INFO("device " << e.device << " alloc at " << a << " of " << e.size << " bytes");
      CHECK((e.size == 0 || inside(e.device, a, a + e.size)));
      out.emplace_back(e.device, a, e.size);
    }
  }
  return out;
}

}  // namespace fragsim::test

// xla-bfc against the facts of specs/xla-bfc.md §7 (BFC's own tests) and
// specs/xla-bfc-spatial.md §1–§2 (spatial partitioning, limit rounding, padding).
#include <catch2/catch.hpp>

#include "policies/jax_gpu.h"
#include "sim_helpers.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {
const nlohmann::json kFixed1G = {{"memory_limit", 1073741824}, {"spatial_partitioning", false}};
}

TEST_CASE("xla-bfc §7.1 NoDups: sizes 1..1023") {
  TraceBuilder t;
  for (int s = 1; s <= 1023; ++s) t.alloc(s, s);
  for (int s = 1; s <= 1023; ++s) t.free(s);
  auto r = simulate({.name = "nodups", .text = t.text, .policy = "xla-bfc", .config = kFixed1G});
  CHECK(r.stats()["num_allocs"] == 1023);
  CHECK(r.stats()["bytes_in_use"] == 0);
  CHECK(r.stats()["peak_bytes_in_use"] == 654336);
  CHECK(r.stats()["largest_alloc_size"] == 1024);
  CHECK(r.result.peak_allocated == 654336);
  // Every address is distinct and 256-aligned.
  std::set<Addr> seen;
  for (const auto& p : r.placements) {
    CHECK(p["addr"].get<Addr>().value() % 256 == 0);
    CHECK(seen.insert(p["addr"].get<Addr>()).second);
  }
}

TEST_CASE("xla-bfc §7.2 ExerciseCoalescing") {
  TraceBuilder t;
  std::uint64_t id = 1;
  t.alloc(id, 4096).free(id);
  ++id;
  for (int i = 0; i < 1024; ++i) {
    t.alloc(id, 4096).alloc(id + 1, 8 << 20).alloc(id + 2, 16384).alloc(id + 3, 40 << 20);
    t.free(id).free(id + 1).free(id + 2).free(id + 3);
    id += 4;
  }
  t.alloc(id, 4096);
  auto r = simulate({.name = "coalesce", .text = t.text, .policy = "xla-bfc", .config = kFixed1G});
  CHECK(r.stats()["num_allocs"] == 4098);  // 4097 as in §7.2, plus the final 4 KiB
  CHECK(r.stats()["peak_bytes_in_use"] == 50352128);
  CHECK(r.stats()["largest_alloc_size"] == 41943040);
  CHECK(r.placements.back()["addr"] == r.placements.front()["addr"]);
  CHECK(r.placements.back()["region_offset"] == 0);
}

TEST_CASE("xla-bfc §7.3 AllocatedVsRequested and zero-size") {
  auto r = simulate(
      {.name = "avr", .text = TraceBuilder().alloc(1, 4).alloc(2, 0).text, .policy = "xla-bfc", .config = kFixed1G});
  CHECK(r.placements[0]["block_bytes"] == 256);
  CHECK(r.placements[1]["ok"] == true);
  CHECK(r.placements[1]["addr"].is_null());
  CHECK(r.stats()["num_allocs"] == 1);
}

TEST_CASE("xla-bfc §7.4 CustomMemoryLimit: 2 MiB") {
  auto r = simulate({.name = "limit2m",
                     .text = TraceBuilder().alloc(1, 256).alloc(2, 8 << 20).text,
                     .policy = "xla-bfc",
                     .config = {{"memory_limit", 2 << 20}, {"spatial_partitioning", false}}});
  CHECK(r.placements[0]["ok"] == true);
  CHECK(r.placements[1]["ok"] == false);
  REQUIRE(r.result.ooms.size() == 1);
  CHECK_FALSE(r.result.ooms[0].fragmentation);
}

TEST_CASE("xla-bfc §7.5 region target: growth starts at 2 MiB, preallocation takes the limit") {
  auto g = simulate({.name = "grow2m",
                     .text = TraceBuilder().alloc(1, 256).text,
                     .policy = "xla-bfc",
                     .config = {{"preallocate", false}}});
  CHECK(g.stats()["pool_bytes"] == 2 << 20);
  auto p = simulate({.name = "pre2g",
                     .text = TraceBuilder().alloc(1, 256).text,
                     .policy = "xla-bfc",
                     .config = {{"memory_limit", 1ULL << 31}, {"spatial_partitioning", false}}});
  CHECK(p.stats()["pool_bytes"] == 1ULL << 31);
}

TEST_CASE("xla-bfc §7.6 BinDebugInfo: 11 chunks, one free chunk of 1073725952") {
  TraceBuilder t;
  std::uint64_t id = 1;
  for (int rep = 0; rep < 2; ++rep)
    for (std::uint64_t s : {256, 512, 1024, 2048, 4096}) t.alloc(id++, s);
  // One more request that cannot fit forces the OOM dump with the bins table.
  t.alloc(id, 2ULL << 30);
  auto r = simulate({.name = "bins", .text = t.text, .policy = "xla-bfc", .config = kFixed1G});
  CHECK(r.stats()["bytes_in_use"] == 15872);
  CHECK(r.stats()["largest_free_block_bytes"] == 1073725952);
  REQUIRE(r.result.ooms.size() == 1);
  const std::string& dump = r.result.ooms[0].explanation;
  // As TSL's bfc_allocator.cc logs it: bin sizes in bytes, the rest in HumanReadableNumBytes.
  CHECK(dump.find("Bin (256): \tTotal Chunks: 2, Chunks in use: 2. 512B allocated for chunks. 512B in use in bin.") !=
        std::string::npos);
  CHECK(dump.find("Bin (4096): \tTotal Chunks: 2, Chunks in use: 2. 8.0KiB allocated for chunks.") !=
        std::string::npos);
  CHECK(dump.find("Bin (268435456): \tTotal Chunks: 1, Chunks in use: 0. 1023.98MiB allocated for chunks.") !=
        std::string::npos);
  CHECK(dump.find("ran out of memory trying to allocate 2.00GiB (rounded to 2147483648)") != std::string::npos);
  CHECK(dump.find("Limit:                      1073741824\n") != std::string::npos);
  CHECK(dump.find("LargestFreeBlock:           1073725952\n") != std::string::npos);
}

TEST_CASE("xla-bfc §3/§7.7 growth regions 4,4,8,...,256 MiB and garbage collection") {
  TraceBuilder t;
  for (int i = 1; i <= 128; ++i) t.alloc(i, 4 << 20);
  for (int i = 1; i <= 127; ++i) t.free(i);
  t.alloc(1000, 1600ULL << 20);  // > limit - pool: only fits after freeing the empty regions
  nlohmann::json cfg = {{"preallocate", false}, {"memory_limit", 2ULL << 30}, {"garbage_collection", true}};
  auto r = simulate({.name = "gc", .text = t.text, .policy = "xla-bfc", .config = cfg});
  std::vector<int> per_region(8, 0);
  for (int i = 0; i < 128; ++i) ++per_region.at(r.placements[i]["region"].get<int>());
  CHECK(per_region == std::vector<int>{1, 1, 2, 4, 8, 16, 32, 64});
  CHECK(r.placements[0]["block_bytes"] == 4 << 20);
  CHECK(r.placements[128]["ok"] == true);
  CHECK(r.placements[128]["region"] == 8);
  // Extend after GC: target doubles 512 MiB -> 2 GiB, capped at limit - pool = 1792 MiB.
  CHECK(r.stats()["pool_bytes"] == 2ULL << 30);
  CHECK(r.placements[128]["block_bytes"] == 1600ULL << 20);
  CHECK(r.result.spaces[0].device_frees == 7);
  CHECK(r.result.spaces[0].extra["bfc"]["garbage_collections"] == 1);
  // Without GC the same request is an OOM.
  cfg["garbage_collection"] = false;
  auto n = simulate({.name = "nogc", .text = t.text, .policy = "xla-bfc", .config = cfg});
  CHECK(n.placements[128]["ok"] == false);
}

TEST_CASE("xla-bfc §7.8 PhysicalAllocatorOomsFragmentation: 508 MiB fails with 508 MiB free") {
  TraceBuilder t;
  for (int i = 1; i <= 128; ++i) t.alloc(i, 4 << 20);
  for (int i = 1; i <= 127; ++i) t.free(i);
  t.alloc(1000, 508ULL << 20);
  auto r = simulate({.name = "physfrag",
                     .text = t.text,
                     .policy = "xla-bfc",
                     .config = {{"preallocate", false}, {"memory_limit", 512ULL << 20}}});
  CHECK(r.stats()["pool_bytes"] == 512ULL << 20);
  REQUIRE(r.result.ooms.size() == 1);
  CHECK(r.result.ooms[0].fragmentation);
  CHECK(r.result.ooms[0].free == 508ULL << 20);
}

TEST_CASE("xla-bfc §7.9 backpedal terminates: 8 device calls for a 2048-byte limit") {
  auto r = simulate({.name = "backpedal",
                     .text = TraceBuilder().alloc(1, 100).text,
                     .policy = "xla-bfc",
                     .config = {{"memory_limit", 2048}, {"jaxlib", "0.10.1"}},
                     .capacity = "0"});
  CHECK(r.placements[0]["ok"] == false);
  CHECK(r.result.spaces[0].device_failed == 8);
}

// BFCAllocator::Extend asks the device for its region size, then for 90 % of each size that failed
// (rounded to 256 B), and gives up below the request: with 100 MiB left on the device, a 100 MiB
// request after a 128 MiB target is tried at 128, 115.2 and 103.68 MiB, and the next, 93.3 MiB, is
// below it. Enough is free, and in one piece: the OOM says so and names the tries.
TEST_CASE("xla-bfc: Extend's backoff passes over the device's last bytes, and the OOM says so") {
  auto r = simulate({.name = "backoff_passes_over",
                     .text = TraceBuilder().alloc(1, 100 << 20).text,
                     .policy = "xla-bfc",
                     .config = {{"preallocate", false}, {"memory_limit", 1ULL << 30}},
                     .capacity = "100MiB"});
  REQUIRE(r.result.ooms.size() == 1);
  const OomRecord& o = r.result.ooms[0];
  CHECK(o.largest_free == 100ULL << 20);  // the device's memory, in one piece
  CHECK(o.fragmentation);                 // the contract's rule: free >= rounded
  CHECK(o.kind == "region_growth_backoff");
  CHECK_THAT(o.explanation, Catch::Contains("asked the device for 128.00 MiB") &&
                                Catch::Contains("down to 103.68 MiB") && Catch::Contains("the next try, 93.31 MiB") &&
                                Catch::Contains("100.00 MiB the device had left"));
  // One piece short of the request: no backoff passed over it, the ordinary capacity OOM.
  auto short_of = simulate({.name = "backoff_short",
                            .text = TraceBuilder().alloc(1, 100 << 20).text,
                            .policy = "xla-bfc",
                            .config = {{"preallocate", false}, {"memory_limit", 1ULL << 30}},
                            .capacity = "98MiB"});
  REQUIRE(short_of.result.ooms.size() == 1);
  CHECK(short_of.result.ooms[0].kind.empty());
}

TEST_CASE("xla-bfc §7.10 spatial: lower 256 at base, upper 256 at base+3840") {
  auto r = simulate(
      {.name = "spatial4k",
       .text = TraceBuilder().alloc(1, 256).alloc(2, 256, "collective").text,
       .policy = "xla-bfc",
       .config = {
           {"memory_limit", 4096}, {"jaxlib", "0.10.1"}, {"spatial_partitioning", true}, {"upper_alignment", 256}}});
  REQUIRE(r.placements[1]["ok"] == true);
  CHECK(r.placements[0]["region_offset"] == 0);
  CHECK(r.placements[1]["region_offset"] == 3840);
  CHECK(r.placements[1]["block_bytes"] == 256);
}

TEST_CASE("xla-bfc limit: f32 fraction, 2 MiB rounding by release, one padded region") {
  Bytes total = 84987740160;  // h100-80g
  auto newest = jaxlib_behaviour(kNewestJaxlib, "jaxlib"), old = jaxlib_behaviour("0.10.1", "jaxlib");
  CHECK(xla_memory_limit(total, 0.75, old) == 63740805120);
  CHECK(xla_memory_limit(total, 0.75, newest) == round_up(63740805120, 2 << 20));
  // 0.9 as f32 is 0.89999997615814208984375
  CHECK(xla_memory_limit(total, 0.9, old) == static_cast<Bytes>(84987740160.0 * 0.89999997615814208984375));
  CHECK(xla_memory_limit(total, 0.9, old) < static_cast<Bytes>(84987740160.0 * 0.9));
  auto r = simulate({.name = "h100default",
                     .text = TraceBuilder().alloc(1, 1000).text,
                     .policy = "xla-bfc",
                     .capacity = "84987740160",
                     .reserve = "500MiB"});
  CHECK(r.stats()["pool_bytes"] == round_up(63740805120, 2 << 20));
  CHECK(r.stats()["bytes_limit"] == round_up(63740805120, 2 << 20));
  auto o = simulate({.name = "h100old",
                     .text = TraceBuilder().alloc(1, 1000).text,
                     .policy = "xla-bfc",
                     .config = {{"jaxlib", "0.10.1"}},
                     .capacity = "84987740160",
                     .reserve = "500MiB"});
  CHECK(o.stats()["pool_bytes"] == round_down(63740805120, 256));
  CHECK(o.result.policy_config["resolved_spatial_partitioning"] == false);
  CHECK(r.result.policy_config["resolved_spatial_partitioning"] == true);
}

TEST_CASE("xla-bfc split rule: whole chunk below 2x, split at >= 2x or >= 128 MiB excess") {
  // A 1 MiB hole reused by 600 KiB: 1 MiB < 2 x 600 KiB and excess < 128 MiB -> taken whole.
  TraceBuilder t;
  t.alloc(1, 1 << 20).alloc(2, 256).free(1).alloc(3, 600 << 10).alloc(4, 256 << 10);
  auto r = simulate({.name = "split", .text = t.text, .policy = "xla-bfc", .config = kFixed1G});
  CHECK(r.placements[2]["region_offset"] == 0);
  CHECK(r.placements[2]["block_bytes"] == 1 << 20);
  CHECK(r.placements[3]["region_offset"] == (1 << 20) + 256);  // not inside the whole-taken hole
  // 300 MiB hole, 150 MiB + 256 request: < 2x but excess >= 128 MiB -> split.
  TraceBuilder u;
  u.alloc(1, 300 << 20).alloc(2, 256).free(1).alloc(3, (150 << 20) + 256).alloc(4, 1 << 20);
  auto s = simulate({.name = "split2", .text = u.text, .policy = "xla-bfc", .config = kFixed1G});
  CHECK(s.placements[2]["block_bytes"] == (150 << 20) + 256);
  CHECK(s.placements[3]["region_offset"] == (150 << 20) + 256);
}

TEST_CASE("xla-bfc spatial vs classic: the gap is taken only when no LOW hole fits") {
  // A 200 MiB hole at the bottom and a 134 MiB tail (the gap in spatial mode): classic best fit
  // takes the smaller tail (whole: 134 < 2 x 100 and the excess < 128 MiB); spatial prefers its
  // own-tag hole and splits it.
  TraceBuilder t;
  t.alloc(1, 200 << 20).alloc(2, 690 << 20).free(1).alloc(3, 100 << 20);
  nlohmann::json classic = kFixed1G, spatial = kFixed1G;
  spatial["spatial_partitioning"] = true;
  auto c = simulate({.name = "cl", .text = t.text, .policy = "xla-bfc", .config = classic}),
       s = simulate({.name = "sp", .text = t.text, .policy = "xla-bfc", .config = spatial});
  CHECK(c.placements[1]["block_bytes"] == 690 << 20);  // split: excess 134 MiB >= 128 MiB
  CHECK(c.placements[2]["region_offset"] == 890 << 20);
  CHECK(c.placements[2]["block_bytes"] == 134 << 20);
  CHECK(s.placements[2]["region_offset"] == 0);
  CHECK(s.placements[2]["block_bytes"] == 100 << 20);
}

TEST_CASE("xla-bfc spatial: collective buffers at the top, 2 MiB aligned — frees regrow the gap") {
  TraceBuilder t;
  t.alloc(1, 1 << 20, "collective").alloc(2, 3 << 20).alloc(3, 1 << 20, "collective").free(1).free(3);
  t.alloc(4, (1024 - 3) << 20);  // only fits if both upper frees returned their space to the gap
  nlohmann::json cfg = {{"memory_limit", 1ULL << 30}};
  auto r = simulate({.name = "upper", .text = t.text, .policy = "xla-bfc", .config = cfg});
  CHECK(r.placements[0]["region_offset"] == (1022 << 20));  // aligndown(end - 1 MiB, 2 MiB)
  CHECK(r.placements[0]["block_bytes"] == 1 << 20);         // exact, never whole
  CHECK(r.placements[2]["region_offset"] == (1020 << 20));
  CHECK(r.placements[1]["region_offset"] == 0);
  CHECK(r.placements[3]["ok"] == true);
  CHECK(r.placements[3]["region_offset"] == 3 << 20);
  // Classic mode sends collective buffers to a separate BFC of total x (1 - fraction).
  cfg["spatial_partitioning"] = false;
  auto c = simulate({.name = "upper_classic", .text = t.text, .policy = "xla-bfc", .config = cfg});
  CHECK(c.stats().contains("collective"));
  CHECK(c.placements[0]["region"] == 0);
  CHECK(c.placements[0]["region_offset"] == 0);
}

TEST_CASE("xla-bfc spatial: an upper request never uses LOW holes (OOM with memory free)") {
  TraceBuilder t;
  t.alloc(1, 512 << 20).alloc(2, 510 << 20).free(1).alloc(3, 64 << 20, "collective");
  auto r =
      simulate({.name = "upperoom", .text = t.text, .policy = "xla-bfc", .config = {{"memory_limit", 1ULL << 30}}});
  REQUIRE(r.result.ooms.size() == 1);
  CHECK(r.result.ooms[0].fragmentation);
}

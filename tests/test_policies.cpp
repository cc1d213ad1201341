// Behaviour of the GPU-side JAX allocators that have no recorded trace to check them against
// (platform, cuda-async), and regression tests for ownership bugs: policies that kept device
// memory after they were gone, scheduled work that outlived its owner, unchecked page grants.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "policies/jax_gpu.h"
#include "sim/base/error.h"
#include "sim_helpers.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {}

TEST_CASE("platform: one device call per buffer, padded to the 2 MiB VMM granularity (jaxlib >= 0.10.2)") {
  TraceBuilder t;
  t.alloc(1, 1).alloc(2, 3 * MiB).free(1).alloc(3, 2 * MiB + 1).free(2).free(3);
  auto r = simulate({.name = "plat", .text = t.text, .policy = "platform", .capacity = "1GiB"});
  // h100-80g preset: granularity 2 MiB (hardware.md §1); every buffer is its own device allocation.
  CHECK(r.placements[0]["block_bytes"] == 2 * MiB);
  CHECK(r.placements[1]["block_bytes"] == 4 * MiB);
  CHECK(r.placements[2]["block_bytes"] == 4 * MiB);
  const auto& sp = r.result.spaces.at(0);
  CHECK(sp.device_allocs == 3);
  CHECK(sp.device_frees == 3);
  CHECK(r.result.peak_reserved == 8 * MiB);  // 2 + 4, then 4 + 4 after the first free
  CHECK(r.result.peak_allocated == r.result.peak_reserved);
  // The simulated call time is the preset's cost model, call by call:
  // alloc 10 µs + 30 ns/MiB, free 14 µs + 5 ns/MiB.
  double want =
      (10000 + 30 * 2) + (10000 + 30 * 4) + (10000 + 30 * 4) + (14000 + 5 * 2) + (14000 + 5 * 4) + (14000 + 5 * 4);
  CHECK(sp.device_time_ns == Approx(want));
}

TEST_CASE("platform: jaxlib before 0.10.2 rounds to 512 B (cuMemAlloc), and OOMs on the padded size") {
  TraceBuilder t;
  t.alloc(1, 1000).alloc(2, 1000);
  auto r = simulate(
      {.name = "plat_old", .text = t.text, .policy = "platform", .config = {{"jaxlib", "0.4.30"}}, .capacity = "1GiB"});
  CHECK(r.placements[0]["block_bytes"] == 1024);
  // 3 MiB device: a 3 MiB + 1 B request pads to 4 MiB under VMM and fails, with 3 MiB free.
  TraceBuilder big;
  big.alloc(1, 3 * MiB + 1);
  auto o =
      simulate({.name = "plat_oom", .text = big.text, .policy = "platform", .capacity = "4MiB", .reserve = "1MiB"});
  REQUIRE(o.result.ooms.size() == 1);
  CHECK(o.result.ooms[0].rounded == 4 * MiB);
  CHECK_FALSE(o.result.ooms[0].fragmentation);  // capacity: nothing fragments a platform allocator
}

TEST_CASE("cuda-async: release threshold = total x f32(fraction), the preallocated pool stays cached") {
  TraceBuilder t;
  t.alloc(1, 100 * MiB).free(1).alloc(2, 50 * MiB);
  auto r = simulate(
      {.name = "async", .text = t.text, .policy = "cuda-async", .config = {{"mem_fraction", 0.5}}, .capacity = "1GiB"});
  Bytes threshold = static_cast<Bytes>(1024.0 * MiB * static_cast<double>(0.5f));
  CHECK(r.result.policy_config["resolved_release_threshold"] == threshold);
  // JAX allocates and frees the pool size once: the first buffers come from that cached memory.
  const auto& sp = r.result.spaces.at(0);
  CHECK(sp.device_allocs == 1);
  CHECK(r.result.peak_reserved == threshold);
  CHECK(r.placements[0]["region"] == 0);
  CHECK(r.placements[1]["addr"] == r.placements[0]["addr"]);  // reused after the free
}

// The pool maps physical memory in 32 MiB chunks (tests/data/device_h200: measured on an H200):
// two 8 MiB buffers share one chunk, which the device grants once and, below the threshold, the
// pool keeps; with threshold 0 a chunk goes back at the sync after its last buffer is freed.
TEST_CASE("cuda-async: chunks return to the device above the threshold at the next sync") {
  TraceBuilder t;
  t.alloc(1, 8 * MiB).alloc(2, 8 * MiB).free(1).free(2).alloc(3, 8 * MiB);
  auto keep = simulate({.name = "async_keep",
                        .text = t.text,
                        .policy = "cuda-async",
                        .config = {{"preallocate", false}, {"release_threshold", "1GiB"}},
                        .capacity = "1GiB"});
  auto trim = simulate({.name = "async_trim",
                        .text = t.text,
                        .policy = "cuda-async",
                        .config = {{"preallocate", false}, {"release_threshold", 0}},
                        .capacity = "1GiB"});
  CHECK(keep.result.spaces.at(0).device_allocs == 1);  // one chunk under both buffers
  CHECK(keep.result.spaces.at(0).device_frees == 0);
  CHECK(keep.result.peak_reserved == 32 * MiB);
  CHECK(keep.placements[1]["addr"].get<std::uint64_t>() == keep.placements[0]["addr"].get<std::uint64_t>() + 8 * MiB);
  CHECK(keep.placements[2]["addr"] == keep.placements[0]["addr"]);  // the freed, still mapped block
  // Threshold 0: the chunk stays while buffer 2 holds it, goes back after the second free.
  CHECK(trim.result.spaces.at(0).device_allocs == 2);
  CHECK(trim.result.spaces.at(0).device_frees == 1);
  CHECK(trim.stats()["trims"] == 1);
  CHECK(trim.stats()["chunks_released"] == 1);
  // Down to the threshold, not below: 3 chunks held, 1 under a live buffer, 40 MiB kept → 2 go.
  TraceBuilder p;
  p.alloc(1, 64 * MiB).alloc(2, 8 * MiB).free(1);
  auto part = simulate({.name = "async_part",
                        .text = p.text,
                        .policy = "cuda-async",
                        .config = {{"preallocate", false}, {"release_threshold", "40MiB"}},
                        .capacity = "1GiB"});
  CHECK(part.result.peak_reserved == 96 * MiB);
  CHECK(part.stats()["reserved_mem_current"] == 32 * MiB);
  CHECK(part.stats()["chunks_released"] == 2);
  // A 40 MiB and a 60 MiB buffer side by side touch 4 chunks (the real pool held 1088 MiB after
  // 1024 + 40 MiB and 1152 MiB after 1024 + 40 + 60 MiB, replay.llm_serving.async.json).
  TraceBuilder u;
  u.alloc(1, 1024 * MiB).alloc(2, 40 * MiB).alloc(3, 60 * MiB);
  auto r = simulate({.name = "async_chunks",
                     .text = u.text,
                     .policy = "cuda-async",
                     .config = {{"preallocate", false}},
                     .capacity = "4GiB"});
  CHECK(r.result.peak_reserved == 1152 * MiB);
  CHECK(r.stats()["chunks_mapped"] == 36);
}

// Review of the chunk model: the memory map once paired blocks with regions by address order
// while the pools were listed by stream, and drew an unmapped tail as 140 GB of free mapped
// memory. Every stream's blocks now lie in one pool (measured on an H200, test_cuda_async_h200):
// stream 7's 4 KiB block and stream 0's 8 MiB block share the reservation's first chunk.
TEST_CASE("cuda-async: every stream's blocks lie in one pool whose memory map stays inside what it holds") {
  std::string text =
      "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"t\":0,\"stream\":7}\n"
      "{\"op\":\"alloc\",\"id\":2,\"size\":8388608,\"t\":10,\"stream\":0}\n";
  auto r = simulate({.name = "async_map",
                     .text = text,
                     .policy = "cuda-async",
                     .config = {{"preallocate", false}},
                     .capacity = "1GiB"});
  REQUIRE(r.result.spaces.at(0).peak);
  const SpaceMoment& m = r.result.spaces.at(0).peak->spaces.at(0);
  REQUIRE(m.map.regions.size() == 1);
  CHECK(r.placements[1]["addr"].get<std::uint64_t>() == r.placements[0]["addr"].get<std::uint64_t>() + 4096);
  Bytes mapped = 0;
  for (const auto& b : m.map.blocks) {
    if (b.mapped) mapped += b.size;
    CHECK(b.addr >= m.map.regions[0].base);
    CHECK(b.addr + b.size <= m.map.regions[0].base + m.map.regions[0].size);
  }
  CHECK(mapped == 32 * MiB);  // one chunk under both buffers, all of it mapped
  CHECK(m.reserved == 32 * MiB);
}

TEST_CASE("cuda-async: another stream's free is reusable only once the freeing work completed") {
  std::string text =
      "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"t\":0,\"stream\":1}\n"
      "{\"op\":\"free\",\"id\":1,\"t\":10}\n"
      "{\"op\":\"alloc\",\"id\":2,\"size\":4096,\"t\":20,\"stream\":2}\n"
      "{\"op\":\"alloc\",\"id\":3,\"size\":4096,\"t\":200,\"stream\":3}\n";
  auto r = simulate({.name = "async_streams",
                     .text = text,
                     .policy = "cuda-async",
                     .config = {{"preallocate", false}, {"release_threshold", "1GiB"}, {"cross_stream_delay", 100}},
                     .capacity = "1GiB"});
  CHECK(r.placements[1]["addr"] != r.placements[0]["addr"]);  // t=20: freed at 10, completes at 110
  CHECK(r.placements[2]["addr"] == r.placements[0]["addr"]);  // t=200: reusable
}

// Regression: --follow-recording asked cuda-async for a range whose free part was mapped and the
// rest not, on a device too small to map all of it. Mapping one part gave the other's memory back
// (every free block unmaps when a part does not fit), and the parts took turns for ever; a real
// snapshot (oom_retry_release, cuda-async at 3 GiB with --keep-going) never finished. Here 96 MiB
// is three 32 MiB chunks: two under buffer 1, one under freed buffer 2's block at X. Buffer 3
// (32 MiB recorded at X + 16 MiB) touches chunks 0 and 1 of X: four in all, one more than the
// device has. It is placed where the policy itself puts it: the free chunk of Y's reservation.
TEST_CASE("cuda-async: a recorded range the device cannot map goes where the policy places it") {
  constexpr std::uint64_t X = 0x7f0000000000, Y = 0x7f1000000000;
  auto alloc = [](int id, std::uint64_t size, std::uint64_t addr) {
    return fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"addr\":{}}}", id, size, addr);
  };
  TraceBuilder t;
  t.raw(alloc(1, 64 * MiB, Y)).raw(alloc(2, 32 * MiB, X)).free(2).raw(alloc(3, 32 * MiB, X + 16 * MiB));
  auto r = simulate({.name = "async_follow_unmappable",
                     .text = t.text,
                     .policy = "cuda-async",
                     .config = {{"preallocate", false}, {"release_threshold", "1GiB"}},
                     .capacity = "96MiB",
                     .follow_recording = true});
  CHECK(r.result.completed);
  CHECK(r.result.ooms.empty());
  REQUIRE(r.placements.size() == 3);
  CHECK(r.placements[0]["addr"] == Y);
  CHECK(r.placements[1]["addr"] == X);  // corrected: the policy chose Y + 64 MiB
  CHECK(r.placements[2]["addr"] == Y + 64 * MiB);
  const auto& follow = r.result.fidelity["follow_recording"];
  CHECK(follow["corrected"] == 1);
  CHECK(follow["uncorrected"] == 1);
  CHECK(r.result.peak_reserved == 96 * MiB);
}

// Regression: the recording's allocator (XLA's BFC, 256 B granularity) left two 256 B buffers
// 256 B apart before a capture began; the pool rounds to 512 B, so the second recorded range lies
// in the first one's block. cuda-async reported an OOM at that buffer, next to a free pool of
// gigabytes (two real XProf captures: event 1 of the T4 one, "largest piece 13.64 GiB"). A buffer
// live before the trace that cannot go where it was recorded is placed as any request.
TEST_CASE("cuda-async: a buffer live before the trace whose recorded range is taken goes where the pool places it") {
  constexpr std::uint64_t X = 0x7f0000000000;
  auto pre = [](int id, std::uint64_t size, std::uint64_t addr) {
    return fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"addr\":{},\"pre_trace\":true}}", id, size, addr);
  };
  TraceBuilder t;
  t.raw(pre(1, 256, X)).raw(pre(2, 256, X + 256)).alloc(3, 4 * MiB).free(1).free(2).free(3);
  auto r = simulate({.name = "async_pre_trace_shared_block",
                     .text = t.text,
                     .policy = "cuda-async",
                     .capacity = "1GiB",
                     .pre_trace = PriorOptions::Mode::kRecorded});
  CHECK(r.result.completed);
  CHECK(r.result.ooms.empty());
  REQUIRE(r.placements.size() == 3);
  CHECK(r.placements[0]["addr"] == X);
  CHECK(r.placements[0]["block_bytes"] == 512);
  CHECK(r.placements[1]["ok"] == true);
  CHECK(r.placements[1]["addr"] != X + 256);  // inside block 1: placed by the pool
  REQUIRE(r.result.spaces.size() == 1);
  CHECK(r.result.spaces[0].stats["pre_trace_not_at_recorded"] == 1);
}

// Regression (issue 14): tpu-padded built a throw-away inner policy to check its config; an inner
// cuda-async preallocated its pool there and never gave it back, so a 512 MiB request failed on
// a 1 GiB device. Configuration now builds nothing, and grants return with their owner.
TEST_CASE("tpu-padded works with every inner policy — no device memory left behind") {
  TraceBuilder t;
  t.alloc(1, 512 * MiB).free(1).alloc(2, 600 * MiB);
  for (const char* inner : {"ideal", "best-fit", "first-fit", "xla-bfc", "platform", "cuda-async", "torch-caching"}) {
    INFO(inner);
    auto r = simulate({.name = std::string("tpuin_") + inner,
                       .text = t.text,
                       .policy = "tpu-padded",
                       .config = {{"inner", inner}},
                       .capacity = "1GiB"});
    CHECK(r.result.completed);
  }
}

// Regression (issue 14): with inner=xla-bfc and defragmentation the rebuilt inner BFC could not
// preallocate while the old one still held the pool, and the run died with exit 1.
TEST_CASE("tpu-padded defragmentation rebuilds a preallocating inner policy in place") {
  TraceBuilder t;
  // 4 × 200 MiB, free the 1st and 3rd: 400 MiB free in two 200 MiB holes, then ask for 300 MiB.
  t.alloc(1, 200 * MiB).alloc(2, 200 * MiB).alloc(3, 200 * MiB).alloc(4, 200 * MiB).free(1).free(3);
  t.alloc(5, 300 * MiB);
  auto r = simulate({.name = "defrag_bfc",
                     .text = t.text,
                     .policy = "tpu-padded",
                     .config = {{"inner", "xla-bfc"}, {"inner_config", {{"mem_fraction", 0.8}}}, {"defragment", true}},
                     .capacity = "1GiB"});
  CHECK(r.result.completed);
  CHECK(r.stats()["compactions"] == 1);
  // Compaction in address order: buffer 2 slides from 200 to 0 MiB, buffer 4 from 600 to 200 MiB
  // (positions inside the pool: the rebuilt pool's base address is new).
  CHECK(r.stats()["bytes_moved"] == 400 * MiB);
  CHECK(r.result.spaces.at(0).device_allocs == 2);  // the old pool, then the rebuilt one
  CHECK(r.result.spaces.at(0).device_frees == 1);
}

// Regression (found by fuzzing the policies): compaction rebuilt the inner policy before knowing
// the live buffers would fit again, and stopped on an internal error when they did not (exit 1).
// With torch-caching inside, order matters: buffer 3 (8 MiB) sits in buffer 1's old 14 MiB segment,
// and re-placed first it gets a 20 MiB segment of its own (requests under 10 MiB,
// specs/torch-caching.md section 1), leaving 10 MiB of 30 for buffer 2's 14 MiB. The rebuild is
// now tried on a device of the same size first; buffer 4's request then fails as before it.
TEST_CASE("tpu-padded defragmentation leaves the state as it was when the live buffers would not fit again") {
  TraceBuilder t;
  t.alloc(1, 13 * MiB).alloc(2, 13 * MiB).free(1).alloc(3, 8 * MiB).alloc(4, 7 * MiB);
  auto r = simulate({.name = "defrag_torch",
                     .text = t.text,
                     .policy = "tpu-padded",
                     .config = {{"inner", "torch-caching"}, {"defragment", true}},
                     .capacity = "30MiB",
                     .keep_going = true,
                     .hw = "tpu-v5e"});
  REQUIRE(r.result.ooms.size() == 1);
  CHECK(r.result.ooms[0].event_index == 4);
  CHECK(r.stats()["compactions"] == 0);
  CHECK(r.stats()["bytes_moved"] == 0);
  REQUIRE(r.placements.size() == 4);
  CHECK(r.placements[2]["ok"] == true);
  CHECK(r.placements[3]["ok"] == false);
}

// Regression (found by issue 50's scaling work): XLA's BFC with spatial partitioning CHECK-fails when
// a second region meets an existing central gap (specs/xla-bfc-spatial.md section 1, "Edge"), and
// fragsim's xla-bfc stops the replay there. Inside tpu-padded that abort was the inner policy's
// alone: the wrapper went on, releasing (and, with defragmentation, compacting) on the state the
// failed check left, and crashed. The real allocator is the same one inside the wrapper, so the run
// stops at the same event with the same message. The sqattn snapshot on a 512 MiB TPU v5e with
// --keep-going reaches that state after its first OOMs.
TEST_CASE("tpu-padded: its inner allocator's abort stops the run where that allocator alone stops") {
  auto run = [](const std::string& policy) {
    RunRequest q;
    q.trace = test_data("torch/sqattn_empty_cache.pickle.zst");
    q.policy = policy;
    q.hw = "tpu-v5e";
    q.capacity = "512MiB";
    q.keep_going = true;
    return run_request(q, test_registry());
  };
  const RunResult alone = run("xla-bfc");
  REQUIRE(!alone.fatal.empty());
  CHECK(alone.fatal.find("one central gap") != std::string::npos);
  for (const char* p : {"tpu-padded[inner=xla-bfc]", "tpu-padded[inner=xla-bfc,defragment=true]"}) {
    INFO(p);
    const RunResult wrapped = run(p);
    CHECK(wrapped.fatal == alone.fatal);
    CHECK(wrapped.fatal_event == alone.fatal_event);
    CHECK(wrapped.ooms.size() == alone.ooms.size());
  }
}

// Regression (issue 14): scheduled callbacks captured `this` and could not be cancelled. A task
// now dies with its owner: this test-only policy keeps just its latest task, so replacing it
// cancels the earlier one, and the engine runs only what is still wanted.
namespace {
struct Counter {
  int ran = 0;
};
class SchedulingPolicy : public AllocatorPolicy {
 public:
  SchedulingPolicy(Scheduler* s, Counter* c) : s_(s), c_(c) {}
  Placement allocate(const AllocRequest& req) override {
    task_ = s_->schedule(req.t + 100, [this] { ++c_->ran; });  // the previous task is cancelled
    return Placement::unplaced(req.size);
  }
  void release(Handle) override {}
  Usage usage() const override { return {}; }
  void validate() const override {}

 private:
  Scheduler* s_;
  Counter* c_;
  Scheduler::Task task_;
};
}  // namespace

TEST_CASE("scheduled work dies with its owner — a replaced task never runs") {
  Counter counter;
  Registry reg;
  reg.add({"scheduling", "test", [&](ConfigReader&, const ConfigContext&) -> PolicyBuilder {
             return [&](const PolicyContext& pc) { return std::make_unique<SchedulingPolicy>(pc.scheduler, &counter); };
           }});
  RunOptions o;
  o.trace = write_text("sched.jsonl",
                       "{\"op\":\"alloc\",\"id\":1,\"size\":8,\"t\":0}\n"
                       "{\"op\":\"alloc\",\"id\":2,\"size\":8,\"t\":10}\n"
                       "{\"op\":\"alloc\",\"id\":3,\"size\":8,\"t\":20}\n"
                       "{\"op\":\"mark\",\"t\":1000}\n");
  o.policy.name = "scheduling";
  o.hw = load_hardware("h100-80g");
  (void)run_simulation(o, reg);
  CHECK(counter.ran == 1);  // the tasks of t=0 and t=10 were cancelled by their replacements

  bool ran = false;
  auto fn = std::make_shared<std::function<void()>>([&] { ran = true; });
  {
    Scheduler::Task t(fn);
    CHECK(t.pending());
  }  // destroyed: cancelled
  CHECK(!*fn);
  CHECK_FALSE(ran);
}

// Regression (issue 14): the expandable path dereferenced a page grant without checking it; on a
// device whose granularity does not divide the 2 MiB page, more was reserved than granted.
TEST_CASE("torch-caching expandable segments on a device whose granularity does not divide the page") {
  nlohmann::json hw = {{"name", "odd"},
                       {"kind", "gpu"},
                       {"spaces", {{{"name", "hbm"}, {"capacity_bytes", 64 * MiB}, {"granularity", 3 * MiB}}}}};
  std::string hw_path = write_text("odd_gpu.json", hw.dump());
  TraceBuilder t;
  // Large pool, 20 MiB pages, each granted as 21 MiB: 3 pages fit the 64 MiB device (60 MiB mapped).
  for (int i = 1; i <= 60; ++i) t.alloc(i, 1 * MiB + 4096);
  auto r = simulate({.name = "odd_gran",
                     .text = t.text,
                     .policy = "torch-caching",
                     .config = {{"alloc_conf", "expandable_segments:True"}},
                     .capacity = "",
                     .keep_going = true,
                     .reserve = "0",
                     .hw = hw_path});
  // --check ran validate() after every event: reserved ≤ what the device granted, grants = device use.
  CHECK(!r.result.completed);
  CHECK(r.result.peak_reserved == 60 * MiB);
  CHECK(r.result.spaces.at(0).device_allocs == 3);
}

TEST_CASE("config errors name the key, the option that named a policy, and every key the policy knows") {
  Registry reg;
  register_builtin_policies(reg);
  auto err = [&](const std::string& policy, const nlohmann::json& cfg) {
    try {
      simulate({.name = "cfgerr", .text = TraceBuilder().alloc(1, 10).text, .policy = policy, .config = cfg});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // memory_limit is read only when present: it must still be listed.
  CHECK_THAT(err("xla-bfc", {{"memory_limt", 5}}), Catch::Contains("memory_limit"));
  CHECK_THAT(err("xla-bfc", {{"mem_fraction", 1e300}}),
             Catch::Contains("mem_fraction: must be a number > 0 and <= 64"));
  CHECK_THAT(err("tpu-padded", {{"inner", "bogus"}}),
             Catch::StartsWith("policy tpu-padded: inner: unknown policy 'bogus'"));
  CHECK_THAT(err("cuda-async", {{"cross_stream_delay", -1}}),
             Catch::Contains("cross_stream_delay: must be an integer >= 0"));
}

TEST_CASE("FRAGSIM_CHECK stays on in release builds and names the place") {
  try {
    FRAGSIM_CHECK(1 + 1 == 3, "arithmetic");
    FAIL("no exception");
  } catch (const InternalError& e) {
    CHECK_THAT(e.what(), Catch::Contains("tests/test_policies.cpp:"));
    CHECK_THAT(e.what(), Catch::Contains("arithmetic"));
  }
}

// Issue 47: a policy's own cap (a memory fraction's share) binds from the first byte; --check
// catches a policy that reserves above it. This test-only policy reserves 2 MiB whatever its
// 1 MiB limit says.
namespace {
class OverLimitPolicy : public AllocatorPolicy {
 public:
  Placement allocate(const AllocRequest& req) override { return Placement::unplaced(req.size); }
  void release(Handle) override {}
  Usage usage() const override {
    Usage u;
    u.reserved = 2 * MiB;
    return u;
  }
  Bytes limit() const override { return 1 * MiB; }
  void validate() const override {}
};
}  // namespace

TEST_CASE("a policy that reserves above its own limit is caught by --check") {
  Registry reg;
  reg.add({"over-limit", "test", [](ConfigReader&, const ConfigContext&) -> PolicyBuilder {
             return [](const PolicyContext&) { return std::make_unique<OverLimitPolicy>(); };
           }});
  RunOptions o;
  o.trace = write_text("over_limit.jsonl", "{\"op\":\"alloc\",\"id\":1,\"size\":8}\n");
  o.policy.name = "over-limit";
  o.hw = load_hardware("h100-80g");
  CHECK_NOTHROW((void)run_simulation(o, reg));  // without --check: not validated
  o.check = true;
  CHECK_THROWS_WITH((void)run_simulation(o, reg), Catch::Contains("reserved 2097152 B above its own limit 1048576 B"));
}

// The history a policy reads in the regions a recording held before it began (policy.h): one request a
// region; held together, or each only while a later one would fit in it.
TEST_CASE("prior requests: held together, or while a later one fits") {
  std::vector<PriorRegion> regions;
  for (Bytes size : {40 * MiB, 20 * MiB, 60 * MiB, 60 * MiB}) {
    PriorRegion r;
    r.addr = Addr(regions.size() * 64 * MiB);
    r.size = size;
    regions.push_back(r);
  }
  auto size = [](const PriorRegion& r) { return r.size; };
  CHECK(prior_requests_of_regions(regions, PriorHistory::kLeast, true, size, nullptr).empty());
  for (const auto& r : prior_requests_of_regions(regions, PriorHistory::kMost, false, size, nullptr))
    CHECK(r.released_before == SIZE_MAX);
  auto likely = prior_requests_of_regions(regions, PriorHistory::kLikely, false, size, nullptr);
  REQUIRE(likely.size() == 4);
  CHECK(likely[0].released_before == 2);         // 40 MiB: the 60 MiB request could not have used it
  CHECK(likely[1].released_before == 2);         // 20 MiB: idem
  CHECK(likely[2].released_before == SIZE_MAX);  // 60 MiB: the next 60 MiB would have fitted in it
  CHECK(likely[3].released_before == SIZE_MAX);
  for (const auto& r : prior_requests_of_regions(regions, PriorHistory::kLikely, true, size, nullptr))
    CHECK(r.released_before == SIZE_MAX);
}

// A region the recording's allocator would not split for a small request (PyTorch with
// max_split_size_mb: a free block of at least that size serves only requests less than 20 MiB below
// it) is not proven in use by a later small request the recording obtained memory for. Regions of 200
// and 40 MiB by address: read as any request that fits, upwards the 200 MiB one had to be in use when
// the 40 MiB one was obtained (240 MiB at once), so the downward order (200 MiB) is taken; serving only
// requests of 181 MiB or more, it was proven in use by none, and upwards holds 200 MiB too.
TEST_CASE("prior requests: a region proven in use only by requests it could have served") {
  std::vector<PriorRegion> regions;
  for (Bytes size : {200 * MiB, 40 * MiB}) {
    PriorRegion r;
    r.addr = Addr(regions.size() * 256 * MiB);
    r.size = size;
    regions.push_back(r);
  }
  auto size = [](const PriorRegion& r) { return r.size; };
  auto any = prior_requests_of_regions(regions, PriorHistory::kLikely, false, size, nullptr);
  REQUIRE(any.size() == 2);
  CHECK(any[0].size == 40 * MiB);  // downwards
  auto least = [](const PriorRegion& r) -> Bytes { return r.size >= 128 * MiB ? r.size - 20 * MiB + 1 : 0; };
  auto oversize = prior_requests_of_regions(regions, PriorHistory::kLikely, false, size, nullptr, least);
  REQUIRE(oversize.size() == 2);
  CHECK(oversize[0].size == 200 * MiB);  // upwards: it holds no more
  CHECK(oversize[0].released_before == 1);
  CHECK(oversize[1].released_before == SIZE_MAX);
}

// The least holding the recording proves (policy.h): a request is held until the last later request of
// its pool that would have fitted in it; the order, of the two address orders, the one that holds
// fewer bytes at once. Regions of 60, 40 and 20 MiB by address: obtained upwards, the 60 MiB one
// had to be in use when the 40 and 20 MiB ones were obtained (120 MiB at once); obtained downwards
// (20, 40, 60: each larger than any before), none had to be (60 MiB). A request of another pool
// (PyTorch's small pool never serves a large request) proves nothing about the others.
TEST_CASE("prior requests: the least holding the recording proves, in the order that needs least") {
  std::vector<PriorRegion> regions;
  for (Bytes size : {60 * MiB, 40 * MiB, 20 * MiB}) {
    PriorRegion r;
    r.addr = Addr(regions.size() * 64 * MiB);
    r.size = size;
    regions.push_back(r);
  }
  auto size = [](const PriorRegion& r) { return r.size; };
  auto likely = prior_requests_of_regions(regions, PriorHistory::kLikely, false, size, nullptr);
  REQUIRE(likely.size() == 3);
  CHECK(likely[0].size == 20 * MiB);  // downwards
  CHECK(likely[1].size == 40 * MiB);
  CHECK(likely[2].size == 60 * MiB);
  CHECK(likely[0].released_before == 1);  // nothing later would have fitted in it
  CHECK(likely[1].released_before == 2);
  CHECK(likely[2].released_before == SIZE_MAX);
  // 30, 10 (another pool) and 20 MiB by address: downwards (30 MiB at once, 50 upwards), the 20 MiB
  // request is released at once: the 10 MiB one after it is of the other pool and could not have
  // used its memory (of one pool, it would be held until then).
  regions[0].size = 30 * MiB;
  regions[1].size = 10 * MiB;
  auto pool = [](const PriorRegion& r) -> std::uint64_t { return r.size == 10 * MiB ? 1 : 0; };
  auto two = prior_requests_of_regions(regions, PriorHistory::kLikely, false, size, pool);
  REQUIRE(two.size() == 3);
  CHECK(two[0].size == 20 * MiB);
  CHECK(two[0].released_before == 1);
  CHECK(two[1].size == 10 * MiB);
  CHECK(two[1].released_before == 2);
  CHECK(two[2].size == 30 * MiB);
}

// A segment's history holds a live block while other regions are obtained only when the recording
// proves it was in use at such a moment (policy.h, for_each_region_piece). A late window of a
// profiler trace frees, in its first step, the loop's buffers allocated before it: a 12 MiB one
// filling a 12 MiB segment, a 5 MiB one beside 15 MiB that stays live. Held through the history as
// pieces of their segments, they were demand beside every other region's (32 MiB held at once);
// read as the memory around them, the 12 MiB segment's request is released before the 20 MiB one
// is obtained (20 MiB at once, the whole trace's reading of the same state), and the engine places
// those blocks after the history.
TEST_CASE("prior requests: a block the trace frees before it needs memory is no piece of a segment's history") {
  auto region = [](Addr at, Bytes size) {
    PriorRegion r;
    r.addr = at;
    r.size = size;
    return r;
  };
  std::vector<PriorRegion> regions = {region(Addr(0), 20 * MiB), region(Addr(64 * MiB), 12 * MiB)};
  regions[0].live = {{.addr = Addr(0), .size = 15 * MiB, .id = 1},
                     {.addr = Addr(15 * MiB), .size = 5 * MiB, .id = 2, .freed_unproven = true}};
  regions[1].live = {{.addr = Addr(64 * MiB), .size = 12 * MiB, .id = 3, .freed_unproven = true}};
  auto size = [](const PriorRegion& r) { return r.size; };
  auto h = prior_requests_of_regions(regions, PriorHistory::kLikely, false, size, nullptr);
  REQUIRE(h.size() == 3);  // downwards: the 12 MiB segment's request, then the 20 MiB one's history
  CHECK(h[0].size == 12 * MiB);
  CHECK(h[0].live == SIZE_MAX);
  CHECK(h[0].released_before == 1);  // nothing later would have fitted in it
  CHECK(h[1].live == 1);             // the block that stays live, at its place
  CHECK(h[2].size == 5 * MiB);       // the freed block's memory: a request, released with its segment
  CHECK(h[2].live == SIZE_MAX);
  // Blocks the recording proves in use (live to the end, or live when the trace obtained memory)
  // stay pieces at their place: upwards, 32 MiB held at once either way.
  regions[0].live[1].freed_unproven = regions[1].live[0].freed_unproven = false;
  auto kept = prior_requests_of_regions(regions, PriorHistory::kLikely, false, size, nullptr);
  REQUIRE(kept.size() == 3);
  CHECK(kept[0].live == 1);
  CHECK(kept[1].live == 2);
  CHECK(kept[2].live == 3);
}

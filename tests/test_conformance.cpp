// Conformance suite: every registered policy on seeded random and workload traces, with
// validate() after every event (--check), non-overlapping live placements, and the same
// peak_requested_bytes (the trace's true peak) for every policy.
#include <array>
#include <catch2/catch.hpp>
#include <map>

#include "policies/policy.h"
#include "sim/commands/trace_info.h"
#include "sim/engine/engine.h"
#include "test_util.h"
#include "traces/generators.h"
#include "traces/trace_reader.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

// Replays placements against the trace's frees: no two live blocks may overlap.
void check_no_overlap(const std::string& trace, const std::string& placements) {
  auto pls = read_jsonl(placements);
  std::map<std::uint64_t, nlohmann::json> by_index;
  for (auto& p : pls) by_index[p["i"].get<std::uint64_t>()] = p;
  auto r = open_trace(trace, {});
  std::map<Addr, std::pair<Bytes, AllocId>> live;  // addr → (block, id)
  std::map<AllocId, Addr> where;
  Event ev;
  while (r->next(ev)) {
    if (ev.op == Op::kAlloc) {
      auto it = by_index.find(ev.index);
      if (it == by_index.end()) break;  // replay stopped
      const auto& p = it->second;
      REQUIRE(p["id"] == ev.id);
      if (!p["ok"].get<bool>() || p["addr"].is_null()) continue;
      Addr a = p["addr"].get<Addr>();
      Bytes b = p["block_bytes"].get<Bytes>();
      REQUIRE(b >= ev.size);
      if (b == 0) continue;
      auto nx = live.lower_bound(a);
      if (nx != live.end()) REQUIRE(a + b <= nx->first);
      if (nx != live.begin()) {
        auto pv = std::prev(nx);
        REQUIRE(pv->first + pv->second.first <= a);
      }
      live[a] = {b, ev.id};
      where[ev.id] = a;
    } else if (ev.op == Op::kFree) {
      auto w = where.find(ev.id);
      if (w == where.end()) continue;
      live.erase(w->second);
      where.erase(w);
    }
  }
}

// Replays events built in memory through best-fit on an h100-80g, validating after every event.
RunResult replay_events_in_memory(const std::vector<Event>& evs, const Registry& reg) {
  RunOptions o;
  o.trace = "in-memory";
  o.source = [&] { return make_event_reader("in-memory", evs); };
  o.policy.name = "best-fit";
  o.hw = load_hardware("h100-80g");
  o.check = true;
  return run_simulation(o, reg);
}

}  // namespace

TEST_CASE("conformance: every policy, seeded random traces, validate after every step") {
  Registry reg;
  register_builtin_policies(reg);
  struct TraceCase {
    std::string workload;
    nlohmann::json knobs;
    std::string capacity;
  };
  const std::vector<TraceCase> traces = {
      {"random", {{"events", 3000}, {"live", 60}, {"max_size", 4 * 1024 * 1024}}, "256MiB"},
      {"random", {{"events", 3000}, {"live", 200}, {"max_size", 512 * 1024 * 1024}}, "4GiB"},  // OOMs
      {"random", {{"events", 2000}, {"live", 30}, {"min_size", 1}, {"max_size", 4096}}, "1GiB"},
      {"torch-eager", {{"steps", 3}, {"ops_per_step", 60}}, "2GiB"},
      {"llm-serving", {{"requests", 12}}, "2GiB"},
      {"jax-train", {{"layers", 2}, {"steps", 2}, {"hidden", 256}}, "1GiB"},
  };
  int k = 0;
  for (const auto& tc : traces) {
    for (std::uint64_t seed : {1, 2}) {
      std::string trace = tmp_path("conf" + std::to_string(k++) + ".fstrace");
      generate_workload(tc.workload, seed, tc.knobs, trace);
      Bytes truth = trace_info(trace, false)["peak_requested_bytes"].get<Bytes>();
      for (const auto& info : reg.all()) {
        for (bool keep_going : {false, true}) {
          INFO(tc.workload << " seed " << seed << " policy " << info.name << " keep_going " << keep_going);
          RunOptions o;
          o.trace = trace;
          o.policy.name = info.name;
          o.hw = load_hardware("h100-80g");
          o.hw.space(Space::kHbm)->capacity = parse_size(tc.capacity, "capacity");
          o.hw.space(Space::kHbm)->reserve = 0;
          o.check = true;
          o.keep_going = keep_going;
          o.placements = tmp_path("conf.placements.jsonl");
          RunResult r = run_simulation(o, reg);
          CHECK(r.peak_requested == truth);
          if (r.completed) CHECK(r.peak_allocated >= truth);  // rounding and padding only add
          CHECK(r.peak_reserved >= r.peak_allocated);         // at every moment reserved ≥ allocated
          CHECK(r.completed == r.ooms.empty());
          if (!keep_going) CHECK(r.ooms.size() <= 1);
          for (const auto& oom : r.ooms) {
            CHECK(oom.fragmentation == (oom.free >= oom.rounded));
            if (info.name == "ideal") CHECK_FALSE(oom.fragmentation);
          }
          check_no_overlap(trace, o.placements);
        }
      }
    }
  }
}

// Regression: cuda-async once recorded the request's stream as the owner of a block it had reused
// from another stream's pool, corrupting that pool on the free (found by this test).
TEST_CASE("conformance: policy configurations, several streams and collective buffers") {
  Registry reg;
  register_builtin_policies(reg);
  struct Cfg {
    std::string policy;
    nlohmann::json config;
  };
  const std::vector<Cfg> cfgs = {
      {"xla-bfc", {{"spatial_partitioning", false}}},
      {"xla-bfc", {{"preallocate", false}}},
      {"xla-bfc", {{"preallocate", false}, {"garbage_collection", true}}},
      {"xla-bfc", {{"jaxlib", "0.10.1"}}},
      {"xla-bfc", {{"mem_fraction", 0.3}, {"upper_alignment", 256}}},
      {"torch-caching", {{"alloc_conf", "expandable_segments:True"}}},
      {"torch-caching", {{"alloc_conf", "max_split_size_mb:32,roundup_power2_divisions:4"}}},
      {"torch-caching", {{"memory_fraction", 0.5}, {"alloc_conf", "garbage_collection_threshold:0.3"}}},
      {"torch-caching", {{"stream_event_delay", 3000}}},
      {"cuda-async", {{"preallocate", false}, {"mem_fraction", 0.2}}},
      {"tpu-padded", {{"inner", "first-fit"}, {"defragment", true}}},
      {"static-heap", {{"order", "temporal"}}},
  };
  int k = 0;
  for (std::uint64_t seed : {11, 12}) {
    std::string trace = tmp_path("confcfg" + std::to_string(seed) + ".fstrace");
    generate_workload("random", seed,
                      {{"events", 4000}, {"live", 120}, {"max_size", 64 << 20}, {"streams", 3}, {"collective", 0.15}},
                      trace);
    Bytes truth = trace_info(trace, false)["peak_requested_bytes"].get<Bytes>();
    for (const auto& c : cfgs) {
      for (const char* cap : {"1GiB", "4GiB"}) {
        INFO(c.policy << " " << c.config.dump() << " seed " << seed << " capacity " << cap);
        RunOptions o;
        o.trace = trace;
        o.policy = {c.policy, c.config};
        o.hw = load_hardware("h100-80g");
        o.hw.space(Space::kHbm)->capacity = parse_size(cap, "capacity");
        o.hw.space(Space::kHbm)->reserve = 0;
        o.check = true;
        o.keep_going = true;
        o.placements = tmp_path("confcfg" + std::to_string(k++) + ".jsonl");
        RunResult r = run_simulation(o, reg);
        CHECK(r.peak_requested == truth);
        CHECK(r.fatal.empty());
        check_no_overlap(trace, o.placements);
      }
    }
  }
}

TEST_CASE("best-fit picks the smallest hole, first-fit the lowest one — both coalesce") {
  // Holes: [A:4 KiB][B busy][C:1 KiB][D busy]... then a 1 KiB request.
  std::string t = write_text("holes.jsonl",
                             "{\"op\":\"alloc\",\"id\":1,\"size\":4096}\n"
                             "{\"op\":\"alloc\",\"id\":2,\"size\":256}\n"
                             "{\"op\":\"alloc\",\"id\":3,\"size\":1024}\n"
                             "{\"op\":\"alloc\",\"id\":4,\"size\":256}\n"
                             "{\"op\":\"free\",\"id\":1}\n"
                             "{\"op\":\"free\",\"id\":3}\n"
                             "{\"op\":\"alloc\",\"id\":5,\"size\":1000}\n"
                             "{\"op\":\"free\",\"id\":2}\n"
                             "{\"op\":\"alloc\",\"id\":6,\"size\":4352}\n");
  Registry reg;
  register_builtin_policies(reg);
  auto run = [&](const char* pol) {
    RunOptions o;
    o.trace = t;
    o.policy.name = pol;
    o.hw = load_hardware("h100-80g");
    o.placements = tmp_path(std::string(pol) + ".holes.jsonl");
    o.check = true;
    (void)run_simulation(o, reg);
    return read_jsonl(o.placements);
  };
  auto bf = run("best-fit"), ff = run("first-fit");
  Addr base = DeviceMemory::kBase;
  CHECK(bf[4]["addr"] == base + 4096 + 256);  // the 1 KiB hole
  CHECK(ff[4]["addr"] == base);               // the first hole
  CHECK(bf[4]["block_bytes"] == 1024);        // 1000 rounded to 256
  // After freeing id 2, best-fit's hole [0, 4096+256) coalesced: 4352 fits at 0.
  CHECK(bf[5]["addr"] == base);
}

TEST_CASE("the engine takes an event source — a trace built in memory replays like a file") {
  Registry reg;
  register_builtin_policies(reg);
  std::vector<Event> evs;
  auto alloc = [&](std::uint64_t id, Bytes size) {
    Event e;
    e.op = Op::kAlloc;
    e.id = AllocId(id);
    e.size = size;
    e.present = key::kId | key::kSize;
    evs.push_back(e);
  };
  alloc(1, 1000);
  alloc(2, 3000);
  Event f;
  f.op = Op::kFree;
  f.id = AllocId(1);
  f.present = key::kId;
  evs.push_back(f);
  alloc(3, 500);
  RunResult r = replay_events_in_memory(evs, reg);
  CHECK(r.events == 4);
  CHECK(r.peak_requested == 4000);
  CHECK(r.peak_allocated == 1024 + 3072);  // 256-byte rounding of the baseline arena
}

// A run's total peaks are the peaks of the sums over its spaces at one moment — not the sum of
// each space's own peak — whether they fall while one space exists or after a second appears.
TEST_CASE("the run's peak allocated is the peak of the sum over devices, before and after a second one appears") {
  Registry reg;
  register_builtin_policies(reg);
  auto run = [&](const std::vector<std::array<std::uint64_t, 4>>& steps) {  // op (1 alloc), id, size, device
    std::vector<Event> evs;
    for (const auto& [op, id, size, device] : steps) {
      Event e;
      e.op = op ? Op::kAlloc : Op::kFree;
      e.id = AllocId(id);
      e.size = size;
      e.device = static_cast<std::uint32_t>(device);
      e.present = key::kId | key::kDevice | (op ? key::kSize : 0);
      evs.push_back(e);
    }
    return replay_events_in_memory(evs, reg);
  };
  // Device 0 holds 3 KiB, then 2 KiB; device 1 takes 4 KiB and gives it back; device 0 grows to
  // 10 KiB: the sum peaks at 10 KiB, while the spaces' own peaks add up to 14 KiB.
  RunResult r = run({{1, 1, 1024, 0}, {1, 2, 2048, 0}, {0, 1, 0, 0}, {1, 3, 4096, 1}, {0, 3, 0, 1}, {1, 4, 8192, 0}});
  REQUIRE(r.spaces.size() == 2);
  CHECK(r.spaces[0].peak_allocated == 10240);
  CHECK(r.spaces[1].peak_allocated == 4096);
  CHECK(r.peak_allocated == 10240);
  // The peak falls while device 0 is the only one: a second device that appears later keeps it.
  r = run({{1, 1, 8192, 0}, {0, 1, 0, 0}, {1, 2, 1024, 1}, {1, 3, 2048, 0}});
  REQUIRE(r.spaces.size() == 2);
  CHECK(r.peak_allocated == 8192);
  // The peak falls while both hold memory: 2 KiB + 512 B on device 0, 1 KiB + 4 KiB on device 1.
  r = run({{1, 1, 2048, 0}, {1, 2, 1024, 1}, {1, 3, 4096, 1}, {1, 4, 512, 0}});
  CHECK(r.peak_allocated == 2048 + 1024 + 4096 + 512);
  CHECK(r.peak_reserved >= r.peak_allocated);
}

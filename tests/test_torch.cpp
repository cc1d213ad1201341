// PyTorch: the safe pickle reader, snapshot import, and torch-caching against the real recorded
// snapshots (100 % of addresses and segment sizes) and hand-built scenarios for what they lack.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim_helpers.h"
#include "traces/pickle.h"
#include "traces/trace_reader.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

// The real snapshots, kept compressed in tests/data/torch (SOURCES.md there).
std::string fixture(const std::string& name) {
  return std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/torch/" + name + ".zst";
}
std::string fixture_bytes(const std::string& name) { return read_input(fixture(name), kMaxPickleBytes); }

RunResult replay(const std::string& trace, nlohmann::json cfg = nlohmann::json::object(), bool check = true) {
  static Registry reg = [] {
    Registry r;
    register_builtin_policies(r);
    return r;
  }();
  RunOptions o;
  o.trace = trace;
  o.policy = {"torch-caching", std::move(cfg)};
  o.hw = load_hardware("h100-80g");
  o.check = check;
  return run_simulation(o, reg);
}

constexpr std::uint64_t MiB = 1 << 20;

}  // namespace

TEST_CASE("torch-caching reproduces every recorded address and segment size of the real snapshots") {
  struct Case {
    const char* file;
    std::uint64_t allocs, segments;
  };
  // Counts: traced allocations (pre-trace ones are placed, not compared) and traced segment_allocs.
  const Case cases[] = {{"small_mlp_97ev.pickle", 36, 9},
                        {"transformer_fwd_bf16.pickle", 937, 0},
                        {"finetune_torch20_format.pickle", 3505, 152},
                        {"transformer_ctx128_fwd.pickle", 2058, 289},
                        {"transformer_ctx128_train_step.pickle", 6771, 783}};
  for (const auto& c : cases) {
    INFO(c.file);
    RunResult r = replay(fixture(c.file));
    REQUIRE(!r.fidelity.is_null());
    CHECK(r.completed);
    CHECK(r.fidelity["allocs_compared"] == c.allocs);
    CHECK(r.fidelity["allocs_matched"] == c.allocs);
    CHECK(r.fidelity["segments_compared"] == c.segments);
    CHECK(r.fidelity["segments_matched"] == c.segments);
    CHECK(r.fidelity["first_mismatch"].is_null());
  }
}

TEST_CASE("snapshot import: pre-trace state first, observations kept, convert writes them") {
  std::string src = fixture("small_mlp_97ev.pickle"), out = tmp_path("mlp.jsonl");
  auto r = cli("convert " + src + " " + out);
  REQUIRE(r.code == 0);
  auto lines = read_jsonl(out);
  REQUIRE(lines.size() > 97);
  CHECK(lines[0]["fragsim_trace"] == 1);
  CHECK(lines[0]["source"] == "torch-snapshot");
  CHECK(lines[0]["time_unit"] == "us");
  std::map<std::string, int> ops;
  for (size_t i = 1; i < lines.size(); ++i) ops[lines[i]["op"].get<std::string>()]++;
  // The snapshot's trace: 36 alloc, 26 free_requested, 26 free_completed, 9 segment_alloc; every
  // block live at the dump was traced, so nothing is synthesised as pre-trace state.
  CHECK(ops["alloc"] == 36);
  CHECK(ops["free"] == 26);
  CHECK(ops["free_requested"] == 26);
  CHECK(ops["segment_alloc"] == 9);
  for (size_t i = 1; i < lines.size(); ++i) CHECK_FALSE(lines[i].contains("pre_trace"));
  // Replaying the converted JSONL gives the same fidelity as the pickle.
  RunResult a = replay(src), b = replay(out);
  CHECK(a.fidelity == b.fidelity);
  CHECK(a.peak_reserved == b.peak_reserved);
}

TEST_CASE("pickle reader refuses hostile input with a clear error and never crashes") {
  auto bad = [](const std::string& bytes) {
    try {
      (void)parse_pickle(bytes, "x.pickle");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(bad("\x80\x04}q\x00"), Catch::Contains("truncated"));
  CHECK_THAT(bad("\x80\x02"
                 "cos\nsystem\n(S'ls'\ntR."),
             Catch::Contains("refused opcode"));
  CHECK_THAT(bad(std::string("\x80\x04\x8c\x02os\x8c\x06system\x93.", 17)), Catch::Contains("refused opcode"));
  std::string deep = "\x80\x04";
  for (int i = 0; i < 5000; ++i) deep += "]";
  for (int i = 0; i < 4999; ++i) deep += "a";
  deep += ".";
  CHECK_THAT(bad(deep), Catch::Contains("nesting deeper"));
  CHECK_THAT(bad(std::string("\x80\x04X\xff\xff\xff\x7f", 7)), Catch::Contains("runs past the end"));
  CHECK_THAT(bad(std::string("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f", 11)),
             Catch::Contains("runs past the end"));
  CHECK_THAT(bad("\x80\x04h\x05."), Catch::Contains("memo index"));
  CHECK_THAT(bad("\x80\x04."), Catch::Contains("STOP"));
  CHECK_THAT(bad("\x80\x04\xff"), Catch::Contains("unsupported opcode"));
  // A well-formed pickle that is not a snapshot, through the CLI: exit 2, one line.
  std::string p = write_text("notsnap.pickle", "\x80\x04K\x05.");
  auto r = cli("info " + p);
  CHECK(r.code == 2);
  CHECK(r.err.find("not a PyTorch memory snapshot") != std::string::npos);
  std::string t = write_text("trunc.pickle", fixture_bytes("small_mlp_97ev.pickle").substr(0, 5000));
  r = cli("run " + t + " --policy torch-caching");
  CHECK(r.code == 2);
  CHECK(r.err.find("pickle: ") != std::string::npos);
}

TEST_CASE("torch-caching sizing: 512-byte rounding, power-2 divisions, pools and segment sizes") {
  TraceBuilder t;
  t.alloc(1, 1).alloc(2, 1200).alloc(3, 1 << 20).alloc(4, (1 << 20) + 1).alloc(5, 12 * MiB + 5);
  auto r = simulate("tsizes", t.text, "torch-caching", nlohmann::json::object());
  CHECK(r.placements[0]["block_bytes"] == 512);
  CHECK(r.placements[1]["block_bytes"] == 1536);
  CHECK(r.placements[2]["block_bytes"] == 1 << 20);  // exactly 1 MiB is small: same 2 MiB segment
  CHECK(r.placements[2]["region"] == r.placements[0]["region"]);
  // 1 MiB+1 opens a 20 MiB segment; 12 MiB+5 best-fits into its 19 MiB remainder.
  CHECK(r.stats()["segment.large_pool.current"] == 1);
  CHECK(r.stats()["reserved_bytes"] == 2 * MiB + 20 * MiB);
  CHECK(r.placements[4]["region"] == r.placements[3]["region"]);
  CHECK(r.placements[4]["region_offset"] == (1 << 20) + 512);
  auto d = simulate("tdiv", TraceBuilder().alloc(1, 1258291).text, "torch-caching",
                    {{"alloc_conf", "roundup_power2_divisions:4"}});
  CHECK(d.placements[0]["block_bytes"] == 1310720);  // 1.2 MiB → next quarter of 1 MiB above: 1.25 MiB
  auto l = simulate("tdivlist", TraceBuilder().alloc(1, 1258291).alloc(2, 3 * MiB + 1).text, "torch-caching",
                    {{"alloc_conf", "roundup_power2_divisions:[1:4,2:8,>:2]"}});
  CHECK(l.placements[0]["block_bytes"] == 1310720);
  CHECK(l.placements[1]["block_bytes"] == 3 * MiB + 256 * 1024);  // [2,4) MiB in 8 steps of 256 KiB
}

TEST_CASE("torch-caching max_split_size: oversize blocks only serve oversize requests") {
  TraceBuilder t;
  t.alloc(1, 100 * MiB).free(1).alloc(2, 30 * MiB);
  auto plain = simulate("mss0", t.text, "torch-caching", nlohmann::json::object());
  CHECK(plain.stats()["num_device_alloc"] == 1);  // the cached 100 MiB block is split
  auto mss = simulate("mss64", t.text, "torch-caching", {{"alloc_conf", "max_split_size_mb:64"}});
  CHECK(mss.stats()["num_device_alloc"] == 2);
  CHECK(mss.placements[1]["region"] == 1);
  CHECK_THROWS_WITH(simulate("mss10", t.text, "torch-caching", {{"alloc_conf", "max_split_size_mb:10"}}),
                    Catch::Contains("max_split_size_mb too small"));
  // An oversize request reuses an oversize block only within max_non_split_rounding (20 MiB).
  TraceBuilder u;
  u.alloc(1, 100 * MiB).free(1).alloc(2, 70 * MiB).alloc(3, 90 * MiB);
  auto o = simulate("mss_round", u.text, "torch-caching", {{"alloc_conf", "max_split_size_mb:64"}});
  CHECK(o.placements[1]["region"] == 1);  // 100 ≥ 70 + 20: not reused
  CHECK(o.placements[2]["region"] == 0);  // 100 < 90 + 20: reused whole
  CHECK(o.placements[2]["block_bytes"] == 100 * MiB);
}

TEST_CASE("torch-caching streams: no reuse across streams — a cross-stream free completes later") {
  TraceBuilder t;
  t.alloc(1, 4096).free(1).alloc(2, 4096, nullptr, 7);
  auto r = simulate("streams", t.text, "torch-caching", nlohmann::json::object());
  CHECK(r.stats()["num_device_alloc"] == 2);
  CHECK(r.placements[1]["region"] == 1);
  // Freed on stream 9 (record_stream) with a 100-tick event: not reusable until it completes.
  std::string text =
      "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"t\":0}\n"
      "{\"op\":\"free\",\"id\":1,\"stream\":9,\"t\":10}\n"
      "{\"op\":\"alloc\",\"id\":2,\"size\":4096,\"t\":20}\n"
      "{\"op\":\"alloc\",\"id\":3,\"size\":4096,\"t\":200}\n";
  auto d = simulate("pending", text, "torch-caching", {{"stream_event_delay", 100}});
  CHECK(d.placements[1]["region_offset"] == 4096);  // block 1 still pending: the next one
  CHECK(d.placements[2]["region_offset"] == 0);     // completed at t=110: reused
}

TEST_CASE("torch-caching garbage collection frees old cached segments above the threshold") {
  TraceBuilder t;
  t.alloc(1, 150 * MiB).alloc(2, 150 * MiB).free(1).free(2).alloc(3, 200 * MiB);
  nlohmann::json cfg = {{"memory_fraction", 0.5}, {"alloc_conf", "garbage_collection_threshold:0.5"}};
  auto gc = simulate("gc", t.text, "torch-caching", cfg, "1GiB");
  CHECK(gc.stats()["num_device_free"] == 2);
  CHECK(gc.stats()["reserved_bytes"] == 200 * MiB);
  cfg.erase("alloc_conf");
  auto nogc = simulate("nogc", t.text, "torch-caching", cfg, "1GiB");
  CHECK(nogc.stats()["num_device_free"] == 0);
  CHECK(nogc.stats()["reserved_bytes"] == 500 * MiB);
}

TEST_CASE("torch-caching OOM: empty the cache and retry, then PyTorch's message") {
  TraceBuilder t;
  t.alloc(1, 60 * MiB).free(1).alloc(2, 80 * MiB).alloc(3, 30 * MiB);
  auto r = simulate("tretry", t.text, "torch-caching", nlohmann::json::object(), "100MiB");
  CHECK(r.placements[1]["ok"] == true);
  CHECK(r.stats()["num_alloc_retries"] == 2);  // the successful retry, and the one before the OOM
  CHECK(r.stats()["num_device_free"] == 1);
  REQUIRE(r.result.ooms.size() == 1);
  CHECK(r.stats()["num_ooms"] == 1);
  const std::string& msg = r.result.ooms[0].explanation;
  CHECK_THAT(msg, Catch::Contains("CUDA out of memory. Tried to allocate 30.00 MiB."));
  CHECK_THAT(msg, Catch::Contains("of which 20.00 MiB is free"));
  CHECK_THAT(msg,
             Catch::Contains("80.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated"));
}

TEST_CASE("torch-caching expandable segments: 8 x 16 MiB maps 7 pages — 4 x 32 MiB then maps none") {
  TraceBuilder t;
  for (int i = 0; i < 8; ++i) t.alloc(i, 16 * MiB);
  for (int i = 0; i < 8; ++i) t.free(i);
  for (int i = 0; i < 4; ++i) t.alloc(100 + i, 32 * MiB);
  auto e = simulate("exp", t.text, "torch-caching", {{"alloc_conf", "expandable_segments:True"}});
  CHECK(e.stats()["num_device_alloc"] == 7);
  CHECK(e.stats()["reserved_bytes"] == 140 * MiB);
  CHECK(e.stats()["inactive_split_bytes"] == 0);
  for (const auto& p : e.placements) CHECK(p["region"] == 0);  // one segment
  auto n = simulate("noexp", t.text, "torch-caching", nlohmann::json::object());
  CHECK(n.stats()["num_device_alloc"] == 12);
  CHECK(n.stats()["reserved_bytes"] == 256 * MiB);
  // empty_cache on an OOM unmaps whole free pages, then the retry maps again.
  TraceBuilder u;
  u.alloc(1, 50 * MiB).free(1).alloc(2, 16 * MiB, nullptr, 3);
  auto m = simulate("expunmap", u.text, "torch-caching", {{"alloc_conf", "expandable_segments:True"}}, "64MiB");
  CHECK(m.placements[1]["ok"] == true);
  CHECK(m.stats()["num_alloc_retries"] == 1);
  CHECK(m.stats()["reserved_bytes"] == 20 * MiB);
}

TEST_CASE("PYTORCH_CUDA_ALLOC_CONF parsing errors name the problem") {
  for (const char* conf : {"bogus:1", "expandable_segments:true", "garbage_collection_threshold:1.5",
                           "roundup_power2_divisions:3", "backend:cudaMallocAsync", "max_split_size_mb"}) {
    INFO(conf);
    CHECK_THROWS_AS(simulate("conf", TraceBuilder().alloc(1, 1).text, "torch-caching", {{"alloc_conf", conf}}),
                    InputError);
  }
  auto ok = simulate(
      "confok", TraceBuilder().alloc(1, 1).text, "torch-caching",
      {{"alloc_conf", "max_split_size_mb:128,garbage_collection_threshold:0.6,pinned_use_cuda_host_register:True"}});
  CHECK(ok.stats()["max_split_size"] == 128 * MiB);
}

TEST_CASE("snapshot import: two devices interleave by time, each replays on its own allocator") {
  std::string src = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/two_devices.pickle";
  std::string out = tmp_path("two.jsonl");
  REQUIRE(cli("convert " + src + " " + out).code == 0);
  auto lines = read_jsonl(out);
  std::vector<std::uint64_t> times;
  std::set<int> devices;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].contains("t")) times.push_back(lines[i]["t"].get<std::uint64_t>());
    devices.insert(lines[i].value("device", 0));
  }
  CHECK(std::is_sorted(times.begin(), times.end()));
  CHECK(devices == std::set<int>{0, 1});
  // The pre-trace block of device 0 (8 bytes at the segment base) is synthesised first.
  CHECK(lines[1]["op"] == "segment_alloc");
  CHECK(lines[1]["pre_trace"] == true);
  RunResult r = replay(src);
  REQUIRE(r.spaces.size() == 2);
  CHECK(r.fidelity["allocs_compared"] == 4);
  CHECK(r.fidelity["allocs_matched"] == 4);
  CHECK(r.fidelity["segments_matched"] == 2);
}

TEST_CASE("seeded mutation of a real snapshot: only clear input errors, never a crash") {
  std::string good = fixture_bytes("small_mlp_97ev.pickle");
  std::uint64_t s = 12345;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  int errors = 0, parsed = 0;
  for (int k = 0; k < 300; ++k) {
    std::string bytes = good;
    int edits = 1 + static_cast<int>(rnd() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rnd() % bytes.size();
      switch (rnd() % 3) {
        case 0:
          bytes[at] = static_cast<char>(rnd());
          break;
        case 1:
          bytes.erase(at, 1 + rnd() % 16);
          break;
        default:
          bytes = bytes.substr(0, at);
          break;
      }
      if (bytes.empty()) bytes.assign(1, 'x');
    }
    std::string p = write_text("mut.pickle", bytes);
    try {
      ReaderOptions ro;
      auto r = open_trace(p, ro);
      Event ev;
      while (r->next(ev)) {
      }
      ++parsed;
    } catch (const InputError& e) {
      ++errors;
      CHECK(std::string(e.what()).find("mut.pickle") != std::string::npos);
    }
  }
  CHECK(errors > 200);  // most mutations break it; the rest still read as valid snapshots
  CHECK(errors + parsed == 300);
}

TEST_CASE("torch-caching adopts a snapshot's recorded allocator_settings unless told otherwise") {
  std::string src = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/recorded_settings.pickle";
  RunResult r = replay(src);
  CHECK(r.policy_config["recorded_settings_applied"] == true);
  CHECK(r.policy_config["resolved_max_split_size"] == 128 * MiB);
  CHECK(r.fidelity["allocs_matched"] == 1);
  CHECK(r.spaces[0].stats["allocated_bytes"] == 1310720);  // 1.2 MiB rounded by the recorded divisions
  RunResult plain = replay(src, {{"use_recorded_settings", false}});
  CHECK(plain.policy_config["resolved_max_split_size"] == -1);
  CHECK(plain.spaces[0].stats["allocated_bytes"] == 1258496);  // 512-byte rounding
  RunResult user = replay(src, {{"alloc_conf", "max_split_size_mb:64"}});
  CHECK(user.policy_config["resolved_max_split_size"] == 64 * MiB);
  CHECK_FALSE(user.policy_config.contains("recorded_settings_applied"));
}

// PyTorch: the safe pickle reader, snapshot import, and torch-caching against the real recorded
// snapshots (100 % of addresses and segment sizes) and hand-built scenarios for what they lack.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/commands/trace_info.h"
#include "sim_helpers.h"
#include "traces/pickle.h"
#include "traces/pickle_writer.h"
#include "traces/torch_snapshot.h"
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
  RunOptions o;
  o.trace = trace;
  o.policy = {"torch-caching", std::move(cfg)};
  o.hw = load_hardware("h100-80g");
  o.check = check;
  return run_simulation(o, test_registry());
}

}  // namespace

TEST_CASE("torch-caching reproduces every recorded address, segment, release and OOM of the real snapshots") {
  struct Case {
    const char* file;
    std::uint64_t allocs, segments, segment_frees, ooms;
  };
  // Counts of what each recording traced (pre-trace allocations are placed, not compared). With no
  // flags: the policy follows the input, its recorded settings and its inferred device memory.
  const Case cases[] = {{"small_mlp_97ev.pickle", 36, 9, 0, 0},
                        {"transformer_fwd_bf16.pickle", 937, 0, 0, 0},
                        {"finetune_torch20_format.pickle", 3505, 152, 0, 0},
                        {"transformer_ctx128_fwd.pickle", 2058, 289, 0, 0},
                        {"transformer_ctx128_train_step.pickle", 6771, 783, 0, 0},
                        {"sqattn_empty_cache.pickle", 2912, 420, 420, 0},
                        // Cut as the ring buffer cuts: its first segment events are an empty_cache's 15
                        // releases of segments held before the trace (were 60/120: the releases before the
                        // first segment event went unrecorded).
                        {"sqattn_empty_cache_cut7000.pickle", 774, 105, 120, 0},
                        {"oom_retry_release.pickle", 782, 22, 17, 0},
                        {"expandable_3dev_oom.pickle", 3025, 0, 0, 1},
                        {"h200_fraction_oom.pickle", 260, 64, 27, 1},
                        {"h200_fraction_oom_expandable.pickle", 260, 0, 0, 1}};
  for (const auto& c : cases) {
    INFO(c.file);
    RunResult r = replay(fixture(c.file));
    REQUIRE(!r.fidelity.is_null());
    CHECK(r.fidelity["allocs_compared"] == c.allocs);
    CHECK(r.fidelity["allocs_matched"] == c.allocs);
    CHECK(r.fidelity["segments_compared"] == c.segments);
    CHECK(r.fidelity["segments_matched"] == c.segments);
    CHECK(r.fidelity.value("segment_frees_compared", std::uint64_t{0}) == c.segment_frees);
    CHECK(r.fidelity.value("segment_frees_matched", std::uint64_t{0}) == c.segment_frees);
    CHECK(r.fidelity.value("ooms_recorded", std::uint64_t{0}) == c.ooms);
    CHECK(r.fidelity.value("ooms_reproduced", std::uint64_t{0}) == c.ooms);
    CHECK(r.ooms.size() == c.ooms);
    CHECK(r.fidelity["first_mismatch"].is_null());
  }
}

// h200_fraction_oom(_expandable) were recorded on an H200 under set_per_process_memory_fraction(0.04)
// (5.59 GiB allowed of 139.80 GiB), which the snapshot does not record; the 3.50 GiB request failed
// with 134.17 GiB (133.75 GiB) free on the device (tests/data/torch/SOURCES.md, the error texts in
// tests/data/device_h200/record/torch_fragment_oom*.result.json). Before, a run with no settings
// took the device's 139.07 GiB as the only limit and completed: 0/27 segment releases, 0/1 OOMs.
// The allocator refused the request itself, so the replay takes the least cap the recording
// allows: the most it held, 5259657216 B (memory_stats' reserved_bytes.all.peak in that
// result.json), a fraction of the 139.07 GiB the run gives the device; 5708447744 B with expandable
// segments (its peak too: no growth asked for more than it mapped).
TEST_CASE("a recorded OOM with room on the device replays under the memory fraction it implies") {
  struct Case {
    const char* file;
    std::uint64_t segment_frees;
    const char* cap;  // the note's "a cap of ..."
  };
  const Case cases[] = {{"h200_fraction_oom.pickle", 27, "a cap of 4.90 GiB (5259657216 B)"},
                        {"h200_fraction_oom_expandable.pickle", 0, "a cap of 5.32 GiB (5708447744 B)"}};
  for (const auto& c : cases) {
    INFO(c.file);
    const Recording rec = read_recording(fixture(c.file), false);
    REQUIRE(rec.devices.size() == 1);
    REQUIRE(rec.devices[0].cap);
    const std::uint64_t event = rec.devices[0].cap->oom_event;
    CmdRun r = run_cmd({.trace = fixture(c.file)});
    REQUIRE(r.result.ooms.size() == 1);
    CHECK(r.result.ooms[0].event_index == event);
    const auto& f = r.json["fidelity"];
    CHECK(f["allocs_compared"] == 260);
    CHECK(f["allocs_matched"] == 260);
    CHECK(f.value("segment_frees_compared", std::uint64_t{0}) == c.segment_frees);
    CHECK(f.value("segment_frees_matched", std::uint64_t{0}) == c.segment_frees);
    CHECK(f["ooms_recorded"] == 1);
    CHECK(f["ooms_reproduced"] == 1);
    CHECK_THAT(r.text, Catch::Contains(fmt::format("the recorded OOM at event {} came with", event)));
    CHECK_THAT(r.text, Catch::Contains("so the allocator refused 3.50 GiB itself"));
    CHECK_THAT(r.text, Catch::Contains("replayed with memory_fraction="));
    CHECK_THAT(r.text, Catch::Contains(c.cap));
    // The advice's larger fraction is found by the sweep and proven by replay, as for a fraction given.
    CHECK_THAT(r.text, Catch::Contains("is the smallest fraction with which the trace fits, verified by replay"));
    // The device keeps its size: reserved plus the free memory the driver reported.
    CHECK_THAT(r.text, Catch::Contains("usable memory 139.07 GiB"));

    // The fraction given wins: the program's own, on the preset's 139.80 GiB, as PyTorch words it.
    CmdRun given = run_cmd({.trace = fixture(c.file), .hw = "h200-141g", .sets = {"memory_fraction=0.04"}});
    CHECK(given.result.policy_config["memory_fraction"] == 0.04);
    CHECK_THAT(given.text, !Catch::Contains("replayed with memory_fraction="));
    REQUIRE(given.result.ooms.size() == 1);
    CHECK(given.result.ooms[0].event_index == event);
    CHECK(given.json["fidelity"]["allocs_matched"] == 260);
    CHECK(given.json["fidelity"]["ooms_reproduced"] == 1);
    CHECK_THAT(given.text, Catch::Contains("GPU 0 has a total capacity of 139.80 GiB of which"));
    CHECK_THAT(given.text,
               Catch::Contains(" 5.59 GiB allowed; Of the allocated memory 4.89 GiB is allocated by PyTorch"));
    // Without --hw the same: the snapshot names no device, but only the H200's 139.80 GiB lies within
    // 2 GiB above the 139.07 GiB its OOM shows (the rest is the CUDA context), and PyTorch's fraction is
    // of that total (a trial found 139.07 GiB and "5.56 GiB allowed": a limit 0.5 % too tight).
    CmdRun bare = run_cmd({.trace = fixture(c.file), .sets = {"memory_fraction=0.04"}});
    CHECK_THAT(bare.text, Catch::Contains("hardware h200-141g by its memory"));
    CHECK_THAT(bare.text, Catch::Contains("GPU 0 has a total capacity of 139.80 GiB of which"));
    CHECK_THAT(bare.text, Catch::Contains(" 5.59 GiB allowed; "));
    // What the allocator can obtain stays what the OOM shows; the total is the device's.
    CHECK(bare.json["devices"][0]["usable_bytes"] == 149322596352);
    CHECK(bare.json["devices"][0]["capacity_bytes"] == 150108897280);
    CHECK(bare.json["devices"][0]["limit_bytes"] == static_cast<Bytes>(0.04 * 150108897280.0));
  }
  // The advice's fraction held on the H200: the same program ran through at 0.07 and failed the
  // 3.50 GiB request at 0.06, "8.39 GiB allowed" (advice_torch_fraction0*.result.json), as the
  // replays at those fractions do, with expandable segments too.
  for (const char* conf : {"", "_expandable"}) {
    INFO(conf);
    const std::string file = std::string("h200_fraction_oom") + conf + ".pickle";
    for (const char* f : {"06", "07"}) {
      const auto real = nlohmann::json::parse(
          read_file(test_data(std::string("device_h200/record/advice_torch_fraction") + f + conf + ".result.json")));
      CmdRun at = run_cmd({.trace = fixture(file), .hw = "h200-141g", .sets = {std::string("memory_fraction=0.") + f}});
      const bool real_oom = real.contains("error_type") && real["error_type"] == "OutOfMemoryError";
      CHECK(real_oom == (std::string(f) == "06"));
      CHECK(at.result.ooms.empty() == !real_oom);
      if (real_oom) CHECK_THAT(at.text, Catch::Contains(" 8.39 GiB allowed; Of the allocated memory 4.89 GiB"));
      if (real_oom) CHECK_THAT(real["error"].get<std::string>(), Catch::Contains(" 8.39 GiB allowed; "));
    }
  }
  // Without the recorded settings the cap goes too: the device's 139.07 GiB holds the trace.
  CmdRun plain =
      run_cmd({.trace = fixture("h200_fraction_oom.pickle"), .policy = "torch-caching[use_recorded_settings=false]"});
  CHECK(plain.result.completed);
  CHECK_THAT(plain.text, !Catch::Contains("replayed with memory_fraction="));
  // A capacity sweep keeps the cap in bytes, so no capacity lifts it: said, with the way out.
  auto sw = sweep_cmd({.trace = fixture("h200_fraction_oom.pickle")}, "min-capacity");
  CHECK(!sw.result.value);
  CHECK_THAT(sw.text, Catch::Contains("torch-caching's memory_fraction is inferred from the recording"));
  CHECK_THAT(sw.text, Catch::Contains("--set memory_fraction=1.00 replays without it"));
  // Recordings whose OOM the device refused keep their device limit and no cap.
  for (const char* file : {"expandable_3dev_oom.pickle", "oom_retry_release.pickle"}) {
    INFO(file);
    CHECK_THAT(run_cmd({.trace = fixture(file)}).text, !Catch::Contains("memory_fraction="));
  }
}

// expandable_3dev_oom records its OOM at event 7872 (a 4.94 GiB request, SOURCES.md). static-heap
// fails a 127 MiB request at event 5640 and stops there: the recorded OOM was never reached, so
// it is not reproduced (before: "1/1 OOMs", read from the last failed allocation). Replayed on
// (--keep-going) the recorded request is placed: 0/1 either way.
// sqattn was recorded without expandable segments: its segments from before the recording are
// cudaMalloc'd ones. Replayed with expandable_segments:True, the first empty_cache unmapped pages
// of them that were never mapped (an internal error, exit 1) — also in a plain OOMing run, whose
// advice replays that setting. PyTorch's release_blocks frees a whole free cudaMalloc segment and
// unmaps only expandable segments' pages, whichever the setting.
// PyTorch frees its cache and retries before it raises; its message ("7.18 GiB is reserved by
// PyTorch but unallocated" here) describes the state after that. The OOM record and its moment
// (state lines, free-block list) must be that one state: before, the moment's figures were from
// before the release (15.84 GiB reserved beside 14.13 GiB) and its block list from after it.
TEST_CASE("a torch OOM after a cache release reports one state") {
  CmdRun r = run_cmd({.trace = fixture("oom_retry_release.pickle"), .capacity = "20GiB"});
  REQUIRE(!r.json["ooms"].empty());
  const auto& o = r.json["ooms"][0];
  const auto& at = o["at_oom"];
  const auto& sp = at["spaces"][0];
  CHECK(at["reserved_bytes"] == o["reserved_bytes"]);
  CHECK(sp["reserved_bytes"] == o["reserved_bytes"]);
  CHECK(sp["allocated_bytes"] == o["allocated_bytes"]);
  const auto& blocks = sp["largest_free_blocks"];
  REQUIRE(!blocks.empty());
  CHECK(sp["largest_free_bytes"] == blocks[0]["size_bytes"]);  // docs/metrics.md: the same figure
  std::uint64_t sum = 0;
  for (const auto& b : blocks) sum += b["size_bytes"].get<std::uint64_t>();
  REQUIRE(blocks.size() == sp["free_blocks"].get<size_t>());  // every free block listed
  CHECK(sum == sp["reserved_unallocated_bytes"].get<std::uint64_t>());
  const std::string unallocated = human_bytes(sp["reserved_unallocated_bytes"].get<Bytes>());
  CHECK_THAT(r.text, Catch::Contains(unallocated + " is reserved by PyTorch but unallocated"));
}

// oom_retry_release shows its device's usable memory (22.69 GiB: an OOM retry, SOURCES.md); a
// run uses it, so a memory fraction swept is of it — said, or "the whole device" reads as the
// assumed h100-80g's 78.66 GiB. With --hw the preset's memory is used and no such note is given.
TEST_CASE("sweep min-mem-fraction names the memory its fractions are of") {
  auto r = sweep_cmd({.trace = fixture("oom_retry_release.pickle"), .policy = "torch-caching"}, "min-mem-fraction");
  CHECK_THAT(r.text, Catch::Contains("each fraction is of device 0's usable memory inferred from the recording, "
                                     "22.69 GiB (24366809088 B), not of the h100-80g preset's"));
  auto hw = sweep_cmd({.trace = fixture("oom_retry_release.pickle"), .hw = "h100-80g", .policy = "torch-caching"},
                      "min-mem-fraction");
  CHECK_THAT(hw.text, !Catch::Contains("each fraction is of"));
  // The H200 snapshot's usable memory lies 0.73 GiB below the H200's total: the fractions are of the
  // total, as PyTorch's are (it said "of device 0's usable memory ... 139.07 GiB" while replaying
  // fractions of 139.80 GiB).
  auto h200 = sweep_cmd({.trace = fixture("h200_fraction_oom.pickle")}, "min-mem-fraction");
  CHECK_THAT(h200.text, Catch::Contains("each fraction is of device 0's total memory, 139.80 GiB (150108897280 B): "
                                        "the h200-141g preset's"));
}

TEST_CASE("empty_cache with expandable segments on a recording made without them") {
  CmdRun r =
      run_cmd({.trace = fixture("sqattn_empty_cache.pickle"), .policy = "torch-caching[expandable_segments=true]"});
  CHECK(r.result.completed);
  CHECK(r.result.empty_cache_calls == 28);
  CHECK_THAT(r.result.empty_cache_effect, Catch::Contains("released"));
  CmdRun small = run_cmd({.trace = fixture("sqattn_empty_cache.pickle"), .capacity = "5GiB"});
  CHECK(!small.result.ooms.empty());
  CHECK_THAT(small.text, Catch::Contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True — verified by replay"));
}

TEST_CASE("a recorded OOM the replay stopped before is not counted as reproduced") {
  // static-heap's plan for device 1 (83.23 GiB) exceeds its 78.51 GiB: that program does not load,
  // so every allocation on device 1 fails, from its first; the recorded OOM comes later.
  std::uint64_t first_on_1 = UINT64_MAX, allocs_on_1 = 0;
  {
    auto reader = open_trace(fixture("expandable_3dev_oom.pickle"));
    Event ev;
    while (reader->next(ev))
      if (ev.op == Op::kAlloc && ev.device == 1 && ev.size > 0) {
        first_on_1 = std::min(first_on_1, ev.index);
        ++allocs_on_1;
      }
  }
  REQUIRE(allocs_on_1 > 1);
  CmdRun r = run_cmd({.trace = fixture("expandable_3dev_oom.pickle"), .policy = "static-heap"});
  REQUIRE(r.result.ooms.size() == 1);
  CHECK(r.result.ooms.front().event_index == first_on_1);
  CHECK(r.json["ooms"][0]["kind"] == "heap_exceeds_space");  // why it could give 0 B: the plan does not load
  CHECK(r.json["fidelity"]["ooms_recorded"] == 1);
  CHECK(r.json["fidelity"]["ooms_reproduced"] == 0);
  // static-heap is no model of PyTorch's allocator: its fidelity stays in the JSON, out of the text.
  CHECK_THAT(r.text, !Catch::Contains("fidelity:"));
  CHECK_THAT(r.text, Catch::Contains("the program does not load"));
  // Replayed on (--keep-going), every allocation on device 1 fails, the recorded request among them.
  CmdRun all = run_cmd({.trace = fixture("expandable_3dev_oom.pickle"), .policy = "static-heap", .keep_going = true});
  CHECK(all.json["oom_count"] == allocs_on_1);
  for (const auto& o : all.json["ooms"]) CHECK(o["device"] == 1);
  for (const auto& d : all.json["devices"])
    if (d["device"] == 1) CHECK((d["peak_reserved_bytes"] == 0 && d["oom_count"] == allocs_on_1));  // held nothing
  CHECK(all.json["fidelity"]["ooms_reproduced"] == 1);
  // The default policy fails the recorded request itself and stops there: reproduced.
  CHECK(run_cmd({.trace = fixture("expandable_3dev_oom.pickle")}).json["fidelity"]["ooms_reproduced"] == 1);
}

TEST_CASE("empty_cache calls are told apart from the allocator's own releases") {
  // sqattn: the program calls torch.cuda.empty_cache() 28 times (SOURCES.md); before, 833 of
  // 2,912 addresses matched.
  RunResult sq = replay(fixture("sqattn_empty_cache.pickle"));
  CHECK(sq.empty_cache_calls == 28);
  CHECK_THAT(sq.empty_cache_effect, Catch::Contains("released"));
  // octree: one failed cudaMalloc made the allocator release its cache and retry — not a call.
  RunResult oom = replay(fixture("oom_retry_release.pickle"));
  CHECK(oom.empty_cache_calls == 0);
  CHECK(oom.spaces.at(0).stats["num_alloc_retries"] == 1);
  CHECK(oom.spaces.at(0).stats["num_device_free"] == 17);
  // The usable memory it implies: at least the 22.69 GiB it held, less than 25.14 GiB.
  const auto& dev = oom.header["recorded_devices"][0];
  CHECK(dev["lower_bytes"] == 24366809088ULL);
  CHECK(dev["upper_bytes"] == 26994540544ULL);
  CHECK(dev["usable_bytes"] == 24366809088ULL);
  bool noted = false;
  for (const auto& n : oom.notes) noted |= n.find("inferred from the recording") != std::string::npos;
  CHECK(noted);
  // A chosen device overrides it: on a roomy GPU the retry does not happen and addresses differ.
  RunOptions o;
  o.trace = fixture("oom_retry_release.pickle");
  o.policy = {"torch-caching", nlohmann::json::object()};
  o.hw = load_hardware("h100-80g");
  o.recorded_devices = false;
  RunResult roomy = run_simulation(o, test_registry());
  CHECK(roomy.spaces.at(0).stats["num_alloc_retries"] == 0);
  CHECK(roomy.fidelity["allocs_matched"] < 782);
  // Every policy answers the op: cuda-async trims, the others say there is nothing to release.
  std::string t = write_text("ec.jsonl",
                             "{\"op\":\"alloc\",\"id\":1,\"size\":33554432}\n{\"op\":\"free\",\"id\":1}\n"
                             "{\"op\":\"empty_cache\"}\n");
  auto effect = [&](const char* p, nlohmann::json cfg) {
    auto r = simulate({.name = std::string("ec_") + p,
                       .text = read_text(t),
                       .policy = p,
                       .config = std::move(cfg),
                       .capacity = "1GiB"});
    CHECK(r.result.empty_cache_calls == 1);
    return r.result.empty_cache_effect;
  };
  CHECK_THAT(effect("torch-caching", nlohmann::json::object()), Catch::Contains("released 32.00 MiB"));
  CHECK_THAT(effect("cuda-async", {{"preallocate", false}, {"release_threshold", 0}}), Catch::Contains("returned"));
  CHECK_THAT(effect("xla-bfc", nlohmann::json::object()), Catch::Contains("nothing released"));
  CHECK_THAT(effect("platform", nlohmann::json::object()), Catch::Contains("nothing to release"));
}

TEST_CASE("expandable segments: recorded reservations, the small pool kept apart, the recorded OOM") {
  RunResult r = replay(fixture("expandable_3dev_oom.pickle"));
  REQUIRE(r.ooms.size() == 1);
  // The recorded oom on device 1: request 5,308,694,528 B with 95,682,560 B left on the device.
  CHECK(r.ooms[0].device == 1);
  CHECK(r.ooms[0].requested == 5308694528ULL);
  CHECK(r.header["recorded_devices"][0]["usable_bytes"] == 84202749952ULL + 95682560ULL);
  // Device 0's small-pool allocations live in their own reservation (0x1c46000000 recorded).
  bool small_seen = false;
  for (const auto& l : converted(fixture("expandable_3dev_oom.pickle"), tmp_path("exp.jsonl")))
    if (l.value("op", "") == "alloc" && l.value("device", 0) == 0 && l["size"].get<std::uint64_t>() <= (1 << 20))
      small_seen |= l["addr"].get<std::uint64_t>() >= 0x1c46000000ULL;
  CHECK(small_seen);
}

TEST_CASE("what-if: expandable segments change a run recorded without them") {
  RunResult base = replay(fixture("transformer_ctx128_train_step.pickle"));
  RunResult exp = replay(fixture("transformer_ctx128_train_step.pickle"), {{"alloc_conf", "expandable_segments:True"}});
  CHECK(exp.policy_config["resolved_expandable_segments"] == true);
  CHECK(exp.peak_reserved < base.peak_reserved);                            // mapping pages on demand reserves less
  CHECK(exp.fidelity["allocs_matched"] < exp.fidelity["allocs_compared"]);  // it maps differently
  CHECK(exp.completed);
}

TEST_CASE("older and smaller snapshot layouts load") {
  // Blocks without addresses: each starts where the previous ended (PyTorch 2.0 era).
  RunResult implied = replay(fixture("torch20_implied_addresses.pickle"));
  CHECK(implied.allocs == 460);
  CHECK(implied.completed);
  CHECK(implied.peak_requested == 11840159744ULL);  // the snapshot's own "snapshot" entry: 11,840,159,744 B
  // The plain list torch.cuda.memory_snapshot() returns (state only).
  RunResult plain = replay(fixture("plain_list_segments.pickle"));
  CHECK(plain.allocs == 10);
  CHECK(plain.header["state_only"] == true);
  CHECK(plain.completed);
}

TEST_CASE("pre-trace blocks take their recorded size, or the split rule's") {
  // finetune: blocks allocated before recording asked for 2 MiB and hold 2.5 MiB (an unsplit
  // 512 KiB remainder), as the segments at the dump record; the replay places them so.
  auto ft = tmp_path("ft.jsonl");
  std::map<std::uint64_t, std::uint64_t> recorded;  // event index → block size
  std::uint64_t i = 0;
  for (const auto& l : converted(fixture("finetune_torch20_format.pickle"), ft)) {
    if (l.contains("fragsim_trace")) continue;
    if (l.contains("block_size")) {
      CHECK(l["block_size"] > l["size"]);
      recorded[i] = l["block_size"].get<std::uint64_t>();
    }
    ++i;
  }
  CHECK(recorded.size() >= 8);
  size_t matched = 0;
  for (const auto& p : run_cmd({.trace = ft}, {.placements = tmp_path("ft.placements.jsonl")}).placements)
    if (auto it = recorded.find(p["i"].get<std::uint64_t>()); it != recorded.end())
      matched += p["block_bytes"] == it->second;
  CHECK(matched == recorded.size());
  // Without a recorded size: a gap of 1 MiB or less after a large-pool block is its unsplit
  // remainder (no free block that small exists in the large pool); with max_split_size set and an
  // oversize block before it, the gap is ambiguous and left alone.
  std::string text =
      "{\"op\":\"segment_alloc\",\"addr\":1073741824,\"size\":48234496,\"pre_trace\":true}\n"
      "{\"op\":\"alloc\",\"id\":1,\"size\":23068672,\"addr\":1073741824,\"pre_trace\":true}\n"
      "{\"op\":\"alloc\",\"id\":2,\"size\":24641536,\"addr\":1097334784,\"pre_trace\":true}\n";
  // (A hand-written trace names no allocator: its state is taken as recorded only on request.)
  auto w =
      simulate({.name = "widen", .text = text, .policy = "torch-caching", .pre_trace = PriorOptions::Mode::kRecorded});
  CHECK(w.stats()["pre_trace_blocks_widened"] == 1);
  CHECK(w.result.peak_allocated == 48234496);  // 22 MiB + the 512 KiB gap + 23.5 MiB: the whole segment
  auto a = simulate({.name = "ambiguous",
                     .text = text,
                     .policy = "torch-caching",
                     .config = {{"alloc_conf", "max_split_size_mb:21"}},
                     .pre_trace = PriorOptions::Mode::kRecorded});
  CHECK(a.result.peak_allocated == 48234496 - 524288);
  CHECK(a.stats()["pre_trace_blocks_ambiguous"] == 1);
}

TEST_CASE("stack frames are kept: the innermost user frame names the buffer, the stack is defined once") {
  auto lines = converted(fixture("sqattn_empty_cache.pickle"), tmp_path("sq.jsonl"));
  std::set<std::uint64_t> defined;
  int named = 0;
  for (const auto& l : lines) {
    std::string op = l.value("op", "");
    if (op == "stack") {
      CHECK(defined.insert(l["id"].get<std::uint64_t>()).second);
      // Python frames; or, for a block live before the recording without frames, the segment it lies
      // in under "(allocated before the recording began)".
      const auto& fr = l["frames"];
      if (fr.back() == "(allocated before the recording began)") {
        CHECK(fr.size() == 2);
        CHECK_THAT(fr[0].get<std::string>(), Catch::StartsWith("segment 0x"));
        continue;
      }
      for (const auto& f : fr) CHECK(f.get<std::string>().find(".py:") != std::string::npos);
    }
    if (op == "alloc" && l.contains("stack")) {
      CHECK(defined.count(l["stack"].get<std::uint64_t>()));
      if (l.contains("name")) {
        ++named;
        CHECK(l["name"].get<std::string>().find("/torch/") == std::string::npos);
      }
    }
  }
  CHECK(named > 2000);
  // modeling_qwen2.py:274 forward allocates the block of the first segment (SOURCES: the add in Qwen2's MLP).
  bool found = false;
  for (const auto& l : lines) found |= l.value("name", "") == "modeling_qwen2.py:274 forward";
  CHECK(found);
}

TEST_CASE("snapshot import: pre-trace state first, observations kept, convert writes them") {
  std::string src = fixture("small_mlp_97ev.pickle"), out = tmp_path("mlp.jsonl");
  auto lines = converted(src, out);
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
  // A well-formed pickle that is not a snapshot, through what info and run call: one-line input errors.
  std::string p = write_text("notsnap.pickle", "\x80\x04K\x05.");
  CHECK(input_error([&] { (void)trace_info(p, false); }).find("not a PyTorch memory snapshot") != std::string::npos);
  std::string t = write_text("trunc.pickle", fixture_bytes("small_mlp_97ev.pickle").substr(0, 5000));
  CHECK(input_error([&] { (void)run_cmd({.trace = t, .policy = "torch-caching"}); }).find("pickle: ") !=
        std::string::npos);
}

TEST_CASE("torch-caching sizing: 512-byte rounding, power-2 divisions, pools and segment sizes") {
  TraceBuilder t;
  t.alloc(1, 1).alloc(2, 1200).alloc(3, 1 << 20).alloc(4, (1 << 20) + 1).alloc(5, 12 * MiB + 5);
  auto r = simulate({.name = "tsizes", .text = t.text, .policy = "torch-caching"});
  CHECK(r.placements[0]["block_bytes"] == 512);
  CHECK(r.placements[1]["block_bytes"] == 1536);
  CHECK(r.placements[2]["block_bytes"] == 1 << 20);  // exactly 1 MiB is small: same 2 MiB segment
  CHECK(r.placements[2]["region"] == r.placements[0]["region"]);
  // 1 MiB+1 opens a 20 MiB segment; 12 MiB+5 best-fits into its 19 MiB remainder.
  CHECK(r.stats()["segment.large_pool.current"] == 1);
  CHECK(r.stats()["reserved_bytes"] == 2 * MiB + 20 * MiB);
  CHECK(r.placements[4]["region"] == r.placements[3]["region"]);
  CHECK(r.placements[4]["region_offset"] == (1 << 20) + 512);
  auto d = simulate({.name = "tdiv",
                     .text = TraceBuilder().alloc(1, 1258291).text,
                     .policy = "torch-caching",
                     .config = {{"alloc_conf", "roundup_power2_divisions:4"}}});
  CHECK(d.placements[0]["block_bytes"] == 1310720);  // 1.2 MiB → next quarter of 1 MiB above: 1.25 MiB
  auto l = simulate({.name = "tdivlist",
                     .text = TraceBuilder().alloc(1, 1258291).alloc(2, 3 * MiB + 1).text,
                     .policy = "torch-caching",
                     .config = {{"alloc_conf", "roundup_power2_divisions:[1:4,2:8,>:2]"}}});
  CHECK(l.placements[0]["block_bytes"] == 1310720);
  CHECK(l.placements[1]["block_bytes"] == 3 * MiB + 256 * 1024);  // [2,4) MiB in 8 steps of 256 KiB
}

TEST_CASE("torch-caching max_split_size: oversize blocks only serve oversize requests") {
  TraceBuilder t;
  t.alloc(1, 100 * MiB).free(1).alloc(2, 30 * MiB);
  auto plain = simulate({.name = "mss0", .text = t.text, .policy = "torch-caching"});
  CHECK(plain.stats()["num_device_alloc"] == 1);  // the cached 100 MiB block is split
  auto mss = simulate(
      {.name = "mss64", .text = t.text, .policy = "torch-caching", .config = {{"alloc_conf", "max_split_size_mb:64"}}});
  CHECK(mss.stats()["num_device_alloc"] == 2);
  CHECK(mss.placements[1]["region"] == 1);
  CHECK_THROWS_WITH(simulate({.name = "mss10",
                              .text = t.text,
                              .policy = "torch-caching",
                              .config = {{"alloc_conf", "max_split_size_mb:10"}}}),
                    Catch::Contains("max_split_size_mb too small"));
  // An oversize request reuses an oversize block only within max_non_split_rounding (20 MiB).
  TraceBuilder u;
  u.alloc(1, 100 * MiB).free(1).alloc(2, 70 * MiB).alloc(3, 90 * MiB);
  auto o = simulate({.name = "mss_round",
                     .text = u.text,
                     .policy = "torch-caching",
                     .config = {{"alloc_conf", "max_split_size_mb:64"}}});
  CHECK(o.placements[1]["region"] == 1);  // 100 ≥ 70 + 20: not reused
  CHECK(o.placements[2]["region"] == 0);  // 100 < 90 + 20: reused whole
  CHECK(o.placements[2]["block_bytes"] == 100 * MiB);
}

TEST_CASE("torch-caching streams: no reuse across streams — a cross-stream free completes later") {
  TraceBuilder t;
  t.alloc(1, 4096).free(1).alloc(2, 4096, nullptr, 7);
  auto r = simulate({.name = "streams", .text = t.text, .policy = "torch-caching"});
  CHECK(r.stats()["num_device_alloc"] == 2);
  CHECK(r.placements[1]["region"] == 1);
  // Freed on stream 9 (record_stream) with a 100-tick event: not reusable until it completes.
  std::string text =
      "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"t\":0}\n"
      "{\"op\":\"free\",\"id\":1,\"stream\":9,\"t\":10}\n"
      "{\"op\":\"alloc\",\"id\":2,\"size\":4096,\"t\":20}\n"
      "{\"op\":\"alloc\",\"id\":3,\"size\":4096,\"t\":200}\n";
  auto d =
      simulate({.name = "pending", .text = text, .policy = "torch-caching", .config = {{"stream_event_delay", 100}}});
  CHECK(d.placements[1]["region_offset"] == 4096);  // block 1 still pending: the next one
  CHECK(d.placements[2]["region_offset"] == 0);     // completed at t=110: reused
}

TEST_CASE("torch-caching garbage collection frees old cached segments above the threshold") {
  TraceBuilder t;
  t.alloc(1, 150 * MiB).alloc(2, 150 * MiB).free(1).free(2).alloc(3, 200 * MiB);
  nlohmann::json cfg = {{"memory_fraction", 0.5}, {"alloc_conf", "garbage_collection_threshold:0.5"}};
  auto gc = simulate({.name = "gc", .text = t.text, .policy = "torch-caching", .config = cfg, .capacity = "1GiB"});
  CHECK(gc.stats()["num_device_free"] == 2);
  CHECK(gc.stats()["reserved_bytes"] == 200 * MiB);
  cfg.erase("alloc_conf");
  auto nogc = simulate({.name = "nogc", .text = t.text, .policy = "torch-caching", .config = cfg, .capacity = "1GiB"});
  CHECK(nogc.stats()["num_device_free"] == 0);
  CHECK(nogc.stats()["reserved_bytes"] == 500 * MiB);
}

// Regression (found by fuzzing the policies): the GC took an expandable reservation for a whole
// free segment once no block of it was in use, and cudaFree'd it while it held mapped and
// unmapped free blocks (internal error, exit 1; an OOM's advice replays the user's GC threshold
// with expandable segments, so a plain run failed too). PyTorch's GC frees whole-segment blocks
// only, never expandable ones (specs/torch-caching.md §5). Here the GC finds nothing to free:
// buffer 6 needs 3 more 20 MiB pages on top of 80 MiB mapped, over the 102.4 MiB allowed; the
// retry's empty_cache unmaps the one free page (stream 0's second), 60 + 60 MiB is still over,
// and the request fails with the pages under buffers 4 and 5 left mapped.
TEST_CASE("torch-caching garbage collection leaves expandable reservations to empty_cache") {
  TraceBuilder t;
  t.alloc(1, 34603008).free(1).alloc(2, 39601115).free(2).alloc(3, 20628965, nullptr, 1).free(3);
  t.alloc(4, 2 * MiB).alloc(5, 40 * MiB, nullptr, 1).alloc(6, 49930429, nullptr, 2);
  auto r = simulate(
      {.name = "gc_expandable",
       .text = t.text,
       .policy = "torch-caching",
       .config = {{"expandable_segments", true}, {"garbage_collection_threshold", 0.5}, {"memory_fraction", 0.8}},
       .capacity = "128MiB",
       .keep_going = true});
  REQUIRE(r.result.ooms.size() == 1);
  CHECK(r.result.ooms[0].event_index == 8);
  CHECK(r.stats()["num_device_alloc"] == 4);  // 2 pages on stream 0, 2 on stream 1
  CHECK(r.stats()["num_device_free"] == 1);
  CHECK(r.stats()["reserved_bytes"] == 60 * MiB);
  CHECK(r.result.peak_reserved == 80 * MiB);
}

// Regression (found by fuzzing --follow-recording with expandable segments: internal error, exit
// 1, "unmapping a page that is not mapped"): a recorded block in a reservation's unmapped part
// was carved there with no memory behind it. The real allocator had mapped those pages
// (specs/torch-caching.md §6: a block lies in mapped pages only), so following the recording maps
// them first: whole 20 MiB pages from the reservation's base, here [B+200, B+240) MiB for a 30 MiB
// block at B+205 MiB; empty_cache then unmaps them once the block is freed.
TEST_CASE("torch-caching follows a recorded block into a reservation's unmapped pages by mapping them") {
  constexpr std::uint64_t B = 0x7f0000000000;
  auto alloc = [](int id, std::uint64_t addr) {
    return fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"addr\":{}}}", id, 30 * MiB, addr);
  };
  TraceBuilder t;
  t.raw(fmt::format("{{\"op\":\"segment_map\",\"addr\":{},\"size\":{}}}", B, 40 * MiB));
  t.raw(alloc(1, B)).raw(alloc(2, B + 205 * MiB)).free(2).raw(R"({"op":"empty_cache"})");
  auto r = simulate({.name = "follow_unmapped",
                     .text = t.text,
                     .policy = "torch-caching",
                     .config = {{"expandable_segments", true}},
                     .capacity = "1GiB",
                     .follow_recording = true});
  REQUIRE(r.placements.size() == 2);
  CHECK(r.placements[0]["addr"] == B);  // the recorded reservation base
  CHECK(r.placements[1]["addr"] == B + 205 * MiB);
  // Pages: 2 under block 1; 1 the policy's own choice for block 2 mapped (B+30 MiB, growing into
  // [B+40, B+60) MiB) before the recording corrected it; 2 under block 2 as recorded.
  CHECK(r.stats()["num_device_alloc"] == 5);
  CHECK(r.result.peak_reserved == 100 * MiB);
  CHECK(r.stats()["num_device_free"] == 3);  // empty_cache: every whole free page
  CHECK(r.stats()["reserved_bytes"] == 40 * MiB);
}

// Regression (a real snapshot, sqattn_empty_cache.pickle, with roundup_power2_divisions:4 at 6 GiB
// and --keep-going, stopped on an internal error, exit 1): a what-if setting makes segments
// larger than the recording's, and the next recorded segment address then lies inside the
// previous grant. The device model took it all the same: two segments over one range, two free
// blocks at one address in the pool's index, and the wrong one merged. A device never grants
// overlapping memory: the grant goes elsewhere. Here 13 MiB blocks in recorded 14 MiB segments
// round to 16 MiB with 2 divisions (specs/torch-caching.md section 1: 8 MiB / 2 = 4 MiB steps).
TEST_CASE("torch-caching: a recorded segment address inside a larger simulated segment is not granted twice") {
  constexpr std::uint64_t A = 0x7f0000000000;
  auto seg = [](std::uint64_t addr) {
    return fmt::format("{{\"op\":\"segment_alloc\",\"addr\":{},\"size\":{}}}", addr, 14 * MiB);
  };
  auto alloc = [](int id, std::uint64_t addr) {
    return fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"addr\":{}}}", id, 13 * MiB, addr);
  };
  TraceBuilder t;
  t.raw(seg(A)).raw(alloc(1, A)).raw(seg(A + 14 * MiB)).raw(alloc(2, A + 14 * MiB));
  auto as_recorded = simulate({.name = "seg_recorded", .text = t.text, .policy = "torch-caching"});
  REQUIRE(as_recorded.placements.size() == 2);
  CHECK(as_recorded.placements[1]["addr"] == A + 14 * MiB);  // a recorded address that fits is taken
  auto larger = simulate({.name = "seg_larger",
                          .text = t.text,
                          .policy = "torch-caching",
                          .config = {{"alloc_conf", "roundup_power2_divisions:2"}}});
  REQUIRE(larger.placements.size() == 2);
  CHECK(larger.placements[0]["addr"] == A);
  CHECK(larger.placements[0]["block_bytes"] == 16 * MiB);
  const auto b = larger.placements[1]["addr"].get<std::uint64_t>();
  CHECK((b >= A + 16 * MiB || b + 16 * MiB <= A));  // not inside [A, A + 16 MiB)
}

TEST_CASE("torch-caching OOM: empty the cache and retry, then PyTorch's message") {
  TraceBuilder t;
  t.alloc(1, 60 * MiB).free(1).alloc(2, 80 * MiB).alloc(3, 30 * MiB);
  auto r = simulate({.name = "tretry", .text = t.text, .policy = "torch-caching", .capacity = "100MiB"});
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
  // A 30 MiB block asks for exactly a 30 MiB segment: no word on sizes.
  CHECK_THAT(msg, !Catch::Contains("names the segment it asks the device for"));
  // A 3 MiB block asks for a 20 MiB segment (1–10 MiB requests, specs/torch-caching.md): PyTorch's
  // "Tried to allocate 20.00 MiB" is that segment, and a line before it says so with both sizes.
  TraceBuilder s;
  s.alloc(1, 90 * MiB).alloc(2, 3 * MiB);
  auto small = simulate({.name = "tsmall", .text = s.text, .policy = "torch-caching", .capacity = "100MiB"});
  REQUIRE(small.result.ooms.size() == 1);
  const std::string& m2 = small.result.ooms[0].explanation;
  CHECK_THAT(m2, Catch::Contains("Tried to allocate 20.00 MiB."));
  CHECK_THAT(m2, Catch::Contains("(PyTorch's message below names the segment it asks the device for, 20.00 MiB "
                                 "(20971520 B); the block: 3.00 MiB (3145728 B))"));
  // That segment is what it needed: 10 MiB left on the device hold the 3 MiB block but not the 20 MiB
  // segment, a capacity OOM (trial 15: "FRAGMENTATION ... though a free piece is large enough").
  CHECK(small.result.ooms[0].needed == 20 * MiB);
  CHECK(small.result.ooms[0].free == 10 * MiB);
  CHECK_FALSE(small.result.ooms[0].fragmentation);
  // PyTorch's ROCm build says HIP, and names its variable (pytorch/pytorch#138002).
  auto hip =
      simulate({.name = "tsmall_hip", .text = s.text, .policy = "torch-caching", .capacity = "100MiB", .hw = "mi300x"});
  REQUIRE(hip.result.ooms.size() == 1);
  CHECK_THAT(hip.result.ooms[0].explanation,
             Catch::Contains("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 20.00 MiB.") &&
                 Catch::Contains("PYTORCH_HIP_ALLOC_CONF=expandable_segments:True"));
}

TEST_CASE("torch-caching expandable segments: 8 x 16 MiB maps 7 pages — 4 x 32 MiB then maps none") {
  TraceBuilder t;
  for (int i = 0; i < 8; ++i) t.alloc(i, 16 * MiB);
  for (int i = 0; i < 8; ++i) t.free(i);
  for (int i = 0; i < 4; ++i) t.alloc(100 + i, 32 * MiB);
  auto e = simulate({.name = "exp",
                     .text = t.text,
                     .policy = "torch-caching",
                     .config = {{"alloc_conf", "expandable_segments:True"}}});
  CHECK(e.stats()["num_device_alloc"] == 7);
  CHECK(e.stats()["reserved_bytes"] == 140 * MiB);
  CHECK(e.stats()["inactive_split_bytes"] == 0);
  for (const auto& p : e.placements) CHECK(p["region"] == 0);  // one segment
  auto n = simulate({.name = "noexp", .text = t.text, .policy = "torch-caching"});
  CHECK(n.stats()["num_device_alloc"] == 12);
  CHECK(n.stats()["reserved_bytes"] == 256 * MiB);
  // empty_cache on an OOM unmaps whole free pages, then the retry maps again.
  TraceBuilder u;
  u.alloc(1, 50 * MiB).free(1).alloc(2, 16 * MiB, nullptr, 3);
  auto m = simulate({.name = "expunmap",
                     .text = u.text,
                     .policy = "torch-caching",
                     .config = {{"alloc_conf", "expandable_segments:True"}},
                     .capacity = "64MiB"});
  CHECK(m.placements[1]["ok"] == true);
  CHECK(m.stats()["num_alloc_retries"] == 1);
  CHECK(m.stats()["reserved_bytes"] == 20 * MiB);
}

TEST_CASE("PYTORCH_CUDA_ALLOC_CONF parsing errors name the problem") {
  for (const char* conf : {"bogus:1", "expandable_segments:true", "garbage_collection_threshold:1.5",
                           "roundup_power2_divisions:3", "backend:cudaMallocAsync", "max_split_size_mb"}) {
    INFO(conf);
    CHECK_THROWS_AS(simulate({.name = "conf",
                              .text = TraceBuilder().alloc(1, 1).text,
                              .policy = "torch-caching",
                              .config = {{"alloc_conf", conf}}}),
                    InputError);
  }
  auto ok = simulate(
      {.name = "confok",
       .text = TraceBuilder().alloc(1, 1).text,
       .policy = "torch-caching",
       .config = {{"alloc_conf",
                   "max_split_size_mb:128,garbage_collection_threshold:0.6,pinned_use_cuda_host_register:True"}}});
  CHECK(ok.stats()["max_split_size"] == 128 * MiB);
}

TEST_CASE("snapshot import: two devices interleave by time, each replays on its own allocator") {
  std::string src = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/two_devices.pickle";
  auto lines = converted(src, tmp_path("two.jsonl"));
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

TEST_CASE("seeded mutation of a real snapshot: only clear input errors, never a crash", "[fuzz]") {
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

TEST_CASE("torch-caching adopts a snapshot's recorded allocator_settings, and a setting given replaces only its own") {
  std::string src = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/recorded_settings.pickle";
  RunResult r = replay(src);
  CHECK(r.policy_config["recorded_settings_applied"] == true);
  CHECK(r.policy_config["resolved_max_split_size"] == 128 * MiB);
  CHECK(r.fidelity["allocs_matched"] == 1);
  CHECK(r.spaces[0].stats["allocated_bytes"] == 1310720);  // 1.2 MiB rounded by the recorded divisions
  RunResult plain = replay(src, {{"use_recorded_settings", false}});
  CHECK(plain.policy_config["resolved_max_split_size"] == -1);
  CHECK(plain.spaces[0].stats["allocated_bytes"] == 1258496);  // 512-byte rounding
  // Overriding one recorded setting (--set max_split_size_mb) keeps the others: max_split_size is the
  // user's, the recorded roundup_power2_divisions still round the 1.2 MiB request.
  RunResult user = replay(src, {{"max_split_size_mb", 64}});
  CHECK(user.policy_config["resolved_max_split_size"] == 64 * MiB);
  CHECK(user.policy_config["recorded_settings_applied"] == true);
  CHECK(user.spaces[0].stats["allocated_bytes"] == 1310720);
  CHECK(user.policy_config["resolved_alloc_conf"].get<std::string>().find("max_split_size_mb:64") == 0);
  REQUIRE(!user.notes.empty());
  CHECK(user.notes.back().find("recorded settings") != std::string::npos);
  // PYTORCH_CUDA_ALLOC_CONF (alloc_conf) is read whole, as PyTorch reads the variable: it replaces the
  // recorded configuration, so the recorded divisions go and the request is rounded to 512 B.
  RunResult whole = replay(src, {{"alloc_conf", "max_split_size_mb:64"}});
  CHECK(whole.policy_config["resolved_alloc_conf"] == "max_split_size_mb:64");
  CHECK_FALSE(whole.policy_config.contains("recorded_settings_applied"));
  CHECK(whole.spaces[0].stats["allocated_bytes"] == 1258496);
}

TEST_CASE("a snapshot's external_annotations (the optimizer's record_function ranges) become marks at their times") {
  // transformer_ctx128_train_step.pickle's external_annotations, as pickle.load shows them.
  const std::pair<const char*, std::uint64_t> want[] = {
      {"START Optimizer.zero_grad#AdamW.zero_grad", 1748730219595970ULL},
      {"END Optimizer.zero_grad#AdamW.zero_grad", 1748730219596156ULL},
      {"START Optimizer.step#AdamW.step", 1748730220044133ULL},
      {"END Optimizer.step#AdamW.step", 1748730220159711ULL}};
  RunResult r = replay(fixture("transformer_ctx128_train_step.pickle"));
  REQUIRE(r.marks.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(r.marks[i].name == want[i].first);
    CHECK(r.marks[i].t.value() == want[i].second);
    if (i) CHECK(r.marks[i].event_index > r.marks[i - 1].event_index);
  }
  // The step's allocations lie between its START and END marks.
  CHECK(r.marks[3].event_index - r.marks[2].event_index > 100);
  CHECK(r.fidelity["allocs_matched"] == r.fidelity["allocs_compared"]);  // marks change no placement
}

TEST_CASE("expandable segments: a mapped range listed without its free tail is still whole pages") {
  // A snapshot as a viewer's demo has it (issue 48 item 4: 0/520 addresses before): one
  // expandable large-pool segment whose blocks are all live at the dump and listed end to end,
  // its total_size their sum, and a trace of alloc and free_completed only (no segment_map: the
  // range was mapped before recording began). PyTorch maps expandable segments in whole pages of
  // 20 MiB in the large pool (c10/cuda/CUDACachingAllocator.cpp, kLargeBuffer; specs/torch-caching.md
  // §6), so the range held 40 MiB; taken at its listed 34.75 MiB it is no whole number of large
  // pages, was seeded as the small pool's, and every block went to a reservation of its own.
  const std::uint64_t base = 0x7f2a00000000ULL;
  const std::vector<Bytes> sizes = {4 * MiB, 8 * MiB, 2 * MiB, 6 * MiB, 3 * MiB + 512, 10 * MiB, 1792 * 1024};
  nlohmann::json trace = nlohmann::json::array(), blocks = nlohmann::json::array();
  std::uint64_t at = base, t = 1000;
  for (Bytes s : sizes) {
    trace.push_back({{"action", "alloc"}, {"addr", at}, {"size", s}, {"stream", 0}, {"time_us", t++}});
    blocks.push_back({{"address", at}, {"size", s}, {"requested_size", s}, {"state", "active_allocated"}});
    at += s;
  }
  // The third block freed and a block of its size allocated again: best fit puts it back there.
  const std::uint64_t third = base + sizes[0] + sizes[1];
  trace.push_back({{"action", "free_completed"}, {"addr", third}, {"size", sizes[2]}, {"stream", 0}, {"time_us", t++}});
  trace.push_back({{"action", "alloc"}, {"addr", third}, {"size", sizes[2]}, {"stream", 0}, {"time_us", t++}});
  nlohmann::json snap = {{"segments",
                          {{{"device", 0},
                            {"address", base},
                            {"total_size", at - base},
                            {"stream", 0},
                            {"segment_type", "large"},
                            {"is_expandable", true},
                            {"blocks", blocks}}}},
                         {"device_traces", {trace}},
                         {"allocator_settings", {{"expandable_segments", true}}}};
  const std::string path = tmp_path("demo_expandable.pickle");
  {
    AtomicFile f(path);
    fragsim::PickleWriter w(f);
    w.json(snap);
    w.finish();
    f.commit();
  }
  auto j = run_json({.trace = path});
  CHECK(j["fidelity"]["allocs_compared"] == 8);
  CHECK(j["fidelity"]["allocs_matched"] == 8);
  CHECK(j["peak_reserved_bytes"] == 40 * MiB);  // two large pages
}

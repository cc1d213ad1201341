// PyTorch profiler (Kineto) traces (issue 48): real traces cut in tests/data/kineto (SOURCES.md)
// replay with their recorded addresses and Total Reserved; every variant of the format is read;
// the window's starting layout is inferred; what is not a memory profile is refused in one line.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/commands/commands.h"
#include "sim/commands/trace_info.h"
#include "sim_helpers.h"
#include "traces/kineto.h"
#include "traces/kineto_layout.h"
#include "traces/trace_reader.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

std::string kineto(const std::string& name) { return test_data("kineto/" + name); }

// Checks that no block the trace's layout holds live before its window meets [at, at + bytes);
// returns the trace's header.
nlohmann::json check_free_before_window(const std::string& name, std::uint64_t at, Bytes bytes) {
  nlohmann::json h;
  auto evs = read_events(kineto(name), {}, &h);
  for (const auto& e : evs)
    if (e.op == Op::kAlloc && e.has(key::kPreTrace) && e.has(key::kAddr)) {
      INFO(fmt::format("{} {:#x} +{}", name, e.addr.value(), e.size));
      CHECK((e.addr.value() + e.size <= at || e.addr.value() >= at + bytes));
    }
  return h;
}

// The fidelity line of a run's text ("" when it has none).
std::string fidelity_line(const std::string& out) {
  const size_t at = out.find("fidelity: ");
  return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
}

}  // namespace

TEST_CASE("kineto: the real traces replay with their recorded addresses and Total Reserved") {
  struct Case {
    const char* file;
    std::uint64_t allocs;   // CUDA allocations in the trace (SOURCES.md)
    std::uint64_t matched;  // addresses reproduced (every one since the layout search's moves of 2026-12-06)
    std::uint64_t events;   // CUDA memory events: each carries Total Reserved
    Bytes peak_reserved;    // the largest Total Reserved the trace records
    Bytes peak_allocated;   // the largest Total Allocated it records
    const char* preset;     // from deviceProperties
    Bytes capacity;         // totalGlobalMem
  };
  const Case cases[] = {
      {"a100_switch_transformer.json.gz", 558, 558, 870, 9386852352, 9361328640, "a100-80g", 84987740160},
      {"t4_resnet50.json.gz", 262, 262, 317, 230686720, 149117952, "h100-80g", 15835660288},
      {"t4_amp_two_threads.pt.trace.json.gz", 156, 156, 312, 278921216, 214771712, "h100-80g", 15637086208},
      {"t4_fp32_two_threads.pt.trace.json.gz", 87, 87, 174, 278921216, 214780416, "h100-80g", 15637086208},
      {"gh200_transformer_stack.pt.trace.json.gz", 60, 60, 120, 117440512, 94398464, "h100-80g", 101468602368},
      {"t4_matmul_full.pt.trace.json.gz", 6, 6, 12, 71303168, 71303168, "h100-80g", 15637086208},
  };
  std::uint64_t all = 0, matched = 0;
  for (const Case& c : cases) {
    INFO(c.file);
    auto r = run_json({.trace = kineto(c.file)});
    CHECK(r["policy"]["name"] == "torch-caching");
    CHECK(r["hardware"]["name"] == c.preset);
    const auto& f = r["fidelity"];
    CHECK(f["allocs_compared"] == c.allocs);
    CHECK(f["allocs_matched"] == c.matched);
    all += f["allocs_compared"].get<std::uint64_t>();
    matched += f["allocs_matched"].get<std::uint64_t>();
    // The allocator's reserved memory after every event, and its peak, exactly as recorded.
    CHECK(f["reserved_compared"] == c.events);
    CHECK(f["reserved_matched"] == c.events);
    CHECK(f["recorded_peak_reserved_bytes"] == c.peak_reserved);
    for (const auto& d : r["devices"])
      if (d["space"] == "hbm") {
        CHECK(d["peak_reserved_bytes"] == c.peak_reserved);
        CHECK(d["capacity_bytes"] == c.capacity);
        // What the program held, as recorded: the memory live before the window is Total
        // Allocated's, not more (the bytes at no stated address were rounded up to 2 MiB, 0.5-1.6 MiB
        // over it).
        CHECK(d["peak_requested_bytes"] == c.peak_allocated);
        // And its blocks: the bytes at no stated address take exactly those bytes, not the rest of
        // their segment (the GH200 trace: 32 MiB for 31.04 MiB, peak allocated 982 KiB above the
        // recorded Total Allocated, trial 18 #4). The T4 traces' 6.125 MiB block keeps a 512-byte
        // remainder the layout leaves after it (PyTorch splits the large pool only above 1 MiB).
        CHECK(d["peak_allocated_bytes"].get<Bytes>() >= c.peak_allocated);
        CHECK(d["peak_allocated_bytes"].get<Bytes>() <= c.peak_allocated + 512);
      }
  }
  // The issue's goal: at least 95 % of all recorded addresses.
  CHECK(matched * 100 >= all * 95);
}

// A what-if re-holds the state before the window under its own settings (issue 47). Re-held under
// the recorded settings themselves it must take the memory the recording shows: PyTorch's rules are
// the same, only the order is the history's. Before, each trace's bytes at no stated address were
// one block on a stream the window never uses while the segment the history obtained for them was
// on another (the A100 trace: 17.40 GiB for 8.74), and an inferred range of a 2 MiB (small-pool)
// segment was re-held as one request above 1 MiB, in a 20 MiB segment of the large pool, and the
// reserved memory left over (6 MiB on each rank of tb_ranks) as a request under 10 MiB: 20 MiB.
TEST_CASE("kineto: the state before a window re-held under the recorded settings takes the recorded memory") {
  for (const char* file :
       {"a100_switch_transformer.json.gz", "t4_resnet50_late.json.gz", "t4_resnet50_first_30.json.gz",
        "t4_fp32_late.pt.trace.json.gz", "gh200_transformer_stack.pt.trace.json.gz",
        "t4_amp_two_threads.pt.trace.json.gz", "random_window_25.json", "mi300x_rank1_hip.json", "tb_ranks"}) {
    INFO(file);
    auto r = run_json({.trace = kineto(file), .pre_trace = "rebuilt"});
    const Bytes recorded = r["fidelity"]["recorded_peak_reserved_bytes"];
    for (const auto& d : r["devices"])
      if (d["space"] == "hbm") {
        CHECK(d["before_recording"]["held"] == "rebuilt");
        const Bytes peak = d["peak_reserved_bytes"];
        CHECK(peak <= recorded + 2 * kMiB);  // the issue's tolerance for Total Reserved
        CHECK(peak + 2 * kMiB >= recorded);
      }
  }
  // The A100 trace's 8.66 GiB live before the window at no address it states are many tensors, not
  // one: roundup_power2_divisions=4 rounds each request up to a quarter of its power of two (8 GiB
  // requests to 10 GiB), and rounding the sum as one request reserved 20.09 GiB for 8.74 recorded.
  auto div = run_json({.trace = kineto("a100_switch_transformer.json.gz"), .sets = {"roundup_power2_divisions=4"}});
  const Bytes recorded = div["fidelity"]["recorded_peak_reserved_bytes"];
  for (const auto& d : div["devices"])
    if (d["space"] == "hbm") CHECK(d["peak_reserved_bytes"].get<Bytes>() < recorded + recorded / 20);
  // The trace says which bytes those are.
  nlohmann::json h;
  Bytes aggregate = 0;
  for (const auto& e : read_events(kineto("a100_switch_transformer.json.gz"), {}, &h))
    if (e.op == Op::kAlloc && e.has(key::kAggregate)) aggregate += e.size;
  CHECK(aggregate == h["kineto"]["devices"][0]["unplaced_live_bytes"].get<Bytes>() +
                         h["kineto"]["devices"][0]["untouched_live_bytes"].get<Bytes>());
  // info counts them apart: no allocation of 8 GiB or more in the sizes, none as the largest.
  auto info = trace_info(kineto("a100_switch_transformer.json.gz"), false);
  CHECK(info["aggregates"]["bytes"] == aggregate);
  CHECK(info["largest_alloc_bytes"].get<Bytes>() < 64 * kMiB);
  for (const auto& b : info["size_histogram"]) CHECK(b["max_bytes"].get<Bytes>() < 64 * kMiB);
  // max_split_size_mb changes only blocks of at least its size (torch-caching.md §3 should_split):
  // where every segment before the window is below it, the allocator so configured could have left
  // that very state, bytes at no stated address included (the rounding of their unknown sizes is
  // the recorded one), and it is taken as recorded (trial 18 #2: 87/87 addresses became 0/87 and
  // reserved 266 → 268 MiB for max_split_size_mb=256 on the T4 fp32 trace, whose segments are all
  // below 64 MiB). Other rounding cannot say how those bytes were rounded: re-held.
  for (const char* set : {"max_split_size_mb=256", "max_split_size_mb=64", "max_split_size_mb=8796093022207"}) {
    INFO(set);
    auto same = run_json({.trace = kineto("t4_fp32_two_threads.pt.trace.json.gz"), .sets = {set}});
    CHECK(same["fidelity"]["allocs_matched"] == 87);
    CHECK(same["fidelity"]["reserved_matched"] == 174);
  }
  auto div4 =
      run_json({.trace = kineto("t4_fp32_two_threads.pt.trace.json.gz"), .sets = {"roundup_power2_divisions=4"}});
  for (const auto& d : div4["devices"])
    if (d["space"] == "hbm") CHECK(d["before_recording"]["held"] == "rebuilt");
}

// Trial 18 #3: a recording proves its device had the memory its allocator held. The H100 trace
// reserved 134 MiB at once; on a device stating 600 MiB, h100-80g's 500 MiB reserve for the runtime
// left 100 MiB, and the replay of the recording itself ran out of memory where the program did not.
TEST_CASE("kineto: the memory a recording held at once is never below what its own device gives") {
  std::string text = read_text(kineto("h100_release_at_alloc.pt.trace.json"));
  const std::string from = "\"totalGlobalMem\": 85045477376";
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), "\"totalGlobalMem\": 629145600");
  const std::string small = write_text("h100_600m.pt.trace.json", text);
  auto r = run_cmd({.trace = small});
  CHECK(r.json["completed"] == true);
  CHECK(r.json["fidelity"]["allocs_matched"] == 31);
  CHECK(r.json["fidelity"]["reserved_matched"] == 62);
  CHECK(r.text.find("the reserve is lowered to 466.00 MiB (--reserve sets it)") != std::string::npos);
  // Given memory (--capacity) is another device: the preset's reserve stays.
  auto given = run_cmd({.trace = small, .capacity = "600MiB", .keep_going = true});
  CHECK(given.json["completed"] == false);
  // Below the preset's reserve the device leaves the runtime's reserve nothing: 0 B, not a number
  // wrapped below zero (trial 20: "16384.00 PiB"); and a device stating less than the recording held
  // is said to contradict it.
  std::string tiny = text;
  tiny.replace(tiny.find("\"totalGlobalMem\": 629145600"), std::string("\"totalGlobalMem\": 629145600").size(),
               "\"totalGlobalMem\": 146800640");
  auto t = run_cmd({.trace = write_text("h100_140m.pt.trace.json", tiny)});
  CHECK(t.text.find("more than the 0 B of its 140.00 MiB") != std::string::npos);
  CHECK(t.json["completed"] == true);
  std::string less = text;
  less.replace(less.find("\"totalGlobalMem\": 629145600"), std::string("\"totalGlobalMem\": 629145600").size(),
               "\"totalGlobalMem\": 104857600");
  auto l = run_cmd({.trace = write_text("h100_100m.pt.trace.json", less), .keep_going = true});
  CHECK(l.text.find("more than the 100.00 MiB (104857600 B) the recording states the device has") != std::string::npos);
}

// A what-if on a late window of a recording answers as on the whole recording (issue 47).
// gh200_transformer_stack_late is the GH200 trace less its first 12 memory events: it begins with a
// 12 MiB and a 5 MiB block of the loop live (allocated before it), which it frees in its first step
// before Total Reserved ever grows. With expandable segments, the history held them at their place
// in their segments while the 32 MiB segment's request and the 31 MiB live before the window were
// held too: the reservation mapped five 20 MiB pages at once, and the second step's 90 MiB needed a
// sixth (124 MiB; the whole trace, whose history does not know those blocks and whose first step
// allocates them, 104 MiB). Nothing the window shows has them in use at a moment the allocator needed
// memory, so the segments' history reads them as the memory around them and places them after it:
// the whole trace's history (8 requests, the 2 blocks that stay live at their place), and its answer.
TEST_CASE("kineto: a what-if on a late window re-holds the loop's buffers as the whole trace's history does") {
  auto whole =
      run_json({.trace = kineto("gh200_transformer_stack.pt.trace.json.gz"), .sets = {"expandable_segments=true"}});
  auto late = run_json(
      {.trace = kineto("gh200_transformer_stack_late.pt.trace.json.gz"), .sets = {"expandable_segments=true"}});
  const auto& w = whole["devices"][0];
  const auto& l = late["devices"][0];
  REQUIRE(l["space"] == "hbm");
  REQUIRE(l["before_recording"]["held"] == "rebuilt");
  CHECK(w["peak_reserved_bytes"] == 104 * kMiB);
  CHECK(l["peak_reserved_bytes"] == 104 * kMiB);  // 124 MiB before
  CHECK(l["before_recording"]["blocks"] == 8);
  CHECK(l["before_recording"]["history"]["requests"] == 8);           // 6 before: the two blocks' memory is requested
  CHECK(l["before_recording"]["history"]["blocks_in_history"] == 2);  // 4 before
  CHECK(l["before_recording"]["history"] == w["before_recording"]["history"]);
  // The recorded settings keep the window's state where it was: every address and Total Reserved.
  auto rec = run_json({.trace = kineto("gh200_transformer_stack_late.pt.trace.json.gz")});
  CHECK(rec["fidelity"]["allocs_matched"] == rec["fidelity"]["allocs_compared"]);
  CHECK(rec["fidelity"]["reserved_matched"] == rec["fidelity"]["reserved_compared"]);
  CHECK(rec["devices"][0]["peak_reserved_bytes"] == 112 * kMiB);
}

TEST_CASE("kineto: events of two threads are ordered by time, in ns since the epoch after baseTimeNanoseconds") {
  nlohmann::json h;
  auto evs = read_events(kineto("t4_fp32_two_threads.pt.trace.json.gz"), {}, &h);
  CHECK(h["source"] == "kineto");
  CHECK(h["time_unit"] == "ns");
  // The file's first [memory] event: ts 1371624316302.789 µs after baseTimeNanoseconds
  // 1775078550000000000, a free of 1,703,936 B at 140619966447616 (a block from before the window).
  std::vector<const Event*> body;
  for (const auto& e : evs)
    if (!e.has(key::kPreTrace) && (e.op == Op::kAlloc || e.op == Op::kFree)) body.push_back(&e);
  REQUIRE(!body.empty());
  CHECK(body.front()->t.value() == 1775078550000000000ULL + 1371624316302789ULL);
  CHECK(body.front()->op == Op::kFree);
  for (size_t i = 1; i < evs.size(); ++i) CHECK(evs[i - 1].t <= evs[i].t);
  // The file lists the main thread's events, then the autograd thread's: in time order the two
  // interleave, so the events' lines in the file (Event::line) go back and forth.
  std::uint64_t back = 0;
  for (size_t i = 1; i < body.size(); ++i) back += body[i]->line < body[i - 1]->line;
  CHECK(back > 0);
}

TEST_CASE("kineto: whole-microsecond epoch timestamps without cat, Ev Idx or finished, on a HIP device of rank 1") {
  nlohmann::json h;
  auto evs = read_events(kineto("mi300x_rank1_hip.json"), {}, &h);
  std::set<std::uint32_t> devices;
  std::uint64_t allocs = 0;
  for (const auto& e : evs)
    if (e.op == Op::kAlloc) {
      devices.insert(e.device);
      ++allocs;
    }
  CHECK(devices == std::set<std::uint32_t>{1});  // Device Id 1, not renumbered
  CHECK(h["rank"] == 1);
  CHECK(h["kineto"]["devices"][0]["platform"] == "HIP");
  CHECK(h["recorded_hardware"]["preset"] == "mi300x");  // compute capability 9.4, vendor by Device Type 6
  // ts 1716980583000000 µs (whole, since the epoch) → ns.
  CHECK(evs.back().t.value() % 1000 == 0);
  auto r = run_json({.trace = kineto("mi300x_rank1_hip.json")});
  CHECK(r["fidelity"]["allocs_matched"] == r["fidelity"]["allocs_compared"]);
  CHECK(r["fidelity"]["reserved_matched"] == r["fidelity"]["reserved_compared"]);
}

TEST_CASE("kineto: CPU events are host memory without addresses, beside the device's") {
  auto evs = read_events(kineto("h100_growth_release.pt.trace.json.gz"));
  std::uint64_t host = 0, device = 0;
  for (const auto& e : evs)
    if (e.op == Op::kAlloc && !e.has(key::kPreTrace)) {
      if (e.space == Space::kHost) {
        ++host;
        CHECK(!e.has(key::kAddr));
        CHECK(e.size == 4000000);
      } else {
        ++device;
        CHECK(e.has(key::kAddr));
      }
    }
  CHECK(host == 2);
  CHECK(device > 0);
  auto r = run_json({.trace = kineto("h100_growth_release.pt.trace.json.gz")});
  std::set<std::string> spaces;
  for (const auto& d : r["devices"]) spaces.insert(d["space"].get<std::string>());
  CHECK(spaces == std::set<std::string>{"hbm", "host"});
  // PyTorch's CPU allocator mallocs and frees each tensor (c10's DefaultCPUAllocator): it holds what
  // is live, no cache (the CUDA caching allocator's segments made 2-20 MiB of "fragmentation" of
  // host memory no process reserved).
  for (const auto& d : r["devices"])
    if (d["space"] == "host") {
      CHECK(d["peak_reserved_bytes"] == d["peak_allocated_bytes"]);
      CHECK(d["peak_allocated_bytes"] == d["peak_requested_bytes"]);
    }
  // The host memory live before ResNet-50's window (88.29 MiB) is the CPU allocator's own, which a
  // CUDA setting does not change: held as recorded while the device's is re-held.
  auto what_if = run_json({.trace = kineto("t4_resnet50.json.gz"), .sets = {"expandable_segments=true"}});
  for (const auto& d : what_if["devices"]) {
    INFO(d["space"]);
    CHECK(d["before_recording"]["held"] == (d["space"] == "host" ? "recorded" : "rebuilt"));
    if (d["space"] == "host") CHECK(d["peak_reserved_bytes"] == d["peak_requested_bytes"]);
  }
}

TEST_CASE("kineto: reserved memory that grows is a segment at the recorded address, a fall is empty_cache") {
  const std::string path = kineto("h100_growth_release.pt.trace.json.gz");
  // The file's own facts: where Total Reserved grows at an allocation (the segment starts at the
  // block's address) and how often it falls.
  auto doc = nlohmann::json::parse(read_input(path, 1 << 26));
  std::vector<std::pair<std::uint64_t, Bytes>> want;
  std::uint64_t falls = 0;
  Bytes reserved = 0;
  bool first = true;
  for (const auto& e : doc["traceEvents"]) {
    if (e["name"] != "[memory]" || e["args"]["Device Type"] != 1) continue;
    Bytes r = e["args"]["Total Reserved"];
    if (!first && r > reserved && e["args"]["Bytes"].get<std::int64_t>() > 0)
      want.push_back({e["args"]["Addr"].get<std::uint64_t>(), r - reserved});
    if (!first && r < reserved) ++falls;
    reserved = r;
    first = false;
  }
  REQUIRE(want.size() >= 3);
  REQUIRE(falls == 1);
  std::vector<std::pair<std::uint64_t, Bytes>> grown;
  std::uint64_t empty_caches = 0;
  for (const auto& e : read_events(path)) {
    if (e.op == Op::kSegmentAlloc && !e.has(key::kPreTrace)) grown.push_back({e.addr.value(), e.size});
    if (e.op == Op::kEmptyCache) ++empty_caches;
  }
  CHECK(grown == want);
  CHECK(empty_caches == falls);
  auto r = run_json({.trace = path});
  const auto& f = r["fidelity"];
  CHECK(f["segments_compared"] == want.size());
  CHECK(f["segments_matched"] == want.size());
  CHECK(f["reserved_matched"] == f["reserved_compared"]);
  CHECK(f["allocs_matched"] == f["allocs_compared"]);
  CHECK(r["empty_cache"]["calls"] == 1);
}

TEST_CASE("kineto: buffers are named by the enclosing operator, stacks come from python_function spans") {
  auto evs = read_events(kineto("gh200_transformer_stack.pt.trace.json.gz"));
  std::map<std::uint64_t, std::vector<std::string>> stacks;
  std::set<std::string> names;
  std::uint64_t with_stack = 0, allocs = 0;
  for (const auto& e : evs) {
    if (e.op == Op::kStack) stacks[e.id.value()] = e.frames;
    if (e.op == Op::kAlloc && !e.has(key::kPreTrace) && e.space == Space::kHbm) {
      ++allocs;
      names.insert(e.name);
      if (e.has(key::kStack)) {
        ++with_stack;
        REQUIRE(stacks.count(e.stack));
      }
    }
  }
  CHECK(allocs == 60);
  CHECK(with_stack == 60);
  // The trace's operators (cpu_op spans around each [memory] event).
  CHECK(names.count("aten::addmm"));
  CHECK(names.count("aten::empty"));
  // python_function names "path(line): func" become "path:line func", innermost first.
  bool converted = false;
  for (const auto& [id, frames] : stacks)
    for (const auto& f : frames)
      if (f.find(".py:") != std::string::npos && f.find("): ") == std::string::npos) converted = true;
  CHECK(converted);
  // --by-stack groups the live bytes by those frames.
  auto c = cli("run " + kineto("gh200_transformer_stack.pt.trace.json.gz") + " --by-stack");
  CHECK(c.code == 0);
  CHECK(c.out.find("aten::addmm") != std::string::npos);
}

TEST_CASE("kineto: the layout inference puts a segment boundary where the real allocator's choice needs one") {
  // In the GH200 trace the first allocation (12 MiB) goes to 0xf96afb400000 although the range
  // just below it, [0xf96afaf00000, +5 MiB), is free then (a 5 MiB block is allocated there later
  // and nothing frees it before): a free block always starts where best fit cuts from, so a
  // segment begins at 0xf96afb400000, and 12 MiB long (the 12 MiB free block at 0xf96afe400000
  // would otherwise be taken: same size, and only a lower address wins).
  nlohmann::json h;
  auto evs = read_events(kineto("gh200_transformer_stack.pt.trace.json.gz"), {}, &h);
  bool found = false;
  for (const auto& e : evs)
    if (e.op == Op::kSegmentAlloc && e.has(key::kPreTrace) && e.addr == Addr(0xf96afb400000ULL))
      found = e.size == 12 * MiB;
  CHECK(found);
  CHECK(h["kineto"]["devices"][0]["layout_search"]["boundaries"] == 1);
  // Reserved memory before the window is the first event's Total Reserved, and the pre-trace
  // segments add up to it.
  Bytes segs = 0;
  for (const auto& e : evs)
    if (e.op == Op::kSegmentAlloc && e.has(key::kPreTrace)) segs += e.size;
  CHECK(segs == 117440512);
  // Unit: the inference on three events of one 20 MiB segment: a block freed in the window that
  // was allocated before it, and the same address allocated again.
  std::vector<KinetoMemEvent> w = {
      {Addr(0x7f0000000000ULL), -static_cast<std::int64_t>(4 * MiB), 6 * MiB, 20 * MiB},
      {Addr(0x7f0000000000ULL), static_cast<std::int64_t>(4 * MiB), 10 * MiB, 20 * MiB},
  };
  KinetoLayout lay = infer_kineto_layout(w);
  CHECK(lay.live_before == 10 * MiB);
  CHECK(lay.reserved_before == 20 * MiB);
  CHECK(lay.freed_in_window == 4 * MiB);
  CHECK(lay.predicted == 1);
  Bytes reserved = 0;
  for (const auto& s : lay.segments) reserved += s.size;
  CHECK(reserved == 20 * MiB);
}

TEST_CASE("kineto: the layout inference makes a block best fit passed over larger than the one it took") {
  // In the T4 fp32 trace (time order) the 512 B block at 0x7fe4bb50e200, freed early in the window,
  // is handed out for a 512 B request after another 512 B request took 0x7fe4bb528e00: a 512 B
  // block there would have won that tie (the lower address), so it was larger, and what is left of
  // it from 0x7fe4bb50e400 is free. Then 0x7fe4bb529000 is freed and a 512 B request takes it, not
  // that lower remainder: best fit takes the smallest block, so the remainder was larger than 0x7fe4bb529000's
  // block (512 B at least: 0x7fe4bb528e00 just below it is in use): at least 1 KiB free from
  // 0x7fe4bb50e400. Before, the search could free only 512 B next to a block or a whole untouched
  // range (here too much: larger requests would then take it) and reproduced 81 of 87 addresses,
  // all six misses these 512 B blocks.
  auto h = check_free_before_window("t4_fp32_two_threads.pt.trace.json.gz", 0x7fe4bb50e400ULL, 1024);
  CHECK(h["kineto"]["devices"][0]["layout_search"]["addresses_predicted"] == 87);
  // The ResNet-50 trace needs two changes at once: 256 KiB requests take the top 256 KiB of one
  // small segment after another in address order (0x7e71eb7b0000, 0x7e71eb9b0000, ... 0x7e71f3990000)
  // and only then 0x7e71e8180000, below all of them: each of those blocks was 256 KiB exactly and
  // 0x7e71e8180000's larger. Making 0x7e71e8180000's block larger alone leaves it the smallest
  // while 0x7e71eb7b0000's is larger than 256 KiB (as the first changes leave it), and its 512 B
  // remainder then takes a later 512 B request: the free-running replay gets worse before a second
  // change puts it right, so a search ranking states by the free-running replay alone stops at 260/262.
  auto r = run_json({.trace = kineto("t4_resnet50.json.gz")});
  CHECK(r["fidelity"]["allocs_matched"] == 262);
}

TEST_CASE("kineto: windows that begin later or end sooner in a real trace reproduce its addresses") {
  // Cut from the shared T4 traces with scripts/cut-kineto (SOURCES.md). What a request leaves of a
  // block the search made larger is a free block in its turn, which a later request takes unless
  // it is larger than that request's block. t4_fp32_late (the fp32 trace less its first 81 memory
  // events): a 512 B request takes 0x7fe4bb528e00 over the 512 B block at 0x7fe4bb50e200, so that
  // one was larger, and what is left of it once it is handed out again must pass 0x7fe4bb528e00's
  // 512 B too: at least 1 KiB free from 0x7fe4bb50e400, two steps of 512 B each of which alone
  // trades one miss for another (45 of 48 addresses before the search tried more than 512 B or the
  // bytes that pass one block). t4_resnet50_late (less its first 239): 0x7e71e8180000's block is
  // larger than the 256 KiB ones best fit takes before it, by more than the small requests that
  // would otherwise take its remainder (the search now tries 32 KiB; 82 of 115 before, the search
  // having freed the whole 1.5 MiB below it instead). t4_resnet50_first_half (its first 210):
  // eight 2 MiB segments laid out alike each hold free memory after a 1 MiB block, and making one
  // of them larger alone only moves a 1 MiB request to the next (118 of 131 before; 121 with the
  // larger amounts alone; a change is now also tried in every range laid out alike).
  // t4_resnet50_first_30 (its first 126): those eight blocks made larger, the first 1 MiB request
  // goes to the 1 MiB block at 0x7e7201a00000, which was larger still: a change that helps only
  // with the next (66 of 77 before; the search now tries, when nothing helps, a change after which
  // best fit takes another block with each change that block suggests).
  // t4_resnet50_60_95 (memory events 60 % to 95 %: --drop 252 --events 147): the 256 KiB block at
  // 0x7e71e8180000 is free and larger than the 256 KiB blocks best fit takes before it; the search
  // first made it larger by freeing the top 32 KiB of the untouched 1.5 MiB below it, which a
  // later request at 0x7e71e8180000 itself then starts at. It needed that range live again, whole,
  // and the range above the block free instead, but could only keep 512 B below the address live
  // (the rest then a free block small requests take): 89 of 90 at a local optimum, in 1,802
  // replays of both searches (each stopped short of its 2,000 by finding no better state).
  struct Case {
    const char* file;
    std::uint64_t allocs, events;
    Bytes peak_reserved;
  };
  for (const Case& c :
       {Case{"t4_fp32_late.pt.trace.json.gz", 48, 95, 278921216}, Case{"t4_resnet50_late.json.gz", 115, 138, 230686720},
        Case{"t4_resnet50_first_half.json.gz", 131, 158, 230686720},
        Case{"t4_resnet50_first_30.json.gz", 77, 94, 230686720},
        Case{"t4_resnet50_60_95.json.gz", 90, 109, 230686720}}) {
    INFO(c.file);
    auto r = run_json({.trace = kineto(c.file)});
    const auto& f = r["fidelity"];
    CHECK(f["allocs_compared"] == c.allocs);
    CHECK(f["allocs_matched"] == c.allocs);
    CHECK(f["reserved_compared"] == c.events);
    CHECK(f["reserved_matched"] == c.events);
    CHECK(f["recorded_peak_reserved_bytes"] == c.peak_reserved);
    for (const auto& d : r["devices"])
      if (d["space"] == "hbm") CHECK(d["peak_reserved_bytes"] == c.peak_reserved);
  }
  // The fp32 window's remainder: no block live before the window in [0x7fe4bb50e400, +1 KiB).
  check_free_before_window("t4_fp32_late.pt.trace.json.gz", 0x7fe4bb50e400ULL, 1024);
}

TEST_CASE("kineto: large segments the window shows only in part keep the memory the allocator had there") {
  // A large segment is 20 MiB when obtained for a request under 10 MiB, else the request rounded
  // up to 2 MiB, never shorter than 10 MiB (specs/torch-caching.md §1, alloc_size). In random_window_10 (device 1)
  // the window's only block in the segment at 0x7f010b000000 is 11.5 MiB, so its extent is 12 MiB,
  // but the segment is 20 MiB: a 4 MiB request goes to 0x7f0119500000 (a 19 MiB free block) rather
  // than to 0x7f010b000000, which a 12 MiB segment would make the smaller block. The search may now
  // lengthen a segment whose last block the allocator passed over even when an untouched range lies
  // between them (it is then free too); before, only one ending at the segment's end, and the
  // replay reproduced 41 of 69 addresses and grew reserved memory the recording never grew (Total
  // Reserved as recorded after 18 of 133 events). In random_window_25 (device 0) a 1.5 MiB block's
  // 2 MiB extent at 0x7f0c00400000 lies 2 MiB below the extent of the blocks from 0x7f0c00880000 up:
  // no large segment is 2 MiB, so both lie in one, with the range between them held live; taken as
  // a segment of its own, the 2 MiB extent became a small-pool one (33 of 42, reserved as recorded
  // after 16 of 79 events). In random_window_14 (device 3) the segment at 0x7f0358400000 is 78 MiB, of
  // which the window touches the first 30 MiB: its free block is larger than the 45 MiB one at
  // 0x7f0347700000 that a 7 MiB request takes; lengthened only as far as one miss needs, it still
  // took later requests, and the search may now give it all the reserved memory no segment of the
  // window holds (66 of 84 with that, 63 before any of these changes). In random_window_29 the
  // segment at 0x7f0244600000 is 12 MiB, of which the window shows 10 MiB, with 4 MiB of reserved
  // memory no segment of the window accounts for: a 10 MiB request passes over its block, so it was
  // larger, and a segment of 10 MiB or more was obtained for a request of its size (rounded up to
  // 2 MiB), not necessarily 20 MiB (79 of 81 when the search could only lengthen it to 20 MiB,
  // more than the reserved memory allows). In
  // random_window_40 the segments at 0x7f0e80000000 and 0x7f0e84400000 are 62 and 66 MiB, of which
  // the window shows 58 MiB each: the first made longer, a later request passes over the second,
  // so neither change helps alone (55 of 72 before the search tried the second after the first).
  struct Case {
    const char* file;
    std::uint64_t matched, allocs, events;
  };
  for (const Case& c : {Case{"random_window_10.json", 64, 69, 133}, Case{"random_window_14.json", 84, 84, 163},
                        Case{"random_window_25.json", 42, 42, 79}, Case{"random_window_29.json", 81, 81, 157},
                        Case{"random_window_40.json", 72, 72, 144}}) {
    INFO(c.file);
    auto r = run_json({.trace = kineto(c.file)});
    const auto& f = r["fidelity"];
    CHECK(f["allocs_compared"] == c.allocs);
    CHECK(f["allocs_matched"].get<std::uint64_t>() >= c.matched);
    CHECK(f["reserved_compared"] == c.events);
    CHECK(f["reserved_matched"] == c.events);
  }
}

TEST_CASE("kineto: a TensorBoard directory of two ranks is one run of two devices, several runs are refused") {
  auto r = run_json({.trace = kineto("tb_ranks")});
  std::set<std::uint64_t> devices;
  for (const auto& d : r["devices"]) devices.insert(d["device"].get<std::uint64_t>());
  CHECK(devices == std::set<std::uint64_t>{0, 1});
  nlohmann::json h;
  read_events(kineto("tb_ranks"), {}, &h);
  CHECK(h["device_names"]["1"] == "rank 1");
  // info shows every rank's window, not the first file's only: both devices' figures, renumbered.
  REQUIRE(h["kineto"]["devices"].size() == 2);
  CHECK(h["kineto"]["devices"][1]["device"] == 1);
  CHECK(h["kineto"]["devices"][1]["allocations"] == 12);
  CHECK(h["kineto"]["events"] == 44);
  auto info = cli("info " + kineto("tb_ranks"));
  CHECK(info.out.find("device 1 (CUDA, NVIDIA H100 80GB HBM3") != std::string::npos);
  CHECK(r["fidelity"]["allocs_matched"] == r["fidelity"]["allocs_compared"]);
  // The same files joined by commas.
  std::string a = kineto("tb_ranks/host_100.1700000000000.pt.trace.json"),
              b = kineto("tb_ranks/host_101.1700000000001.pt.trace.json");
  CHECK(run_json({.trace = a + "," + b})["fidelity"] == r["fidelity"]);
  // Each rank's state before its window follows a what-if and binds a limit, the later rank's too
  // (its window starts 13 us after rank 0's: its state came after rank 0's events had begun, and
  // was replayed as recorded whatever the settings, to 123 % of a memory fraction, with no OOM).
  for (const auto& d : r["devices"]) CHECK(d["before_recording"]["held"] == "recorded");
  auto what_if = run_json({.trace = kineto("tb_ranks"), .sets = {"expandable_segments=true"}});
  REQUIRE(what_if["devices"].size() == 2);
  for (const auto& d : what_if["devices"]) CHECK(d["before_recording"]["held"] == "rebuilt");
  // 20 MiB reserved before each window: a fraction of an H100 below that binds both from the first byte.
  auto tight = run_json({.trace = kineto("tb_ranks"), .sets = {"memory_fraction=0.0002"}, .keep_going = true});
  REQUIRE(tight["devices"].size() == 2);
  for (const auto& d : tight["devices"]) {
    CHECK(d["before_recording"]["held"] == "rebuilt");
    CHECK(d["peak_reserved_bytes"].get<Bytes>() <= d["limit_bytes"].get<Bytes>());
  }
  // Two runs under one log directory: name one.
  namespace fs = std::filesystem;
  fs::path logs = tmp_path("kineto_logs");
  fs::create_directories(logs / "run_a");
  fs::create_directories(logs / "run_b");
  fs::copy_file(a, logs / "run_a" / "w.1.pt.trace.json", fs::copy_options::overwrite_existing);
  fs::copy_file(a, logs / "run_b" / "w.2.pt.trace.json", fs::copy_options::overwrite_existing);
  auto two = cli("run " + logs.string());
  CHECK(two.code == 2);
  CHECK(two.err.find("2 profile runs") != std::string::npos);
  CHECK(two.err.find("run_a") != std::string::npos);
  // One worker's two profiles (two cycles of a schedule): name the file.
  fs::copy_file(a, logs / "run_a" / "w.3.pt.trace.json", fs::copy_options::overwrite_existing);
  auto cycles = cli("info " + (logs / "run_a").string());
  CHECK(cycles.code == 2);
  CHECK(cycles.err.find("2 profiles of worker w") != std::string::npos);
  CHECK(std::count(cycles.err.begin(), cycles.err.end(), '\n') == 1);
}

TEST_CASE("kineto: what is not a memory profile is refused with one line saying what is missing") {
  auto none = cli("run " + kineto("no_memory_events.json"));
  CHECK(none.code == 2);
  CHECK(none.err.find("profile_memory=True") != std::string::npos);
  CHECK(std::count(none.err.begin(), none.err.end(), '\n') == 1);
  auto old = cli("info " + kineto("no_addresses_2021.json"));
  CHECK(old.code == 2);
  CHECK(old.err.find("no_addresses_2021.json:") != std::string::npos);
  CHECK(old.err.find("args.Addr") != std::string::npos);
  // A .json that is no Chrome trace at all is read as fragsim JSONL, and its refusal says it is not a
  // profiler trace either (trial 13: "op: missing required key" alone, for {"foo":1} and []).
  for (const char* doc : {"{\"foo\":1}\n", "[]\n"}) {
    auto other = cli("info " + write_text("other.json", doc));
    INFO(other.err);
    CHECK(other.code == 2);
    CHECK(other.err.find("not a PyTorch profiler trace either") != std::string::npos);
  }
  // A UTF-8 byte-order mark before a valid trace (an editor's save) is read past, as .json and as
  // .pt.trace.json (trial 13: read as JSONL; simdjson reads no mark).
  const std::string hip = read_text(kineto("mi300x_rank1_hip.json"));
  const std::string plain = fidelity_line(cli("run " + kineto("mi300x_rank1_hip.json")).out);
  REQUIRE_FALSE(plain.empty());
  for (const char* name : {"bom.json", "bom.pt.trace.json"}) {
    auto marked = cli("run " + write_text(name, "\xEF\xBB\xBF" + hip));
    INFO(marked.err);
    CHECK(marked.code == 0);
    CHECK(fidelity_line(marked.out) == plain);
  }
  // One event that lost its totals is named with the key it lacks and its place among the memory
  // events (trial 13: "Total Allocated and Total Reserved missing: a profile this old").
  auto doc = nlohmann::json::parse(read_text(kineto("mi300x_rank1_hip.json")));
  int memory = 0, dropped_at = 0;
  for (auto& e : doc["traceEvents"])
    if (e.value("name", "") == "[memory]" && ++memory == 3) {
      e["args"].erase("Total Reserved");
      dropped_at = memory;
    }
  REQUIRE(dropped_at == 3);
  auto lost = cli("info " + write_text("lost_total.json", doc.dump()));
  INFO(lost.err);
  CHECK(lost.code == 2);
  CHECK(lost.err.find("args.Total Reserved: missing in [memory] event 3 of the file") != std::string::npos);
  // Truncated JSON and corrupt gzip: input errors, never crashes. Each malformed copy of a valid
  // trace is refused in one line naming the file and the line at `pos` of the text.
  std::string text = read_text(kineto("mi300x_rank1_hip.json"));
  auto line_at = [&](const std::string& t, size_t pos) {
    return static_cast<std::uint64_t>(std::count(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(pos), '\n')) + 1;
  };
  auto refused = [&](const std::string& name, const std::string& bad, size_t pos, const std::string& what) {
    auto c = cli("info " + write_text(name, bad));
    INFO(c.err);
    CHECK(c.code == 2);
    CHECK(std::count(c.err.begin(), c.err.end(), '\n') == 1);
    CHECK(c.err.find(fmt::format("{}:{}: {}", name, line_at(bad, pos), what)) != std::string::npos);
  };
  // Cut short: said so, at its last line (it said "the top level is neither an object nor an array
  // of events").
  for (size_t cut : {text.size() / 3, text.size() / 2, text.size() - 3})
    refused("cut.pt.trace.json", text.substr(0, cut), cut, "not valid JSON: the file ends before its JSON does");
  // A syntax error inside the file: its line (there was none).
  const size_t reserved = text.find("\"Total Reserved\"");
  REQUIRE(reserved != std::string::npos);
  refused("syntax.pt.trace.json", text.substr(0, reserved) + "\"oops " + text.substr(reserved), reserved,
          "not valid JSON");
  // A syntax error inside distributedInfo (skipped in silence, with whatever followed it), and more
  // after the document (it said the document ended early).
  const size_t world = text.find("\"world_size\"");
  REQUIRE(world != std::string::npos);
  refused("late_error.pt.trace.json", text.substr(0, world) + "," + text.substr(world), world, "not valid JSON");
  refused("trailing.pt.trace.json", text + "garbage\n", text.size(),
          "not valid JSON: more follows the end of the JSON document");
  // A negative address or total is malformed, not a block nowhere (it was read, and cost fidelity);
  // named at its event's first line.
  const size_t addr = text.find("\"Addr\": ");
  REQUIRE(addr != std::string::npos);
  const size_t num = addr + 8, end = text.find_first_of(",}", num), event = text.rfind("\n  {\n", addr) + 2;
  refused("negative.pt.trace.json", text.substr(0, num) + "-5" + text.substr(end), event, "args.Addr: negative (-5)");
  // A memory event without its size, and a GPU whose memory is not a size: refused (a trial found the
  // first dropped in silence, its block's later free read as memory from before the window, and the
  // second replaced by an assumed 80 GB H100).
  const size_t bytes = text.find("\"Bytes\": ");
  REQUIRE(bytes != std::string::npos);
  const size_t bytes_end = text.find_first_of(",}", bytes), bytes_event = text.rfind("\n  {\n", bytes) + 2;
  std::string no_bytes = text.substr(0, bytes) + "\"Bytez\": 0" + text.substr(bytes_end);
  refused("no_bytes.pt.trace.json", no_bytes, bytes_event, "args.Bytes: missing in a [memory] event");
  const size_t mem = text.find("\"totalGlobalMem\": ");
  REQUIRE(mem != std::string::npos);
  const size_t mem_end = text.find_first_of(",}", mem);
  for (const char* v : {"\"x\"", "0"}) {
    auto c = cli("info " + write_text("bad_mem.pt.trace.json",
                                      text.substr(0, mem) + "\"totalGlobalMem\": " + v + text.substr(mem_end)));
    CHECK(c.code == 2);
    CHECK(c.err.find("bad_mem.pt.trace.json: deviceProperties[].totalGlobalMem: must be a positive integer") !=
          std::string::npos);
  }
  auto gz = write_text("bad.pt.trace.json.gz", "\x1f\x8b\x08\x00garbage");
  auto g = cli("info " + gz);
  CHECK(g.code == 2);
  CHECK(g.err.find("gzip") != std::string::npos);
}

TEST_CASE("kineto: a report or a JSONL trace named .json is never taken for a profiler trace") {
  auto rep = tmp_path("report.json");
  REQUIRE(cli("run " + kSample + " --json " + rep).code == 0);
  CHECK(!is_kineto_file(rep));
  CHECK(is_report_path(rep));
  auto jl = write_text("plain.json", "{\"op\":\"alloc\",\"id\":1,\"size\":512}\n{\"op\":\"free\",\"id\":1}\n");
  CHECK(!is_kineto_file(jl));
  CHECK(cli("run " + jl).code == 0);
  CHECK(is_kineto_file(kineto("mi300x_rank1_hip.json")));
  CHECK(!is_report_path(kineto("mi300x_rank1_hip.json")));
  // compare's array of reports, its keys sorted: "fragsim_report" after a by-stack table larger
  // than the 64 KiB the detection reads (a real trace's compare array looks so).
  std::string sites;
  for (int i = 0; i < 4000; ++i) sites += fmt::format("{}{{\"bytes\": {}, \"name\": \"ph\"}}", i ? ", " : "", i);
  auto cmp = write_text("compare.json", "[\n  {\n    \"at_peak_allocated\": {\"sites\": [" + sites +
                                            "]},\n    \"fragsim_report\": 1\n  }\n]\n");
  CHECK(!is_kineto_file(cmp));
  CHECK(is_report_path(cmp));
  // A Chrome trace that is a bare array of events (the legacy autograd profiler's) is a trace.
  CHECK(is_kineto_file(write_text("events.json", "[{\"name\": \"[memory]\", \"ph\": \"i\", \"ts\": 1}]")));
  // diff of a profiler trace under two policies replays it.
  auto d = cli("diff " + kineto("t4_matmul_full.pt.trace.json.gz") + " --policies torch-caching,best-fit");
  CHECK(d.code == 0);
}

TEST_CASE("kineto: a trace whose first top-level value is larger than 64 KiB is still a profiler trace") {
  // Detection looked for traceEvents, schemaVersion or deviceProperties in the first 64 KiB (or the
  // first line): a distributedInfo written first whose process-group table spans many ranks (recent
  // PyTorch's pg_config) hid them, and the trace was read as fragsim JSONL and refused. The top
  // level is now walked key by key, past values of any size, compact or pretty-printed.
  auto doc = nlohmann::json::parse(read_text(kineto("mi300x_rank1_hip.json")));
  nlohmann::json info = doc["distributedInfo"];
  info["pg_config"] = nlohmann::json::array();
  for (int i = 0; i < 1500; ++i)
    info["pg_config"].push_back({{"pg_name", std::to_string(i)},
                                 {"pg_desc", "default_pg"},
                                 {"backend_config", "cuda:nccl"},
                                 {"pg_size", 2},
                                 {"ranks", {0, 1}}});
  REQUIRE(info.dump().size() > 65536);
  const std::string rest =
      fmt::format(R"("schemaVersion": {}, "deviceProperties": {}, "traceEvents": {})", doc["schemaVersion"].dump(),
                  doc["deviceProperties"].dump(1), doc["traceEvents"].dump(1));
  const std::string plain = fidelity_line(cli("run " + kineto("mi300x_rank1_hip.json")).out);
  REQUIRE_FALSE(plain.empty());
  for (const auto& [name, text] :
       {std::pair{"big_first_compact.json", R"({"distributedInfo": )" + info.dump() + ", " + rest + "}"},
        std::pair{"big_first_pretty.json", "{\n  \"distributedInfo\": " + info.dump(2) + ",\n  " + rest + "\n}\n"}}) {
    const std::string path = write_text(name, text);
    INFO(name);
    CHECK(is_kineto_file(path));
    CHECK_FALSE(is_report_path(path));
    auto c = cli("run " + path);
    INFO(c.err);
    CHECK(c.code == 0);
    CHECK(fidelity_line(c.out) == plain);
  }
  // Only top-level keys count: a JSONL trace whose header names traceEvents as a value is JSONL
  // (the first line held the quoted word: it was taken for a profiler trace).
  auto jl =
      write_text("named.json",
                 "{\"fragsim_trace\": 1, \"workload\": \"traceEvents\"}\n{\"op\":\"alloc\",\"id\":1,\"size\":512}\n");
  CHECK_FALSE(is_kineto_file(jl));
  CHECK(cli("run " + jl).code == 0);
}

TEST_CASE("kineto: an empty .json is refused in one line naming the file, an empty .jsonl has no events") {
  // A 0-byte .json (a trace handler that failed, a copy cut short) was read as a JSONL trace of no
  // events and ran: exit 0, "nothing to replay". It is no profiler trace, report or JSONL trace.
  for (const char* text : {"", "\n  \n"}) {
    const std::string path = write_text("empty.json", text);
    for (const char* command : {"run ", "info ", "compare "}) {
      auto c = cli(command + path);
      INFO(command << c.err);
      CHECK(c.code == 2);
      CHECK(std::count(c.err.begin(), c.err.end(), '\n') == 1);
      CHECK(c.err.find("empty.json: the file is empty") != std::string::npos);
    }
  }
  // Named as a profiler trace, it said "not valid JSON: the file ends before its JSON does" at line 1.
  auto named = cli("info " + write_text("empty.pt.trace.json", ""));
  CHECK(named.code == 2);
  CHECK(std::count(named.err.begin(), named.err.end(), '\n') == 1);
  CHECK(named.err.find("empty.pt.trace.json: the file is empty (0 bytes): not a PyTorch profiler trace") !=
        std::string::npos);
  // The contract's JSONL ignores blank lines (specs/contracts.md §1): an empty .jsonl is a trace of no events.
  CHECK(cli("run " + write_text("empty.jsonl", "")).code == 0);
}

TEST_CASE("kineto: convert writes the recorded reserved memory as reserved events that replay the same") {
  auto out = tmp_path("gh200.jsonl");
  REQUIRE(cli("convert " + kineto("gh200_transformer_stack.pt.trace.json.gz") + " " + out).code == 0);
  std::uint64_t reserved = 0;
  for (const auto& j : read_jsonl(out))
    if (j.value("op", "") == "reserved") {
      ++reserved;
      CHECK(j["size"] == 117440512);
    }
  CHECK(reserved == 120);
  auto a = run_json({.trace = kineto("gh200_transformer_stack.pt.trace.json.gz")});
  auto b = run_json({.trace = out});
  CHECK(a["fidelity"] == b["fidelity"]);
  CHECK(a["trace"]["digest"] == b["trace"]["digest"]);
  // A reserved event must say how much.
  auto bad = write_text("reserved.jsonl", "{\"op\":\"reserved\",\"device\":0}\n");
  auto c = cli("info " + bad);
  CHECK(c.code == 2);
  CHECK(c.err.find("reserved.jsonl:1: size: missing required key") != std::string::npos);
}

TEST_CASE("kineto: the replay's reserved memory is compared after every event, and a difference is named") {
  // torch-caching holds a 2 MiB small segment for a 1 MiB block: the first reserved observation
  // agrees, the second (as if the recording had obtained another segment) does not.
  auto t = write_text("reserved_obs.jsonl",
                      "{\"op\":\"alloc\",\"id\":1,\"size\":1048576}\n{\"op\":\"reserved\",\"size\":2097152}\n"
                      "{\"op\":\"alloc\",\"id\":2,\"size\":512}\n{\"op\":\"reserved\",\"size\":4194304}\n");
  auto r = run_json({.trace = t, .policy = "torch-caching"});
  const auto& f = r["fidelity"];
  CHECK(f["reserved_compared"] == 2);
  CHECK(f["reserved_matched"] == 1);
  CHECK(f["recorded_peak_reserved_bytes"] == 4194304);
  CHECK(f["first_mismatch"]["kind"] == "reserved");
  CHECK(f["first_mismatch"]["event_index"] == 3);
  CHECK(f["first_mismatch"]["recorded_bytes"] == 4194304);
  CHECK(f["first_mismatch"]["simulated_bytes"] == 2097152);
  // The text names it in words, as it does an address (trial 12, finding 6: the JSON object was printed).
  auto text = cli("run " + t + " --policy torch-caching");
  CHECK(text.out.find("first mismatch: event 3 on device 0: reserved 4.00 MiB as recorded, 2.00 MiB simulated\n") !=
        std::string::npos);
  // platform (one device malloc per buffer, nothing cached) holds no more than its live buffers, not
  // the caching allocator's segments: reserved differs. (best-fit, whose arena re-holds the segments'
  // memory held before the recording began, the live blocks at their place, matches all 12.)
  auto b = run_json({.trace = kineto("t4_matmul_full.pt.trace.json.gz"), .policy = "platform"});
  CHECK(b["fidelity"]["reserved_compared"] == 12);
  CHECK(b["fidelity"]["reserved_matched"].get<int>() < 12);
  auto c = cli("run " + kineto("t4_matmul_full.pt.trace.json.gz"));
  CHECK(c.out.find("reserved as recorded after 12 of 12 events") != std::string::npos);
  // A run that stops before an observation (too little memory for the state before the window) has
  // no simulated figure there: the text says so (trial 13: the null figure was an internal error).
  auto stopped = cli("run " + kineto("t4_matmul_full.pt.trace.json.gz") + " --capacity 1MiB");
  INFO(stopped.out << stopped.err);
  CHECK(stopped.code == 0);
  CHECK(stopped.out.find("; the replay stopped before it\n") != std::string::npos);
}

namespace {

// A copy of a fixture's trace, changed by `change` (the document), written as `name` under `dir`
// (a folder of tmp_path, made when missing): the test's own variants of real and synthetic traces.
template <class F>
std::string kineto_variant(const std::string& fixture, const std::string& dir, const std::string& name, F&& change) {
  auto doc = nlohmann::json::parse(read_input(kineto(fixture), 1 << 26));
  change(doc);
  std::filesystem::create_directories(tmp_path(dir));
  const std::string path = tmp_path(dir) + "/" + name;
  write_text(dir + "/" + name, doc.dump());
  return path;
}

// Every [memory] event of Device Type `type` in a trace document.
template <class F>
void each_memory_event(nlohmann::json& doc, int type, F&& f) {
  for (auto& e : doc["traceEvents"])
    if (e.value("name", "") == "[memory]" && e["args"]["Device Type"] == type) f(e["args"]);
}

}  // namespace

// Trial 9, finding 1: CPU memory (Device Type 0) was replayed in the preset's host space, XLA's
// pinned host BFC pool with its 64 GiB limit, so a 70 GiB CPU tensor the recording shows allocated
// was an OOM that stopped the run (and made sweep say no capacity works). PyTorch's CPU allocator
// is malloc and free per tensor (c10's DefaultCPUAllocator): no cap of its own; the host's RAM
// bounds it, and a trace does not record that.
TEST_CASE("kineto: CPU memory has no limit: a CPU allocation the recording shows never runs out") {
  constexpr std::int64_t kBig = std::int64_t{70} << 30;
  const std::string big =
      kineto_variant("h100_growth_release.pt.trace.json.gz", "cpu70", "cpu70.pt.trace.json", [&](nlohmann::json& d) {
        // The first CPU tensor (4,000,000 B, allocated and freed) made 70 GiB; Total Allocated follows.
        each_memory_event(d, 0, [&](nlohmann::json& a) {
          const bool alloc = a["Bytes"].get<std::int64_t>() > 0;
          if (a["Bytes"].get<std::int64_t>() == (alloc ? 4000000 : -4000000) && a["Total Allocated"] != 0) {
            a["Bytes"] = alloc ? kBig : -kBig;
            a["Total Allocated"] = alloc ? kBig : 0;
          }
        });
      });
  for (const std::string hw : {"", "a100-40g"}) {
    INFO("--hw " << hw);
    auto r = run_cmd({.trace = big, .hw = hw});
    CHECK(r.json["completed"] == true);
    CHECK(r.json["oom_count"] == 0);
    bool host = false;
    for (const auto& d : r.json["devices"]) {
      if (d["space"] != "host") continue;
      host = true;
      CHECK(d["unbounded"] == true);
      CHECK(d["usable_bytes"] == 0);
      CHECK(d["peak_requested_bytes"].get<std::int64_t>() >= kBig);
      CHECK(d["oom_count"] == 0);
    }
    CHECK(host);
    CHECK(r.text.find("host: no limit: PyTorch's CPU allocator has no cap of its own") != std::string::npos);
    CHECK(r.text.find("no limit   70.00 GiB") != std::string::npos);
    // The GPU binds (its share of its memory), never host memory without a limit.
    CHECK(r.json["binding"]["space"] == "hbm");
  }
  // --capacity is the device's memory: host memory stays unbounded, and sweep answers for the GPU.
  auto small = run_json({.trace = big, .capacity = "4GiB"});
  CHECK(small["oom_count"] == 0);
  auto s = sweep_cmd({.trace = big}, "min-capacity");
  CHECK(s.text.find("smallest capacity with no OOM") != std::string::npos);
}

// Trial 9, finding 2: Total Reserved falling at an allocation (torch.cuda.empty_cache() just before
// it, or the allocator's own retry inside it) was taken as a release only: the segment that
// allocation obtained was placed before the window (h100_release_at_alloc: 30 of 31 addresses,
// reserved as recorded after 0 of 62 events, peak 172 MiB for the recorded 134 MiB; t4_oom_retry: 4
// of 6, 0 of 12). And every fall was "the program called empty_cache", though a retry is the
// allocator's (specs/kineto.md: Total Reserved "shrinks on empty_cache or an OOM retry").
TEST_CASE("kineto: a fall of Total Reserved at an allocation releases the cache, then obtains its segment") {
  struct Case {
    const char* file;
    std::uint64_t maybe_retries;  // falls the trace cannot attribute (SOURCES.md: the synthetic program's)
  };
  for (const Case c : {Case{"h100_release_at_alloc.pt.trace.json", 0}, Case{"t4_oom_retry.pt.trace.json", 1}}) {
    INFO(c.file);
    const std::string path = kineto(c.file);
    // The file's own facts: the falls at an allocation, the block each one allocated, the recorded
    // Total Reserved after every event and its peak.
    auto doc = nlohmann::json::parse(read_input(path, 1 << 26));
    std::vector<std::uint64_t> fall_blocks;
    std::uint64_t falls = 0, events = 0;
    Bytes reserved = 0, peak = 0;
    each_memory_event(doc, 1, [&](const nlohmann::json& a) {
      const Bytes r = a["Total Reserved"];
      if (events && r < reserved) {
        ++falls;
        if (a["Bytes"].get<std::int64_t>() > 0 && a["Addr"].get<std::uint64_t>() % (2 << 20) == 0)
          fall_blocks.push_back(a["Addr"]);
      }
      reserved = r;
      peak = std::max(peak, r);
      ++events;
    });
    REQUIRE(falls >= 1);
    REQUIRE(!fall_blocks.empty());
    // No segment from before the window holds a block allocated at a fall: its segment came then.
    for (std::uint64_t x : fall_blocks) check_free_before_window(c.file, x, 1);
    std::set<std::uint64_t> obtained;
    for (const auto& e : read_events(path))
      if (e.op == Op::kSegmentAlloc && !e.has(key::kPreTrace)) obtained.insert(e.addr.value());
    for (std::uint64_t x : fall_blocks) CHECK(obtained.count(x));
    auto r = run_json({.trace = path});
    const auto& f = r["fidelity"];
    CHECK(f["allocs_matched"] == f["allocs_compared"]);
    CHECK(f["reserved_compared"] == events);
    CHECK(f["reserved_matched"] == events);
    CHECK(f["segments_matched"] == f["segments_compared"]);
    CHECK(r["peak_reserved_bytes"] == peak);
    // Each fall is a release; one where the cache and the segment obtained exceed the most the window
    // held may be the allocator's retry, and is said to be either.
    CHECK(r["empty_cache"]["calls"] == falls);
    CHECK(r["empty_cache"].value("maybe_retries", std::uint64_t{0}) == c.maybe_retries);
    const std::string text = r["empty_cache"]["text"];
    CHECK((text.find("the program called it") != std::string::npos) == (c.maybe_retries == 0));
  }
}

// Trial 9, finding 3: a rank recorded with with_stack=True defines stacks, which name no device, and
// was read as using device 0 as well as its own: rank 1 on cuda:1 became two devices, the ranks
// were numbered 0, 2, 4, 6 and a check of the same memory without stacks failed.
TEST_CASE("kineto: ranks recorded with stacks are numbered by the devices their memory events use") {
  auto rank_copy = [&](const std::string& dir, int rank, bool stacks) {
    return kineto_variant("gh200_transformer_stack.pt.trace.json.gz", dir,
                          fmt::format("host_{}.17000000000{}.pt.trace.json", rank, rank), [&](nlohmann::json& d) {
                            d["distributedInfo"] = {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}};
                            d["deviceProperties"][0]["id"] = rank;  // rank r on cuda:r
                            each_memory_event(d, 1, [&](nlohmann::json& a) { a["Device Id"] = rank; });
                            if (stacks) return;
                            nlohmann::json kept = nlohmann::json::array();
                            for (auto& e : d["traceEvents"])
                              if (e.value("cat", "") != "python_function") kept.push_back(e);
                            d["traceEvents"] = kept;
                            d.erase("with_stack");
                          });
  };
  for (int rank : {0, 1}) rank_copy("ranks_stack", rank, true), rank_copy("ranks_plain", rank, false);
  nlohmann::json h;
  read_events(tmp_path("ranks_stack"), {}, &h);
  CHECK(h["device_names"] == nlohmann::json({{"0", "rank 0"}, {"1", "rank 1"}}));
  auto stacked = run_cmd({.trace = tmp_path("ranks_stack")});
  auto plain = run_cmd({.trace = tmp_path("ranks_plain")});
  std::set<std::uint64_t> devices;
  for (const auto& d : stacked.json["devices"]) devices.insert(d["device"].get<std::uint64_t>());
  CHECK(devices == std::set<std::uint64_t>{0, 1});
  CHECK(stacked.text.find("1 (rank 1) hbm") != std::string::npos);
  // Turning on with_stack changes no memory: the gate passes.
  auto gate = check_cmd("plain.json", plain.json, "stacked.json", stacked.json, {});
  CHECK(gate.pass);
  // The HTML summary names the ranks as the text does: from each device's name in the page's report.
  const nlohmann::json page = stacked.page();  // held: a loop over a temporary's member reads freed memory
  for (const auto& d : page["runs"][0]["report"]["devices"])
    CHECK(d["name"] == fmt::format("rank {}", d["device"].get<int>()));
}

// Trial 9, finding 5: every rank of a set ran on the first trace's GPU (a T4 rank replayed with an
// A100's 78.66 GiB); two traces of one rank were taken without a word; labels lost ".json".
TEST_CASE("kineto: each rank of a set has its own GPU's memory, one rank twice is refused, labels are whole") {
  const std::string dir = mixed_gpu_ranks("mixed_gpus");
  // The T4's memory, as its own trace states it.
  auto t4 = nlohmann::json::parse(read_input(kineto("t4_matmul_full.pt.trace.json.gz"), 1 << 26));
  const Bytes t4_memory = t4["deviceProperties"][0]["totalGlobalMem"];
  auto r = run_cmd({.trace = dir});
  CHECK(r.json["hardware"]["name"] == "a100-80g");
  bool seen = false;
  for (const auto& d : r.json["devices"])
    if (d["device"] == 1 && d["space"] == "hbm") {
      seen = true;
      CHECK(d["capacity_bytes"] == t4_memory);
      CHECK(d["name"] == "hostB_2.1700000001.pt.trace.json.gz");
    } else if (d["device"] == 0 && d["space"] == "hbm") {
      CHECK(d["capacity_bytes"] == 84987740160);  // the A100's totalGlobalMem
    }
  CHECK(seen);
  CHECK(r.text.find("device 1: its memory is its own recording's, 14.56 GiB (15637086208 B)") != std::string::npos);
  // --capacity (or --hw) is one memory for every device.
  const nlohmann::json one = run_json({.trace = dir, .capacity = "20GiB"});
  for (const auto& d : one["devices"])
    if (d["space"] == "hbm") CHECK(d["capacity_bytes"] == Bytes{20} << 30);
  // Two traces that state one rank.
  for (const char* name : {"a_1.111.pt.trace.json", "b_1.111.pt.trace.json"})
    kineto_variant("t4_matmul_full.pt.trace.json.gz", "one_rank_twice", name, [](nlohmann::json& d) {
      d["distributedInfo"] = {{"backend", "nccl"}, {"rank", 0}, {"world_size", 2}};
    });
  auto twice = cli("run " + tmp_path("one_rank_twice"));
  CHECK(twice.code == 2);
  CHECK(twice.err.find("rank 0, as ") != std::string::npos);
  CHECK(twice.err.find("one rank recorded twice") != std::string::npos);
  CHECK(std::count(twice.err.begin(), twice.err.end(), '\n') == 1);
  // A name that says another rank than the trace's own (trial 21 #12: taken silently as the name's).
  kineto_variant("t4_matmul_full.pt.trace.json.gz", "rank_named_wrong", "trace_rank0.pt.trace.json",
                 [](nlohmann::json& d) {
                   d["distributedInfo"] = {{"backend", "nccl"}, {"rank", 1}, {"world_size", 2}};
                 });
  kineto_variant("t4_matmul_full.pt.trace.json.gz", "rank_named_wrong", "trace_rank1.pt.trace.json",
                 [](nlohmann::json& d) {
                   d["distributedInfo"] = {{"backend", "nccl"}, {"rank", 1}, {"world_size", 2}};
                 });
  auto wrong = cli("run " + tmp_path("rank_named_wrong"));
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("trace_rank0.pt.trace.json: its name says rank 0 and its recording says rank 1") !=
        std::string::npos);
  CHECK(std::count(wrong.err.begin(), wrong.err.end(), '\n') == 1);
}

// Trial 9, finding 4: info's per-device "peak requested" added the CPU tensors (host) to the GPU's
// memory without saying so (ResNet-50 on a T4: 230.50 MiB = 142.21 MiB of the GPU + 88.29 MiB of
// CPU); docs/metrics.md: sums over spaces are labelled in every output.
TEST_CASE("kineto: info gives each device's memory spaces their own peak, and labels their sum") {
  const std::string path = kineto("t4_resnet50.json.gz");
  auto info = trace_info(path, false);
  auto run = run_json({.trace = path});
  std::map<std::string, Bytes> by_space;
  for (const auto& d : info["devices"]) {
    CHECK(d["device"] == 0);
    by_space[d["space"].get<std::string>()] = d["peak_requested_bytes"];
  }
  REQUIRE(by_space.size() == 2);
  // run's own figure per space (what the replay's requests held live at once).
  for (const auto& d : run["devices"]) CHECK(by_space[d["space"].get<std::string>()] == d["peak_requested_bytes"]);
  CHECK(by_space["hbm"] == 149117952);  // 142.21 MiB: the GPU's peak Total Allocated
  auto text = trace_info_text(info);
  CHECK(text.find("device 0 hbm: peak requested 142.21 MiB") != std::string::npos);
  CHECK(text.find("device 0 host: peak requested 88.29 MiB") != std::string::npos);
  CHECK(text.find("summed over the 2 memory spaces at one moment (not any device's memory)") != std::string::npos);
}

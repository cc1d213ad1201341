// Issue 24: live bytes by call site (--by-stack, the report's by_stack), the simulated run as a
// PyTorch memory snapshot (--export-snapshot) that PyTorch's own torch.cuda._memory_viz and
// fragsim's importer read back, `fragsim diff` of two runs, --from/--to, and the viewer's new
// views (per-buffer timeline, allocator state at any event, icicle) in headless Chromium.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>
#include <tuple>

#include "html_util.h"
#include "sim/report/diff.h"
#include "sim/report/report.h"
#include "sim/report/snapshot_export.h"
#include "sim_helpers.h"
#include "test_util.h"

using namespace fragsim::test;

namespace {

const std::string kData = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/";
const std::string kJaxCapture = kData + "xprof/tracelens_jax_te_fused_attn_934987a2fc2f.xplane.pb.zst";

// A trace whose call sites are known: three stacks under one outer frame and one without it,
// and buffers without a stack, one of them with a name that carries a terminal escape.
std::string stacks_trace() {
  std::string t = R"({"fragsim_trace":1,"time_unit":"ns"}
{"op":"stack","id":1,"frames":["/w/model.py:10 attn","/w/train.py:5 step"]}
{"op":"stack","id":2,"frames":["/w/model.py:20 mlp","/w/train.py:5 step"]}
{"op":"stack","id":3,"frames":["/w/data.py:3 load"]}
)";
  int id = 0, t_ns = 0;
  auto alloc = [&](std::uint64_t size, const std::string& extra) {
    t += "{\"op\":\"alloc\",\"id\":" + std::to_string(++id) + ",\"size\":" + std::to_string(size) +
         ",\"t\":" + std::to_string(t_ns += 10) + extra + "}\n";
  };
  for (int i = 0; i < 3; ++i) alloc(MiB, ",\"stack\":1");
  alloc(4 * MiB, ",\"stack\":2");
  alloc(2 * MiB, ",\"stack\":3");
  alloc(MiB, "");
  alloc(MiB / 2, ",\"name\":\"evil\\u001b[2J\"");
  return write_text("stacks.jsonl", t);
}

// One event of a trace as the importer gives it, less its time (fragsim keeps one time per free).
using EventKey = std::tuple<std::string, std::uint64_t, std::uint64_t, std::uint64_t, bool, std::uint64_t,
                            std::uint64_t, std::string>;
std::map<std::uint64_t, std::vector<EventKey>> events_by_device(const std::string& trace) {
  std::string out = tmp_path("events.jsonl");
  REQUIRE(cli("convert " + trace + " " + out).code == 0);
  std::map<std::uint64_t, std::vector<EventKey>> by;
  auto lines = read_jsonl(out);
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto& e = lines[i];
    by[e.value("device", std::uint64_t{0})].emplace_back(
        e["op"].get<std::string>(), e.value("id", std::uint64_t{0}), e.value("size", std::uint64_t{0}),
        e.value("addr", std::uint64_t{0}), e.value("pre_trace", false), e.value("block_size", std::uint64_t{0}),
        e.value("stack", std::uint64_t{0}), e.value("name", std::string()));
  }
  // Segments released together (empty_cache, an OOM's retry) in one order: the export writes them
  // as PyTorch's release_blocks walks its pool (by size, then address); an OOM's retry may have
  // released them in another.
  for (auto& [dev, evs] : by)
    for (size_t i = 0; i < evs.size();) {
      auto release = [&](size_t k) {
        return k < evs.size() && (std::get<0>(evs[k]) == "segment_free" || std::get<0>(evs[k]) == "segment_unmap");
      };
      size_t j = i;
      while (release(j)) ++j;
      std::sort(evs.begin() + static_cast<std::ptrdiff_t>(i), evs.begin() + static_cast<std::ptrdiff_t>(j));
      i = j > i ? j : i + 1;
    }
  return by;
}

// Checks an exported snapshot with Debian's PyTorch (python3-torch): its _memory_viz of that
// version reads a snapshot's segment list (stats: the segment summary; memory and segments: the
// flame-graph lines). Prints what differs; exit 0 when every figure agrees with the report.
const char* kMemoryVizCheck = R"PY(
import json, pickle, sys
import torch.cuda._memory_viz as mv
snap = pickle.load(open(sys.argv[1], 'rb'))
rep = json.load(open(sys.argv[2]))
hbm = [d for d in rep['devices'] if d['space'] == 'hbm']
segs = snap['segments']
bad = []
def want(what, got, exp):
    if got != exp: bad.append(f'{what}: {got} != {exp}')
st = mv.stats(segs)  # asserts each segment's blocks add up to its total_size
want('stats segments', st['segments'], len(segs))
want('stats total_size', st['total_size'].value, sum(d['final_reserved_bytes'] for d in hbm))
alloc = st['active_allocated'].value if 'active_allocated' in st else 0
want('stats active_allocated', alloc, sum(d['final_allocated_bytes'] for d in hbm))
ident = lambda lines: lines
mem = mv.memory(segs, format_flamegraph=ident).splitlines()
want('memory lines total', sum(int(l.rsplit(' ', 1)[1]) for l in mem), sum(d['final_reserved_bytes'] for d in hbm))
want('memory lines in use', sum(int(l.rsplit(' ', 1)[1]) for l in mem if ';active_allocated' in l), alloc)
seg_lines = mv.segments(segs, format_flamegraph=ident).splitlines()
want('segments named', len({l.split(';')[1] for l in seg_lines}), len(segs))
for d in hbm:
    tr = snap['device_traces'][d['device']]
    want(f"device {d['device']} ooms", sum(1 for e in tr if e['action'] == 'oom'), d['oom_count'])
    want(f"device {d['device']} allocs", sum(1 for e in tr if e['action'] == 'alloc') > 0, True)
print('\n'.join(bad) if bad else 'agree')
sys.exit(1 if bad else 0)
)PY";

nlohmann::json history_of(const nlohmann::json& page_data, size_t run = 0) {
  REQUIRE(page_data["runs"][run].contains("history"));
  return page_data["runs"][run]["history"];
}

}  // namespace

TEST_CASE("by stack: live bytes at the peak by call site and by stack frame, as the trace's stacks hold them") {
  const std::string trace = stacks_trace(), json = tmp_path("stacks.json");
  auto r = cli("run " + trace + " --policy best-fit --capacity 1GiB --by-stack --json " + json);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(read_text(json));
  const auto& bs = j["at_peak_allocated"]["by_stack"];
  // Every live buffer is in one site: the sites add up to the moment's live bytes, which for
  // best-fit (no rounding beyond 256 B) is the peak allocated.
  CHECK(bs["buffers"] == 7);
  CHECK(bs["live_bytes"] == j["peak_allocated_bytes"]);
  std::map<std::string, nlohmann::json> site;
  std::uint64_t sum = 0;
  for (const auto& s : bs["sites"]) site[s["site"]] = s, sum += s["bytes"].get<std::uint64_t>();
  CHECK(sum == bs["live_bytes"].get<std::uint64_t>());
  // A site is the buffers' name, else the innermost frame of their stack.
  CHECK(site.at("/w/model.py:20 mlp")["requested_bytes"] == 4 * MiB);
  CHECK(site.at("/w/model.py:10 attn")["requested_bytes"] == 3 * MiB);
  CHECK(site.at("/w/model.py:10 attn")["buffers"] == 3);
  CHECK(site.at("/w/data.py:3 load")["requested_bytes"] == 2 * MiB);
  CHECK(site.at("(no name or stack)")["requested_bytes"] == MiB);
  CHECK(site.at("evil\x1b[2J")["requested_bytes"] == MiB / 2);
  CHECK(bs["sites"][0]["site"] == "/w/model.py:20 mlp");  // the most bytes first
  // A frame holds every buffer whose stack passes through it: the outer step holds attn and mlp.
  std::map<std::string, nlohmann::json> frame;
  for (const auto& f : bs["frames"]) frame[f["frame"]] = f;
  CHECK(frame.at("/w/train.py:5 step")["requested_bytes"] == 7 * MiB);
  CHECK(frame.at("/w/train.py:5 step")["buffers"] == 4);
  CHECK(frame.at("/w/data.py:3 load")["requested_bytes"] == 2 * MiB);
  CHECK(frame.count("(no name or stack)") == 0);
  // The text table: the same rows, the hostile name escaped (no raw escape reaches the terminal).
  CHECK(r.out.find("live bytes by call site") != std::string::npos);
  CHECK(r.out.find("model.py:20 mlp") < r.out.find("model.py:10 attn"));
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find("evil\\e[2J") != std::string::npos);
}

TEST_CASE("by stack: allocations of autograd's backward thread are named by their node, from their C++ frames") {
  // transformer_ctx128_train_step records 3,534 of its 6,771 allocations with C++ frames only (the
  // backward pass runs on autograd's own thread: no Python frame), as memory_viz shows them. At the
  // peak of the train step, 226 of the live buffers come from the backward of its batched matmuls:
  // their frames pass through torch::autograd::generated::BmmBackward0::apply.
  const std::string json = tmp_path("backward.json");
  REQUIRE(cli("run " + kTrain + " --by-stack --json " + json).code == 0);
  const auto bs = nlohmann::json::parse(read_text(json))["at_peak_allocated"]["by_stack"];
  std::map<std::string, nlohmann::json> site, frame;
  for (const auto& s : bs["sites"]) site[s["site"]] = s;
  for (const auto& f : bs["frames"]) frame[f["frame"]] = f;
  REQUIRE(site.count("BmmBackward0 (backward)") == 1);
  CHECK(site.at("BmmBackward0 (backward)")["buffers"] == 226);
  CHECK(site.count("(no name or stack)") == 0);
  // Their stacks: the C++ functions between the allocation and the node, less those every
  // allocation shares (the unwinder, the caching allocator, the dispatcher's wrappers).
  CHECK(frame.at("torch::autograd::generated::BmmBackward0::apply")["buffers"] == 226);
  CHECK(frame.at("at::_ops::bmm::call")["buffers"] == 226);
  for (const auto& [f, v] : frame) {
    INFO(f);
    CHECK(f.find("CUDACachingAllocator") == std::string::npos);
    CHECK(f.find("unwind") == std::string::npos);
    // No parameter list: a "(" only in "(anonymous namespace)" or a name fragsim gives.
    const bool bare = f.find('(') == std::string::npos || f.find("(anonymous namespace)") != std::string::npos ||
                      f.front() == '(' || f.find("segment") != std::string::npos;
    CHECK(bare);
  }
}

TEST_CASE("by stack: a PyTorch snapshot's peak by call site covers every live buffer, the OOM's too") {
  const std::string json = tmp_path("3dev.json");
  REQUIRE(cli("run " + k3dev + " --json " + json).code == 0);
  auto j = nlohmann::json::parse(read_text(json));
  REQUIRE(!j["ooms"].empty());
  for (const auto* m : {&j["devices"][0]["at_peak_allocated"], &j["ooms"][0]["at_oom"]}) {
    const auto& bs = (*m)["by_stack"];
    INFO(bs.dump().substr(0, 400));
    CHECK(bs["buffers"] == (*m)["live_buffers"]);
    std::uint64_t sum = 0;
    for (const auto& s : bs["sites"]) sum += s["bytes"].get<std::uint64_t>();
    if (bs["site_count"].get<size_t>() <= bs["sites"].size()) CHECK(sum == bs["live_bytes"].get<std::uint64_t>());
    for (const auto& f : bs["frames"]) CHECK(f["bytes"].get<std::uint64_t>() <= bs["live_bytes"].get<std::uint64_t>());
  }
  // The peak of a device with one space: live bytes there are its allocated bytes at its peak.
  const auto& d0 = j["devices"][0];
  CHECK(d0["at_peak_allocated"]["by_stack"]["live_bytes"] == d0["peak_allocated_bytes"]);
}

TEST_CASE("export: a simulated run as a PyTorch snapshot reads back event for event, device by device") {
  for (const char* name : {"transformer_ctx128_train_step", "sqattn_empty_cache", "oom_retry_release",
                           "expandable_3dev_oom", "finetune_torch20_format"}) {
    INFO(name);
    const std::string trace = kData + "torch/" + name + ".pickle.zst", out = tmp_path(std::string(name) + ".pickle");
    REQUIRE(cli("run " + trace + " --keep-going --export-snapshot " + out).code == 0);
    // The recording replays to its own addresses, so the export of the simulated run holds the
    // recording's events: the same allocations, frees and segment changes at the same addresses,
    // the state before the recording rebuilt from the exported segments as from the original's.
    auto a = events_by_device(trace), b = events_by_device(out);
    REQUIRE(a.size() == b.size());
    for (const auto& [dev, evs] : a) {
      INFO("device " << dev);
      REQUIRE(b.count(dev) == 1);
      CHECK(b[dev].size() == evs.size());
      size_t first = 0;
      while (first < evs.size() && first < b[dev].size() && evs[first] == b[dev][first]) ++first;
      CHECK(first == evs.size());
    }
  }
}

TEST_CASE("export: PyTorch's torch.cuda._memory_viz reads the exported snapshot and agrees with fragsim") {
  const std::string script = write_text("memory_viz_check.py", kMemoryVizCheck);
  for (const std::string& args :
       {kTrain, k3dev + " --keep-going", kTrain + " --policy torch-caching[expandable_segments=true]"}) {
    INFO(args);
    const std::string out = tmp_path("viz.pickle"), json = tmp_path("viz.json");
    REQUIRE(cli("run " + args + " --json " + json + " --export-snapshot " + out).code == 0);
    // Debian's python3-torch (scripts/common.sh installs it) at its own path: not a virtualenv's.
    const std::string log = tmp_path("viz.log");
    int rc = std::system(("/usr/bin/python3 " + script + " " + out + " " + json + " >" + log + " 2>&1").c_str());
    INFO(read_text(log));
    CHECK(WEXITSTATUS(rc) == 0);
    CHECK(read_text(log) == "agree\n");
  }
}

// A what-if exported as a snapshot carries its allocator_settings in PyTorch's form, so that the
// file replays as the run it shows (found by a fresh-eyes trial: the expandable-segments what-if of
// transformer_ctx128_train_step read back at 56.91 GiB reserved and 206/6771 addresses, under
// PyTorch's defaults, against the run's 51.82 GiB).
TEST_CASE("export: a what-if's allocator settings travel with the snapshot, which replays as the what-if") {
  const std::string out = tmp_path("whatif_settings.pickle");
  CmdRun r = run_cmd({.trace = kTrain, .policy = "torch-caching[expandable_segments=true,roundup_power2_divisions=4]"},
                     fragsim::RunOutputs{.export_events = true});
  fragsim::export_snapshot(r.result, out);
  const nlohmann::json& set = r.json["allocator_settings"];
  CHECK(set["expandable_segments"] == true);
  CHECK(set["max_split_size"] == -1);
  CHECK(set["roundup_power2_divisions"]["1024"] == 4);
  CHECK(set["PYTORCH_CUDA_ALLOC_CONF"] == "roundup_power2_divisions:4,expandable_segments:True");
  CmdRun back = run_cmd({.trace = out});
  CHECK(back.json["trace"]["header"]["allocator_settings"] == set);
  CHECK(back.json["peak_reserved_bytes"] == r.json["peak_reserved_bytes"]);
  CHECK(back.json["peak_allocated_bytes"] == r.json["peak_allocated_bytes"]);
}

// Before: the export of a best-fit run (one segment, the whole arena) read back under torch-caching
// aborted: the device memory's bump pointer handed out the recorded segment's address a second time.
TEST_CASE("export: a run of another policy exported as a snapshot replays under the snapshot's own policy") {
  const std::string trace = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";
  for (const char* policy : {"best-fit", "first-fit", "xla-bfc"}) {
    INFO(policy);
    const std::string out = tmp_path(std::string("other_") + policy + ".pickle");
    fragsim::RunResult r =
        run_cmd({.trace = trace, .policy = policy}, fragsim::RunOutputs{.export_events = true}).result;
    fragsim::export_snapshot(r, out);
    CmdRun back = run_cmd({.trace = out});  // torch-caching, as for any snapshot
    CHECK(back.json["policy"]["name"] == "torch-caching");
    CHECK(back.json["completed"] == true);
    CHECK(back.json["trace"]["allocs"] == r.allocs);  // every allocation of the run, read back
    CHECK(back.json["peak_requested_bytes"] == fragsim::report_json(r)["peak_requested_bytes"]);
  }
}

TEST_CASE("export: a policy that places nothing at an address is refused in one line, and no file is left") {
  const std::string out = tmp_path("none.pickle");
  std::remove(out.c_str());
  // ideal places nothing: it only counts live bytes against the capacity.
  auto r = cli("run " + kData + "torch/small_mlp_97ev.pickle.zst --policy ideal --export-snapshot " + out);
  CHECK(r.code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("--export-snapshot: policy ideal placed no buffer at an address") != std::string::npos);
  CHECK(!std::ifstream(out).good());
  // Allocations on two streams: the export writes stream 0 throughout and would read back as
  // another run (a caching allocator's pools are per stream: 15 of 6,151 addresses read back), so it
  // is refused before anything is written (issue 50: exports read back as their run, or are refused).
  const std::string two = tmp_path("two_streams.jsonl");
  REQUIRE(cli("gen random --seed 3 --set events=400 --set live=40 --set streams=2 -o " + two).code == 0);
  auto s = cli("run " + two + " --policy torch-caching --export-snapshot " + out);
  CHECK(s.code == 2);
  CHECK(std::count(s.err.begin(), s.err.end(), '\n') == 1);
  CHECK(s.err.find("--export-snapshot: the trace allocates on more than one stream") != std::string::npos);
  CHECK(!std::ifstream(out).good());
  // One stream, whatever its number, reads back as it ran.
  const std::string one = tmp_path("one_stream.jsonl");
  REQUIRE(cli("gen random --seed 3 --set events=400 --set live=40 -o " + one).code == 0);
  CHECK(cli("run " + one + " --policy torch-caching --export-snapshot " + out).code == 0);
  CHECK(std::ifstream(out).good());
}

TEST_CASE("diff: one trace under two policies, each device's change is the difference of the two reports") {
  const std::string a = tmp_path("da.json"), b = tmp_path("db.json"), d = tmp_path("d.json"), md = tmp_path("d.md");
  const std::string pa = "torch-caching", pb = "torch-caching[expandable_segments=true]";
  REQUIRE(cli("run " + kTrain + " --policy " + pa + " --json " + a).code == 0);
  REQUIRE(cli("run " + kTrain + " --policy '" + pb + "' --json " + b).code == 0);
  REQUIRE(cli("diff " + kTrain + " --policies '" + pa + "," + pb + "' --json " + d + " --markdown " + md).code == 0);
  auto ra = nlohmann::json::parse(read_text(a)), rb = nlohmann::json::parse(read_text(b));
  auto j = nlohmann::json::parse(read_text(d));
  CHECK(j["fragsim_diff"] == 1);
  CHECK(j["same_trace"] == true);
  CHECK(j["a"]["peak_reserved_bytes"] == ra["peak_reserved_bytes"]);
  CHECK(j["b"]["peak_reserved_bytes"] == rb["peak_reserved_bytes"]);
  REQUIRE(j["devices"].size() == 1);
  const auto& ch = j["devices"][0]["change"];
  CHECK(ch["peak_reserved_bytes"].get<std::int64_t>() ==
        rb["peak_reserved_bytes"].get<std::int64_t>() - ra["peak_reserved_bytes"].get<std::int64_t>());
  CHECK(ch["peak_allocated_bytes"].get<std::int64_t>() ==
        rb["peak_allocated_bytes"].get<std::int64_t>() - ra["peak_allocated_bytes"].get<std::int64_t>());
  // Expandable segments map what they need: less reserved at the same peak event.
  CHECK(ch["peak_reserved_bytes"].get<std::int64_t>() < 0);
  // The peak's live bytes by call site, A against B: each from its report; the sites' changes
  // add up to the change of live bytes (every site is listed here).
  const auto& at = j["at_peak"];
  CHECK(at["a_live_bytes"] == ra["at_peak_allocated"]["by_stack"]["live_bytes"]);
  CHECK(at["b_live_bytes"] == rb["at_peak_allocated"]["by_stack"]["live_bytes"]);
  CHECK(at["a_event"] == ra["at_peak_allocated"]["event_index"]);
  std::int64_t sum = 0;
  for (const auto& s : at["sites"]) sum += s["change_bytes"].get<std::int64_t>();
  CHECK(sum == at["change_bytes"].get<std::int64_t>());
  // One path: the diff of the two reports is the diff of the two runs.
  const std::string d2 = tmp_path("d2.json");
  REQUIRE(cli("diff " + a + " " + b + " --json " + d2).code == 0);
  auto j2 = nlohmann::json::parse(read_text(d2));
  for (const char* k : {"devices", "at_peak", "first_oom", "buffers", "headline"}) CHECK(j2[k] == j[k]);
  // Markdown for a CI summary: one row per device and space.
  std::string m = read_text(md);
  CHECK(m.find("### fragsim diff") == 0);
  CHECK(m.find("| 0 hbm |") != std::string::npos);
}

TEST_CASE("diff: a run that now runs out of memory names the event, the device and the request of its first OOM") {
  const std::string a = tmp_path("ok.json"), b = tmp_path("oom.json"), d = tmp_path("oomdiff.json");
  REQUIRE(cli("run " + kTrain + " --json " + a).code == 0);
  REQUIRE(cli("run " + kTrain + " --capacity 40GiB --json " + b).code == 0);
  auto rb = nlohmann::json::parse(read_text(b));
  REQUIRE(!rb["ooms"].empty());
  auto r = cli("diff " + a + " " + b + " --json " + d);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(read_text(d));
  CHECK(j["first_oom"]["change"] == "new in B");
  CHECK(j["first_oom"]["b"]["event_index"] == rb["ooms"][0]["event_index"]);
  CHECK(j["first_oom"]["b"]["requested_bytes"] == rb["ooms"][0]["requested_bytes"]);
  const std::string ev = std::to_string(rb["ooms"][0]["event_index"].get<std::uint64_t>());
  CHECK(j["headline"].dump().find("B runs out of memory at event " + ev) != std::string::npos);
  CHECK(r.out.find("B runs out of memory at event " + ev) != std::string::npos);
}

// Trial 10, finding 7: for a run that stopped at an OOM diff printed "peak reserved = plan 8.72 GiB +
// fragmentation 0 B" (the plan of the whole trace, though the run reserved 32 MiB: no such sum
// holds), and "peaks: A at event 2156, B at ?" and "B event -" for a run that allocated nothing.
TEST_CASE(
    "diff: a run that stopped at an OOM is no sum of plan and fragmentation, and one that allocated nothing has no "
    "peak") {
  const std::string a = tmp_path("whole.json"), none = tmp_path("none.json"), part = tmp_path("part.json");
  REQUIRE(cli("run " + kSample + " --policy best-fit --json " + a).code == 0);
  REQUIRE(cli("run " + kSample + " --policy best-fit --capacity 1MiB --reserve 0 --json " + none).code == 0);
  REQUIRE(cli("run " + kSample + " --policy best-fit --capacity 600MiB --reserve 0 --json " + part).code == 0);
  const auto ra = nlohmann::json::parse(read_text(a)), rn = nlohmann::json::parse(read_text(none)),
             rp = nlohmann::json::parse(read_text(part));
  REQUIRE_FALSE(rn.contains("at_peak_allocated"));  // its first allocation ran out of memory
  REQUIRE(rn["ooms"][0]["event_index"] == 0);
  REQUIRE(rp["waste"]["reserved_bytes"].get<Bytes>() < rp["waste"]["plan_bytes"].get<Bytes>());
  const std::string plan = human_bytes(ra["waste"]["plan_bytes"].get<Bytes>());
  const std::string whole =
      fmt::format("plan {} + fragmentation {}", plan, human_bytes(ra["waste"]["fragmentation_bytes"].get<Bytes>()));
  const std::string peak_a = std::to_string(ra["at_peak_allocated"]["event_index"].get<std::uint64_t>());
  auto r = cli("diff " + a + " " + none);
  REQUIRE(r.code == 0);
  INFO(r.out);
  CHECK(r.out.find("peaks: A at event " + peak_a + ", B no peak (nothing allocated before its first OOM, event 0)") !=
        std::string::npos);
  CHECK(r.out.find("at ?") == std::string::npos);
  CHECK(r.out.find("at each run's peak (A event " + peak_a + ", B no peak)") != std::string::npos);
  CHECK(r.out.find("peak reserved: " + whole + " -> 0 B, less than the plan " + plan + ": it stopped at an OOM") !=
        std::string::npos);
  auto p = cli("diff " + a + " " + part);
  REQUIRE(p.code == 0);
  INFO(p.out);
  CHECK(p.out.find("peak reserved: " + whole + " -> " + human_bytes(rp["waste"]["reserved_bytes"].get<Bytes>()) +
                   ", less than the plan " + plan + ": it stopped at an OOM") != std::string::npos);
}

// Before: buffers listed among one report's 20 largest but not the other's were called removed
// (or added), though they were live there too, only not among its 20 largest.
TEST_CASE("diff: a buffer is added or removed only when it was not live at the other run's peak") {
  const std::string trace = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";
  // When each event's buffer was live: its alloc and free event indices (the header is no event).
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> life;
  std::uint64_t index = 0;
  for (const auto& e : read_jsonl(trace)) {
    if (e.contains("fragsim_trace")) continue;
    if (e["op"] == "alloc") life[e["id"].get<std::uint64_t>()] = {index, UINT64_MAX};
    if (e["op"] == "free") life[e["id"].get<std::uint64_t>()].second = index;
    ++index;
  }
  auto a = run_cmd({.trace = trace, .policy = "best-fit"}).json;
  auto b = run_cmd({.trace = trace, .capacity = "1300MiB", .reserve = "0B", .policy = "best-fit"}).json;
  nlohmann::json d = fragsim::diff_reports({a, "a"}, {b, "b"});
  auto live_at = [&](const nlohmann::json& buf, std::uint64_t event) {
    auto [from, to] = life.at(buf["id"].get<std::uint64_t>());
    return from <= event && event < to;
  };
  const std::uint64_t peak_a = d["a"]["peak_event"], peak_b = d["b"]["peak_event"];
  REQUIRE(peak_a != peak_b);
  size_t listed = 0;
  for (const auto& buf : d["buffers"]["removed"]) {
    CHECK_FALSE(live_at(buf, peak_b));
    ++listed;
  }
  for (const auto& buf : d["buffers"]["added"]) {
    CHECK_FALSE(live_at(buf, peak_a));
    ++listed;
  }
  CHECK(listed > 0);                              // the runs' peaks differ in what is live
  CHECK(d["buffers"]["unknown"].get<int>() > 0);  // and some listed buffers cannot be told apart
}

// A what-if that re-holds a mid-run snapshot's state holds its blocks at one event (the last before
// the trace's own), the recorded run at their own: the same blocks, not one added and one removed.
// And a buffer whose block another allocator rounds differently (22 MiB, 21.48 MiB expandable) is
// absent from the other list only when its request would have put it there.
TEST_CASE("diff: blocks live before the recording are the same buffers in a run that re-holds them") {
  const std::string t = torch_fixture("finetune_torch20_format");
  auto a = run_cmd({.trace = t}).json;
  auto b = run_cmd({.trace = t, .sets = {"expandable_segments=true"}}).json;
  REQUIRE(b["devices"][0]["before_recording"]["held"] == "rebuilt");
  nlohmann::json d = fragsim::diff_reports({a, "a"}, {b, "b"});
  std::map<std::uint64_t, int> seen;  // id -> lists it is in
  for (const char* k : {"added", "removed"})
    for (const auto& buf : d["buffers"][k]) ++seen[buf["id"].get<std::uint64_t>()];
  for (const auto& [id, n] : seen) {
    INFO("id " << id);
    CHECK(n == 1);
  }
  // Whatever one run lists as gone was live at the other's peak only below that run's listing.
  auto listed_least = [](const nlohmann::json& r) {
    Bytes least = UINT64_MAX;
    for (const auto& x : r["at_peak_allocated"]["top_buffers"]) least = std::min(least, x["block_bytes"].get<Bytes>());
    return least;
  };
  for (const auto& buf : d["buffers"]["removed"]) CHECK(buf["requested_bytes"].get<Bytes>() > listed_least(b));
  for (const auto& buf : d["buffers"]["added"]) CHECK(buf["requested_bytes"].get<Bytes>() > listed_least(a));
}

TEST_CASE("diff: bad requests are one line naming what is wrong, exit 2") {
  const std::string report = tmp_path("diff_bad.json");
  REQUIRE(cli("run " + kTrain + " --json " + report).code == 0);
  // Each request and what its one line must say (options that shape a replay are refused with
  // reports, which are read as they are; a trace and a report are not two runs).
  const std::pair<std::string, std::string> bad[] = {
      {"diff " + kTrain, "give two traces"},
      {"diff " + kTrain + " --policies best-fit", "exactly two"},
      {"diff " + kTrain + " " + kTrain + " --policies best-fit,first-fit", "give one TRACE"},
      {"diff " + report + " " + report + " --policies best-fit,ideal", "--policies applies to traces only"},
      {"diff " + report + " " + report + " --capacity 1GiB --from 5", "--capacity, --from/--to apply to traces only"},
      {"diff " + kTrain + " " + report, "not one of each"},
      {"diff " + report, "give B"}};
  for (const auto& [args, says] : bad) {
    INFO(args);
    auto r = cli(args);
    CHECK(r.code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(says) != std::string::npos);
  }
}

// The TPU capture's four devices each reserve their pool at their first events (0-7); a window from
// event 10 drew devices 1-3 from their first events in it (16-18), as if nothing were held before
// (trial 14). Every space that holds memory as the window opens is drawn from its first event.
TEST_CASE("window: every space that holds memory as the window opens is drawn from its first event") {
  RunOutputs out;
  out.window.from = {.set = true, .is_time = false, .event = 10, .seconds = 0};
  out.window.from_text = "10";
  auto r = run_cmd({.trace = test_data("xprof/xprof_tpu_inference_2.xplane.pb.zst"), .capacity = "12GiB"}, out);
  REQUIRE(r.result.spaces.size() == 4);
  for (const auto& s : r.result.spaces) {
    INFO("device " << s.device);
    REQUIRE(!s.timeline.empty());
    CHECK(s.timeline.front().event_index == 10);
    CHECK(s.timeline.front().reserved > 0);  // the pool, reserved before the window
  }
}

TEST_CASE("window: --from/--to limit what the page shows of a run to its events, the run's figures stay whole") {
  const std::string whole = tmp_path("whole.json"), html = tmp_path("window.html"), json = tmp_path("window.json");
  REQUIRE(cli("run " + kTrain + " --json " + whole).code == 0);
  REQUIRE(cli("run " + kTrain + " --from 1000 --to 3000 --html " + html + " --json " + json).code == 0);
  auto w = nlohmann::json::parse(read_text(whole)), j = nlohmann::json::parse(read_text(json));
  CHECK(j["peak_allocated_bytes"] == w["peak_allocated_bytes"]);
  CHECK(j["at_peak_allocated"]["event_index"] == w["at_peak_allocated"]["event_index"]);
  auto h = history_of(embedded_data(read_text(html)));
  CHECK(h["first"] == 1000);
  CHECK(h["last"] == 3000);
  for (const auto& tl : h["timelines"])
    for (const auto& p : tl["points"]) {
      CHECK(p[0].get<std::uint64_t>() >= 1000);
      CHECK(p[0].get<std::uint64_t>() <= 3000);
    }
  for (const char* bad : {"--from abc", "--to 3q", "--from 5000 --to 100", "--from 99999999"}) {
    INFO(bad);
    auto r = cli("run " + kTrain + " " + std::string(bad) + " --html " + tmp_path("bad.html"));
    CHECK(r.code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

// The SVG texts of one class in the "Memory over time" section of a rendered page.
struct ChartText {
  double x, y;
  std::string text;
};
std::vector<ChartText> chart_texts(const std::string& dom, const std::string& cls) {
  // The section ends where the next one begins (each section's heading is inside its own div).
  size_t from = dom.find("<div id=\"charts\">"), to = dom.find("<div id=\"buffers\">", from);
  REQUIRE(from != std::string::npos);
  std::string charts = dom.substr(from, to == std::string::npos ? std::string::npos : to - from);
  std::vector<ChartText> out;
  std::regex text("<text x=\"([0-9.]+)\" y=\"(-?[0-9.]+)\"[^>]*class=\"" + cls + "\"[^>]*>([^<]*)</text>");
  for (std::sregex_iterator it(charts.begin(), charts.end(), text), end; it != end; ++it)
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2]), (*it)[3]});
  return out;
}

TEST_CASE("viewer: a --from/--to page draws memory over time over the window, and off-scale limits do not overlap",
          "[chromium]") {
  const std::string html = tmp_path("window_axis.html");
  REQUIRE(cli("run " + kTrain + " --from 1000 --to 3000 --html " + html).code == 0);
  std::string dom = rendered_dom(html);
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  std::vector<std::string> ticks;
  for (const auto& c : chart_texts(dom, "axis")) ticks.push_back(c.text);
  // The x axis runs from the window's first event to its last (1,000 … 3,000), not over all 19,958.
  CHECK(std::find(ticks.begin(), ticks.end(), "1,000") != ticks.end());
  CHECK(std::find(ticks.begin(), ticks.end(), "3,000") != ticks.end());
  CHECK(std::find(ticks.begin(), ticks.end(), "19,958") == ticks.end());
  CHECK(dom.find("Window: from event 1000 to event 3000 (the y axis fits the window") != std::string::npos);
  // xla-bfc on the MI300X capture: usable memory and the 75 % limit are both far above the data;
  // their two arrows at the top sit side by side, the second fully left of the first.
  const std::string mi = tmp_path("mi300.html");
  REQUIRE(cli("run " + kData + "xprof/tracelens_mi300_jax08_gemm.xplane.pb.zst --html " + mi).code == 0);
  dom = rendered_dom(mi);
  auto cap = chart_texts(dom, "axis offscale-capacity"), lim = chart_texts(dom, "axis offscale-limit");
  REQUIRE(!cap.empty());
  REQUIRE(cap.size() == lim.size());
  for (size_t i = 0; i < cap.size(); ++i) {
    INFO(cap[i].text << " / " << lim[i].text);
    // Right-aligned at x: the capacity label spans [x - width, x]; the limit's ends left of that.
    CHECK(lim[i].x <= cap[i].x - 6.0 * static_cast<double>(cap[i].text.size()));
  }
  // At 1102 MiB the usable memory (602 MiB) is in the chart, near its top, and the BFC's limit (75 %
  // of the capacity, 828 MiB) above it: the usable line's label goes below the limit's arrow, not on
  // it (a new user's trial, 2026-12-07: the two were drawn over each other).
  const std::string small = tmp_path("mi300_small.html");
  REQUIRE(
      cli("run " + kData + "xprof/tracelens_mi300_jax08_gemm.xplane.pb.zst --capacity 1102MiB --html " + small).code ==
      0);
  dom = rendered_dom(small);
  auto arrow = chart_texts(dom, "axis offscale-limit"), usable = chart_texts(dom, "axis label-capacity");
  REQUIRE(!arrow.empty());
  REQUIRE(!usable.empty());
  // Each chart is an SVG of its own: every arrow sits at the same height in its chart.
  for (const auto& a : arrow) CHECK(a.y == arrow.front().y);
  for (const auto& u : usable) {
    INFO(u.text << " / " << arrow.front().text);
    CHECK(u.y >= arrow.front().y + 12);
  }
}

TEST_CASE(
    "viewer: per-buffer timeline, allocator state at any event and icicle answer hover and the scrubber, "
    "for a PyTorch snapshot, a JAX capture and a 3-device run",
    "[chromium]") {
  for (const std::string& trace : {kTrain, kJaxCapture, k3dev}) {
    INFO(trace);
    const std::string html = tmp_path("viewer.html");
    REQUIRE(cli("run " + trace + " --html " + html).code == 0);
    auto data = embedded_data(read_text(html));
    auto h = history_of(data);
    std::string dom = rendered_dom(html, "#probe");
    CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
    CHECK(dom.find("data-ready=\"1\"") != std::string::npos);
    for (const char* id : {"buffers", "states", "stacks"})
      CHECK(dom.find("<div id=\"" + std::string(id) + "\"><h2>") != std::string::npos);
    size_t charts = 0, states = 0, flames = 0;
    for (const auto& p : probes(dom)) {
      INFO(p.dump());
      if (p.contains("buffers_chart")) {  // hover along the chart: every answer a live buffer there
        ++charts;
        CHECK(p["answered"] == p["probes"]);
        CHECK(p["bands"].get<int>() > 0);
        CHECK(p["named"] == p["bands"]);
        CHECK(p["live_ok"] == p["bands"]);
      } else if (p.contains("states")) {  // keyframes rebuilt from deltas; the slider redraws
        ++states;
        CHECK(p["agree"] == p["rebuilt"]);
        CHECK(p["moved"] == 3);
      } else if (p.contains("flame")) {
        ++flames;
        CHECK(p["agree"] == p["probes"]);
      }
    }
    // One timeline chart per device and space with a timeline, one scrubber per run, an icicle per moment.
    CHECK(charts == h["timelines"].size());
    CHECK(states == 1);
    CHECK(flames >= 1);
  }
}

TEST_CASE("viewer: a device where nothing was placed has an empty buffer chart that says so", "[chromium]") {
  // static-heap's plan for device 1 of this recording exceeds its memory: the program does not
  // load and no buffer of it is placed (policies/static_heap.cpp); devices 0 and 2 hold buffers.
  const std::string html = tmp_path("empty_device.html");
  REQUIRE(cli("run " + k3dev + " --policy static-heap --html " + html).code == 0);
  std::string dom = rendered_dom(html);
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  CHECK(dom.find("data-ready=\"1\"") != std::string::npos);
  CHECK(dom.find("device 1 hbm: no buffer placed") != std::string::npos);
  CHECK(dom.find("device 0 hbm: no buffer placed") == std::string::npos);
  CHECK(dom.find("device 1 hbm: 0 largest buffers") == std::string::npos);
}

TEST_CASE("viewer: a --from/--to window that holds no allocation draws every section without a script error",
          "[chromium]") {
  // small_mlp_97ev_cut38 (tests/data/torch/SOURCES.md) starts with 14 blocks live in 5 segments and
  // allocates nothing in its events 0-5. viewer_buffers.js returned for runs without allocations
  // before it set FS.marksOf and FS.clock; the segments chart then threw "FS.marksOf is not a
  // function" and the sections after it (live bytes by call site) were never drawn. No keyframe was
  // planned in such a window either, so the allocator state at any event was left out.
  const std::string cut = kData + "torch/small_mlp_97ev_cut38.pickle.zst";
  const std::string run = tmp_path("empty_window.html"), cmp = tmp_path("empty_window_compare.html");
  REQUIRE(cli("run " + cut + " --from 0 --to 5 --html " + run).code == 0);
  REQUIRE(cli("compare " + cut + " --from 0 --to 5 --html " + cmp).code == 0);
  REQUIRE(history_of(embedded_data(read_text(run)))["allocations"]["slots"].empty());
  for (const std::string& html : {run, cmp}) {
    INFO(html);
    std::string console;
    std::string dom = rendered_dom(html, "#probe", "", &console);
    CHECK(console.find("Uncaught") == std::string::npos);
    CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
    for (const char* id : {"charts", "segments", "states", "stacks"})
      CHECK(dom.find("<div id=\"" + std::string(id) + "\"><h2>") != std::string::npos);
    CHECK(dom.find("No allocation in the events shown. Window: from event 0 to event 5.") != std::string::npos);
  }
}

TEST_CASE("viewer: diff --html shows both runs' timelines on one axis and the diff's figures", "[chromium]") {
  const std::string html = tmp_path("diff.html"), json = tmp_path("diff.json");
  REQUIRE(cli("diff " + kTrain + " --policies 'torch-caching,torch-caching[expandable_segments=true]' --html " + html +
              " --json " + json)
              .code == 0);
  auto data = embedded_data(read_text(html));
  auto j = nlohmann::json::parse(read_text(json));
  REQUIRE(data.contains("diff"));
  CHECK(data["diff"] == j);
  CHECK(data["runs"].size() == 2);
  std::string dom = rendered_dom(html);
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  CHECK(dom.find("data-ready=\"1\"") != std::string::npos);
  // Every headline line, as the DOM serialises text ('>' as &gt;): the setup that differs first.
  REQUIRE(j["headline"].size() >= 2);
  CHECK(j["headline"][0].get<std::string>().rfind(
            "set up differently: PYTORCH_CUDA_ALLOC_CONF in force \"\" -> \"expandable_segments:True\"", 0) == 0);
  for (const auto& h : j["headline"]) {
    std::string text;
    for (char c : h.get<std::string>())
      text += c == '>' ? "&gt;" : c == '<' ? "&lt;" : c == '&' ? "&amp;" : std::string(1, c);
    CHECK(dom.find(text) != std::string::npos);
  }
}

TEST_CASE("diff: a failing check names the diff that shows what changed, and that diff runs") {
  const std::string a = tmp_path("gate_a.json"), b = tmp_path("gate_b.json");
  REQUIRE(cli("run " + kTrain + " --json " + a).code == 0);
  REQUIRE(cli("run " + kTrain + " --capacity 40GiB --json " + b).code == 0);
  auto r = cli("check --baseline " + a + " --current " + b + " --json " + tmp_path("gate.json"));
  REQUIRE(r.code == 1);
  auto j = nlohmann::json::parse(read_text(tmp_path("gate.json")));
  const std::string cmd = j["diff_command"];
  CHECK(cmd == "fragsim diff " + a + " " + b);
  auto text = cli("check --baseline " + a + " --current " + b);
  CHECK(text.out.find(cmd) != std::string::npos);
  auto d = cli(cmd.substr(std::string("fragsim ").size()) + " --json " + tmp_path("gate_diff.json"));
  CHECK(d.code == 0);
  CHECK(nlohmann::json::parse(read_text(tmp_path("gate_diff.json")))["first_oom"]["change"] == "new in B");
  // A passing check names none.
  REQUIRE(cli("check --baseline " + a + " --current " + a + " --json " + tmp_path("gate_ok.json")).code == 0);
  CHECK(nlohmann::json::parse(read_text(tmp_path("gate_ok.json")))["diff_command"] == "");
  CHECK(nlohmann::json::parse(read_text(tmp_path("gate_ok.json")))["diff_commands"].empty());
}

TEST_CASE("diff: a failing check of compare arrays names one diff per failing run, and each runs") {
  // Both policies meet a new OOM at 40 GiB: two failing runs, two commands, each picking its run.
  const std::string a = tmp_path("gate_ca.json"), b = tmp_path("gate_cb.json");
  REQUIRE(cli("compare " + kTrain + " --policies best-fit,xla-bfc --json " + a).code == 0);
  REQUIRE(cli("compare " + kTrain + " --policies best-fit,xla-bfc --capacity 40GiB --json " + b).code <= 1);
  auto r = cli("check --baseline " + a + " --current " + b + " --json " + tmp_path("gate_c.json"));
  REQUIRE(r.code == 1);
  auto j = nlohmann::json::parse(read_text(tmp_path("gate_c.json")));
  REQUIRE(j["diff_commands"].size() == 2);
  CHECK(j["diff_command"] == j["diff_commands"][0]);
  std::set<std::string> labels;
  for (const auto& c : j["diff_commands"]) {
    const std::string cmd = c;
    CHECK(r.out.find(cmd) != std::string::npos);
    std::string label = cmd.substr(cmd.rfind(' ') + 1);
    labels.insert(label);
    REQUIRE(cli(cmd.substr(std::string("fragsim ").size()) + " --json " + tmp_path("gate_cd.json")).code == 0);
    auto d = nlohmann::json::parse(read_text(tmp_path("gate_cd.json")));
    CHECK(d["first_oom"]["change"] == "new in B");
    CHECK(d["a"]["label"] == label);
  }
  CHECK(labels == std::set<std::string>{"best-fit", "xla-bfc"});
  // Against a one-run array: the run both hold is named by --label (the baseline has two), the run
  // only the baseline holds fails the gate with no diff to run, and the named diff runs.
  const std::string one = tmp_path("gate_c1.json");
  REQUIRE(cli("compare " + kTrain + " --policies best-fit --capacity 40GiB --json " + one).code <= 1);
  auto r1 = cli("check --baseline " + a + " --current " + one + " --json " + tmp_path("gate_c1c.json"));
  REQUIRE(r1.code == 1);
  auto j1 = nlohmann::json::parse(read_text(tmp_path("gate_c1c.json")));
  REQUIRE(j1["diff_commands"].size() == 1);
  const std::string cmd1 = j1["diff_commands"][0];
  CHECK(cmd1 == "fragsim diff " + a + " " + one + " --label best-fit");
  CHECK(cli(cmd1.substr(std::string("fragsim ").size())).code == 0);
}

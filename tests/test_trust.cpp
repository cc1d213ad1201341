// Answers users can trust (issue 21): one report model rendered by every output — the same figure
// has the same value in the text, the JSON, the HTML page, the Perfetto trace and a batch — per
// device and memory space, never summed silently; nothing assumed without a note; what cannot be
// meant refused with the fix; defaults that follow the input in every command. The commands run
// in process (sim_helpers.h); only how the command line shows its arguments spawns the binary.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <sstream>

#include "sim/base/units.h"
#include "sim/commands/trace_info.h"
#include "sim/engine/window.h"
#include "sim_helpers.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

const std::string kTpu = test_data("xprof/xprof_tpu_inference_2.xplane.pb.zst");         // 4 TPU v6e chips
const std::string kMi300 = test_data("xprof/tracelens_mi300_jax08_gemm.xplane.pb.zst");  // HBM and pinned host memory

// The text report's per-space row for device d, space sp.
std::string text_row(const std::string& text, int d, const std::string& sp) {
  const std::string head = "per device and memory space";
  auto at = text.find(head);
  REQUIRE(at != std::string::npos);
  std::istringstream in(text.substr(at));
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string a, b, c;
    w >> a;
    if (a == "*") w >> a;
    w >> b;
    if (a == std::to_string(d) && b == sp) return line;
  }
  FAIL("no row for device " << d << " " << sp);
  return {};
}

std::string pct(double f) { return fmt::format("{:.1f}%", 100.0 * f); }

// Every output of one run agrees on every per-space figure, and the binding space.
void outputs_agree(const std::string& trace) {
  std::string pf = tmp_path("agree.perfetto.json");
  // --json, --html and --perfetto of one run, and its text summary.
  auto t = run_cmd({.trace = trace}, {.perfetto = pf, .keep_live_buffers = true});
  const auto& j = t.json;
  REQUIRE(j["devices"].size() > 1);  // these are the runs that used to be summed
  // The page's report is the JSON report (the page keeps no memory-map blocks in it).
  auto h = t.page()["runs"][0]["report"];
  for (const char* k : {"devices", "binding", "fragmentation", "peak_reserved_bytes", "oom_count", "notes"})
    CHECK(h[k].dump().size() > 0);
  for (size_t i = 0; i < j["devices"].size(); ++i) {
    const auto &d = j["devices"][i], &hd = h["devices"][i];
    for (const char* k : {"peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "usable_bytes",
                          "oom_count", "peak_reserved_share"})
      CHECK(hd[k] == d[k]);
    CHECK(hd["fragmentation"] == d["fragmentation"]);
  }
  CHECK(h["binding"] == j["binding"]);
  CHECK(h["fragmentation"] == j["fragmentation"]);
  // The text: one row per space with the JSON's figures, the binding one starred, the run's
  // totals labelled sums.
  for (const auto& d : j["devices"]) {
    std::string row = text_row(t.text, d["device"], d["space"]);
    INFO(row);
    for (const char* k : {"usable_bytes", "peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes"})
      CHECK(row.find(human_bytes(d[k].get<Bytes>())) != std::string::npos);
    const auto& f = d["fragmentation"];
    CHECK(row.find(human_bytes(f["at_peak_allocated"]["reserved_unallocated_bytes"].get<Bytes>())) !=
          std::string::npos);
    CHECK(row.find(pct(f["at_peak_allocated"]["external"].get<double>())) != std::string::npos);
    CHECK(row.find(pct(f["max"].get<double>())) != std::string::npos);
    bool binds = d["device"] == j["binding"]["device"] && d["space"] == j["binding"]["space"];
    CHECK((row.rfind("    *", 0) == 0) == binds);
  }
  CHECK(t.text.find("sums over the " + std::to_string(j["devices"].size()) + " spaces at one moment") !=
        std::string::npos);
  CHECK(t.text.find("peak requested  ") == std::string::npos);  // no unlabelled headline sum
  // The top level: fragmentation is the binding space's, never a ratio over several.
  for (const auto& d : j["devices"])
    if (d["device"] == j["binding"]["device"] && d["space"] == j["binding"]["space"])
      CHECK(j["fragmentation"] == d["fragmentation"]);
  // Perfetto: each (device, space)'s counter track peaks at that space's JSON peaks.
  auto p = nlohmann::json::parse(read_text(pf));
  std::map<std::pair<int, std::string>, std::pair<Bytes, Bytes>> peaks;
  for (const auto& e : p["traceEvents"])
    if (e["ph"] == "C" && e["name"].get<std::string>().find(" memory") != std::string::npos) {
      std::string sp = e["name"].get<std::string>();
      sp = sp.substr(0, sp.find(' '));
      auto& pk = peaks[{e["pid"].get<int>(), sp}];
      pk.first = std::max(pk.first, e["args"]["allocated"].get<Bytes>());
      pk.second = std::max(pk.second, e["args"]["reserved"].get<Bytes>());
    }
  for (const auto& d : j["devices"]) {
    auto pk = peaks[{d["device"].get<int>(), d["space"].get<std::string>()}];
    CHECK(pk.first == d["peak_allocated_bytes"].get<Bytes>());
    CHECK(pk.second == d["peak_reserved_bytes"].get<Bytes>());
  }
  // OOMs: one cause, the same in the JSON, the page and the Perfetto instant event.
  for (const auto& e : p["traceEvents"])
    if (e["ph"] == "i" && e.value("cat", "") == "oom") CHECK(e["args"]["cause"] == j["ooms"][0]["cause"]);
}

}  // namespace

TEST_CASE("trust: a 3-GPU snapshot, a 4-chip TPU capture and an HBM+host capture agree in every output") {
  outputs_agree(k3dev);
  outputs_agree(kTpu);
  outputs_agree(kMi300);
}

TEST_CASE("trust: a batch's and a merge's reports are the run's own report") {
  std::string dir = tmp_path("trust_batch");
  std::filesystem::create_directories(dir);
  std::string m = write_text("trust_batch/runs.txt", k3dev + "\n" + kMi300 + " --label host\n");
  auto b = run_batch(m, "1/1", test_registry());
  CHECK(b["runs"][0]["report"] == run_json({.trace = k3dev}));
  CHECK(b["runs"][1]["report"] == run_json({.trace = kMi300}));
}

TEST_CASE("trust: a multi-device run names the binding device and labels sums, in text and JSON") {
  auto r = run_cmd({.trace = k3dev});
  const auto& j = r.json;
  CHECK(r.text.find("(3 devices)") != std::string::npos);
  CHECK(j["binding"]["device"] == 1);
  CHECK(j["binding"]["reason"].get<std::string>().find("the first OOM") == 0);
  CHECK(j["top_level"].get<std::string>().find("sums over 3 spaces") != std::string::npos);
  // The TPU capture: 4 chips of 31.25 GiB each; no figure compares a sum with one chip.
  auto tpu = run_cmd({.trace = kTpu});
  const auto& t = tpu.json;
  CHECK(t["devices"].size() == 4);
  for (const auto& d : t["devices"]) CHECK(d["peak_reserved_bytes"].get<Bytes>() <= d["usable_bytes"].get<Bytes>());
  CHECK(t["peak_reserved_bytes"].get<Bytes>() > t["devices"][0]["usable_bytes"].get<Bytes>());  // the labelled sum
  CHECK(tpu.text.find("(4 devices)") != std::string::npos);
  CHECK(tpu.text.find("* binds: device") != std::string::npos);
}

TEST_CASE("trust: pinned host memory is its own space, and never preallocated from a device-memory fraction") {
  // JAX's host BFC (xla_gpu_host_bfc) grows on demand up to 64 GiB whatever the device settings.
  for (const RunRequest& req :
       {RunRequest{.trace = kMi300},
        RunRequest{.trace = kMi300, .policy = "xla-bfc[mem_fraction=0.9,preallocate=true]"},
        RunRequest{.trace = kMi300, .envs = {"XLA_PYTHON_CLIENT_MEM_FRACTION=.9"}},
        RunRequest{.trace = kMi300, .policy = "cuda-async"}, RunRequest{.trace = kMi300, .policy = "platform"}}) {
    INFO(command_line(req));
    auto j = run_json(req);
    bool host = false;
    for (const auto& d : j["devices"])
      if (d["space"] == "host") {
        host = true;
        CHECK(d["peak_reserved_bytes"].get<Bytes>() < (Bytes{1} << 30));
      }
    CHECK(host);
  }
}

TEST_CASE("trust: every choice the input did not make is a note, in text, JSON and HTML") {
  // A PyTorch snapshot names no device: the hardware is chosen by the memory its OOM shows (two
  // presets explain it), and said so.
  auto t = run_cmd({.trace = k3dev});
  std::string notes = t.json["notes"].dump();
  CHECK(notes.find("hardware h100-80g by its memory") != std::string::npos);
  CHECK(notes.find("a100-80g explains it too") != std::string::npos);
  CHECK(notes.find("policy torch-caching: the trace is a PyTorch memory snapshot") != std::string::npos);
  CHECK(notes.find("device 1: usable memory 78.51 GiB") != std::string::npos);
  CHECK(t.text.find("note: hardware h100-80g by its memory") != std::string::npos);
  // A plain trace: the hardware and the policy are assumed.
  auto p = run_json({.trace = kSample});
  CHECK(p["notes"].dump().find("hardware h100-80g assumed") != std::string::npos);
  CHECK(p["notes"].dump().find("policy best-fit: the trace names no allocator") != std::string::npos);
  // A recording's setting kept while another is overridden.
  auto k = run_json({.trace = kMi300, .policy = "xla-bfc[mem_fraction=0.5]"});
  CHECK(k["notes"].dump().find("the capture's mode kept") != std::string::npos);
}

TEST_CASE("trust: what cannot be meant is refused with the fix, exit 2, one line") {
  // Each refusal is an InputError (exit 2) whose message is one line (input_error checks it).
  auto refused = [](const RunRequest& req) { return input_error([&] { (void)run_cmd(req); }); };
  std::string bare = refused({.trace = kSample, .capacity = "16"});
  CHECK(bare.find("--capacity: '16' has no unit") != std::string::npos);
  CHECK(bare.find("16GiB") != std::string::npos);
  CHECK(run_cmd({.trace = kSample, .capacity = "0", .policy = "ideal"}).result.events > 0);  // 0 needs no unit
  std::string tpu = refused({.trace = kSample, .policy = "tpu-padded"});
  CHECK(tpu.find("models TPU memory") != std::string::npos);
  CHECK(tpu.find("--hw names a TPU preset") != std::string::npos);
  CHECK(run_cmd({.trace = kSample, .hw = "tpu-v5e", .policy = "tpu-padded"}).result.policy_name == "tpu-padded");
  // A framework's variable on another framework's recording.
  std::string env = refused({.trace = k3dev, .envs = {"XLA_PYTHON_CLIENT_MEM_FRACTION=.5"}});
  CHECK(env.find("JAX's variable, but the trace is a PyTorch memory snapshot") != std::string::npos);
  CHECK(run_cmd({.trace = k3dev, .policy = "xla-bfc", .envs = {"XLA_PYTHON_CLIENT_MEM_FRACTION=.5"}})  // asked for
            .json["policy"]["config"]["mem_fraction"] == 0.5);
  std::string mix =
      refused({.trace = kSample, .policy = "torch-caching", .envs = {"XLA_PYTHON_CLIENT_PREALLOCATE=false"}});
  CHECK(mix.find("models PyTorch's allocator") != std::string::npos);
  // Sharding only where a policy models it.
  std::string shard = refused({.trace = kSample, .policy = "best-fit", .shard = 4});
  CHECK(shard.find("these do: tpu-padded, static-heap") != std::string::npos);
}

TEST_CASE("trust: defaults follow the input in every command") {
  // compare on a snapshot: the recorded allocator and its what-ifs, beside the lower bound.
  auto arr = compare_cmd({.base = {.trace = k3dev}}).json;
  std::vector<std::string> labels;
  for (const auto& r : arr) labels.push_back(r["label"]);
  REQUIRE(labels.size() >= 3);
  CHECK(labels[0] == "ideal");
  CHECK(labels[1] == "torch-caching");
  CHECK(labels[2] == "torch-caching[expandable_segments=false]");  // recorded on: the what-if turns it off
  // Each what-if with the variable that selects it, whole, as PyTorch reads it (the recorded
  // configuration with the one key changed).
  CHECK(arr[2]["setting"] == "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False");
  CHECK(arr[1].contains("setting") == false);
  // Pasted as it reads, the setting replays the row.
  REQUIRE(arr.size() >= 4);
  CHECK(arr[3]["label"] == "torch-caching[max_split_size_mb=256]");
  CHECK(arr[3]["setting"] == "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:256");
  const nlohmann::json pasted = run_json({.trace = k3dev, .envs = {arr[3]["setting"].get<std::string>()}});
  CHECK(pasted["peak_reserved_bytes"] == arr[3]["peak_reserved_bytes"]);
  CHECK(pasted["oom_count"] == arr[3]["oom_count"]);
  // On a capture: the recorded BFC, and its other mode.
  arr = compare_cmd({.base = {.trace = kMi300}}).json;
  CHECK(arr[1]["label"] == "xla-bfc");
  CHECK(arr[2]["label"] == "xla-bfc[preallocate=true]");
  // Entries that resolve to the recorded settings say so.
  auto same = compare_cmd({.base = {.trace = kMi300}, .policies = "xla-bfc,xla-bfc[preallocate=false]"});
  CHECK(same.text.find("note: xla-bfc and xla-bfc[preallocate=false] ran with the same settings") != std::string::npos);
  // sweep picks the policy run would: torch-caching for a snapshot.
  auto s = sweep_cmd({.trace = test_data("torch/small_mlp_97ev.pickle.zst")}, "min-mem-fraction");
  REQUIRE(s.result.value);
  CHECK(s.json["policy"]["name"] == "torch-caching");
  CHECK(s.text.find("setting: torch.cuda.set_per_process_memory_fraction(") != std::string::npos);
  // A policy without a fraction (the TPU runtime) gets pointed at min-capacity, with the command.
  std::string t = input_error([] { (void)sweep_cmd({.trace = kTpu}, "min-mem-fraction"); });
  CHECK(t.find("has no memory fraction") != std::string::npos);
  CHECK(t.find("--find min-capacity` finds") != std::string::npos);
}

// Trial 12, finding 1: every --set on compare's default entries was refused by the lower bound
// ("policy ideal: unknown key 'memory_fraction'"). The key configures the entries that have it.
TEST_CASE("trust: compare --set configures the default entries that take the key") {
  auto arr = compare_cmd({.base = {.trace = k3dev, .sets = {"memory_fraction=0.5"}}}).json;
  REQUIRE(arr.size() >= 2);
  for (const auto& r : arr) {
    CHECK(r["policy"]["name"] == "torch-caching");  // the bound takes no settings: left out
    CHECK(r["policy"]["config"]["memory_fraction"] == 0.5);
  }
  CHECK(arr[0]["label"] == "torch-caching");
  CHECK(arr[1]["label"] == "torch-caching[expandable_segments=false]");
  // On a capture: the BFC's fraction; the platform allocator (no fraction) is left out.
  arr = compare_cmd({.base = {.trace = kMi300, .sets = {"mem_fraction=0.5"}}}).json;
  REQUIRE(arr.size() >= 1);
  for (const auto& r : arr) {
    CHECK(r["policy"]["name"] == "xla-bfc");
    CHECK(r["policy"]["config"]["mem_fraction"] == 0.5);
  }
  // A key no default entry takes is still refused, naming it.
  std::string bad = input_error([] { (void)compare_cmd({.base = {.trace = k3dev, .sets = {"no_such_key=1"}}}); });
  CHECK(bad.find("no_such_key") != std::string::npos);
}

TEST_CASE("trust: info, run and compare read a profile log directory at any depth, and ask when it holds several") {
  std::string root = tmp_path("prof");
  std::string run = root + "/plugins/profile/2026_12_03_06_00_00";
  std::filesystem::create_directories(run);
  std::filesystem::copy_file(kMi300, run + "/host0.xplane.pb.zst");
  CHECK(trace_info(root, false)["events"] == trace_info(kMi300, false)["events"]);
  CHECK(run_json({.trace = root})["fidelity"] == run_json({.trace = kMi300})["fidelity"]);
  CHECK(compare_cmd({.base = {.trace = root}}).json[1]["label"] == "xla-bfc");  // the capture's recorded BFC
  std::filesystem::create_directories(root + "/plugins/profile/2026_12_03_07_00_00");
  std::filesystem::copy_file(kMi300, root + "/plugins/profile/2026_12_03_07_00_00/host0.xplane.pb.zst");
  std::string two = input_error([&] { (void)trace_info(root, false); });
  CHECK(two.find("2 profile runs under it") != std::string::npos);
  CHECK(two.find("2026_12_03_07_00_00") != std::string::npos);
}

TEST_CASE("trust: sweeps say what they searched, mark a bound answer and print the setting as typed") {
  // A trace that fits in 0.01% of an 80 GB GPU: the answer is a bound, not an exact fraction. (It read
  // "<= 0.01" before the search refined below 0.01, issue 47; 0.00001 of the device, 859 KB, is the
  // finest step whose pass of ten spans the device's 2 MiB granularity.)
  std::string tiny = write_text("tiny.jsonl", "{\"op\":\"alloc\",\"id\":1,\"size\":1048576}\n");
  auto s = sweep_cmd({.trace = tiny, .policy = "xla-bfc"}, "min-mem-fraction");
  REQUIRE(s.result.value);
  CHECK(s.text.find("smallest memory fraction with no OOM: <= 0.00001 (the lowest fraction tried: every fraction "
                    "from 0.00001 up fits)") != std::string::npos);
  CHECK(s.text.find("searched XLA_PYTHON_CLIENT_MEM_FRACTION from 0.00001 to 1.00") != std::string::npos);
  CHECK(s.text.find("setting: XLA_PYTHON_CLIENT_MEM_FRACTION=.00001") != std::string::npos);
  CHECK(s.text.find("replay:  fragsim run " + tiny + " --policy xla-bfc --env XLA_PYTHON_CLIENT_MEM_FRACTION=.00001") !=
        std::string::npos);
  // The capacity sweep goes past the run's capacity when nothing there fits, and says so.
  auto c = sweep_cmd({.trace = k3dev}, "min-capacity");
  REQUIRE(c.result.value);
  CHECK(c.text.find("past the run's capacity of 79.15 GiB") != std::string::npos);
  CHECK(c.text.find("each capacity tried applies to every device") != std::string::npos);
}

TEST_CASE("trust: help and errors show positional arguments as positional") {
  // How the command line names its arguments: end to end.
  auto h = cli("run --help");
  CHECK(h.out.find("usage: fragsim run TRACE [TRACE...] [--policy POLICY] [options]") != std::string::npos);
  CHECK(h.out.find("--trace") == std::string::npos);
  auto m = cli("run --policy ideal");
  CHECK(m.code == 2);
  CHECK(m.err.find("missing TRACE") != std::string::npos);
  CHECK(m.err.find("--trace") == std::string::npos);
  auto c = cli("compare --help");
  CHECK(c.out.find("--more") == std::string::npos);
}

TEST_CASE("trust: text names a buffer once, shows times from the trace's start and mismatches in words") {
  auto t = run_cmd({.trace = kTpu}).text;
  // Unnamed buffers: "id 14" once, not "id 14  id 14".
  CHECK(t.find("id 14  id 14") == std::string::npos);
  CHECK(t.find("  id 14, event 15") != std::string::npos);
  CHECK(t.find(" s in)") != std::string::npos);  // "(event 28, 3.203 s in)", not an epoch timestamp
  // A replay that misses: the MI355X capture (every address as recorded since the regions obtained
  // before it are inferred) under a what-if, one preallocated region (3 of 30).
  auto m = run_cmd({.trace = test_data("xprof/tracelens_jax_te_fused_attn_934987a2fc2f.xplane.pb.zst"),
                    .envs = {"XLA_PYTHON_CLIENT_PREALLOCATE=true"}})
               .text;
  CHECK(m.find("first mismatch: event ") != std::string::npos);
  CHECK(m.find("recorded address 0x") != std::string::npos);
  CHECK(m.find("{\"event_index\"") == std::string::npos);
  auto i = trace_info_text(trace_info(k3dev, false));
  CHECK(i.find("time span 2.73541 s") != std::string::npos);
  CHECK(i.find("allocator settings: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") != std::string::npos);
  CHECK(i.find("{\"allocator_settings\"") == std::string::npos);
}

TEST_CASE("trust: a trace that records no times shows event numbers, never made-up times") {
  // PyTorch 2.0 snapshots carry no time_us (SOURCES.md); fragsim numbers their events, and t is
  // that number. Reading it as nanoseconds once made an 11 µs fine-tuning run.
  const std::string untimed = test_data("torch/finetune_torch20_format.pickle.zst");
  auto info = trace_info(untimed, false);
  CHECK(info["timed"] == false);
  CHECK(trace_info_text(info).find("no times recorded") != std::string::npos);
  CHECK(trace_info_text(info).find("time span") == std::string::npos);
  auto r = run_cmd({.trace = untimed}, kWithHtml);
  CHECK_FALSE(r.result.timed);
  const std::string at = "at the peak of allocated memory (event " +
                         std::to_string(r.json["at_peak_allocated"]["event_index"].get<std::uint64_t>()) + "):";
  CHECK(r.text.find(at) != std::string::npos);
  CHECK(r.text.find(" us in)") == std::string::npos);
  CHECK(r.text.find("the trace records no times") != std::string::npos);
  CHECK(r.page()["runs"][0]["history"]["timed"] == false);
  // A window bounded by time has nothing to measure there: refused, in one line.
  CHECK_THROWS_WITH(run_cmd({.trace = untimed}, {.history = true, .window = parse_window("1us", "3us")}),
                    Catch::Contains("the trace records no times: bound the window by event index"));
  CHECK(signed_percent(1e-11, 2) == "+0.000000000010%");
  // A JSONL trace with times keeps them, in text as in the page.
  auto timed = run_cmd({.trace = kSample}, kWithHtml);
  CHECK(timed.result.timed);
  CHECK(trace_info(kSample, false)["timed"] == true);
  CHECK(timed.text.find(" in):") != std::string::npos);
  CHECK(timed.text.find("records no times") == std::string::npos);
  CHECK(timed.page()["runs"][0]["history"]["timed"] == true);
}

TEST_CASE("trust: fidelity against a recording says when the run was given other device memory than it had") {
  // The 3-GPU snapshot's memory is inferred from its OOM (3025/3025 addresses at it); at 85,862 MiB
  // the allocator frees and retries elsewhere, and the addresses part ways with the recording.
  auto as_recorded = run_cmd({.trace = k3dev});
  CHECK_FALSE(as_recorded.json["fidelity"].contains("memory_as_recorded"));
  CHECK(as_recorded.json["fidelity"]["allocs_matched"] == as_recorded.json["fidelity"]["allocs_compared"]);
  auto other = run_cmd({.trace = k3dev, .capacity = "85862MiB"});
  CHECK(other.json["fidelity"]["memory_as_recorded"] == false);
  CHECK(other.json["fidelity"]["allocs_matched"] < other.json["fidelity"]["allocs_compared"]);
  CHECK(other.text.find("against a recording made with other device memory than this run's") != std::string::npos);
  // Naming the very device the capture states (--hw mi300x for the MI300X capture) is no change.
  auto same = run_cmd({.trace = kMi300, .hw = "mi300x"});
  CHECK_FALSE(same.json["fidelity"].contains("memory_as_recorded"));
}

// Answers users can trust (issue 21): one report model rendered by every output — the same figure
// has the same value in the text, the JSON, the HTML page, the Perfetto trace and a batch — per
// device and memory space, never summed silently; nothing assumed without a note; what cannot be
// meant refused with the fix; defaults that follow the input in every command.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <sstream>

#include "sim/base/units.h"
#include "test_util.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

std::string data(const std::string& rel) { return std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/" + rel; }
const std::string kSample = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";
const std::string k3dev = data("torch/expandable_3dev_oom.pickle.zst");             // 3 GPUs, one OOM on device 1
const std::string kTpu = data("xprof/xprof_tpu_inference_2.xplane.pb.zst");         // 4 TPU v6e chips
const std::string kMi300 = data("xprof/tracelens_mi300_jax08_gemm.xplane.pb.zst");  // HBM and pinned host memory

nlohmann::json run_json(const std::string& args) {
  std::string js = tmp_path("trust.json");
  auto r = cli("run " + args + " --json " + js);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(read_text(js));
}

nlohmann::json html_report(const std::string& html, size_t run = 0) {
  std::string h = read_text(html);
  const std::string open = "<script type=\"application/json\" id=\"fragsim-data\">";
  auto a = h.find(open) + open.size();
  return nlohmann::json::parse(h.substr(a, h.find("</script>", a) - a))["runs"][run]["report"];
}

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
void outputs_agree(const std::string& trace, const std::string& extra = "") {
  std::string js = tmp_path("agree.json"), html = tmp_path("agree.html"), pf = tmp_path("agree.perfetto.json");
  auto t = cli("run " + trace + extra + " --json " + js + " --html " + html + " --perfetto " + pf);
  REQUIRE(t.code == 0);  // the text summary is on stdout beside the files
  auto j = nlohmann::json::parse(read_text(js));
  REQUIRE(j["devices"].size() > 1);  // these are the runs that used to be summed
  // The page's report is the JSON report (the page keeps no memory-map blocks in it).
  auto h = html_report(html);
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
    std::string row = text_row(t.out, d["device"], d["space"]);
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
  CHECK(t.out.find("sums over the " + std::to_string(j["devices"].size()) + " spaces at one moment") !=
        std::string::npos);
  CHECK(t.out.find("peak requested  ") == std::string::npos);  // no unlabelled headline sum
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
  std::string all = tmp_path("trust_batch/all.json");
  REQUIRE(cli("batch " + m + " --json " + all).code == 0);
  auto b = nlohmann::json::parse(read_text(all));
  CHECK(b["runs"][0]["report"] == run_json(k3dev));
  CHECK(b["runs"][1]["report"] == run_json(kMi300));
}

TEST_CASE("trust: a multi-device run names the binding device and labels sums, in text and JSON") {
  std::string js = tmp_path("binding.json");
  auto text = cli("run " + k3dev + " --json " + js);
  auto j = nlohmann::json::parse(read_text(js));
  CHECK(text.out.find("(3 devices)") != std::string::npos);
  CHECK(j["binding"]["device"] == 1);
  CHECK(j["binding"]["reason"].get<std::string>().find("the first OOM") == 0);
  CHECK(j["top_level"].get<std::string>().find("sums over 3 spaces") != std::string::npos);
  // The TPU capture: 4 chips of 31.25 GiB each; no figure compares a sum with one chip.
  auto t = run_json(kTpu);
  CHECK(t["devices"].size() == 4);
  for (const auto& d : t["devices"]) CHECK(d["peak_reserved_bytes"].get<Bytes>() <= d["usable_bytes"].get<Bytes>());
  CHECK(t["peak_reserved_bytes"].get<Bytes>() > t["devices"][0]["usable_bytes"].get<Bytes>());  // the labelled sum
  auto out = cli("run " + kTpu).out;
  CHECK(out.find("(4 devices)") != std::string::npos);
  CHECK(out.find("* binds: device") != std::string::npos);
}

TEST_CASE("trust: pinned host memory is its own space, and never preallocated from a device-memory fraction") {
  // JAX's host BFC (xla_gpu_host_bfc) grows on demand up to 64 GiB whatever the device settings.
  for (const char* extra : {"", " --policy 'xla-bfc[mem_fraction=0.9,preallocate=true]'",
                            " --env XLA_PYTHON_CLIENT_MEM_FRACTION=.9", " --policy cuda-async", " --policy platform"}) {
    INFO(extra);
    auto j = run_json(kMi300 + extra);
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
  // A PyTorch snapshot names no device: the hardware is assumed, and said so.
  std::string js = tmp_path("notes.json");
  auto t = cli("run " + k3dev + " --json " + js);
  std::string notes = nlohmann::json::parse(read_text(js))["notes"].dump();
  CHECK(notes.find("hardware h100-80g assumed") != std::string::npos);
  CHECK(notes.find("policy torch-caching: the trace is a PyTorch memory snapshot") != std::string::npos);
  CHECK(notes.find("device 1: usable memory 78.51 GiB") != std::string::npos);
  CHECK(t.out.find("note: hardware h100-80g assumed") != std::string::npos);
  // A plain trace: the policy is assumed too.
  auto p = run_json(kSample);
  CHECK(p["notes"].dump().find("policy best-fit: the trace names no allocator") != std::string::npos);
  // A recording's setting kept while another is overridden.
  auto k = run_json(kMi300 + " --policy 'xla-bfc[mem_fraction=0.5]'");
  CHECK(k["notes"].dump().find("the capture's mode kept") != std::string::npos);
}

TEST_CASE("trust: what cannot be meant is refused with the fix, exit 2, one line") {
  auto bare = cli("run " + kSample + " --capacity 16");
  CHECK(bare.code == 2);
  CHECK(bare.err.find("--capacity: '16' has no unit") != std::string::npos);
  CHECK(bare.err.find("16GiB") != std::string::npos);
  CHECK(cli("run " + kSample + " --capacity 0 --policy ideal").code == 0);  // 0 needs no unit
  auto tpu = cli("run " + kSample + " --policy tpu-padded");
  CHECK(tpu.code == 2);
  CHECK(tpu.err.find("models TPU memory") != std::string::npos);
  CHECK(tpu.err.find("--hw names a TPU preset") != std::string::npos);
  CHECK(cli("run " + kSample + " --policy tpu-padded --hw tpu-v5e").code == 0);
  // A framework's variable on another framework's recording.
  auto env = cli("run " + k3dev + " --env XLA_PYTHON_CLIENT_MEM_FRACTION=.5");
  CHECK(env.code == 2);
  CHECK(env.err.find("JAX's variable, but the trace is a PyTorch memory snapshot") != std::string::npos);
  CHECK(cli("run " + k3dev + " --policy xla-bfc --env XLA_PYTHON_CLIENT_MEM_FRACTION=.5").code == 0);  // asked for
  auto mix = cli("run " + kSample + " --policy torch-caching --env XLA_PYTHON_CLIENT_PREALLOCATE=false");
  CHECK(mix.code == 2);
  CHECK(mix.err.find("models PyTorch's allocator") != std::string::npos);
  for (const auto& e : {bare, tpu, env, mix}) CHECK(std::count(e.err.begin(), e.err.end(), '\n') == 1);
  // Sharding only where a policy models it.
  auto shard = cli("run " + kSample + " --policy best-fit --shard 4");
  CHECK(shard.code == 2);
  CHECK(shard.err.find("these do: tpu-padded, static-heap") != std::string::npos);
}

TEST_CASE("trust: defaults follow the input in every command") {
  // compare on a snapshot: the recorded allocator and its what-ifs, beside the lower bound.
  std::string js = tmp_path("cmp_default.json");
  REQUIRE(cli("compare " + k3dev + " --json " + js).code == 0);
  auto arr = nlohmann::json::parse(read_text(js));
  std::vector<std::string> labels;
  for (const auto& r : arr) labels.push_back(r["label"]);
  REQUIRE(labels.size() >= 3);
  CHECK(labels[0] == "ideal");
  CHECK(labels[1] == "torch-caching");
  CHECK(labels[2] == "torch-caching[expandable_segments=false]");  // recorded on: the what-if turns it off
  // On a capture: the recorded BFC, and its other mode.
  REQUIRE(cli("compare " + kMi300 + " --json " + js).code == 0);
  arr = nlohmann::json::parse(read_text(js));
  CHECK(arr[1]["label"] == "xla-bfc");
  CHECK(arr[2]["label"] == "xla-bfc[preallocate=true]");
  // Entries that resolve to the recorded settings say so.
  auto same = cli("compare " + kMi300 + " --policies 'xla-bfc,xla-bfc[preallocate=false]'");
  CHECK(same.out.find("note: xla-bfc and xla-bfc[preallocate=false] ran with the same settings") != std::string::npos);
  // sweep picks the policy run would: torch-caching for a snapshot.
  std::string sj = tmp_path("sweep_default.json");
  auto s = cli("sweep " + data("torch/small_mlp_97ev.pickle.zst") + " --find min-mem-fraction --json " + sj);
  REQUIRE(s.code == 0);
  CHECK(nlohmann::json::parse(read_text(sj))["policy"]["name"] == "torch-caching");
  CHECK(s.out.find("setting: torch.cuda.set_per_process_memory_fraction(") != std::string::npos);
  // A policy without a fraction (the TPU runtime) gets pointed at min-capacity, with the command.
  auto t = cli("sweep " + kTpu + " --find min-mem-fraction");
  CHECK(t.code == 2);
  CHECK(t.err.find("has no memory fraction") != std::string::npos);
  CHECK(t.err.find("--find min-capacity` finds") != std::string::npos);
}

TEST_CASE("trust: info, run and compare read a profile log directory at any depth, and ask when it holds several") {
  std::string root = tmp_path("prof");
  std::string run = root + "/plugins/profile/2026_12_03_06_00_00";
  std::filesystem::create_directories(run);
  std::filesystem::copy_file(kMi300, run + "/host0.xplane.pb.zst");
  for (const char* cmd : {"info ", "run ", "compare "}) {
    auto r = cli(std::string(cmd) + root);
    INFO(cmd << r.err);
    CHECK(r.code == 0);
  }
  CHECK(run_json(root)["fidelity"] == run_json(kMi300)["fidelity"]);
  std::filesystem::create_directories(root + "/plugins/profile/2026_12_03_07_00_00");
  std::filesystem::copy_file(kMi300, root + "/plugins/profile/2026_12_03_07_00_00/host0.xplane.pb.zst");
  auto two = cli("info " + root);
  CHECK(two.code == 2);
  CHECK(two.err.find("2 profile runs under it") != std::string::npos);
  CHECK(two.err.find("2026_12_03_07_00_00") != std::string::npos);
}

TEST_CASE("trust: sweeps say what they searched, mark a bound answer and print the setting as typed") {
  // A trace that fits in 1% of an 80 GB GPU: the answer is a bound, not an exact fraction.
  std::string tiny = write_text("tiny.jsonl", "{\"op\":\"alloc\",\"id\":1,\"size\":1048576}\n");
  auto s = cli("sweep " + tiny + " --policy xla-bfc --find min-mem-fraction");
  REQUIRE(s.code == 0);
  CHECK(s.out.find("smallest memory fraction with no OOM: <= 0.01") != std::string::npos);
  CHECK(s.out.find("searched XLA_PYTHON_CLIENT_MEM_FRACTION from 0.01 to 1.00") != std::string::npos);
  CHECK(s.out.find("setting: XLA_PYTHON_CLIENT_MEM_FRACTION=.01") != std::string::npos);
  CHECK(s.out.find("replay:  fragsim run " + tiny + " --policy xla-bfc --env XLA_PYTHON_CLIENT_MEM_FRACTION=.01") !=
        std::string::npos);
  // The capacity sweep goes past the preset when nothing there fits, and says so.
  auto c = cli("sweep " + k3dev + " --find min-capacity");
  REQUIRE(c.code == 0);
  CHECK(c.out.find("past the preset's 79.15 GiB") != std::string::npos);
  CHECK(c.out.find("each capacity tried applies to every device") != std::string::npos);
}

TEST_CASE("trust: help and errors show positional arguments as positional") {
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
  auto t = cli("run " + kTpu).out;
  // Unnamed buffers: "id 14" once, not "id 14  id 14".
  CHECK(t.find("id 14  id 14") == std::string::npos);
  CHECK(t.find("  id 14, event 15") != std::string::npos);
  CHECK(t.find(" s in)") != std::string::npos);  // "(event 28, 3.203 s in)", not an epoch timestamp
  auto m = cli("run " + kMi300).out;
  CHECK(m.find("first mismatch: event ") != std::string::npos);
  CHECK(m.find("recorded address 0x") != std::string::npos);
  CHECK(m.find("{\"event_index\"") == std::string::npos);
  auto i = cli("info " + k3dev).out;
  CHECK(i.find("time span 2.73541 s") != std::string::npos);
  CHECK(i.find("allocator settings: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") != std::string::npos);
  CHECK(i.find("{\"allocator_settings\"") == std::string::npos);
}

// Issue 24: live bytes by call site (--by-stack, the report's by_stack), --from/--to, and the
// viewer's new views (per-buffer timeline, allocator state at any event, icicle) in headless
// Chromium.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <numeric>
#include <tuple>

#include "html_util.h"
#include "test_util.h"

using namespace fragsim::test;

namespace {

const std::string kData = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/";
const std::string kTrain = kData + "torch/transformer_ctx128_train_step.pickle.zst";
const std::string k3dev = kData + "torch/expandable_3dev_oom.pickle.zst";
const std::string kJax = kData + "xprof/tracelens_jax_te_fused_attn_934987a2fc2f.xplane.pb.zst";
constexpr std::uint64_t kMiB = 1 << 20;

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
  for (int i = 0; i < 3; ++i) alloc(kMiB, ",\"stack\":1");
  alloc(4 * kMiB, ",\"stack\":2");
  alloc(2 * kMiB, ",\"stack\":3");
  alloc(kMiB, "");
  alloc(kMiB / 2, ",\"name\":\"evil\\u001b[2J\"");
  return write_text("stacks.jsonl", t);
}

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
  CHECK(site.at("/w/model.py:20 mlp")["requested_bytes"] == 4 * kMiB);
  CHECK(site.at("/w/model.py:10 attn")["requested_bytes"] == 3 * kMiB);
  CHECK(site.at("/w/model.py:10 attn")["buffers"] == 3);
  CHECK(site.at("/w/data.py:3 load")["requested_bytes"] == 2 * kMiB);
  CHECK(site.at("(no name or stack)")["requested_bytes"] == kMiB);
  CHECK(site.at("evil\x1b[2J")["requested_bytes"] == kMiB / 2);
  CHECK(bs["sites"][0]["site"] == "/w/model.py:20 mlp");  // the most bytes first
  // A frame holds every buffer whose stack passes through it: the outer step holds attn and mlp.
  std::map<std::string, nlohmann::json> frame;
  for (const auto& f : bs["frames"]) frame[f["frame"]] = f;
  CHECK(frame.at("/w/train.py:5 step")["requested_bytes"] == 7 * kMiB);
  CHECK(frame.at("/w/train.py:5 step")["buffers"] == 4);
  CHECK(frame.at("/w/data.py:3 load")["requested_bytes"] == 2 * kMiB);
  CHECK(frame.count("(no name or stack)") == 0);
  // The text table: the same rows, the hostile name escaped (no raw escape reaches the terminal).
  CHECK(r.out.find("live bytes by call site") != std::string::npos);
  CHECK(r.out.find("model.py:20 mlp") < r.out.find("model.py:10 attn"));
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find("evil\\e[2J") != std::string::npos);
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

TEST_CASE(
    "viewer: per-buffer timeline, allocator state at any event and icicle answer hover and the scrubber, "
    "for a PyTorch snapshot, a JAX capture and a 3-device run",
    "[chromium]") {
  for (const std::string& trace : {kTrain, kJax, k3dev}) {
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

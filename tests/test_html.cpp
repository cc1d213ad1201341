// The interactive HTML report (issue 13): the embedded data agrees with the JSON report, the page
// cannot be broken out of by names in the trace, and a real browser (headless Chromium, installed
// by scripts/test) runs the viewer without an error and draws every part. The pages are the ones
// `fragsim run --html` and `compare --html` write, made in process (sim_helpers.h).
#include <catch2/catch.hpp>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>

#include "html_util.h"
#include "sim_helpers.h"
#include "test_util.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {}  // namespace

TEST_CASE("html: the page carries each run's own report, and every in-use block names its buffer") {
  auto run = run_cmd({.trace = kSample, .capacity = "1GiB", .policy = "xla-bfc", .keep_going = true}, kWithHtml);
  auto d = embedded_data(run.html());
  const auto& j = run.json;
  REQUIRE(d["runs"].size() == 1);
  const auto& r = d["runs"][0];
  // One serialisation: the page's report is the JSON report (less the blocks of its maps).
  CHECK(without_maps(r["report"]) == without_maps(j));
  CHECK(r["report"]["devices"][0]["limit_bytes"] == 805306368);  // BFC limit: 0.75 of the 1 GiB device (JAX's default)
  CHECK(d["traces"].size() == 1);
  CHECK(r["timelines"].size() == 1);
  // The peak moment and one per detailed OOM; each in-use block is a live buffer at its address.
  REQUIRE(r["moments"].size() >= 2);
  for (const auto& m : r["moments"]) {
    std::set<std::string> addrs;
    for (const auto& b : m["buffers"]) addrs.insert(b["addr"].get<std::string>());
    auto fig = r["report"][nlohmann::json::json_pointer(m["path"].get<std::string>())];
    CHECK(m["buffers"].size() == fig["live_buffers"].get<size_t>());
    size_t in_use = 0;
    for (const auto& sp : m["maps"])
      for (const auto& b : sp["blocks"])
        if (b[2].get<bool>()) {
          ++in_use;
          CHECK(addrs.count(b[5].get<std::string>()) == 1);
        }
    CHECK(in_use == fig["live_buffers"].get<size_t>());
  }
}

TEST_CASE("html: names from the trace cannot end the script element or inject markup", "[chromium]") {
  std::string t =
      write_text("inject.jsonl",
                 "{\"fragsim_trace\":1}\n"
                 "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"name\":\"</script><script>document.title='pwned'"
                 "</script><!--\"}\n"
                 "{\"op\":\"alloc\",\"id\":2,\"size\":999999999999,\"name\":\"<b>big</b>\"}\n");
  std::string h = run_cmd({.trace = t, .capacity = "1GiB", .policy = "best-fit"}, kWithHtml).html();
  std::string html = write_text("inject.html", h);
  CHECK(count(h, "</script>") == 2);  // the data's and the viewer's own
  CHECK(h.find("<b>big") == std::string::npos);
  auto d = embedded_data(h);
  CHECK(d["runs"][0]["report"]["ooms"][0]["request"]["name"] == "<b>big</b>");
  std::string dom = rendered_dom(html);
  CHECK(dom.find("<title>pwned") == std::string::npos);
  CHECK(dom.find("&lt;b&gt;big&lt;/b&gt;") != std::string::npos);  // shown as text in the OOM table
}

TEST_CASE("html: headless Chromium runs the viewer without an error and draws charts, maps, findings and OOMs",
          "[chromium]") {
  std::string html = write_text(
      "view.html",
      run_cmd({.trace = kSample, .capacity = "1GiB", .policy = "xla-bfc", .keep_going = true}, kWithHtml).html());
  auto d = embedded_data(read_text(html));
  const auto& rep = d["runs"][0]["report"];
  std::string dom = rendered_dom(html);
  CHECK(dom.find("data-ready=\"1\"") != std::string::npos);
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  CHECK(count(dom, "class=\"series-reserved\"") == 1);
  CHECK(count(dom, "class=\"oom-marker\"") == rep["ooms"].size());
  CHECK(count(dom, "class=\"oom-row\"") == rep["ooms"].size());
  CHECK(count(dom, "class=\"line-limit\"") == 1);
  CHECK(count(dom, "<canvas class=\"map\"") >= 1);
  // The address maps' chooser: one option per moment (the icicle below has its own).
  const auto maps_at = dom.find("<div id=\"maps\">");
  REQUIRE(maps_at != std::string::npos);
  const std::string maps = dom.substr(maps_at, dom.find("<div id=\"stacks\">") - maps_at);
  CHECK(count(maps, "<option") == d["runs"][0]["moments"].size());
  // The findings in full: every note and advice line, and the allocator's own message.
  REQUIRE(rep.contains("advice"));
  CHECK(count(dom, "<li class=\"advice\">") == rep["advice"].size());
  CHECK(count(dom, "<li>note: ") == rep["notes"].size());
  std::string expl = d["runs"][0]["explanation"];
  REQUIRE(!expl.empty());
  std::string last = expl.substr(expl.rfind('\n', expl.size() - 2) + 1);  // its last line is on the page
  last.pop_back();
  CHECK(dom.find(last.substr(0, 40)) != std::string::npos);
}

TEST_CASE("html: hover answers on every address map, a 1,010-segment PyTorch map and a BFC grown region by region",
          "[chromium]") {
  // PyTorch: transformer_ctx128_train_step holds 1,010 segments at its peak.
  std::string torch = write_text("torch_map.html", run_cmd({.trace = kTrain}, kWithHtml).html());
  auto d = embedded_data(read_text(torch));
  REQUIRE(d["runs"][0]["moments"][0]["maps"][0]["regions"].size() == 1010);
  check_probes(rendered_dom(torch, "#probe"), 1);
  // JAX growing on demand: regions obtained one by one, blocks listed region by region.
  std::string bfc = write_text(
      "grow_map.html",
      run_cmd({.trace = kSample, .capacity = "1GiB", .policy = "xla-bfc[preallocate=false]", .keep_going = true},
              kWithHtml)
          .html());
  auto g = embedded_data(read_text(bfc));
  REQUIRE(g["runs"][0]["moments"][0]["maps"][0]["regions"].size() > 1);
  check_probes(rendered_dom(bfc, "#probe"), 2);
}

TEST_CASE("html: y axes fit the data, with the device's capacity marked above when it is far", "[chromium]") {
  // 1.39 GiB at the peak on an 80 GB GPU: a chart up to the capacity would be a flat line.
  std::string html = write_text("fit.html", run_cmd({.trace = kSample, .policy = "best-fit"}, kWithHtml).html());
  std::string dom = rendered_dom(html);
  CHECK(count(dom, "class=\"axis offscale-capacity\"") == 1);
  CHECK(count(dom, "class=\"line-capacity\"") == 0);
  CHECK(dom.find("is above this chart") != std::string::npos);
  // Near the data, the capacity is a line on the chart.
  html = write_text(
      "fit.html",
      run_cmd({.trace = kSample, .capacity = "2GiB", .reserve = "0", .policy = "best-fit"}, kWithHtml).html());
  dom = rendered_dom(html);
  CHECK(count(dom, "class=\"line-capacity\"") == 1);
}

TEST_CASE("html: one chart per device, the binding device marked, and a compare's policies overlaid", "[chromium]") {
  std::string html = write_text("3dev.html", run_cmd({.trace = k3dev}, kWithHtml).html());
  std::string dom = rendered_dom(html);
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  CHECK(count(dom, "class=\"chart\"") == 3);
  CHECK(count(dom, "class=\"summary-row\"") == 3);
  CHECK(dom.find(">1 *</td>") != std::string::npos);  // device 1 binds: the first OOM
  // The others were replayed up to it only: not "ok" (trial 14: a stopped TPU run's other devices).
  CHECK(count(dom, ">stopped at event ") == 2);
  CHECK(count(dom, ">ok</td>") == 0);
  // The OOM's dot is on device 1's chart, at that device's allocated memory, under its capacity.
  CHECK(count(dom, "class=\"oom-marker\"") == 1);
  check_probes(rendered_dom(html, "#probe"), 3);

  // A compare: one chart per space, every policy on it; small multiples on request.
  std::string cmp =
      write_text("compare.html",
                 compare_cmd({.base = {.trace = kSample}, .policies = "xla-bfc,best-fit,cuda-async"}, true).html());
  std::string cdom = rendered_dom(cmp);
  CHECK(cdom.find("data-ready=\"1\"") != std::string::npos);
  CHECK(cdom.find("<div id=\"errors\"></div>") != std::string::npos);
  CHECK(count(cdom, "class=\"chart\"") == 1);
  CHECK(count(cdom, "class=\"series-allocated\"") == 3);
  CHECK(count(cdom, "class=\"series-requested\"") == 1);  // the trace's, drawn once
  CHECK(count(cdom, "class=\"mapbox\"") == 3);
  CHECK(count(cdom, "id=\"mult\"") == 1);

  // Several traces: the page names each.
  std::string other = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/llm_serving_small.jsonl";
  std::string two = write_text(
      "two.html",
      compare_cmd({.base = {.trace = kSample}, .traces = {kSample, other}, .policies = "best-fit"}, true).html());
  std::string tdom = rendered_dom(two);
  CHECK(tdom.find("jax_train_small.jsonl</code>") != std::string::npos);
  CHECK(tdom.find("llm_serving_small.jsonl</code>") != std::string::npos);
}

TEST_CASE("html: the trace's marks are drawn on every chart", "[chromium]") {
  std::string t = write_text("marks.jsonl",
                             "{\"op\":\"alloc\",\"id\":1,\"size\":1048576}\n{\"op\":\"mark\",\"name\":\"step 1\"}\n"
                             "{\"op\":\"alloc\",\"id\":2,\"size\":1048576}\n{\"op\":\"mark\",\"name\":\"step 2\"}\n"
                             "{\"op\":\"free\",\"id\":1}\n");
  std::string html = write_text("marks.html", run_cmd({.trace = t}, kWithHtml).html());
  std::string dom = rendered_dom(html);
  CHECK(count(dom, "class=\"mark\"") == 2);
  CHECK(dom.find("<title>step 2</title>") != std::string::npos);
}

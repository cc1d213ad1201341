// The interactive HTML report (issue 13): the embedded data agrees with the JSON report, the page
// cannot be broken out of by names in the trace, and a real browser (headless Chromium, installed
// by scripts/test) runs the viewer without an error and draws every part.
#include <catch2/catch.hpp>
#include <cstdio>
#include <set>

#include "test_util.h"

using namespace fragsim::test;

namespace {

const std::string kSample = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";

nlohmann::json embedded_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"fragsim-data\">";
  auto a = html.find(open);
  REQUIRE(a != std::string::npos);
  a += open.size();
  auto b = html.find("</script>", a);
  REQUIRE(b != std::string::npos);
  return nlohmann::json::parse(html.substr(a, b - a));
}

// The DOM after the page's scripts ran, from headless Chromium.
std::string rendered_dom(const std::string& html_path) {
  std::string chromium;
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"})
    if (std::system((std::string("command -v ") + c + " >/dev/null 2>&1").c_str()) == 0) {
      chromium = c;
      break;
    }
  if (chromium.empty()) FAIL("no chromium on PATH: scripts/test installs the Debian package 'chromium'");
  std::string dom = tmp_path("dom.html"), profile = tmp_path("chromium-profile");
  std::string cmd = chromium +
                    " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --disable-background-networking "
                    "--disable-component-update --disable-sync --no-first-run --user-data-dir=" +
                    profile + " --virtual-time-budget=10000 --dump-dom file://" + html_path + " >" + dom +
                    " 2>/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  return read_text(dom);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("html: the embedded data agrees with the JSON report and every in-use block names its buffer") {
  std::string html = tmp_path("bfc.html"), json = tmp_path("bfc.json");
  REQUIRE(cli("run " + kSample + " --policy xla-bfc --capacity 1GiB --keep-going --html " + html + " --json " + json)
              .code == 0);
  auto d = embedded_data(read_text(html));
  auto j = nlohmann::json::parse(read_text(json));
  REQUIRE(d["runs"].size() == 1);
  const auto& r = d["runs"][0];
  CHECK(r["completed"] == false);
  CHECK(r["oom_count"] == j["oom_count"]);
  CHECK(r["ooms"].size() == j["oom_count"].get<size_t>());
  CHECK(r["peak_allocated"] == j["peak_allocated_bytes"]);
  CHECK(r["peak_reserved"] == j["peak_reserved_bytes"]);
  CHECK(r["ooms"][0]["event_index"] == j["ooms"][0]["event_index"]);
  CHECK(r["ooms"][0]["name"] == j["ooms"][0]["request"]["name"]);
  CHECK(r["limit"].get<std::uint64_t>() == 805306368);  // BFC limit: 0.75 of the 1 GiB device (JAX's default)
  // The peak moment and one per detailed OOM; each in-use block is a live buffer at its address.
  REQUIRE(r["moments"].size() >= 2);
  for (const auto& m : r["moments"]) {
    std::set<std::string> addrs;
    for (const auto& b : m["buffers"]) addrs.insert(b["addr"].get<std::string>());
    CHECK(m["buffers"].size() == m["live_buffers"].get<size_t>());
    size_t in_use = 0;
    for (const auto& sp : m["spaces"])
      for (const auto& b : sp["blocks"])
        if (b[2].get<bool>()) {
          ++in_use;
          CHECK(addrs.count(b[5].get<std::string>()) == 1);
        }
    CHECK(in_use == m["live_buffers"].get<size_t>());
  }
}

TEST_CASE("html: names from the trace cannot end the script element or inject markup") {
  std::string t =
      write_text("inject.jsonl",
                 "{\"fragsim_trace\":1}\n"
                 "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"name\":\"</script><script>document.title='pwned'"
                 "</script><!--\"}\n"
                 "{\"op\":\"alloc\",\"id\":2,\"size\":999999999999,\"name\":\"<b>big</b>\"}\n");
  std::string html = tmp_path("inject.html");
  REQUIRE(cli("run " + t + " --policy best-fit --capacity 1GiB --html " + html).code == 0);
  std::string h = read_text(html);
  CHECK(count(h, "</script>") == 2);  // the data's and the viewer's own
  CHECK(h.find("<b>big") == std::string::npos);
  auto d = embedded_data(h);
  CHECK(d["runs"][0]["ooms"][0]["name"] == "<b>big</b>");
  std::string dom = rendered_dom(html);
  CHECK(dom.find("<title>pwned") == std::string::npos);
  CHECK(dom.find("&lt;b&gt;big&lt;/b&gt;") != std::string::npos);  // shown as text in the OOM table
}

TEST_CASE("html: headless Chromium runs the viewer without an error and draws charts, maps and the OOM table") {
  std::string html = tmp_path("view.html");
  REQUIRE(cli("run " + kSample + " --policy xla-bfc --capacity 1GiB --keep-going --html " + html).code == 0);
  auto d = embedded_data(read_text(html));
  std::string dom = rendered_dom(html);
  CHECK(dom.find("data-ready=\"1\"") != std::string::npos);
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  CHECK(count(dom, "class=\"series-reserved\"") == 1);
  CHECK(count(dom, "class=\"oom-marker\"") == d["runs"][0]["ooms"].size());
  CHECK(count(dom, "class=\"oom-row\"") == d["runs"][0]["ooms"].size());
  CHECK(count(dom, "class=\"line-limit\"") == 1);
  CHECK(count(dom, "<canvas class=\"map\"") >= 1);
  CHECK(count(dom, "<option") == d["runs"][0]["moments"].size());

  std::string cmp = tmp_path("compare.html");
  REQUIRE(cli("compare " + kSample + " --policies xla-bfc,best-fit,cuda-async --html " + cmp).code == 0);
  std::string cdom = rendered_dom(cmp);
  CHECK(cdom.find("data-ready=\"1\"") != std::string::npos);
  CHECK(cdom.find("<div id=\"errors\"></div>") != std::string::npos);
  CHECK(count(cdom, "class=\"chart\"") == 3);
  CHECK(count(cdom, "class=\"series-reserved\"") == 3);
  CHECK(count(cdom, "class=\"mapbox\"") == 3);
}

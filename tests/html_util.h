// What the tests of the HTML report share: the data a page embeds, the DOM headless Chromium
// leaves after the viewer ran, and what its #probe mode found (sim/viewer/report_viewer.js).
#pragma once
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace fragsim::test {

inline nlohmann::json embedded_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"fragsim-data\">";
  auto a = html.find(open);
  REQUIRE(a != std::string::npos);
  a += open.size();
  auto b = html.find("</script>", a);
  REQUIRE(b != std::string::npos);
  return nlohmann::json::parse(html.substr(a, b - a));
}

// The DOM after the page's scripts ran, from headless Chromium; `fragment` (e.g. "#probe") is
// appended to the file URL.
// `window`: "WIDTH,HEIGHT" of the browser's window ("" = Chromium's default); `console`, when
// given, receives what the page wrote to its console (and uncaught errors), one message a line.
inline std::string rendered_dom(const std::string& html_path, const std::string& fragment = "",
                                const std::string& window = "", std::string* console = nullptr) {
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
                    profile + " --virtual-time-budget=10000" + (window.empty() ? "" : " --window-size=" + window) +
                    (console ? " --enable-logging=stderr --v=0" : "") + " --dump-dom 'file://" + html_path + fragment +
                    "' >" + dom + " 2>" + (console ? tmp_path("console.txt") : std::string("/dev/null"));
  REQUIRE(std::system(cmd.c_str()) == 0);
  if (console) {
    console->clear();
    std::istringstream in(read_text(tmp_path("console.txt")));
    for (std::string line; std::getline(in, line);)
      if (line.find(":CONSOLE") != std::string::npos) *console += line + "\n";
  }
  return read_text(dom);
}

inline size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// What #probe found: one JSON object per chart and per address map (report_viewer.js).
inline std::vector<nlohmann::json> probes(const std::string& dom) {
  const std::string open = "<pre id=\"probe\" hidden=\"\">";
  auto a = dom.find(open);
  REQUIRE(a != std::string::npos);
  a += open.size();
  std::string text = dom.substr(a, dom.find("</pre>", a) - a);
  std::vector<nlohmann::json> v;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}

// Every chart answers hover along its width; every map's hover agrees, point for point, with a
// linear search over its blocks, and names the buffer of every in-use block it passes over; at
// least `min_maps` maps show blocks in use. (The views of issue 24 report their own probes:
// tests/test_viewer.cpp.)
inline void check_probes(const std::string& dom, size_t min_maps) {
  auto v = probes(dom);
  size_t maps = 0, charts = 0;
  for (const auto& p : v) {
    INFO(p.dump());
    if (p.contains("chart")) {
      ++charts;
      CHECK(p["answered"] == p["probes"]);
    } else if (p.contains("map")) {
      CHECK(p["probes"].get<int>() > 0);
      CHECK(p["agree"] == p["probes"]);
      CHECK(p["named"] == p["in_use"]);
      if (p["in_use"].get<int>() > 0) ++maps;
    }
  }
  CHECK(charts >= 1);
  CHECK(maps >= min_maps);
}

// The report JSON without memory-map blocks (the page's report keeps none: it has its own maps).
inline nlohmann::json without_maps(nlohmann::json j) {
  std::function<void(nlohmann::json&)> strip = [&](nlohmann::json& x) {
    if (x.is_object()) {
      if (x.contains("memory_map")) x["memory_map"].erase("blocks"), x["memory_map"].erase("truncated");
      for (auto& [k, v] : x.items()) strip(v);
    } else if (x.is_array()) {
      for (auto& v : x) strip(v);
    }
  };
  strip(j);
  return j;
}

}  // namespace fragsim::test

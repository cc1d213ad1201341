#include "sim/report/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "sim/base/io.h"
#include "sim/engine/history.h"
#include "sim/report/by_stack.h"
#include "sim/report/history_json.h"
#include "sim/report/report.h"

namespace fragsim {

// The viewer's source, generated from sim/viewer/report_viewer.js by CMake.
extern const char* const kReportViewerJs;

namespace {

std::string hex(Addr a) { return fmt::format("0x{:x}", a.value()); }

nlohmann::json buffer(const BufferView& b) {
  nlohmann::json j = {{"id", b.id},
                      {"addr", b.has_addr ? nlohmann::json(hex(b.addr)) : nlohmann::json()},
                      {"requested", b.requested},
                      {"block", b.block},
                      {"event_index", b.event_index}};
  if (!b.name.empty()) j["name"] = b.name;
  if (std::string s = shape_text(b); !s.empty()) j["shape"] = s;
  if (b.stack) j["stack"] = std::to_string(b.stack);
  return j;
}

// One space's map: regions [base, size, id] in address order and blocks [offset in region, size,
// in use, mapped, region id, address] in address order; blocks outside every region (policies
// without regions) are left out.
nlohmann::json map_json(const SpaceMoment& s) {
  nlohmann::json regions = nlohmann::json::array(), blocks = nlohmann::json::array();
  std::vector<MemoryMap::Region> rs = s.map.regions;
  std::sort(rs.begin(), rs.end(), [](const auto& a, const auto& b) { return a.base < b.base; });
  std::vector<const MemoryMap::Block*> bs;
  for (const auto& b : s.map.blocks) bs.push_back(&b);
  std::sort(bs.begin(), bs.end(), [](auto* a, auto* b) { return a->addr < b->addr; });
  for (const auto& g : rs) regions.push_back({hex(g.base), g.size, g.id});
  for (const auto* b : bs) {
    auto it = std::upper_bound(rs.begin(), rs.end(), b->addr, [](Addr a, const auto& g) { return a < g.base; });
    if (it == rs.begin() || b->addr - std::prev(it)->base >= std::prev(it)->size) continue;
    --it;
    blocks.push_back({b->addr - it->base, b->size, b->in_use, b->mapped, it->id, hex(b->addr)});
  }
  return {{"device", s.device},
          {"space", space_name(s.space)},
          {"truncated", s.truncated},
          {"regions", regions},
          {"blocks", blocks}};
}

// A moment's maps, live buffers and call sites; its figures are the report's at `path` (a JSON pointer).
nlohmann::json moment(const RunResult& r, const Moment& m, std::string title, std::string path) {
  nlohmann::json live = nlohmann::json::array(), maps = nlohmann::json::array();
  for (const auto& b : m.live) live.push_back(buffer(b));
  for (const auto& s : m.spaces) maps.push_back(map_json(s));
  return {{"title", std::move(title)},
          {"path", std::move(path)},
          {"event_index", m.event_index},
          {"buffers", live},
          {"maps", maps},
          {"flame", flame_json(m.sites, m.other_sites, r.stacks)}};
}

// A recording's compiled modules (traces/xla_modules.h) as the page's module view reads them.
nlohmann::json modules_json(const std::vector<ModuleView>& mods) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : mods) {
    nlohmann::json heaps = nlohmann::json::array(), allocs = nlohmann::json::array(), bufs = nlohmann::json::array();
    for (const auto& h : m.heaps) heaps.push_back({h.trace, h.xla_bytes, h.planned_bytes});
    for (const auto& a : m.allocations) allocs.push_back({a.index, a.size, a.kind, a.heap_trace});
    for (const auto& b : m.buffers)
      bufs.push_back({b.id, b.name, b.shape, b.logical, b.padded, b.tile, b.kind, b.allocation, b.offset, b.heap_trace,
                      b.order, b.end, b.planned});
    out.push_back({{"name", m.name},
                   {"module_name", m.module_name},
                   {"heap_events", m.heap_events},
                   {"truncated", m.truncated},
                   {"planned_by", m.planned_by},
                   {"heaps", heaps},
                   {"allocations", allocs},
                   {"buffers", bufs}});
  }
  return out;
}

nlohmann::json run(const RunResult& r, size_t trace) {
  nlohmann::json timelines = nlohmann::json::array(), moments = nlohmann::json::array();
  for (const auto& s : r.spaces) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : s.timeline)
      points.push_back({p.event_index, p.requested, p.allocated, p.reserved, std::round(p.fragmentation * 1e4) / 1e4});
    timelines.push_back({{"device", s.device}, {"space", space_name(s.space)}, {"points", points}});
  }
  if (r.several_spaces()) {
    for (size_t i = 0; i < r.spaces.size(); ++i)
      if (r.spaces[i].peak)
        moments.push_back(moment(r, *r.spaces[i].peak,
                                 fmt::format("device {} {}: its peak (event {})", r.spaces[i].device,
                                             space_name(r.spaces[i].space), r.spaces[i].peak->event_index),
                                 fmt::format("/devices/{}/at_peak_allocated", i)));
  } else if (const Moment* m = r.peak()) {
    moments.push_back(moment(r, *m, fmt::format("peak allocated (event {})", m->event_index), "/at_peak_allocated"));
  }
  for (size_t i = 0; i < r.ooms.size(); ++i)
    if (r.ooms[i].moment)
      moments.push_back(moment(r, *r.ooms[i].moment, fmt::format("OOM at event {}", r.ooms[i].event_index),
                               fmt::format("/ooms/{}/at_oom", i)));
  std::string explanation;
  for (const auto& o : r.ooms)
    if (explanation.empty()) explanation = o.explanation;
  nlohmann::json j = {{"label", label_of(r)},   {"trace", trace},     {"report", report_json(r, 0)},
                      {"timelines", timelines}, {"moments", moments}, {"explanation", explanation}};
  if (r.history) j["history"] = history_json(*r.history, r);
  if (r.modules) j["modules"] = modules_json(*r.modules);
  return j;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// JSON inside <script>: "</" would end the element early, "<!--" would open a comment.
std::string script_safe(const std::string& json) {
  std::string o;
  o.reserve(json.size());
  for (char c : json) {
    if (c == '<')
      o += "\\u003c";
    else
      o += c;
  }
  return o;
}

constexpr const char* kStyle =
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;"
    "font-size:13px}th{background:#f0f0f0}td:first-child{text-align:left}td.l{text-align:left}"
    "td.n{white-space:nowrap}.bad{color:#b00;font-weight:bold}"
    ".note{color:#666;font-size:12px;max-width:900px}.chart{display:block;border:1px solid #ddd;"
    "user-select:none}.axis{font-size:10px;fill:#555}.chartbox h3,.mapbox h3{margin:.8em 0 .2em}"
    "canvas.map{display:block;border:1px solid #ccc;margin-bottom:4px}"
    ".zoombar button{font-size:11px;padding:0 5px;margin-right:2px}.zoombar{margin:.2em 0}"
    "#pinned{position:fixed;right:12px;bottom:12px;max-width:45%;max-height:45%;overflow:auto;background:#fffff4;"
    "border:1px solid #999;box-shadow:0 2px 8px rgba(0,0,0,.25);padding:6px 8px;z-index:20}"
    "#pinned pre{font:12px monospace;margin:.3em 0;white-space:pre-wrap}.pinned-title{font-weight:bold;font-size:13px}"
    "ul.matches li{cursor:pointer;font-size:12px}ul.matches li:hover{background:#eef}"
    ".regionlabel,.maptitle{font-size:12px;color:#444;margin-top:6px}"
    "#tooltip{position:absolute;display:none;background:#fffff0;border:1px solid #999;padding:4px 6px;"
    "font:12px monospace;white-space:pre-wrap;overflow-wrap:anywhere;pointer-events:none;z-index:10;max-width:700px}"
    "pre.explanation{background:#f7f7f7;padding:.5em;font-size:12px;white-space:pre-wrap;max-width:1100px}"
    "ul.lines li{font-size:13px;margin:.2em 0;max-width:1100px}ul.lines code{background:#f3f3f3}"
    ".legend span{display:inline-block;margin-right:1em;font-size:12px}.controls{font-size:12px;margin:.3em 0}"
    "#errors{color:#b00;white-space:pre}";

}  // namespace

nlohmann::json viewer_data(const std::vector<RunResult>& runs) {
  nlohmann::json traces = nlohmann::json::array(), rs = nlohmann::json::array(), stacks = nlohmann::json::object();
  std::vector<std::string> paths;
  for (const auto& r : runs) {
    auto it = std::find(paths.begin(), paths.end(), r.trace_path);
    size_t t = static_cast<size_t>(it - paths.begin());
    if (it == paths.end()) {
      paths.push_back(r.trace_path);
      traces.push_back(
          {{"path", r.trace_path}, {"events", r.events}, {"hardware", r.hardware.value("name", std::string("?"))}});
    }
    rs.push_back(run(r, t));
    for (const auto& [id, frames] : r.stacks) stacks[std::to_string(id)] = frames;
    if (r.history)
      for (const auto& [id, frames] : r.history->stacks) stacks[std::to_string(id)] = frames;
  }
  return {{"traces", traces}, {"runs", rs}, {"stacks", stacks}};
}

std::string report_html(const std::vector<RunResult>& runs, const nlohmann::json& diff) {
  nlohmann::json data = viewer_data(runs);
  if (!diff.is_null()) data["diff"] = diff;
  return viewer_html(data);
}

std::string reports_html(const std::vector<std::pair<std::string, nlohmann::json>>& reports,
                         const nlohmann::json& diff) {
  nlohmann::json traces = nlohmann::json::array(), rs = nlohmann::json::array(), stacks = nlohmann::json::object();
  for (const auto& [name, report] : reports) {
    nlohmann::json rep = report;
    // The page's reports keep no memory-map blocks (as report_json(r, 0) writes them).
    std::function<void(nlohmann::json&)> strip = [&](nlohmann::json& x) {
      if (x.is_object()) {
        if (x.contains("memory_map") && x["memory_map"].is_object()) x["memory_map"].erase("blocks");
        for (auto& [k, v] : x.items()) strip(v);
      } else if (x.is_array()) {
        for (auto& v : x) strip(v);
      }
    };
    strip(rep);
    traces.push_back({{"path", rep["trace"].value("path", name)},
                      {"events", rep["trace"].value("events", std::uint64_t{0})},
                      {"hardware", rep["hardware"].value("name", std::string("?"))}});
    if (rep.contains("stacks") && rep["stacks"].is_object()) stacks.update(rep["stacks"]);
    rs.push_back({{"label", name},
                  {"trace", traces.size() - 1},
                  {"report", rep},
                  {"timelines", nlohmann::json::array()},
                  {"moments", nlohmann::json::array()},
                  {"explanation", ""}});
  }
  nlohmann::json data = {{"traces", traces}, {"runs", rs}, {"stacks", stacks}};
  if (!diff.is_null()) data["diff"] = diff;
  return viewer_html(data);
}

std::string viewer_html(const nlohmann::json& data) {
  std::string h;
  auto out = std::back_inserter(h);
  std::string title, list;
  for (const auto& t : data["traces"]) {
    std::string p = t["path"].get<std::string>();
    title += (title.empty() ? "" : ", ") + p;
    list += fmt::format("<li>trace <code>{}</code>: {} events; hardware {}</li>", esc(p),
                        t["events"].get<std::uint64_t>(), esc(t["hardware"].get<std::string>()));
  }
  fmt::format_to(out,
                 "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>fragsim: {}</title><style>{}</style>"
                 "</head><body>\n",
                 esc(title), kStyle);
  fmt::format_to(out, "<h1>fragsim report</h1>\n<ul class=\"traces\">{}</ul>\n", list);
  fmt::format_to(out,
                 "<noscript><p class=\"bad\">This report draws its charts with JavaScript; the same figures are in "
                 "fragsim's --json report.</p></noscript>\n<div id=\"errors\"></div>\n<div id=\"findings\"></div>\n"
                 "<div id=\"diff\"></div>\n"
                 "<h2>Summary</h2><div id=\"summary\"></div>\n<div id=\"search\"></div>\n<div id=\"charts\"></div>\n"
                 "<div id=\"buffers\"></div>\n<div id=\"segments\"></div>\n<div id=\"states\"></div>\n"
                 "<div id=\"maps\"></div>\n<div id=\"stacks\"></div>\n<div id=\"modules\"></div>\n"
                 "<div id=\"ooms\"></div>\n"
                 "<div id=\"tooltip\"></div>\n<pre id=\"probe\" hidden></pre>\n");
  fmt::format_to(out, "<script type=\"application/json\" id=\"fragsim-data\">{}</script>\n",
                 script_safe(dump_json(data)));
  fmt::format_to(out, "<script>\n{}</script>\n</body></html>\n", kReportViewerJs);
  return h;
}

}  // namespace fragsim

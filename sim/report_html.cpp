#include "sim/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/report.h"

namespace fragsim {

// The viewer's source, generated from sim/report_viewer.js by CMake.
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

// One space's map: regions [base, size, id] and blocks [offset in region, size, in use, mapped,
// region id, address]; blocks outside every region (policies without regions) get region -1.
nlohmann::json space(const SpaceMoment& s) {
  nlohmann::json regions = nlohmann::json::array(), blocks = nlohmann::json::array();
  std::vector<MemoryMap::Region> rs = s.map.regions;
  std::sort(rs.begin(), rs.end(), [](const auto& a, const auto& b) { return a.base < b.base; });
  for (const auto& g : rs) regions.push_back({hex(g.base), g.size, g.id});
  for (const auto& b : s.map.blocks) {
    auto it = std::upper_bound(rs.begin(), rs.end(), b.addr, [](Addr a, const auto& g) { return a < g.base; });
    if (it == rs.begin() || b.addr - std::prev(it)->base >= std::prev(it)->size) continue;
    --it;
    blocks.push_back({b.addr - it->base, b.size, b.in_use, b.mapped, it->id, hex(b.addr)});
  }
  return {{"device", s.device},       {"space", space_name(s.space)}, {"allocated", s.allocated},
          {"reserved", s.reserved},   {"unused", s.unused()},         {"unused_share", s.unused_share()},
          {"external", s.external()}, {"truncated", s.truncated},     {"regions", regions},
          {"blocks", blocks}};
}

nlohmann::json moment(const Moment& m, std::string title) {
  nlohmann::json top = nlohmann::json::array(), live = nlohmann::json::array(), spaces = nlohmann::json::array();
  for (const auto& b : m.top_buffers) top.push_back(buffer(b));
  for (const auto& b : m.live) live.push_back(buffer(b));
  for (const auto& s : m.spaces) spaces.push_back(space(s));
  return {{"title", std::move(title)},
          {"event_index", m.event_index},
          {"live_buffers", m.live_buffers},
          {"top", top},
          {"buffers", live},
          {"spaces", spaces}};
}

nlohmann::json run(const RunResult& r) {
  nlohmann::json timeline = nlohmann::json::array(), marks = nlohmann::json::array(), ooms = nlohmann::json::array(),
                 moments = nlohmann::json::array();
  for (const auto& p : r.timeline)
    timeline.push_back({p.event_index, p.requested, p.allocated, p.reserved, std::round(p.fragmentation * 1e4) / 1e4});
  for (const auto& m : r.marks) marks.push_back({m.event_index, m.name});
  std::string explanation;
  for (const auto& o : r.ooms) {
    nlohmann::json j = {{"event_index", o.event_index},
                        {"id", o.request.id},
                        {"device", o.device},
                        {"space", space_name(o.space)},
                        {"requested", o.requested},
                        {"rounded", o.rounded},
                        {"allocated", o.allocated},
                        {"free", o.free},
                        {"largest_free", o.largest_free},
                        {"cause", o.kind.empty() ? (o.fragmentation ? "fragmentation" : "capacity") : o.kind}};
    if (!o.request.name.empty()) j["name"] = o.request.name;
    if (std::string s = shape_text(o.request); !s.empty()) j["shape"] = s;
    if (o.request.stack) j["stack"] = std::to_string(o.request.stack);
    ooms.push_back(j);
    if (o.moment && moments.size() < 1 + kDetailedOoms)
      moments.push_back(moment(*o.moment, fmt::format("OOM at event {}", o.event_index)));
    if (explanation.empty()) explanation = o.explanation;
  }
  if (r.peak)
    moments.insert(moments.begin(), moment(*r.peak, fmt::format("peak allocated (event {})", r.peak->event_index)));
  // The device's usable memory and the allocator's limit, summed over the HBM spaces the run used.
  Bytes capacity = 0, limit = 0;
  for (const auto& s : r.spaces) {
    if (s.space != Space::kHbm) continue;
    for (const auto& hs : r.hardware.value("spaces", nlohmann::json::array()))
      if (hs.value("name", "") == "hbm") capacity += hs.value("usable_bytes", Bytes{0});
    if (s.extra.contains("bfc")) limit += s.extra["bfc"].value("memory_limit", Bytes{0});
  }
  Bytes unused = 0, reserved = 0;
  for (const auto& s : r.spaces) {
    unused += s.at_peak_allocated.unused();
    reserved += s.at_peak_allocated.reserved;
  }
  double external_max = 0;
  for (const auto& s : r.spaces) external_max = std::max(external_max, s.external_max);
  return {{"label", label_of(r)},
          {"completed", r.completed},
          {"oom_count", r.ooms.size()},
          {"events", r.events},
          {"peak_requested", r.peak_requested},
          {"peak_allocated", r.peak_allocated},
          {"peak_reserved", r.peak_reserved},
          {"unused_at_peak", unused},
          {"unused_share_at_peak", reserved ? static_cast<double>(unused) / static_cast<double>(reserved) : 0.0},
          {"external_at_peak", r.frag_at_peak},
          {"external_max", std::max(external_max, r.frag_max)},
          {"capacity", capacity},
          {"limit", limit},
          {"timeline", timeline},
          {"marks", marks},
          {"ooms", ooms},
          {"moments", moments},
          {"explanation", explanation}};
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
    "font-size:13px}th{background:#f0f0f0}td:first-child{text-align:left}.bad{color:#b00;font-weight:bold}"
    ".note{color:#666;font-size:12px;max-width:900px}.chart{max-width:900px;display:block;border:1px solid #ddd;"
    "user-select:none}.axis{font-size:10px;fill:#555}.chartbox h3,.mapbox h3{margin:.8em 0 .2em}"
    "canvas.map{width:900px;display:block;border:1px solid #ccc;margin-bottom:4px}"
    ".regionlabel,.maptitle{font-size:12px;color:#444;margin-top:6px}"
    "#tooltip{position:absolute;display:none;background:#fffff0;border:1px solid #999;padding:4px 6px;"
    "font:12px monospace;white-space:pre;pointer-events:none;z-index:10;max-width:700px;overflow:hidden}"
    "pre.explanation{background:#f7f7f7;padding:.5em;font-size:12px;max-height:20em;overflow:auto}"
    "#errors{color:#b00;white-space:pre}";

}  // namespace

nlohmann::json viewer_data(const std::vector<RunResult>& runs) {
  nlohmann::json j = {{"trace", runs.empty() ? "" : runs.front().trace_path},
                      {"events", runs.empty() ? 0 : runs.front().events},
                      {"hardware", runs.empty() ? "" : runs.front().hardware.value("name", std::string("?"))},
                      {"runs", nlohmann::json::array()},
                      {"stacks", nlohmann::json::object()}};
  for (const auto& r : runs) {
    j["runs"].push_back(run(r));
    for (const auto& [id, frames] : r.stacks) j["stacks"][std::to_string(id)] = frames;
  }
  return j;
}

std::string report_html(const std::vector<RunResult>& runs) {
  nlohmann::json data = viewer_data(runs);
  std::string h;
  auto out = std::back_inserter(h);
  const std::string trace = data["trace"].get<std::string>();
  fmt::format_to(out,
                 "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>fragsim: {}</title><style>{}</style>"
                 "</head><body>\n",
                 esc(trace), kStyle);
  fmt::format_to(out, "<h1>fragsim report</h1>\n<p>trace <code>{}</code>: {} events; hardware {}</p>\n", esc(trace),
                 data["events"].get<std::uint64_t>(), esc(data["hardware"].get<std::string>()));
  fmt::format_to(
      out,
      "<noscript><p class=\"bad\">This report draws its charts with JavaScript; the same figures are in "
      "fragsim's --json report.</p></noscript>\n<div id=\"errors\"></div>\n<h2>Summary</h2><div "
      "id=\"summary\"></div>\n<h2>Memory over time</h2><div id=\"charts\"></div>\n<h2>Address "
      "maps</h2><div id=\"maps\"></div>\n<h2>OOMs</h2><div id=\"ooms\"></div>\n<div id=\"tooltip\"></div>\n");
  fmt::format_to(out, "<script type=\"application/json\" id=\"fragsim-data\">{}</script>\n",
                 script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  fmt::format_to(out, "<script>\n{}</script>\n</body></html>\n", kReportViewerJs);
  return h;
}

}  // namespace fragsim

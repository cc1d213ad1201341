#include "sim/report_html.h"

#include <fmt/format.h>

#include <algorithm>

namespace fragsim {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                   "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

}  // namespace

std::string report_html(const std::vector<RunResult>& runs) {
  std::string h;
  auto out = std::back_inserter(h);
  const RunResult& first = runs.front();
  fmt::format_to(out,
                 "<!doctype html><html><head><meta charset=\"utf-8\"><title>fragsim: {}</title><style>"
                 "body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}"
                 "td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}th{{background:#eee}}"
                 ".oom{{color:#b00}}</style></head><body>\n",
                 esc(first.trace_path));
  fmt::format_to(out,
                 "<h1>fragsim report</h1><p>trace <code>{}</code>: {} events, {} allocs, {} frees; hardware {}</p>\n",
                 esc(first.trace_path), first.events, first.allocs, first.frees,
                 esc(first.hardware.value("name", std::string("?"))));
  // Chart.
  std::uint64_t max_x = 1;
  Bytes max_y = 1;
  for (const auto& r : runs) {
    max_x = std::max<std::uint64_t>(max_x, r.events);
    for (const auto& p : r.timeline) max_y = std::max({max_y, p.requested, p.allocated, p.reserved});
  }
  const double W = 900, H = 320, L = 70, B = 30;
  auto X = [&](std::uint64_t i) { return L + (W - L - 10) * static_cast<double>(i) / static_cast<double>(max_x); };
  auto Y = [&](Bytes b) { return H - B - (H - B - 10) * static_cast<double>(b) / static_cast<double>(max_y); };
  fmt::format_to(
      out, "<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" style=\"border:1px solid #ddd\">\n", W,
      H);
  for (int k = 0; k <= 4; ++k) {
    Bytes v = max_y / 4 * static_cast<Bytes>(k);
    fmt::format_to(out,
                   "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/><text x=\"4\" y=\"{:.1f}\" "
                   "font-size=\"11\">{}</text>\n",
                   L, W - 10, Y(v), Y(v), Y(v) + 4, esc(human_bytes(v)));
  }
  fmt::format_to(out, "<text x=\"{}\" y=\"{}\" font-size=\"11\">event index → {}</text>\n", L, H - 8, max_x);
  auto line = [&](const std::vector<TimelinePoint>& tl, auto get, const char* color, const char* dash) {
    std::string pts;
    for (const auto& p : tl) pts += fmt::format("{:.1f},{:.1f} ", X(p.event_index), Y(get(p)));
    fmt::format_to(
        out, "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"{}\" points=\"{}\"/>\n",
        color, dash, pts);
  };
  std::string legend;
  line(
      first.timeline, [](const TimelinePoint& p) { return p.requested; }, "#555", "4,3");
  legend += "<span style=\"color:#555\">- - requested</span> ";
  for (size_t i = 0; i < runs.size(); ++i) {
    const char* c = kColors[i % 8];
    std::string label = runs[i].label.empty() ? runs[i].policy_name : runs[i].label;
    if (runs.size() == 1) {
      line(
          runs[i].timeline, [](const TimelinePoint& p) { return p.allocated; }, "#2ca02c", "");
      legend += "<span style=\"color:#2ca02c\">— allocated</span> ";
    }
    line(
        runs[i].timeline, [](const TimelinePoint& p) { return p.reserved; }, c, "");
    legend += fmt::format("<span style=\"color:{}\">— reserved ({})</span> ", c, esc(label));
    for (const auto& o : runs[i].ooms)
      fmt::format_to(
          out, "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"10\" y2=\"{1}\" stroke=\"{2}\" stroke-dasharray=\"2,2\"/>\n",
          X(o.event_index), H - B, c);
  }
  fmt::format_to(out, "</svg><p>{} (dotted verticals: OOMs)</p>\n", legend);
  // Table.
  fmt::format_to(out,
                 "<table><tr><th>policy</th><th>result</th><th>OOMs</th><th>peak requested</th><th>peak allocated</th>"
                 "<th>peak reserved</th><th>fragmentation at peak</th><th>max</th></tr>\n");
  for (const auto& r : runs)
    fmt::format_to(
        out,
        "<tr><td style=\"text-align:left\">{}</td><td "
        "class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}%</td><td>{:.1f}%</td></tr>\n",
        esc(r.label.empty() ? r.policy_name : r.label), r.completed ? "" : "oom", r.completed ? "ok" : "OOM",
        r.ooms.size(), human_bytes(r.peak_requested), human_bytes(r.peak_allocated), human_bytes(r.peak_reserved),
        100 * r.frag_at_peak, 100 * r.frag_max);
  fmt::format_to(out, "</table>\n");
  for (const auto& r : runs) {
    if (r.ooms.empty()) continue;
    fmt::format_to(out, "<h3 class=\"oom\">{}: first OOM</h3><pre>", esc(r.label.empty() ? r.policy_name : r.label));
    const auto& o = r.ooms.front();
    fmt::format_to(out, "event {} (id {}): requested {}, free {}, largest free {} → {}\n{}", o.event_index, o.id,
                   human_bytes(o.requested), human_bytes(o.free), human_bytes(o.largest_free),
                   o.fragmentation ? "fragmentation" : "capacity", esc(o.explanation));
    fmt::format_to(out, "</pre>\n");
  }
  fmt::format_to(out, "</body></html>\n");
  return h;
}

}  // namespace fragsim

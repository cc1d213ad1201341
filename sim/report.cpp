#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace fragsim {

namespace {

nlohmann::json oom_json(const OomRecord& o) {
  nlohmann::json j = {{"event_index", o.event_index},
                      {"t", o.t},
                      {"id", o.id},
                      {"device", o.device},
                      {"space", space_name(o.space)},
                      {"requested_bytes", o.requested},
                      {"rounded_bytes", o.rounded},
                      {"allocated_bytes", o.allocated},
                      {"reserved_bytes", o.reserved},
                      {"free_bytes", o.free},
                      {"largest_free_bytes", o.largest_free},
                      {"cause", o.fragmentation ? "fragmentation" : "capacity"}};
  if (!o.kind.empty()) j["kind"] = o.kind;
  return j;
}

nlohmann::json ooms_json(const std::vector<OomRecord>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& o : v) a.push_back(oom_json(o));
  return a;
}

std::string pct(double f) { return fmt::format("{:.1f}%", 100.0 * f); }

// "reproduced 3025/3025 recorded allocation addresses, 22/22 segment sizes, 17/17 segment releases,
// 1/1 OOMs": what a recording let the run check itself against.
std::string fidelity_text(const nlohmann::json& f) {
  auto n = [&](const char* k) { return f.value(k, std::uint64_t{0}); };
  std::string s = fmt::format("reproduced {}/{} recorded allocation addresses, {}/{} segment sizes", n("allocs_matched"),
                              n("allocs_compared"), n("segments_matched"), n("segments_compared"));
  if (f.contains("segment_frees_compared"))
    s += fmt::format(", {}/{} segment releases", n("segment_frees_matched"), n("segment_frees_compared"));
  if (f.contains("ooms_recorded")) s += fmt::format(", {}/{} OOMs", n("ooms_reproduced"), n("ooms_recorded"));
  return s;
}

}  // namespace

nlohmann::json report_json(const RunResult& r) {
  nlohmann::json devices = nlohmann::json::array();
  std::uint64_t da = 0, df = 0;
  double time_ns = 0;
  for (const auto& s : r.spaces) {
    nlohmann::json d = {
        {"device", s.device},
        {"space", space_name(s.space)},
        {"completed", s.ooms.empty()},
        {"oom_count", s.ooms.size()},
        {"ooms", ooms_json(s.ooms)},
        {"peak_requested_bytes", s.peak_requested},
        {"peak_allocated_bytes", s.peak_allocated},
        {"peak_reserved_bytes", s.peak_reserved},
        {"final_allocated_bytes", s.final_allocated},
        {"final_reserved_bytes", s.final_reserved},
        {"fragmentation", {{"at_peak_reserved", s.frag_at_peak}, {"max", s.frag_max}}},
        {"device_calls", {{"alloc", s.device_allocs}, {"free", s.device_frees}, {"failed", s.device_failed}}},
        {"device_time_ns", s.device_time_ns},
        {"policy_stats", s.stats}};
    for (auto it = s.extra.begin(); it != s.extra.end(); ++it) d[it.key()] = it.value();
    da += s.device_allocs;
    df += s.device_frees;
    time_ns += s.device_time_ns;
    devices.push_back(std::move(d));
  }
  nlohmann::json trace = {{"path", r.trace_path},
                          {"events", r.events},
                          {"allocs", r.allocs},
                          {"frees", r.frees},
                          {"header", r.header.is_null() ? nlohmann::json::object() : r.header}};
  if (r.skipped_frees) trace["skipped_frees"] = r.skipped_frees;
  if (!r.trace_digest.empty()) trace["digest"] = r.trace_digest;
  nlohmann::json j = {{"fragsim_report", 1},
                      {"trace", trace},
                      {"policy", {{"name", r.policy_name}, {"config", r.policy_config}}},
                      {"hardware", r.hardware},
                      {"completed", r.completed},
                      {"oom_count", r.ooms.size()},
                      {"ooms", ooms_json(r.ooms)},
                      {"peak_requested_bytes", r.peak_requested},
                      {"peak_allocated_bytes", r.peak_allocated},
                      {"peak_reserved_bytes", r.peak_reserved},
                      {"fragmentation", {{"at_peak_reserved", r.frag_at_peak}, {"max", r.frag_max}}},
                      {"device_calls", {{"alloc", da}, {"free", df}}},
                      {"device_time_ns", time_ns},
                      {"devices", devices}};
  if (r.spaces.size() == 1) {
    j["policy_stats"] = r.spaces[0].stats;
    for (auto it = r.spaces[0].extra.begin(); it != r.spaces[0].extra.end(); ++it) j[it.key()] = it.value();
  }
  if (!r.label.empty()) j["label"] = r.label;
  if (r.empty_cache_calls) j["empty_cache"] = {{"calls", r.empty_cache_calls}, {"effect", r.empty_cache_effect}};
  if (!r.fidelity.is_null()) j["fidelity"] = r.fidelity;
  if (r.stopped_early) j["stopped_early"] = true;
  if (!r.fatal.empty()) j["fatal"] = {{"event_index", r.fatal_event}, {"message", r.fatal}};
  if (!r.notes.empty()) j["notes"] = r.notes;
  return j;
}

std::string report_text(const RunResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "fragsim: {} — policy {} on {}\n", r.trace_path, r.policy_name,
                 r.hardware.value("name", std::string("?")));
  for (const auto& n : r.notes) fmt::format_to(out, "  note: {}\n", n);
  fmt::format_to(out, "  events {}  allocs {}  frees {}{}\n", r.events, r.allocs, r.frees,
                 r.skipped_frees ? fmt::format("  (skipped {} frees of unknown ids)", r.skipped_frees) : "");
  fmt::format_to(out, "  result: {}\n",
                 r.completed ? "completed, no OOM"
                             : fmt::format("{} OOM{}{}", r.ooms.size(), r.ooms.size() == 1 ? "" : "s",
                                           r.stopped_early ? " (stopped at the first; --keep-going lists all)" : ""));
  if (r.empty_cache_calls)
    fmt::format_to(out, "  empty_cache: the program called it {} time{}; the last one: {}\n", r.empty_cache_calls,
                   r.empty_cache_calls == 1 ? "" : "s", r.empty_cache_effect);
  if (!r.fatal.empty())
    fmt::format_to(out, "  ABORTED at event {}: {} (the real allocator stops the process here)\n", r.fatal_event,
                   r.fatal);
  fmt::format_to(out, "  peak requested  {:>14}  ({} B)\n", human_bytes(r.peak_requested), r.peak_requested);
  fmt::format_to(out, "  peak allocated  {:>14}  ({} B)\n", human_bytes(r.peak_allocated), r.peak_allocated);
  fmt::format_to(out, "  peak reserved   {:>14}  ({} B)\n", human_bytes(r.peak_reserved), r.peak_reserved);
  fmt::format_to(out, "  fragmentation   {} at peak reserved, {} max\n", pct(r.frag_at_peak), pct(r.frag_max));
  for (const auto& sp : r.spaces) {
    if (r.spaces.size() > 1)
      fmt::format_to(out, "  device {} {}: peak allocated {}, reserved {}, frag max {}, {} OOMs\n", sp.device,
                     space_name(sp.space), human_bytes(sp.peak_allocated), human_bytes(sp.peak_reserved),
                     pct(sp.frag_max), sp.ooms.size());
    if (sp.device_allocs || sp.device_frees)
      fmt::format_to(out, "  device calls (device {} {}): {} alloc, {} free, simulated {:.3f} ms\n", sp.device,
                     space_name(sp.space), sp.device_allocs, sp.device_frees, sp.device_time_ns / 1e6);
  }
  if (!r.fidelity.is_null()) {
    fmt::format_to(out, "  fidelity: {}\n", fidelity_text(r.fidelity));
    if (!r.fidelity["first_mismatch"].is_null())
      fmt::format_to(out, "  first mismatch: {}\n", r.fidelity["first_mismatch"].dump());
  }
  size_t shown = 0;
  for (const auto& o : r.ooms) {
    if (shown++ == 10) {
      fmt::format_to(out, "  ... {} more OOMs in the JSON report\n", r.ooms.size() - 10);
      break;
    }
    fmt::format_to(
        out,
        "  OOM at event {} (t={}, id {}, device {} {}): requested {} (rounded {}); allocated {}, reserved "
        "{}, free {}, largest free {} -> {}\n",
        o.event_index, o.t, o.id, o.device, space_name(o.space), human_bytes(o.requested), human_bytes(o.rounded),
        human_bytes(o.allocated), human_bytes(o.reserved), human_bytes(o.free), human_bytes(o.largest_free),
        o.fragmentation ? "FRAGMENTATION (enough memory is free, no hole fits)" : "CAPACITY (not enough free memory)");
    if (!o.explanation.empty()) s += o.explanation;
  }
  return s;
}

std::string compare_table(const std::vector<RunResult>& runs) {
  std::string s;
  auto out = std::back_inserter(s);
  if (!runs.empty())
    fmt::format_to(out, "trace {} on {}: {} events, peak requested {}\n", runs[0].trace_path,
                   runs[0].hardware.value("name", std::string("?")), runs[0].events,
                   human_bytes(runs[0].peak_requested));
  size_t w = 16;
  for (const auto& r : runs) w = std::max(w, (r.label.empty() ? r.policy_name : r.label).size());
  fmt::format_to(out, "{:<{}} {:>9} {:>7} {:>14} {:>14} {:>10} {:>10} {:>12} {:>10}\n", "policy", w, "result", "OOMs",
                 "peak alloc", "peak reserved", "frag@peak", "frag max", "device calls", "call ms");
  for (const auto& r : runs) {
    std::uint64_t calls = 0;
    double ns = 0;
    for (const auto& sp : r.spaces) calls += sp.device_allocs + sp.device_frees, ns += sp.device_time_ns;
    fmt::format_to(out, "{:<{}} {:>9} {:>7} {:>14} {:>14} {:>10} {:>10} {:>12} {:>10.2f}\n",
                   r.label.empty() ? r.policy_name : r.label, w, r.completed ? "ok" : "OOM", r.ooms.size(),
                   human_bytes(r.peak_allocated), human_bytes(r.peak_reserved), pct(r.frag_at_peak), pct(r.frag_max),
                   calls, ns / 1e6);
  }
  for (const auto& r : runs)
    if (!r.fidelity.is_null())
      fmt::format_to(out, "{}: {}\n", r.label.empty() ? r.policy_name : r.label, fidelity_text(r.fidelity));
  return s;
}

}  // namespace fragsim

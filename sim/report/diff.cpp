#include "sim/report/diff.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "policies/policy.h"
#include "policies/torch_alloc_config.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "sim/base/units.h"
#include "sim/report/report.h"
#include "sim/report/report_schema.h"

namespace fragsim {

namespace {

using J = nlohmann::json;

std::uint64_t u(const J& j, const char* k) { return j.is_object() ? j.value(k, std::uint64_t{0}) : 0; }
double f(const J& j, const char* k) {
  return j.is_object() && j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0;
}
// b - a, held to int64's range: reports are inputs too, and a byte count past 2^63 (a hand-made or
// damaged report) must not overflow the subtraction (UBSan: the Python fuzzer's reports did).
std::int64_t delta(std::uint64_t a, std::uint64_t b) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (b >= a) return static_cast<std::int64_t>(std::min(b - a, kMax));
  const std::uint64_t down = a - b;
  return down > kMax ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(down);
}

std::string change_pct(std::uint64_t a, std::uint64_t b) {
  if (!a) return b ? "new" : "0%";
  return signed_percent(100.0 * (static_cast<double>(b) - static_cast<double>(a)) / static_cast<double>(a), 1);
}

// The moment a report calls its peak: the binding space's (the top level's at_peak_allocated).
const J& peak_moment(const J& r) {
  static const J none = J::object();
  return r.contains("at_peak_allocated") ? r["at_peak_allocated"] : none;
}

J run_summary(const DiffInput& in) {
  const J& r = in.report;
  const J& p = peak_moment(r);
  J s = {{"name", in.name},
         {"trace", r["trace"].value("path", std::string())},
         {"digest", r["trace"].value("digest", std::string())},
         {"policy", r["policy"].value("name", std::string())},
         {"config", r["policy"].value("config", J::object())},
         {"hardware", r["hardware"].value("name", std::string())},
         {"events", u(r["trace"], "events")},
         {"completed", r.value("completed", false)},
         {"oom_count", u(r, "oom_count")},
         {"peak_requested_bytes", u(r, "peak_requested_bytes")},
         {"peak_allocated_bytes", u(r, "peak_allocated_bytes")},
         {"peak_reserved_bytes", u(r, "peak_reserved_bytes")},
         {"peak_event", p.is_object() && p.contains("event_index") ? p["event_index"] : J()},
         {"peak_t", p.is_object() && p.contains("t") ? p["t"] : J()}};
  if (r.contains("binding")) s["binding"] = r["binding"];
  if (r.contains("label")) s["label"] = r["label"];
  if (r.contains("fatal")) s["fatal"] = r["fatal"];  // the allocator aborted the process
  return s;
}

J device_figures(const J& d) {
  const J& fr = d["fragmentation"];
  J j = {{"peak_requested_bytes", u(d, "peak_requested_bytes")},
         {"peak_allocated_bytes", u(d, "peak_allocated_bytes")},
         {"peak_reserved_bytes", u(d, "peak_reserved_bytes")},
         {"usable_bytes", u(d, "usable_bytes")},
         {"reserved_unallocated_bytes", u(fr["at_peak_allocated"], "reserved_unallocated_bytes")},
         {"external_fragmentation", f(fr["at_peak_allocated"], "external")},
         {"fragmentation_max", f(fr, "max")},
         {"oom_count", u(d, "oom_count")}};
  // Its allocations after the run stopped (another device's OOM or abort), never replayed.
  if (u(d, "allocs_not_replayed")) j["allocs_not_replayed"] = u(d, "allocs_not_replayed");
  // Its own first OOM, and where its process stopped (a set's ranks stop alone).
  if (d.contains("ooms") && d["ooms"].is_array() && !d["ooms"].empty())
    j["first_oom_event"] = u(d["ooms"][0], "event_index");
  if (d.contains("stopped_at_event")) j["stopped_at_event"] = u(d, "stopped_at_event");
  if (d.contains("at_peak_allocated")) j["peak_event"] = d["at_peak_allocated"]["event_index"];
  // The waste split (report "waste"): the best static plan and what the allocator held beyond it.
  if (d.contains("waste") && d["waste"].contains("plan_bytes")) {
    j["plan_bytes"] = u(d["waste"], "plan_bytes");
    j["fragmentation_bytes"] = u(d["waste"], "fragmentation_bytes");
  }
  return j;
}

J devices(const J& a, const J& b) {
  std::map<std::pair<std::uint64_t, std::string>, std::pair<J, J>> by;
  for (const auto& d : a["devices"]) by[{u(d, "device"), d.value("space", "")}].first = device_figures(d);
  for (const auto& d : b["devices"]) by[{u(d, "device"), d.value("space", "")}].second = device_figures(d);
  std::map<std::uint64_t, std::string> names;
  for (const J* r : {&a, &b})
    for (const auto& d : (*r)["devices"])
      if (d.contains("name") && d["name"].is_string()) names.emplace(u(d, "device"), d["name"].get<std::string>());
  // A single-space report keeps its peak moment at the top level.
  for (auto& [k, v] : by) {
    if (a["devices"].size() == 1 && v.first.is_object() && peak_moment(a).contains("event_index"))
      v.first["peak_event"] = peak_moment(a)["event_index"];
    if (b["devices"].size() == 1 && v.second.is_object() && peak_moment(b).contains("event_index"))
      v.second["peak_event"] = peak_moment(b)["event_index"];
  }
  J out = J::array();
  for (const auto& [k, v] : by) {
    J row = {{"device", k.first}, {"space", k.second}, {"a", v.first}, {"b", v.second}};
    if (auto n = names.find(k.first); n != names.end()) row["name"] = n->second;  // a set's "rank 1", "nodeB:0"
    if (v.first.is_object() && v.second.is_object())
      row["change"] = {
          {"peak_allocated_bytes", delta(u(v.first, "peak_allocated_bytes"), u(v.second, "peak_allocated_bytes"))},
          {"peak_reserved_bytes", delta(u(v.first, "peak_reserved_bytes"), u(v.second, "peak_reserved_bytes"))},
          {"reserved_unallocated_bytes",
           delta(u(v.first, "reserved_unallocated_bytes"), u(v.second, "reserved_unallocated_bytes"))},
          {"external_fragmentation", f(v.second, "external_fragmentation") - f(v.first, "external_fragmentation")},
          {"oom_count", delta(u(v.first, "oom_count"), u(v.second, "oom_count"))}};
    if (row.contains("change") && (v.first.contains("allocs_not_replayed") || v.second.contains("allocs_not_replayed")))
      row["change"]["allocs_not_replayed"] =
          delta(u(v.first, "allocs_not_replayed"), u(v.second, "allocs_not_replayed"));
    if (row.contains("change") && v.first.contains("fragmentation_bytes") && v.second.contains("fragmentation_bytes"))
      row["change"]["fragmentation_bytes"] =
          delta(u(v.first, "fragmentation_bytes"), u(v.second, "fragmentation_bytes"));
    out.push_back(std::move(row));
  }
  return out;
}

// "device 1 (rank 1) hbm": a row of devices() as the text names it.
std::string device_words(const J& row) {
  return fmt::format("device {}{} {}", u(row, "device"),
                     row.contains("name") ? " (" + row["name"].get<std::string>() + ")" : std::string(),
                     row["space"].get<std::string>());
}

// ", before the recording's first event: ..." for a first OOM of the memory live before the
// recording (prior_oom_words, as run and check say it), "" otherwise.
std::string prior_suffix(const J& oom) {
  const std::string w = prior_oom_words_of(oom);
  return w.empty() ? w : ", " + w;
}

J first_oom(const J& a, const J& b) {
  auto of = [](const J& r) -> J {
    if (!r.contains("ooms") || r["ooms"].empty()) return nullptr;
    const J& o = r["ooms"][0];
    J j = {{"event_index", o["event_index"]},
           {"t", o.value("t", J())},
           {"device", o["device"]},
           {"space", o["space"]},
           {"requested_bytes", o["requested_bytes"]},
           {"cause", o.value("cause", "")}};
    if (o.contains("request") && o["request"].contains("name")) j["request"] = o["request"]["name"];
    if (o.contains("before_recording")) j["before_recording"] = o["before_recording"];
    return j;
  };
  J fa = of(a), fb = of(b);
  std::string change = fa.is_null() && fb.is_null()                  ? "none"
                       : fa.is_null()                                ? "new in B"
                       : fb.is_null()                                ? "gone in B"
                       : u(fb, "event_index") < u(fa, "event_index") ? "earlier in B"
                       : u(fb, "event_index") > u(fa, "event_index") ? "later in B"
                                                                     : "same event";
  return {{"a", fa}, {"b", fb}, {"change", change}};
}

// Rows of two by_stack tables (key: `key`) side by side, the largest change first.
J side_by_side(const J& a, const J& b, const char* list, const char* key, size_t n) {
  std::map<std::string, std::pair<J, J>> by;
  if (a.is_object() && a.contains(list))
    for (const auto& r : a[list]) by[r.value(key, "")].first = r;
  if (b.is_object() && b.contains(list))
    for (const auto& r : b[list]) by[r.value(key, "")].second = r;
  J rows = J::array();
  for (const auto& [k, v] : by) {
    std::uint64_t ab = u(v.first, "bytes"), bb = u(v.second, "bytes");
    std::string change = v.first.is_null()    ? "added"
                         : v.second.is_null() ? "removed"
                         : bb > ab            ? "grown"
                         : bb < ab            ? "shrunk"
                                              : "same";
    rows.push_back({{key, k},
                    {"a_bytes", ab},
                    {"b_bytes", bb},
                    {"change_bytes", delta(ab, bb)},
                    {"a_buffers", u(v.first, "buffers")},
                    {"b_buffers", u(v.second, "buffers")},
                    {"change", change}});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const J& x, const J& y) {
    return std::llabs(x["change_bytes"].get<std::int64_t>()) > std::llabs(y["change_bytes"].get<std::int64_t>());
  });
  if (rows.size() > n) rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(n), rows.end());
  return rows;
}

J attribution(const J& ma, const J& mb) {
  const J none = J::object();
  const J& ba = ma.contains("by_stack") ? ma["by_stack"] : none;
  const J& bb = mb.contains("by_stack") ? mb["by_stack"] : none;
  return {{"a_event", ma.value("event_index", J())},
          {"b_event", mb.value("event_index", J())},
          {"a_t", ma.value("t", J())},
          {"b_t", mb.value("t", J())},
          {"a_live_bytes", u(ba, "live_bytes")},
          {"b_live_bytes", u(bb, "live_bytes")},
          {"change_bytes", delta(u(ba, "live_bytes"), u(bb, "live_bytes"))},
          {"a_buffers", u(ba, "buffers")},
          {"b_buffers", u(bb, "buffers")},
          {"sites", side_by_side(ba, bb, "sites", "site", 30)},
          {"frames", side_by_side(ba, bb, "frames", "frame", 30)}};
}

// How a buffer is recognised in the other run: its name, shape and frame; within one trace also
// its id and the time it was allocated at (an id may be reused after its free). Not its event: a
// block live before a mid-run recording is held at one event when a run re-holds that state, at
// its own when the run keeps it as recorded. Across traces an id and a time name different things,
// so buffers with nothing to tell them apart (unnamed ones, or several of one name) are one key,
// paired largest with largest (buffers()).
std::string buffer_key(const J& b, bool same_trace) {
  std::string k = b.value("name", "") + "|" + (b.contains("shape") ? dump_json(b["shape"]) : "") + "|" +
                  b.value("dtype", "") + "|" + b.value("frame", "");
  if (same_trace)
    k += "|id " + std::to_string(u(b, "id")) + "@" +
         (b.contains("t") ? "t " + dump_json(b["t"]) : std::to_string(u(b, "event_index")));
  return k;
}

// A report lists only the largest live buffers at a moment (top_buffers): a buffer missing from
// one list was not live there only when that list holds every live buffer, or when the buffer is
// larger than the smallest one listed (it would have been listed). Otherwise nothing is said of it.
J buffers(const J& ma, const J& mb, bool same_trace) {
  std::map<std::string, std::vector<J>> in_a, in_b;
  if (ma.contains("top_buffers"))
    for (const auto& b : ma["top_buffers"]) in_a[buffer_key(b, same_trace)].push_back(b);
  if (mb.contains("top_buffers"))
    for (const auto& b : mb["top_buffers"]) in_b[buffer_key(b, same_trace)].push_back(b);
  for (auto* side : {&in_a, &in_b})  // buffers of one key pair in order of size, whatever order the lists have
    for (auto& [k, bs] : *side)
      std::stable_sort(bs.begin(), bs.end(),
                       [](const J& x, const J& y) { return u(x, "block_bytes") > u(y, "block_bytes"); });
  // Block sizes a list vouches for: every live buffer larger than this is in it (0: all are).
  auto vouches_above = [](const J& m) -> std::uint64_t {
    if (!m.contains("top_buffers") || m["top_buffers"].size() >= u(m, "live_buffers")) return 0;
    std::uint64_t least = UINT64_MAX;
    for (const auto& b : m["top_buffers"]) least = std::min(least, u(b, "block_bytes"));
    return least;
  };
  const std::uint64_t a_above = vouches_above(ma), b_above = vouches_above(mb);
  auto brief = [](const J& b) {
    J j = {{"id", b["id"]},
           {"event_index", b["event_index"]},
           {"block_bytes", b["block_bytes"]},
           {"requested_bytes", b["requested_bytes"]}};
    for (const char* k : {"name", "shape", "dtype", "frame"})
      if (b.contains(k)) j[k] = b[k];
    return j;
  };
  J added = J::array(), removed = J::array(), grown = J::array(), shrunk = J::array();
  std::uint64_t unknown = 0;  // listed in one run, maybe live but unlisted in the other
  // The other run's block for it is another allocator's, but never smaller than its request.
  auto absent = [&](const J& b, std::uint64_t other_above, J& into) {
    if (other_above == 0 || u(b, "requested_bytes") > other_above)
      into.push_back(brief(b));
    else
      ++unknown;
  };
  // Per key: buffers of equal block size pair first (the same buffer, unchanged), then the rest
  // largest with largest (grown or shrunk); what is left on one side was added or removed.
  for (const auto& kv : in_b) in_a[kv.first];
  for (auto& [k, as] : in_a) {
    const std::vector<J>& bs = in_b[k];
    std::vector<const J*> ra, rb;  // unpaired, largest first
    size_t i = 0, j = 0;
    while (i < as.size() || j < bs.size()) {
      const bool has_a = i < as.size(), has_b = j < bs.size();
      const std::uint64_t x = has_a ? u(as[i], "block_bytes") : 0, y = has_b ? u(bs[j], "block_bytes") : 0;
      if (has_a && has_b && x == y) {
        ++i, ++j;
      } else if (has_a && (!has_b || x > y)) {
        ra.push_back(&as[i++]);
      } else {
        rb.push_back(&bs[j++]);
      }
    }
    for (size_t n = 0; n < std::max(ra.size(), rb.size()); ++n) {
      if (n >= ra.size()) {
        absent(*rb[n], a_above, added);
      } else if (n >= rb.size()) {
        absent(*ra[n], b_above, removed);
      } else {
        const std::uint64_t x = u(*ra[n], "block_bytes"), y = u(*rb[n], "block_bytes");
        J j2 = brief(*rb[n]);
        j2["a_block_bytes"] = x;
        (y > x ? grown : shrunk).push_back(std::move(j2));
      }
    }
  }
  for (J* list : {&added, &removed, &grown, &shrunk})  // largest first
    std::stable_sort(list->begin(), list->end(),
                     [](const J& x, const J& y) { return u(x, "block_bytes") > u(y, "block_bytes"); });
  return {{"added", added},
          {"removed", removed},
          {"grown", grown},
          {"shrunk", shrunk},
          {"unknown", unknown},
          {"unknown_note", unknown ? fmt::format("{} buffer(s) listed at one peak only, no larger than the other "
                                                 "report's listed ones: they may be live there too (reports list "
                                                 "the largest 20)",
                                                 unknown)
                                   : std::string()},
          {"note",
           "among the largest live buffers at each run's peak (the reports' top_buffers); a buffer one list "
           "has and the other lacks is added or removed only when the other list would have held it"}};
}

}  // namespace

std::vector<SettingDifference> setting_differences(const J& a, const J& b) {
  const std::string prefix = kResolvedPrefix;
  auto is_resolved = [&](const std::string& k) { return k.rfind(prefix, 0) == 0; };
  // A setting and the resolved figure that carries its value: one name starts with the other.
  auto carries = [&](const std::string& resolved, const std::string& setting) {
    const std::string stem = resolved.substr(prefix.size());
    return setting.rfind(stem, 0) == 0 || stem.rfind(setting, 0) == 0;
  };
  const J none = J::object();
  const J& ca = a.is_object() ? a : none;
  const J& cb = b.is_object() ? b : none;
  std::set<std::string> keys;
  for (const auto& [k, v] : ca.items()) keys.insert(k);
  for (const auto& [k, v] : cb.items()) keys.insert(k);
  auto value = [](const J& c, const std::string& k) { return c.contains(k) ? c[k] : J(); };
  std::vector<std::string> equal_resolved, differing_resolved;
  for (const auto& k : keys)
    if (is_resolved(k) && ca.contains(k) && cb.contains(k))
      (ca[k] == cb[k] ? equal_resolved : differing_resolved).push_back(k);
  std::vector<SettingDifference> out;
  for (const auto& k : keys) {
    if (is_resolved(k) || value(ca, k) == value(cb, k)) continue;
    const bool spelled = std::any_of(equal_resolved.begin(), equal_resolved.end(),
                                     [&](const std::string& r) { return carries(r, k); }) ||
                         (k == kRecordedSettingsKey && !equal_resolved.empty() && differing_resolved.empty());
    if (!spelled) out.push_back({k, value(ca, k), value(cb, k), false});
  }
  for (const auto& r : differing_resolved)
    if (std::none_of(out.begin(), out.end(), [&](const SettingDifference& d) { return carries(r, d.key); }))
      out.push_back({r.substr(prefix.size()), ca[r], cb[r], true});
  // A configuration read from one whole variable (PyTorch's PYTORCH_CUDA_ALLOC_CONF) that differs is
  // shown as that variable's text in force, in place of the keys it states (however each run was
  // given them: --set, --env, the recording) and their resolved figures.
  const std::string resolved_conf = kResolvedAllocConfKey;
  if (std::find(differing_resolved.begin(), differing_resolved.end(), resolved_conf) != differing_resolved.end() &&
      ca[resolved_conf].is_string() && cb[resolved_conf].is_string()) {
    std::set<std::string> stated = {resolved_conf.substr(prefix.size()), kRecordedSettingsKey};
    for (const J* c : {&ca[resolved_conf], &cb[resolved_conf]})
      for (const auto& part : torch::conf_parts(c->get<std::string>())) stated.insert(torch::conf_key(part));
    auto is_stated = [&](const SettingDifference& d) {
      return stated.count(d.key) || (d.resolved && std::any_of(stated.begin(), stated.end(), [&](const std::string& k) {
                                       return carries(prefix + d.key, k);
                                     }));
    };
    std::erase_if(out, is_stated);
    out.insert(out.begin(),
               {std::string(kAllocConfVariable) + " in force", ca[resolved_conf], cb[resolved_conf], false});
  }
  return out;
}

J pick_report(const J& j, const std::string& label, const std::string& file) {
  const std::vector<LabelledRun> runs = labelled_runs(j, file);
  if (!j.is_array() && !j.contains("fragsim_batch")) {
    if (!label.empty() && runs[0].label != label && j["policy"].value("name", "") != label)
      throw InputError(fmt::format("{}: --label {}: the report is of run '{}'", file, label, runs[0].label));
    return j;
  }
  std::vector<std::string> labels;
  for (const auto& r : runs) {
    labels.push_back(r.label);
    if (!label.empty() && r.label == label) return *r.report;
  }
  if (label.empty() && runs.size() == 1) return *runs[0].report;
  throw InputError(
      fmt::format("{}: {}: a file of several runs (compare --json, batch); pick one with --label (its "
                  "runs: {})",
                  file, label.empty() ? "several runs" : "no run labelled '" + label + "'", fmt::join(labels, ", ")));
}

std::pair<std::string, std::string> report_names(const J& a, const J& b) {
  auto name = [](const J& r, bool hw) {
    std::string path = r.contains("trace") ? r["trace"].value("path", std::string()) : std::string();
    std::string n = path.substr(path.find_last_of('/') + 1);
    std::string policy = r.value("label", r.contains("policy") ? r["policy"].value("name", std::string()) : "");
    if (!policy.empty()) n += (n.empty() ? "" : ", ") + policy;
    if (hw && r.contains("hardware")) {
      const J& h = r["hardware"];
      n += ", on " + h.value("name", std::string("?"));
      if (h.contains("spaces") && h["spaces"].is_array() && !h["spaces"].empty())
        n += " " + human_bytes(h["spaces"][0].value("capacity_bytes", Bytes{0}));
    }
    return n;
  };
  std::pair<std::string, std::string> n{name(a, false), name(b, false)};
  if (n.first == n.second) n = {name(a, true), name(b, true)};
  if (n.first == n.second) n = {n.first + " (a)", n.second + " (b)"};
  return n;
}

J diff_reports(const DiffInput& a, const DiffInput& b) {
  check_report_schema(a.report, a.name);
  check_report_schema(b.report, b.name);
  const J& ra = a.report;
  const J& rb = b.report;
  J sa = run_summary(a), sb = run_summary(b);
  const bool same_trace = !sa["digest"].get<std::string>().empty() && sa["digest"] == sb["digest"];
  J d = {{"fragsim_diff", 1},
         {"a", sa},
         {"b", sb},
         {"same_trace", same_trace},
         {"devices", devices(ra, rb)},
         {"first_oom", first_oom(ra, rb)},
         {"at_peak", attribution(peak_moment(ra), peak_moment(rb))},
         {"buffers", buffers(peak_moment(ra), peak_moment(rb), same_trace)}};
  if (!ra["ooms"].empty() && !rb["ooms"].empty() && ra["ooms"][0].contains("at_oom") &&
      rb["ooms"][0].contains("at_oom"))
    d["at_first_oom"] = attribution(ra["ooms"][0]["at_oom"], rb["ooms"][0]["at_oom"]);
  // The headline: what differs in how the runs were set up, then what changed the peak and the
  // first OOM, in a few lines.
  J head = J::array();
  std::vector<std::string> setup;
  if (sa["policy"] != sb["policy"])
    setup.push_back(fmt::format("policy {} -> {}", sa["policy"].get<std::string>(), sb["policy"].get<std::string>()));
  if (sa["hardware"] != sb["hardware"])
    setup.push_back(
        fmt::format("hardware {} -> {}", sa["hardware"].get<std::string>(), sb["hardware"].get<std::string>()));
  if (sa["policy"] == sb["policy"])
    for (const auto& s : setting_differences(sa["config"], sb["config"]))
      setup.push_back(
          fmt::format("{}{} {} -> {}", s.key, s.resolved ? " (resolved)" : "", dump_json(s.a), dump_json(s.b)));
  for (const auto& row : d["devices"])
    if (row["a"].is_object() && row["b"].is_object() && row["a"]["usable_bytes"] != row["b"]["usable_bytes"]) {
      const auto [a, b] = human_bytes_apart(u(row["a"], "usable_bytes"), u(row["b"], "usable_bytes"));
      setup.push_back(
          fmt::format("device {} {} usable memory {} -> {}", u(row, "device"), row["space"].get<std::string>(), a, b));
    }
  if (!setup.empty()) head.push_back(fmt::format("set up differently: {}", fmt::join(setup, "; ")));
  for (const char* k : {"peak_allocated_bytes", "peak_reserved_bytes"}) {
    std::uint64_t x = u(sa, k), y = u(sb, k);
    std::string what = std::string(k) == "peak_allocated_bytes" ? "peak allocated" : "peak reserved";
    head.push_back(x == y ? fmt::format("{}: unchanged, {}", what, human_bytes(x))
                          : fmt::format("{} {} by {} ({}): {} -> {}", what, y > x ? "grew" : "shrank",
                                        human_bytes(static_cast<Bytes>(std::llabs(delta(x, y)))), change_pct(x, y),
                                        human_bytes(x), human_bytes(y)));
  }
  const J& fo = d["first_oom"];
  std::string change = fo["change"];
  // "completes" only for a run with no OOM and no abort (a run can end in its allocator's abort).
  if (change == "new in B")
    head.push_back(fmt::format("B runs out of memory at event {} ({} {} on device {} {}){}; A {}",
                               u(fo["b"], "event_index"), human_bytes(u(fo["b"], "requested_bytes")),
                               fo["b"].value("cause", ""), u(fo["b"], "device"), fo["b"].value("space", ""),
                               prior_suffix(fo["b"]), sa.value("completed", false) ? "completed" : "had no OOM"));
  else if (change == "gone in B")
    head.push_back(fmt::format("B {}; A ran out of memory at event {}",
                               sb.value("completed", false) ? "completes" : "has no OOM", u(fo["a"], "event_index")));
  else if (change != "none")
    head.push_back(fmt::format("first OOM: event {} in A, {} in B ({})", u(fo["a"], "event_index"),
                               u(fo["b"], "event_index"), change));
  for (const auto& [run, s] : {std::pair<const char*, const J*>{"A", &sa}, {"B", &sb}})
    if (s->contains("fatal"))
      head.push_back(fmt::format("{} aborted at event {}: {} (the real allocator stops the process there)", run,
                                 u((*s)["fatal"], "event_index"), (*s)["fatal"].value("message", "")));
  // Each device's own first OOM, where several devices differ in it (a set's ranks stop alone: rank
  // 2's OOM may move while the run's first, rank 0's, stays).
  if (d["devices"].size() > 1)
    for (const auto& row : d["devices"]) {
      if (!row["a"].is_object() || !row["b"].is_object()) continue;
      const bool ha = row["a"].contains("first_oom_event"), hb = row["b"].contains("first_oom_event");
      if (!ha && !hb) continue;
      const std::uint64_t ea = ha ? u(row["a"], "first_oom_event") : 0, eb = hb ? u(row["b"], "first_oom_event") : 0;
      if (ha && hb && ea == eb) continue;
      const std::string where = device_words(row);
      head.push_back(!ha   ? fmt::format("{}: B runs out of memory at event {}; A had no OOM there", where, eb)
                     : !hb ? fmt::format("{}: no OOM in B; A ran out of memory at event {}", where, ea)
                           : fmt::format("{}: first OOM at event {} in A, {} in B ({} in B)", where, ea, eb,
                                         eb < ea ? "earlier" : "later"));
    }
  // A device one run left more of unreplayed (it stopped at another device's OOM or abort) compares
  // figures over fewer events: said, not left to the table (issue 47).
  for (const auto& row : d["devices"]) {
    const std::uint64_t na = u(row["a"], "allocs_not_replayed"), nb = u(row["b"], "allocs_not_replayed");
    if (na == nb) continue;
    const bool b_more = nb > na;
    const J& more = b_more ? sb : sa;
    const std::uint64_t n = b_more ? nb : na, other = b_more ? na : nb;
    // Where it stopped: its first OOM or its abort, whichever came first.
    const J& oom = b_more ? fo["b"] : fo["a"];
    const J& dev = b_more ? row["b"] : row["a"];
    std::optional<std::uint64_t> stop;
    if (dev.is_object() && dev.contains("stopped_at_event"))  // its own process's stop
      stop = u(dev, "stopped_at_event");
    else if (oom.is_object())
      stop = u(oom, "event_index");
    if (more.contains("fatal")) stop = std::min(stop.value_or(UINT64_MAX), u(more["fatal"], "event_index"));
    head.push_back(
        fmt::format("{} left {} allocation{} of {} unreplayed (it stopped{}, before that device's end); {} {}: its "
                    "figures for that device cover fewer events",
                    b_more ? "B" : "A", n, n == 1 ? "" : "s", device_words(row),
                    stop ? fmt::format(" at event {}", *stop) : std::string(), b_more ? "A" : "B",
                    other ? fmt::format("left {}", other) : std::string("replayed them all")));
  }
  const J& sites = d["at_peak"]["sites"];
  if (!sites.empty() && sites[0]["change_bytes"].get<std::int64_t>() != 0) {
    std::string top;
    for (size_t i = 0; i < sites.size() && i < 3; ++i)
      if (sites[i]["change_bytes"].get<std::int64_t>() != 0)
        top += fmt::format("{}{} {}", top.empty() ? "" : "; ", signed_bytes(sites[i]["change_bytes"]),
                           sites[i]["site"].get<std::string>());
    head.push_back(fmt::format("at the peak, live bytes {} ({} -> {}); the largest changes by call site: {}",
                               signed_bytes(d["at_peak"]["change_bytes"]), human_bytes(u(d["at_peak"], "a_live_bytes")),
                               human_bytes(u(d["at_peak"], "b_live_bytes")), top));
  }
  d["headline"] = head;
  return d;
}

namespace {

// A name from a report as the terminal shows it, and as Markdown does (sim/base/text.h).
std::string term(const J& s) { return escape_terminal(s.is_string() ? s.get<std::string>() : std::string()); }
std::string md(const J& s) { return escape_markdown(s.is_string() ? s.get<std::string>() : std::string()); }

// A run's peak moment: "event 2156", or "no peak" for a run that allocated nothing (one whose first
// allocation ran out of memory has no moment to show).
std::string peak_event_text(const J& event) {
  return event.is_null() ? std::string("no peak") : fmt::format("event {}", event.get<std::uint64_t>());
}

// "at event 2156", or why there is none: "no peak (nothing allocated before its first OOM, event 50)".
std::string peak_when(const J& s, const J& first_oom) {
  if (!s["peak_event"].is_null()) return "at " + peak_event_text(s["peak_event"]);
  return first_oom.is_null()
             ? std::string("no peak (nothing allocated)")
             : fmt::format("no peak (nothing allocated before its first OOM, event {})", u(first_oom, "event_index"));
}

// A space's peak reserved as the waste split has it: "plan 8.72 GiB + fragmentation 24.34 MiB" when
// the allocator reserved at least the plan; else what it reserved, which is no such sum (a run that
// stopped at an OOM held less than the plan of the whole trace); "-" when the space was not planned.
std::string waste_split_text(const J& x) {
  if (!x.is_object() || !x.contains("plan_bytes")) return "-";
  const Bytes plan = u(x, "plan_bytes"), reserved = u(x, "peak_reserved_bytes");
  if (reserved >= plan)
    return fmt::format("plan {} + fragmentation {}", human_bytes(plan), human_bytes(u(x, "fragmentation_bytes")));
  return fmt::format("{}, less than the plan {}{}", human_bytes(reserved), human_bytes(plan),
                     u(x, "oom_count") ? ": it stopped at an OOM" : "");
}

std::string site_change_line(const J& r, const char* key) {
  return fmt::format("{:>12}  {:>11} -> {:<11} {:>5} -> {:<5} {:<8} {}", signed_bytes(r["change_bytes"]),
                     human_bytes(u(r, "a_bytes")), human_bytes(u(r, "b_bytes")), u(r, "a_buffers"), u(r, "b_buffers"),
                     r["change"].get<std::string>(), term(r[key]));
}

std::string buffer_text(const J& b) {
  std::string what = escape_terminal(b.value("name", ""));
  if (b.contains("shape")) what += fmt::format(" {}{}", escape_terminal(b.value("dtype", "")), dump_json(b["shape"]));
  // The id and event tell apart buffers of one call site (one may leave a peak as another joins it).
  what += fmt::format("{}id {}, event {}", what.empty() ? "" : "  ", u(b, "id"), u(b, "event_index"));
  std::string was;
  if (b.contains("a_block_bytes")) {
    const Bytes before = u(b, "a_block_bytes"), now = u(b, "block_bytes");
    was = fmt::format(
        " (was {}{})", human_bytes(before),
        human_bytes(before) == human_bytes(now) && before != now ? ", " + signed_bytes(before, now) : std::string());
  }
  return fmt::format("{} {}{}", human_bytes(u(b, "block_bytes")), what, was);
}

}  // namespace

std::string diff_text(const J& d) {
  std::string s;
  auto out = std::back_inserter(s);
  const J &a = d["a"], &b = d["b"];
  fmt::format_to(out, "fragsim diff\n  A: {} — {} on {} ({} events)\n  B: {} — {} on {} ({} events)\n", term(a["name"]),
                 term(a["policy"]), term(a["hardware"]), u(a, "events"), term(b["name"]), term(b["policy"]),
                 term(b["hardware"]), u(b, "events"));
  if (!d["same_trace"].get<bool>())
    fmt::format_to(out, "  (different traces: buffers are matched by name, shape and frame)\n");
  for (const auto& h : d["headline"]) fmt::format_to(out, "  {}\n", term(h));
  fmt::format_to(out, "  peaks: A {}, B {}\n", peak_when(a, d["first_oom"]["a"]), peak_when(b, d["first_oom"]["b"]));
  fmt::format_to(out, "  per device and space (A -> B):\n");
  fmt::format_to(out, "    {:<12} {:>25} {:>25} {:>19} {:>15} {:>9} {:>15}\n", "device", "peak allocated",
                 "peak reserved", "unused at peak", "extfrag at peak", "OOMs", "peak event");
  for (const auto& r : d["devices"]) {
    auto pair = [&](const char* k, bool bytes) {
      auto one = [&](const J& x) {
        return x.is_null() ? std::string("-") : bytes ? human_bytes(u(x, k)) : fmt::format("{:.1f}%", 100.0 * f(x, k));
      };
      return one(r["a"]) + " -> " + one(r["b"]);
    };
    auto evs = [&](const J& x) {
      return x.is_object() && x.contains("peak_event") ? std::to_string(x["peak_event"].get<std::uint64_t>()) : "-";
    };
    fmt::format_to(out, "    {:<12} {:>25} {:>25} {:>19} {:>15} {:>9} {:>15}\n",
                   fmt::format("{} {}", u(r, "device"), r["space"].get<std::string>()),
                   pair("peak_allocated_bytes", true), pair("peak_reserved_bytes", true),
                   pair("reserved_unallocated_bytes", true), pair("external_fragmentation", false),
                   fmt::format("{} -> {}", r["a"].is_null() ? 0 : u(r["a"], "oom_count"),
                               r["b"].is_null() ? 0 : u(r["b"], "oom_count")),
                   evs(r["a"]) + " -> " + evs(r["b"]));
  }
  // The waste split of each space either run planned: peak reserved = best static plan + fragmentation.
  for (const auto& r : d["devices"])
    if ((r["a"].is_object() && r["a"].contains("plan_bytes")) || (r["b"].is_object() && r["b"].contains("plan_bytes")))
      fmt::format_to(out, "    {:<12} peak reserved: {} -> {}\n",
                     fmt::format("{} {}", u(r, "device"), r["space"].get<std::string>()), waste_split_text(r["a"]),
                     waste_split_text(r["b"]));
  const J& fo = d["first_oom"];
  auto oom = [](const J& o) {
    return o.is_null() ? std::string("none")
                       : fmt::format("event {} on device {} {}: {} {}{}{}", u(o, "event_index"), u(o, "device"),
                                     o["space"].get<std::string>(), human_bytes(u(o, "requested_bytes")),
                                     escape_terminal(o.value("cause", "")),
                                     o.contains("request") ? " (" + escape_terminal(o.value("request", "")) + ")" : "",
                                     prior_suffix(o));
  };
  if (fo["change"] == "none")
    fmt::format_to(out, "  first OOM: none in either run\n");
  else
    fmt::format_to(out, "  first OOM: A {}; B {} — {}\n", oom(fo["a"]), oom(fo["b"]), fo["change"].get<std::string>());
  auto attribution_text = [&](const char* title, const J& at) {
    fmt::format_to(out, "  {} (A {}, B {}): live bytes {} -> {} ({})\n", title, peak_event_text(at["a_event"]),
                   peak_event_text(at["b_event"]), human_bytes(u(at, "a_live_bytes")),
                   human_bytes(u(at, "b_live_bytes")), signed_bytes(at["change_bytes"]));
    if (at["sites"].empty()) return;
    fmt::format_to(out, "    by call site (change, bytes A -> B, buffers A -> B):\n");
    for (size_t i = 0; i < at["sites"].size() && i < 12; ++i)
      fmt::format_to(out, "      {}\n", site_change_line(at["sites"][i], "site"));
    if (!at["frames"].empty()) {
      fmt::format_to(out, "    by stack frame:\n");
      for (size_t i = 0; i < at["frames"].size() && i < 8; ++i)
        fmt::format_to(out, "      {}\n", site_change_line(at["frames"][i], "frame"));
    }
  };
  attribution_text("at each run's peak", d["at_peak"]);
  if (d.contains("at_first_oom")) attribution_text("at each run's first OOM", d["at_first_oom"]);
  const J& bs = d["buffers"];
  for (const char* k : {"added", "removed", "grown", "shrunk"}) {
    if (bs[k].empty()) continue;
    fmt::format_to(out, "  among the largest buffers at each peak, {} in B:\n", k);
    for (size_t i = 0; i < bs[k].size() && i < 8; ++i) fmt::format_to(out, "    {}\n", buffer_text(bs[k][i]));
  }
  if (bs.value("unknown", 0) > 0) fmt::format_to(out, "  {}\n", term(bs["unknown_note"]));
  return s;
}

std::string diff_markdown(const J& d) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "### fragsim diff\n\nA: {} ({})  \nB: {} ({})\n\n", md(d["a"]["name"]), md(d["a"]["policy"]),
                 md(d["b"]["name"]), md(d["b"]["policy"]));
  for (const auto& h : d["headline"]) fmt::format_to(out, "- {}\n", md(h));
  fmt::format_to(out, "\n| device | peak allocated A | B | change | peak reserved A | B | change | OOMs A | B |\n");
  fmt::format_to(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : d["devices"]) {
    auto v = [&](const J& x, const char* k) { return x.is_null() ? std::string("-") : human_bytes(u(x, k)); };
    auto c = [&](const char* k) {
      return r.contains("change") ? signed_bytes(r["change"][k].get<std::int64_t>()) : std::string("-");
    };
    fmt::format_to(out, "| {} {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", u(r, "device"),
                   r["space"].get<std::string>(), v(r["a"], "peak_allocated_bytes"), v(r["b"], "peak_allocated_bytes"),
                   c("peak_allocated_bytes"), v(r["a"], "peak_reserved_bytes"), v(r["b"], "peak_reserved_bytes"),
                   c("peak_reserved_bytes"), r["a"].is_null() ? 0 : u(r["a"], "oom_count"),
                   r["b"].is_null() ? 0 : u(r["b"], "oom_count"));
  }
  const J& sites = d["at_peak"]["sites"];
  if (!sites.empty()) {
    fmt::format_to(out, "\nAt each run's peak, by call site:\n\n| change | A | B | buffers A | B | site |\n");
    fmt::format_to(out, "|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < sites.size() && i < 10; ++i) {
      const J& r = sites[i];
      fmt::format_to(out, "| {} | {} | {} | {} | {} | {} |\n", signed_bytes(r["change_bytes"]),
                     human_bytes(u(r, "a_bytes")), human_bytes(u(r, "b_bytes")), u(r, "a_buffers"), u(r, "b_buffers"),
                     md(r["site"]));
    }
  }
  return s;
}

}  // namespace fragsim

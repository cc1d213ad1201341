#include "sim/check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/units.h"
#include "sim/report_schema.h"

namespace fragsim {

namespace {

// The runs of a report file: one object, or the array `compare --json` writes.
std::vector<nlohmann::json> runs_of(const nlohmann::json& j, const std::string& file) {
  std::vector<nlohmann::json> v;
  if (j.is_array()) {
    if (j.empty()) throw InputError(file + ": an empty array holds no report");
    for (size_t i = 0; i < j.size(); ++i) {
      check_report_schema(j[i], fmt::format("{} [{}]", file, i));
      v.push_back(j[i]);
    }
  } else {
    check_report_schema(j, file);
    v.push_back(j);
  }
  return v;
}

std::string label_of(const nlohmann::json& r) {
  if (r.contains("label") && r["label"].is_string()) return r["label"].get<std::string>();
  return r["policy"]["name"].get<std::string>();
}

// What differs between two reports' policies, ignoring `resolved_*` figures (they follow from the
// hardware): "" when nothing does.
std::string policy_difference(const nlohmann::json& a, const nlohmann::json& b) {
  if (a["name"] != b["name"]) return fmt::format("{} vs {}", a["name"].dump(), b["name"].dump());
  std::vector<std::string> keys;
  auto user = [](const nlohmann::json& cfg) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : cfg.items())
      if (k.rfind(kResolvedPrefix, 0) != 0) out[k] = v;
    return out;
  };
  nlohmann::json ua = user(a["config"]), ub = user(b["config"]);
  for (const auto& [k, v] : ua.items())
    if (!ub.contains(k) || ub[k] != v)
      keys.push_back(fmt::format("{}: {} vs {}", k, v.dump(), ub.value(k, nlohmann::json()).dump()));
  for (const auto& [k, v] : ub.items())
    if (!ua.contains(k)) keys.push_back(fmt::format("{}: null vs {}", k, v.dump()));
  return fmt::format("{}", fmt::join(keys, "; "));
}

// "h100-80g, hbm 16.00 GiB": what a reader needs to see why two hardware models differ.
std::string hardware_text(const nlohmann::json& hw) {
  std::string s = hw.value("name", std::string("?"));
  if (hw.contains("spaces") && hw["spaces"].is_array())
    for (const auto& sp : hw["spaces"])
      if (sp.is_object() && sp.value("name", std::string()) == "hbm" && sp.contains("capacity_bytes") &&
          sp["capacity_bytes"].is_number_unsigned())
        s += ", hbm " + human_bytes(sp["capacity_bytes"].get<Bytes>());
  return s;
}

std::string fmt_value(const std::string& metric, double v) {
  if (metric.find("bytes") != std::string::npos) return human_bytes(static_cast<Bytes>(v));
  if (metric.find("fragmentation") != std::string::npos) return fmt::format("{:.2f}%", 100 * v);
  if (std::isnan(v)) return "none";
  return fmt::format("{:.0f}", v);
}

std::string xml_escape(const std::string& s) {
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

}  // namespace

CheckResult run_check(const nlohmann::json& baseline, const nlohmann::json& current, const CheckOptions& o) {
  if (!std::isfinite(o.tolerance_pct) || o.tolerance_pct < 0)
    throw InputError(fmt::format("--tolerance: must be a finite percentage >= 0, got {}", o.tolerance_pct));
  auto base = runs_of(baseline, o.baseline_path), cur = runs_of(current, o.current_path);
  CheckResult res;
  res.tolerance_pct = o.tolerance_pct;
  std::map<std::string, const nlohmann::json*> by_label;
  for (const auto& b : base) by_label[label_of(b)] = &b;
  for (const auto& c : cur) {
    std::string label = label_of(c);
    auto it = by_label.find(label);
    if (it == by_label.end()) {
      if (base.size() == 1 && cur.size() == 1) {
        it = by_label.begin();  // one run each: compare them whatever their labels
      } else {
        res.notes.push_back(fmt::format("{}: not in the baseline, not compared", label));
        continue;
      }
    }
    const nlohmann::json& b = *it->second;
    by_label.erase(it);
    // Same trace? Same policy?
    std::string bd = b["trace"].value("digest", std::string()), cd = c["trace"].value("digest", std::string());
    if (!bd.empty() && !cd.empty() && bd != cd) {
      if (!o.allow_different_trace)
        throw InputError(fmt::format(
            "{} and {}: reports of different traces (digest {} vs {}); --allow-different-trace compares them anyway",
            o.baseline_path, o.current_path, bd, cd));
      res.notes.push_back(fmt::format("{}: different traces (digest {} vs {}), compared as asked", label, bd, cd));
    } else if (bd.empty() || cd.empty()) {
      res.notes.push_back(
          fmt::format("{}: a report carries no trace digest (an older fragsim): same trace assumed", label));
    }
    std::string diff = policy_difference(b["policy"], c["policy"]);
    if (!diff.empty()) {
      if (!o.allow_different_policy)
        throw InputError(
            fmt::format("{} and {}: {}: different policies or settings ({}); "
                        "--allow-different-policy compares them anyway",
                        o.baseline_path, o.current_path, label, diff));
      res.notes.push_back(fmt::format("{}: different policy settings ({}), compared as asked", label, diff));
    }
    if (b["hardware"] != c["hardware"])
      res.notes.push_back(fmt::format("{}: the hardware differs ({} vs {})", label, hardware_text(b["hardware"]),
                                      hardware_text(c["hardware"])));
    auto add = [&](const std::string& metric, double bv, double cv, bool regression, std::string msg) {
      res.items.push_back({label, metric, bv, cv, regression, std::move(msg)});
      if (regression) res.pass = false;
    };
    // OOMs: the count, and the first OOM's event.
    double bn = static_cast<double>(b["oom_count"].get<std::uint64_t>());
    double cn = static_cast<double>(c["oom_count"].get<std::uint64_t>());
    add("oom_count", bn, cn, bn != cn,
        bn != cn ? fmt::format("OOM count changed: {:.0f} -> {:.0f}", bn, cn) : fmt::format("OOM count {:.0f}", cn));
    auto first = [](const nlohmann::json& r) {
      return r["ooms"].empty() ? NAN : static_cast<double>(r["ooms"][0]["event_index"].get<std::uint64_t>());
    };
    double bf = first(b), cf = first(c);
    bool moved = !(std::isnan(bf) && std::isnan(cf)) && !(bf == cf);
    std::string fm;
    if (std::isnan(bf) && !std::isnan(cf))
      fm = fmt::format("new OOM at event {:.0f} ({} requested, cause {})", cf, c["ooms"][0]["requested_bytes"].dump(),
                       c["ooms"][0].value("cause", std::string("?")));
    else if (!std::isnan(bf) && std::isnan(cf))
      fm = fmt::format("the OOM at event {:.0f} is gone", bf);
    else if (moved)
      fm = fmt::format("first OOM moved from event {:.0f} to {:.0f}", bf, cf);
    else
      fm = std::isnan(cf) ? "no OOM" : fmt::format("first OOM at event {:.0f}", cf);
    add("first_oom_event", bf, cf, moved && !(std::isnan(cf)) && (std::isnan(bf) || cf < bf), fm);
    // Figures that must not grow beyond the tolerance.
    auto grew = [&](const std::string& metric, double bv, double cv) {
      double limit = bv * (1.0 + o.tolerance_pct / 100.0);
      bool reg = cv > limit && cv - bv > 1e-12;
      double pct = bv > 0 ? 100.0 * (cv - bv) / bv : (cv > 0 ? 100.0 : 0.0);
      add(metric, bv, cv, reg,
          fmt::format("{} {}: {} -> {} ({:+.2f}%, tolerance {}%)", metric, reg ? "grew" : "ok", fmt_value(metric, bv),
                      fmt_value(metric, cv), pct, o.tolerance_pct));
    };
    for (const char* k : {"peak_allocated_bytes", "peak_reserved_bytes"})
      grew(k, static_cast<double>(b[k].get<std::uint64_t>()), static_cast<double>(c[k].get<std::uint64_t>()));
    for (const auto& [key, val] : c["fragmentation"].items()) {
      if (!val.is_number() || !b["fragmentation"].contains(key) || !b["fragmentation"][key].is_number()) continue;
      grew("fragmentation." + key, b["fragmentation"][key].get<double>(), val.get<double>());
    }
  }
  for (const auto& [label, _] : by_label) res.notes.push_back(fmt::format("{}: only in the baseline", label));
  return res;
}

std::string check_text(const CheckResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  for (const auto& n : r.notes) fmt::format_to(out, "note: {}\n", n);
  if (r.pass) {
    fmt::format_to(out, "check passed: no new OOM, no peak or fragmentation growth beyond {}% ({} figures)\n",
                   r.tolerance_pct, r.items.size());
    return s;
  }
  fmt::format_to(out, "check FAILED:\n");
  for (const auto& i : r.items)
    if (i.regression) fmt::format_to(out, "  {}: {}\n", i.run, i.message);
  return s;
}

nlohmann::json check_json(const CheckResult& r) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& i : r.items) {
    auto num = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
    items.push_back({{"run", i.run},
                     {"metric", i.metric},
                     {"baseline", num(i.baseline)},
                     {"current", num(i.current)},
                     {"regression", i.regression},
                     {"message", i.message}});
  }
  return {
      {"fragsim_check", 1}, {"pass", r.pass}, {"tolerance_pct", r.tolerance_pct}, {"items", items}, {"notes", r.notes}};
}

std::string check_markdown(const CheckResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "### fragsim check: {}\n\n", r.pass ? "passed" : "**FAILED**");
  fmt::format_to(out, "| run | figure | baseline | current | |\n|---|---|---:|---:|---|\n");
  for (const auto& i : r.items)
    fmt::format_to(out, "| {} | {} | {} | {} | {} |\n", i.run, i.metric, fmt_value(i.metric, i.baseline),
                   fmt_value(i.metric, i.current), i.regression ? "regression" : "ok");
  fmt::format_to(out, "\nTolerance {}%.\n", r.tolerance_pct);
  for (const auto& n : r.notes) fmt::format_to(out, "\n> {}\n", n);
  return s;
}

std::string check_junit(const CheckResult& r) {
  size_t failures = 0;
  for (const auto& i : r.items) failures += i.regression;
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  auto out = std::back_inserter(s);
  fmt::format_to(out, "<testsuites><testsuite name=\"fragsim check\" tests=\"{}\" failures=\"{}\">\n", r.items.size(),
                 failures);
  for (const auto& i : r.items) {
    fmt::format_to(out, "  <testcase classname=\"{}\" name=\"{}\"", xml_escape(i.run), xml_escape(i.metric));
    if (i.regression)
      fmt::format_to(out, "><failure message=\"{}\"/></testcase>\n", xml_escape(i.message));
    else
      fmt::format_to(out, "/>\n");
  }
  fmt::format_to(out, "</testsuite></testsuites>\n");
  return s;
}

std::string check_github(const CheckResult& r, const std::string& file) {
  // GitHub Actions workflow commands: one ::error line per regression (shown on the run).
  std::string s;
  for (const auto& i : r.items)
    if (i.regression)
      fmt::format_to(std::back_inserter(s), "::error file={},title=fragsim {} ({})::{}\n", file, i.metric, i.run,
                     i.message);
  return s;
}

}  // namespace fragsim

#include "sim/commands/check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "sim/base/units.h"
#include "sim/commands/run_setup.h"
#include "sim/report/diff.h"
#include "sim/report/report.h"
#include "sim/report/report_schema.h"

namespace fragsim {

namespace {

// The runs of a report file (labelled_runs: one report, a compare array, a batch or merge result).
// Runs are matched by label, so two runs of one file may not share one.
std::vector<LabelledRun> runs_of(const nlohmann::json& j, const std::string& file) {
  std::vector<LabelledRun> v = labelled_runs(j, file);
  std::map<std::string, const LabelledRun*> seen;
  for (const auto& r : v)
    if (auto [it, fresh] = seen.emplace(r.label, &r); !fresh)
      throw InputError(fmt::format("{}: label: '{}' also labels run {}; runs are matched by label", r.where, r.label,
                                   it->second->at));
  return v;
}

// Every number under `j` (nested objects flattened to "a.b"), each checked to be a finite number
// (a figure that is not is an input error naming the file and key).
void figures_of(const nlohmann::json& j, const std::string& file, const std::string& path,
                std::map<std::string, double>* out) {
  for (const auto& [k, v] : j.items()) {
    std::string key = path + "." + k;
    if (v.is_object())
      figures_of(v, file, key, out);
    else
      (*out)[key] = JsonField(v, file, key).number();
  }
}

// The figures check compares in one report or device entry: the OOM count, the peaks and every
// fragmentation figure.
std::map<std::string, double> gated_figures(const nlohmann::json& r, const std::string& file, const std::string& at) {
  std::map<std::string, double> f;
  JsonField rf(r, file, at);
  for (const char* k : {"peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes"})
    if (rf.has(k)) f[k] = static_cast<double>(rf.at(k).u64());
  if (rf.has("fragmentation")) figures_of(rf.at("fragmentation").object(), file, "fragmentation", &f);
  return f;
}

// The figures docs/metrics.md ("What a CI gate should watch") recommends gating: peak allocated
// and reserved, and the fragmentation at the peak of allocated memory and at its worst. Peak
// requested depends on the trace alone, and at_peak_reserved is usually 0 for a preallocating
// allocator: compared and shown, gated only with --gate all.
bool recommended(const std::string& figure) {
  return figure == "peak_allocated_bytes" || figure == "peak_reserved_bytes" ||
         figure.rfind("fragmentation.max", 0) == 0 || figure.rfind("fragmentation.at_peak_allocated", 0) == 0;
}

// The trace a report is of, for notes: its file name.
std::string trace_name(const nlohmann::json& r) {
  const nlohmann::json* t = r.contains("trace") && r["trace"].is_object() ? &r["trace"] : nullptr;
  std::string path = t && t->contains("path") && (*t)["path"].is_string() ? (*t)["path"].get<std::string>() : "?";
  return std::filesystem::path(path).filename().string();
}

// A device entry's key: "device 0 hbm".
std::string device_key(const nlohmann::json& d, const std::string& file, const std::string& at) {
  JsonField f(d, file, at);
  return fmt::format("device {} {}", f.at("device").u64(), f.at("space").string());
}

// What differs between two reports' policies, compared as they resolved (setting_differences),
// ignoring figures the policy derived (they follow from the hardware): "" when nothing does.
std::string policy_difference(const nlohmann::json& a, const nlohmann::json& b) {
  if (a["name"] != b["name"]) return fmt::format("{} vs {}", dump_json(a["name"]), dump_json(b["name"]));
  std::vector<std::string> keys;
  for (const auto& d : setting_differences(a["config"], b["config"]))
    if (!d.resolved) keys.push_back(fmt::format("{}: {} vs {}", d.key, dump_json(d.a), dump_json(d.b)));
  return fmt::format("{}", fmt::join(keys, "; "));
}

// "h100-80g, hbm 16.00 GiB": what a reader needs to see why two reports' hardware differs, with each
// device whose memory is not the model's ("device 1 (rank 1) hbm 79.15 GiB": a set of recordings
// keeps each rank's or host's own; "device 0 hbm 22.69 GiB usable, inferred from the recording":
// the memory the run had, where the recording implied it); `exact`: capacities and the reserve in bytes (for two that
// read the same rounded, but differ).
std::string hardware_text(const nlohmann::json& report, bool exact = false) {
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& hw = report.contains("hardware") && report["hardware"].is_object() ? report["hardware"] : none;
  auto size = [&](Bytes c) { return exact ? fmt::format("{} B", c) : human_bytes(c); };
  std::string s = hw.value("name", std::string("?"));
  std::optional<Bytes> model;
  if (hw.contains("spaces") && hw["spaces"].is_array())
    for (const auto& sp : hw["spaces"])
      if (sp.is_object() && sp.value("name", std::string()) == "hbm" && sp.contains("capacity_bytes") &&
          sp["capacity_bytes"].is_number_unsigned()) {
        model = sp["capacity_bytes"].get<Bytes>();
        s += ", hbm " + size(*model);
        if (exact && sp.contains("reserve_bytes") && sp["reserve_bytes"].is_number_unsigned())
          s += fmt::format(" less {} B reserved", sp["reserve_bytes"].get<Bytes>());
      }
  if (report.contains("devices") && report["devices"].is_array())
    for (const auto& d : report["devices"]) {
      if (!d.is_object() || d.value("space", std::string()) != "hbm" || !d.contains("device") ||
          !d["device"].is_number_unsigned())
        continue;
      const std::string name =
          fmt::format("device {}{} hbm", d["device"].get<std::uint64_t>(),
                      d.contains("name") && d["name"].is_string() ? " (" + d["name"].get<std::string>() + ")" : "");
      // The memory the run had, where the recording implied it: what it ran on, whatever the model says.
      if (d.value("usable_inferred", false) && d.contains("usable_bytes") && d["usable_bytes"].is_number_unsigned())
        s += fmt::format(", {} {} usable, inferred from the recording", name, size(d["usable_bytes"].get<Bytes>()));
      else if (d.contains("capacity_bytes") && d["capacity_bytes"].is_number_unsigned() &&
               d["capacity_bytes"].get<Bytes>() != model)
        s += fmt::format(", {} {}", name, size(d["capacity_bytes"].get<Bytes>()));
    }
  return s;
}

std::string fmt_value(const std::string& metric, double v, int decimals = 2) {
  if (std::isnan(v)) return "none";
  if (metric.find("bytes") != std::string::npos) return human_bytes(static_cast<Bytes>(v));
  if (metric.find("fragmentation") != std::string::npos) return fmt::format("{:.{}f}%", 100 * v, decimals);
  return fmt::format("{:.0f}", v);
}

// The baseline's and the current value as text, never alike for a change: bytes that read alike
// come with the exact change (`delta`, else ""), fractions with more decimals.
struct ChangeText {
  std::string baseline, current, delta;
};
ChangeText change_text(const std::string& metric, double bv, double cv) {
  ChangeText t{fmt_value(metric, bv), fmt_value(metric, cv), ""};
  if (t.baseline != t.current || bv == cv || std::isnan(bv) || std::isnan(cv)) return t;
  if (metric.find("bytes") != std::string::npos) {
    t.delta = signed_bytes(static_cast<Bytes>(bv), static_cast<Bytes>(cv));  // whole bytes below 2^64
    return t;
  }
  for (int d = 4; t.baseline == t.current && d <= 8; d += 2)
    t.baseline = fmt_value(metric, bv, d), t.current = fmt_value(metric, cv, d);
  return t;
}

// The growth from bv to cv: relative ("+4.20%") where the baseline is something; where it reads as
// none ("0.00%", "0 B") and grew, the amount (a share in percentage points, bytes, a count), since
// a percentage of (almost) nothing is no measure ("+16478792.26%" for 0.00% -> 0.85%).
std::string growth_text(const std::string& metric, double bv, double cv) {
  if (cv <= bv || fmt_value(metric, bv) != fmt_value(metric, 0)) {
    const double pct = bv > 0 ? 100.0 * (cv - bv) / bv : 0.0;
    return signed_percent(pct, 2);
  }
  if (metric.find("bytes") != std::string::npos)
    return signed_bytes(static_cast<Bytes>(bv), static_cast<Bytes>(cv)) + " from none";
  if (metric.find("fragmentation") != std::string::npos)
    return fmt::format("{:+.2f} percentage points from none", 100 * (cv - bv));
  return fmt::format("{:+.0f} from none", cv - bv);
}

// The earliest event a report's (or device entry's, at `at`) ooms list, and its index there,
// whatever order the file lists them in; NaN when it lists none.
std::pair<double, size_t> first_oom_of(const nlohmann::json& r, const std::string& file, const std::string& at) {
  const auto& ooms = JsonField(r, file, at).at("ooms").array();
  std::pair<double, size_t> f{NAN, 0};
  for (size_t i = 0; i < ooms.size(); ++i) {
    const double e = static_cast<double>(
        JsonField(ooms[i], file, fmt::format("{}ooms[{}]", at.empty() ? "" : at + ".", i)).at("event_index").u64());
    if (std::isnan(f.first) || e < f.first) f = {e, i};
  }
  return f;
}

// The event where a run's replay stopped: its first OOM when it stopped there (stopped_early), or
// its modelled abort; NaN when it replayed the whole trace. Its peaks are maxima over the events
// up to there.
double stop_event(const nlohmann::json& r, const std::string& file) {
  JsonField f(r, file);
  double stop = NAN;
  if (f.has("stopped_early") && f.at("stopped_early").boolean()) stop = first_oom_of(r, file, "").first;
  if (f.has("fatal")) {
    const double e = static_cast<double>(f.at("fatal").at("event_index").u64());
    if (std::isnan(stop) || e < stop) stop = e;
  }
  return stop;
}

// Where a device's replay stopped: its process's stop (devices[].stopped_at_event: each member of a
// set of recordings stops alone; NaN for a device that replayed to its end), else, in a report that
// does not say it per device, the run's stop `run_stop`.
double device_stop(const nlohmann::json& report, const nlohmann::json& device, double run_stop) {
  const auto& devs = report["devices"];
  const bool per_process = std::any_of(devs.begin(), devs.end(), [](const nlohmann::json& d) {
    return d.is_object() && d.contains("stopped_at_event") && d["stopped_at_event"].is_number_unsigned();
  });
  if (!per_process) return run_stop;
  return device.contains("stopped_at_event") && device["stopped_at_event"].is_number_unsigned()
             ? static_cast<double>(device["stopped_at_event"].get<std::uint64_t>())
             : NAN;
}

// "the whole trace" or "event 7132": how far a run replayed.
std::string reach_text(double stop) { return std::isnan(stop) ? "the whole trace" : fmt::format("event {:.0f}", stop); }

// The event of the peak of allocated memory of a report or device entry (at_peak_allocated), the
// moment peak_allocated_bytes and fragmentation.at_peak_allocated are taken at; NaN when unknown.
double peak_allocated_event(const nlohmann::json& r, const std::string& file, const std::string& at) {
  JsonField f(r, file, at);
  if (!f.has("at_peak_allocated") || !f.at("at_peak_allocated").has("event_index")) return NAN;
  return static_cast<double>(f.at("at_peak_allocated").at("event_index").u64());
}

// The binding (device, space) a report's run-level figures are those of: "device 1 hbm", "" when
// it names none.
std::string binding_of(const nlohmann::json& r, const std::string& file) {
  JsonField f(r, file);
  if (!f.has("binding") || !f.at("binding").raw().is_object()) return "";
  return device_key(f.at("binding").raw(), file, "binding");
}

}  // namespace

CheckResult run_check(const nlohmann::json& baseline, const nlohmann::json& current, const CheckOptions& o) {
  if (!std::isfinite(o.tolerance_pct) || o.tolerance_pct < 0)
    throw InputError(
        fmt::format("{}: must be a finite percentage >= 0, got {}", o.names("--tolerance"), o.tolerance_pct));
  auto base = runs_of(baseline, o.baseline_path), cur = runs_of(current, o.current_path);
  CheckResult res;
  res.tolerance_pct = o.tolerance_pct;
  std::map<std::string, const LabelledRun*> by_label;
  for (const auto& b : base) by_label[b.label] = &b;
  std::set<std::string> paired;  // runs compared (in both)
  auto add = [&](const std::string& run, const std::string& metric, double bv, double cv, bool regression,
                 std::string msg) {
    res.items.push_back({run, metric, bv, cv, regression, true, std::move(msg)});
    if (regression) res.pass = false;
  };
  for (const auto& run : cur) {
    const std::string& label = run.label;
    const nlohmann::json& c = *run.report;
    auto it = by_label.find(label);
    if (it == by_label.end()) {
      if (base.size() == 1 && cur.size() == 1) {
        it = by_label.begin();  // one run each: compare them whatever their labels
      } else {
        // Nothing to compare it with: a gate that passed it would pass any run, an OOM included.
        add(label, "baseline_run", NAN, NAN, true,
            fmt::format("not in the baseline {}: no run labelled so to compare it with", o.baseline_path));
        continue;
      }
    }
    const nlohmann::json& b = *it->second->report;
    by_label.erase(it);
    paired.insert(label);
    // Same trace? Same policy?
    auto digest = [](const nlohmann::json& r, const std::string& file) {
      JsonField t(r, file, "");
      return t.at("trace").has("digest") ? t.at("trace").at("digest").string() : std::string();
    };
    std::string bd = digest(b, o.baseline_path), cd = digest(c, o.current_path);
    if (!bd.empty() && !cd.empty() && bd != cd) {
      if (o.same_trace)
        throw InputError(fmt::format("{} and {}: reports of different traces (digest {} vs {}) and {}", o.baseline_path,
                                     o.current_path, bd, cd, o.names.switch_on("--same-trace")));
      res.notes.push_back(
          fmt::format("{}: the traces differ ({} vs {}, digest {} vs {}): compared as two recordings of "
                      "one workload (--same-trace refuses this)",
                      label, trace_name(b), trace_name(c), bd, cd));
    } else if (bd.empty() || cd.empty()) {
      res.notes.push_back(
          fmt::format("{}: a report carries no trace digest (an older fragsim): same trace assumed", label));
    }
    std::string diff = policy_difference(b["policy"], c["policy"]);
    if (!diff.empty()) {
      if (!o.allow_different_policy)
        throw InputError(
            fmt::format("{} and {}: {}: different policies or settings ({}); "
                        "{} compares them anyway",
                        o.baseline_path, o.current_path, label, diff, o.names.switch_on("--allow-different-policy")));
      res.notes.push_back(fmt::format("{}: different policy settings ({}), compared as asked", label, diff));
    }
    if (b["hardware"] != c["hardware"] || hardware_text(b, true) != hardware_text(c, true)) {
      // In bytes when the texts, or those of the models alone, read alike rounded.
      auto model = [](const nlohmann::json& r) { return hardware_text(nlohmann::json{{"hardware", r["hardware"]}}); };
      const bool same_text = hardware_text(b) == hardware_text(c) || model(b) == model(c);
      res.notes.push_back(fmt::format("{}: the hardware differs ({} vs {})", label, hardware_text(b, same_text),
                                      hardware_text(c, same_text)));
    }
    // OOMs: the count, and the first OOM's event.
    auto count = [&](const std::string& where, const nlohmann::json& bj, const nlohmann::json& cj) {
      double bn = static_cast<double>(JsonField(bj, o.baseline_path, where).at("oom_count").u64());
      double cn = static_cast<double>(JsonField(cj, o.current_path, where).at("oom_count").u64());
      std::string metric = where.empty() ? "oom_count" : where + ".oom_count";
      add(label, metric, bn, cn, bn != cn,
          bn != cn ? fmt::format("{}OOM count changed: {:.0f} -> {:.0f}", where.empty() ? "" : where + ": ", bn, cn)
                   : fmt::format("OOM count {:.0f}", cn));
    };
    count("", b, c);
    // The first OOM, of the run and (below) of each device entry: the earliest event its ooms list,
    // read whatever order a file lists them in.
    auto first_oom = [&](const std::string& where, const nlohmann::json& bj, const nlohmann::json& cj) {
      const auto [bf, bi] = first_oom_of(bj, o.baseline_path, where);
      const auto [cf, ci] = first_oom_of(cj, o.current_path, where);
      const bool moved = !(std::isnan(bf) && std::isnan(cf)) && !(bf == cf);
      const std::string prefix = where.empty() ? "" : where + ": ";
      std::string fm;
      if (std::isnan(bf) && !std::isnan(cf)) {
        const nlohmann::json& oom = cj["ooms"][ci];
        // An OOM of the state held before the recording began: the limit does not hold that state.
        const std::string before = prior_oom_words_of(oom);
        fm = fmt::format("{}new OOM at event {:.0f} ({} requested, cause {}){}", prefix, cf,
                         oom.contains("requested_bytes") && oom["requested_bytes"].is_number_unsigned()
                             ? human_bytes(oom["requested_bytes"].get<Bytes>())
                             : std::string("?"),
                         oom.contains("cause") && oom["cause"].is_string() ? oom["cause"].get<std::string>() : "?",
                         before.empty() ? "" : ", " + before);
      } else if (!std::isnan(bf) && std::isnan(cf)) {
        fm = fmt::format("{}the OOM at event {:.0f} is gone", prefix, bf);
      } else if (moved) {
        fm = fmt::format("{}first OOM moved from event {:.0f} to {:.0f}", prefix, bf, cf);
      } else {
        fm = std::isnan(cf) ? prefix + "no OOM" : fmt::format("{}first OOM at event {:.0f}", prefix, cf);
      }
      add(label, where.empty() ? "first_oom_event" : where + ".first_oom_event", bf, cf,
          moved && !(std::isnan(cf)) && (std::isnan(bf) || cf < bf), fm);
    };
    first_oom("", b, c);
    // A modelled abort (the allocator stops the process: "fatal") ends the run as an OOM does; a new
    // one, or one that comes sooner, is a regression even when no OOM is listed.
    auto aborted_at = [](const nlohmann::json& r) {
      return r.contains("fatal") ? static_cast<double>(r["fatal"]["event_index"].get<std::uint64_t>()) : NAN;
    };
    const double ba = aborted_at(b), ca = aborted_at(c);
    if (!std::isnan(ba) || !std::isnan(ca)) {
      const bool worse = !std::isnan(ca) && (std::isnan(ba) || ca < ba);
      add(label, "fatal_event", ba, ca, worse,
          std::isnan(ba)   ? fmt::format("new abort at event {:.0f}: {}", ca, c["fatal"]["message"].get<std::string>())
          : std::isnan(ca) ? fmt::format("the abort at event {:.0f} is gone", ba)
          : ba == ca       ? fmt::format("aborts at event {:.0f}, as the baseline", ca)
                           : fmt::format("abort moved from event {:.0f} to {:.0f}", ba, ca));
    }
    // Peaks are maxima over the events a run replayed. When the current run got further than the
    // baseline (which stopped at an OOM or an abort), a peak it may have reached past the baseline's
    // stop measures events the baseline never replayed: shown, not gated. A peak of allocated memory
    // reached by then (at_peak_allocated) is one over the same events, and still gates.
    const double bstop = stop_event(b, o.baseline_path), cstop = stop_event(c, o.current_path);
    const bool further = !std::isnan(bstop) && (std::isnan(cstop) || cstop > bstop);
    if (further)
      res.notes.push_back(
          fmt::format("{}: the current run replayed further than the baseline ({} vs event {:.0f}, where the "
                      "baseline stopped): its peaks and fragmentation past event {:.0f} cover events the baseline "
                      "never reached, so they are shown, not gated; a peak of allocated memory reached by event "
                      "{:.0f} still gates",
                      label, reach_text(cstop), bstop, bstop, bstop));
    // Figures that must not grow beyond the tolerance: every peak and fragmentation figure the
    // report documents, of the run and of each (device, space). `past`: the current's figure may
    // have been reached past the baseline's stop.
    auto grew = [&](const std::string& metric, const std::string& figure, double bv, double cv, bool past,
                    double b_stop) {
      double limit = bv * (1.0 + o.tolerance_pct / 100.0);
      bool over = cv > limit && cv - bv > 1e-12;
      bool gated = (o.gate_all || recommended(figure)) && !past;
      const ChangeText ct = change_text(metric, bv, cv);
      add(label, metric, bv, cv, over && gated,
          fmt::format("{} {}: {} -> {} ({}{}, tolerance {}%){}", metric, over ? "grew" : "ok", ct.baseline, ct.current,
                      ct.delta.empty() ? "" : ct.delta + ", ", growth_text(metric, bv, cv), o.tolerance_pct,
                      past ? fmt::format(", not gated: reached past event {:.0f}, where the baseline stopped", b_stop)
                      : gated ? ""
                              : ", not gated (--gate all)"));
      res.items.back().gated = gated;
      res.items.back().past_baseline_stop = past;
    };
    auto figures = [&](const std::string& where, const nlohmann::json& bj, const nlohmann::json& cj, double b_stop,
                       double c_stop) {
      const bool further_here = !std::isnan(b_stop) && (std::isnan(c_stop) || c_stop > b_stop);
      auto bmap = gated_figures(bj, o.baseline_path, where), cmap = gated_figures(cj, o.current_path, where);
      std::string prefix = where.empty() ? "" : where + ".";
      // Figures taken at the peak of allocated memory, which the current reached by the baseline's stop.
      // A report of one space gives its peak moment at the run's level only (the device entry has none):
      // that one is the device's (trial 15: the run's figure gated, the same device figure did not).
      double peak_event = peak_allocated_event(cj, o.current_path, where);
      if (std::isnan(peak_event) && !where.empty() && c.contains("devices") && c["devices"].is_array() &&
          c["devices"].size() == 1)
        peak_event = peak_allocated_event(c, o.current_path, "");
      const bool peak_within = further_here && peak_event <= b_stop;
      auto past = [&](const std::string& k) {
        const bool at_peak = k == "peak_allocated_bytes" || k.rfind("fragmentation.at_peak_allocated", 0) == 0;
        return further_here && !(at_peak && peak_within);
      };
      for (const auto& [k, bv] : bmap) {
        if (auto ci = cmap.find(k); ci != cmap.end())
          grew(prefix + k, k, bv, ci->second, past(k), b_stop);
        else  // a figure the current report leaves out cannot be shown not to have grown
          add(label, prefix + k, bv, NAN, o.gate_all || recommended(k),
              fmt::format("{}{}: missing from the current report", prefix, k));
      }
      for (const auto& [k, cv] : cmap)
        if (!bmap.count(k)) res.notes.push_back(fmt::format("{}: {}{}: not in the baseline report", label, prefix, k));
    };
    // The run's figures are its binding device's: when that changed, they are two devices' and
    // compare nothing; each device's own rows below do.
    const std::string bbind = binding_of(b, o.baseline_path), cbind = binding_of(c, o.current_path);
    if (bbind != cbind && !bbind.empty() && !cbind.empty())
      res.notes.push_back(
          fmt::format("{}: the run's figures are {}'s in the baseline and {}'s in the current (the "
                      "binding device changed): compared per device only",
                      label, bbind, cbind));
    else
      figures("", b, c, bstop, cstop);
    // A device's allocations after the run stopped (at another device's OOM or abort) were never
    // replayed: its figures end at the stop. More of them than in the baseline is a regression, even
    // where every figure of the device passes (issue 47: a run stopped where the baseline, with
    // --keep-going, replayed every device to its end, passed with its other devices' figures cut short).
    auto not_replayed = [&](const std::string& where, const nlohmann::json& bj, const nlohmann::json& cj) {
      auto of = [&](const nlohmann::json& r, const std::string& file) {
        JsonField f(r, file, where);
        return f.has("allocs_not_replayed") ? static_cast<double>(f.at("allocs_not_replayed").u64()) : 0.0;
      };
      const double bn = of(bj, o.baseline_path), cn = of(cj, o.current_path);
      if (bn == 0 && cn == 0) return;
      const double at = device_stop(c, cj, cstop);
      const std::string stop = std::isnan(at) ? "" : fmt::format(" at event {:.0f}", at);
      add(label, where + ".allocs_not_replayed", bn, cn, cn > bn,
          cn > bn ? fmt::format("{}: {:.0f} allocation{} not replayed: the run stopped{}, before this device's end "
                                "({}): its figures cover only the events before the stop",
                                where, cn, cn == 1 ? "" : "s", stop,
                                bn == 0 ? "the baseline replayed them all" : fmt::format("{:.0f} in the baseline", bn))
                  : fmt::format("{}: allocations not replayed {:.0f} -> {:.0f}", where, bn, cn));
    };
    auto devices = [&](const nlohmann::json& r, const std::string& file) {
      std::map<std::string, const nlohmann::json*> m;
      const auto& arr = JsonField(r, file).at("devices").array();
      for (size_t i = 0; i < arr.size(); ++i) {
        std::string at = fmt::format("devices[{}]", i);
        if (!m.emplace(device_key(arr[i], file, at), &arr[i]).second)
          throw InputError(fmt::format("{}: {}: {} is listed twice", file, at, device_key(arr[i], file, at)));
      }
      return m;
    };
    auto bdev = devices(b, o.baseline_path), cdev = devices(c, o.current_path);
    for (const auto& [k, cj] : cdev) {
      auto bi = bdev.find(k);
      if (bi == bdev.end()) {
        add(label, k, NAN, NAN, true, fmt::format("{}: not in the baseline (memory on a device it did not use)", k));
        continue;
      }
      count(k, *bi->second, *cj);
      first_oom(k, *bi->second, *cj);
      not_replayed(k, *bi->second, *cj);
      figures(k, *bi->second, *cj, device_stop(b, *bi->second, bstop), device_stop(c, *cj, cstop));
    }
    for (const auto& [k, bj] : bdev)
      if (!cdev.count(k)) add(label, k, NAN, NAN, true, fmt::format("{}: missing from the current report", k));
  }
  for (const auto& [label, _] : by_label)
    add(label, "current_run", NAN, NAN, true,
        fmt::format("only in the baseline: {} has no run labelled so", o.current_path));
  // One `fragsim diff` per failing run that both sides hold (a diff picks one run of an array by
  // --label; a run only one side holds has nothing to be diffed with).
  if (!res.pass) {
    const std::string diff = "fragsim diff " + shell_quote(o.baseline_path) + " " + shell_quote(o.current_path);
    // A side with several runs needs --label to pick one (a single run is taken whatever its label).
    const bool arrays = base.size() > 1 || cur.size() > 1;
    for (const auto& i : res.items) {
      if (!i.regression || !paired.count(i.run)) continue;
      std::string cmd = arrays ? diff + " --label " + shell_quote(i.run) : diff;
      if (std::find(res.diff_commands.begin(), res.diff_commands.end(), cmd) == res.diff_commands.end())
        res.diff_commands.push_back(std::move(cmd));
    }
    if (!res.diff_commands.empty()) res.diff_command = res.diff_commands.front();
  }
  return res;
}

std::string check_text(const CheckResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  for (const auto& n : r.notes) fmt::format_to(out, "note: {}\n", escape_terminal(n));
  size_t gated = 0;
  for (const auto& i : r.items) gated += i.gated;
  if (r.pass)
    fmt::format_to(out, "check passed: no new OOM, no peak or fragmentation growth beyond {}% ({} figures gated)\n",
                   r.tolerance_pct, gated);
  else
    fmt::format_to(out, "check FAILED:\n");
  for (const auto& i : r.items)
    if (i.regression) fmt::format_to(out, "  {}: {}\n", escape_terminal(i.run), escape_terminal(i.message));
  // Growth beyond the tolerance of a figure that does not gate is shown, so that nothing grows unseen.
  for (const auto& i : r.items)
    if (!i.gated && i.current > i.baseline * (1.0 + r.tolerance_pct / 100.0) && i.current - i.baseline > 1e-12)
      fmt::format_to(out, "  {}: {}\n", escape_terminal(i.run), escape_terminal(i.message));
  for (const auto& cmd : r.diff_commands)
    fmt::format_to(out, "what changed (peaks by call site, buffers, OOMs; --html FILE for the page): {}\n",
                   escape_terminal(cmd));
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
                     {"gated", i.gated},
                     {"message", i.message}});
    if (i.past_baseline_stop) items.back()["past_baseline_stop"] = true;
  }
  return {{"fragsim_check", 1},
          {"pass", r.pass},
          {"tolerance_pct", r.tolerance_pct},
          {"items", items},
          {"notes", r.notes},
          {"diff_command", r.diff_command},
          {"diff_commands", r.diff_commands}};
}

std::string check_markdown(const CheckResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "### fragsim check: {}\n\n", r.pass ? "passed" : "**FAILED**");
  fmt::format_to(out, "| run | figure | baseline | current | |\n|---|---|---:|---:|---|\n");
  for (const auto& i : r.items) {
    const ChangeText ct = change_text(i.metric, i.baseline, i.current);
    fmt::format_to(out, "| {} | {} | {} | {} | {} |\n", escape_markdown(i.run), escape_markdown(i.metric),
                   escape_markdown(ct.baseline),
                   escape_markdown(ct.delta.empty() ? ct.current : ct.current + " (" + ct.delta + ")"),
                   i.regression ? "regression" : (i.gated ? "ok" : "not gated"));
  }
  fmt::format_to(out, "\nTolerance {}%.\n", r.tolerance_pct);
  for (const auto& cmd : r.diff_commands) fmt::format_to(out, "\nWhat changed: {}\n", escape_markdown(cmd));
  for (const auto& n : r.notes) fmt::format_to(out, "\n> {}\n", escape_markdown(n));
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
    fmt::format_to(out, "  <testcase classname=\"{}\" name=\"{}\"", escape_xml(i.run), escape_xml(i.metric));
    if (i.regression)
      fmt::format_to(out, "><failure message=\"{}\"/></testcase>\n", escape_xml(i.message));
    else
      fmt::format_to(out, "/>\n");
  }
  fmt::format_to(out, "</testsuite></testsuites>\n");
  return s;
}

std::string check_github(const CheckResult& r, const std::string& file) {
  // GitHub Actions workflow commands: one ::error line per regression (shown on the run), every
  // value escaped as GitHub's toolkit escapes it, so that no name can end the line. Without a file
  // the annotation belongs to the run alone.
  std::string s;
  const std::string on = file.empty() ? std::string() : "file=" + escape_github_property(file) + ",";
  for (const auto& i : r.items)
    if (i.regression)
      fmt::format_to(std::back_inserter(s), "::error {}title={}::{}\n", on,
                     escape_github_property(fmt::format("fragsim {} ({})", i.metric, i.run)),
                     escape_github_data(i.message));
  return s;
}

}  // namespace fragsim

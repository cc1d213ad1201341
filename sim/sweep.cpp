#include "sim/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

#include "sim/base/error.h"

namespace fragsim {

namespace {

// The config key that holds a policy's memory fraction, and how its users set it.
std::pair<const char*, const char*> fraction_knob(const std::string& policy) {
  if (policy == "torch-caching") return {"memory_fraction", "torch.cuda.set_per_process_memory_fraction({})"};
  return {"mem_fraction", "XLA_PYTHON_CLIENT_MEM_FRACTION={}"};
}

RunOptions point_options(const RunOptions& base, double value, bool fraction) {
  RunOptions o = base;
  o.placements.clear();
  o.perfetto.clear();
  o.keep_live_buffers = false;
  o.keep_going = false;
  o.check = false;
  if (fraction) {
    o.policy.config[fraction_knob(o.policy.name).first] = value;
  } else {
    o.hw.space(Space::kHbm)->capacity = static_cast<Bytes>(value);
  }
  return o;
}

// The points `values` from one decode of the trace, on opt.threads threads.
std::vector<SweepPoint> run_points(const SweepOptions& opt, const Registry& reg, const std::vector<double>& values,
                                   bool fraction) {
  std::vector<RunOptions> runs;
  for (double v : values) runs.push_back(point_options(opt.base, v, fraction));
  std::vector<RunResult> rs = run_simulations(runs, reg, opt.threads);
  std::vector<SweepPoint> pts;
  for (size_t i = 0; i < rs.size(); ++i) {
    const RunResult& r = rs[i];
    SweepPoint p{values[i], r.completed, r.ooms.size(), std::nullopt, r.trace_digest};
    if (!r.ooms.empty()) p.first_oom_event = r.ooms[0].event_index;
    pts.push_back(p);
  }
  return pts;
}

}  // namespace

std::string fraction_setting(double f) {
  std::string s = fmt::format("{:.2f}", f);
  if (s.rfind("0.", 0) == 0) s = s.substr(1);
  while (s.size() > 2 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

SweepResult run_sweep(const SweepOptions& opt, const Registry& reg) {
  SweepResult res;
  res.find = opt.find;
  res.policy = opt.base.policy.name;
  res.policy_config = opt.base.policy.config;
  res.hardware = opt.base.hw.to_json();
  res.trace = opt.base.trace;
  if (opt.find == "min-mem-fraction") {
    const std::string& pol = opt.base.policy.name;
    if (pol != "xla-bfc" && pol != "cuda-async" && pol != "torch-caching")
      throw InputError(
          "sweep --find min-mem-fraction: only policies with a memory fraction (xla-bfc, cuda-async, torch-caching)");
    std::vector<double> fractions;
    for (int i = 1; i <= 100; ++i) fractions.push_back(i / 100.0);
    if (opt.on_pass) opt.on_pass("fractions 0.01..1.00: 100 settings");
    res.runs = run_points(opt, reg, fractions, true);
    // Safe answer: smallest fraction from which every larger one completes.
    int safe = 100;
    while (safe > 0 && res.runs[safe - 1].completed) --safe;
    for (int i = 0; i < safe; ++i)
      if (res.runs[i].completed) res.anomalies.push_back(res.runs[i].value);
    res.monotonic = res.anomalies.empty();
    res.monotonic_basis = "observed over every fraction 0.01..1.00";
    if (safe < 100) {
      res.value = (safe + 1) / 100.0;
      res.setting =
          fmt::format(fmt::runtime(fraction_knob(pol).second),
                      pol == "torch-caching" ? fmt::format("{:.2f}", *res.value) : fraction_setting(*res.value));
    }
    return res;
  }
  if (opt.find != "min-capacity") throw InputError("sweep --find: must be min-capacity or min-mem-fraction");
  const SpaceSpec* hbm = opt.base.hw.space(Space::kHbm);
  if (!hbm) throw InputError("sweep --find min-capacity: hardware has no hbm space");
  const Bytes g = std::max<Bytes>(hbm->granularity, 1);
  auto cap = [&](std::uint64_t k) { return static_cast<double>(k * g); };
  std::vector<SweepPoint> all;
  std::mutex m;
  int passes = 0;
  auto eval = [&](const std::vector<std::uint64_t>& ks) {
    std::vector<double> caps;
    for (auto k : ks) caps.push_back(cap(k));
    if (opt.on_pass)
      opt.on_pass(fmt::format("capacity pass {}: {} setting{} from {}", ++passes, caps.size(),
                              caps.size() == 1 ? "" : "s", human_bytes(static_cast<Bytes>(caps.front()))));
    std::vector<SweepPoint> pts = run_points(opt, reg, caps, false);
    std::lock_guard<std::mutex> l(m);
    all.insert(all.end(), pts.begin(), pts.end());
    return pts;
  };
  // Find an upper bound that completes: the reserve plus 2x the trace's peak, doubling.
  std::uint64_t lo = 0, hi = std::max<std::uint64_t>(1, (hbm->reserve + 2 * kGiB) / g);
  for (;;) {
    auto p = eval({hi});
    if (p[0].completed) break;
    lo = hi;
    if (hi > (1ULL << 46) / g) {  // 64 TiB: give up
      res.runs = all;
      return res;
    }
    hi *= 2;
  }
  // k-ary search: lo fails (or is 0), hi completes.
  unsigned k = opt.threads ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  while (hi - lo > 1) {
    std::vector<std::uint64_t> ks;
    for (unsigned i = 1; i <= k; ++i) {
      std::uint64_t x = lo + (hi - lo) * i / (k + 1);
      if (x > lo && x < hi && (ks.empty() || ks.back() != x)) ks.push_back(x);
    }
    if (ks.empty()) ks.push_back(lo + 1);
    auto pts = eval(ks);
    std::uint64_t new_lo = lo, new_hi = hi;
    for (size_t i = 0; i < ks.size(); ++i) {
      if (pts[i].completed) {
        new_hi = std::min(new_hi, ks[i]);
      }
    }
    for (size_t i = 0; i < ks.size(); ++i)
      if (!pts[i].completed && ks[i] < new_hi) new_lo = std::max(new_lo, ks[i]);
    lo = new_lo;
    hi = new_hi;
  }
  // Verify monotonicity around the answer.
  std::vector<std::uint64_t> ks;
  for (int d = 1; d <= opt.verify; ++d) {
    if (hi > static_cast<std::uint64_t>(d)) ks.push_back(hi - d);
    ks.push_back(hi + d);
  }
  auto pts = eval(ks);
  for (size_t i = 0; i < ks.size(); ++i) {
    bool expect = ks[i] > hi;
    if (pts[i].completed != expect) res.anomalies.push_back(cap(ks[i]));
  }
  res.monotonic = res.anomalies.empty();
  res.monotonic_basis = fmt::format("bisection; checked {} granularity steps on each side of the answer", opt.verify);
  res.value = cap(hi);
  Bytes c = static_cast<Bytes>(cap(hi));
  res.setting = c % kMiB == 0 ? fmt::format("--capacity {}MiB", c / kMiB) : fmt::format("--capacity {}", c);
  std::sort(all.begin(), all.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.value < b.value; });
  res.runs = all;
  return res;
}

nlohmann::json sweep_json(const SweepResult& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& p : r.runs) {
    nlohmann::json j = {{"value", p.value}, {"completed", p.completed}, {"oom_count", p.oom_count}};
    if (p.first_oom_event) j["first_oom_event"] = *p.first_oom_event;
    runs.push_back(j);
  }
  nlohmann::json j = {{"find", r.find},
                      {"policy", {{"name", r.policy}, {"config", r.policy_config}}},
                      {"hardware", r.hardware},
                      {"trace", {{"path", r.trace}, {"digest", r.runs.empty() ? "" : r.runs.front().trace_digest}}},
                      {"value", r.value ? nlohmann::json(*r.value) : nlohmann::json()},
                      {"setting", r.value ? nlohmann::json(r.setting) : nlohmann::json()},
                      {"monotonic", r.monotonic},
                      {"monotonic_basis", r.monotonic_basis},
                      {"anomalies", r.anomalies},
                      {"runs", runs}};
  return j;
}

std::string sweep_text(const SweepResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  if (!r.value) {
    if (r.find == "min-mem-fraction")
      fmt::format_to(out,
                     "no memory fraction works: {} OOMs even with the whole device (fraction 1.00, {} runs); "
                     "`--find min-capacity` tells how much memory the trace needs\n",
                     r.policy, r.runs.size());
    else
      fmt::format_to(out, "no capacity in range works: {} OOMs even at the largest capacity tried ({} runs)\n",
                     r.policy, r.runs.size());
    return s;
  }
  if (r.find == "min-capacity")
    fmt::format_to(out, "smallest capacity with no OOM: {} ({} B)\n", human_bytes(static_cast<Bytes>(*r.value)),
                   static_cast<Bytes>(*r.value));
  else
    fmt::format_to(out, "smallest memory fraction with no OOM: {:.2f}\n", *r.value);
  fmt::format_to(out, "  setting: {}\n", r.setting);
  fmt::format_to(out, "  monotonic: {} ({})\n", r.monotonic ? "yes" : "NO", r.monotonic_basis);
  if (!r.anomalies.empty()) {
    fmt::format_to(out, "  outcomes that break monotonicity at:");
    for (double a : r.anomalies)
      fmt::format_to(out, " {}",
                     r.find == "min-capacity" ? human_bytes(static_cast<Bytes>(a)) : fmt::format("{:.2f}", a));
    fmt::format_to(out, "\n  the setting above is the smallest value from which every larger one completes\n");
  }
  fmt::format_to(out, "  {} simulations\n", r.runs.size());
  return s;
}

}  // namespace fragsim

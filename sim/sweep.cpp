#include "sim/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
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
    // Fraction i/100 for i in 1..100; evaluated points by i.
    std::map<int, SweepPoint> seen;
    auto eval = [&](std::vector<int> idx, const std::string& what) {
      idx.erase(std::remove_if(idx.begin(), idx.end(), [&](int i) { return seen.count(i) > 0; }), idx.end());
      if (idx.empty()) return;
      std::vector<double> fr;
      for (int i : idx) fr.push_back(i / 100.0);
      if (opt.on_pass) opt.on_pass(fmt::format("{}: {} setting{}", what, fr.size(), fr.size() == 1 ? "" : "s"));
      auto pts = run_points(opt, reg, fr, true);
      for (size_t k = 0; k < idx.size(); ++k) seen.emplace(idx[k], pts[k]);
    };
    auto every = [&] {
      std::vector<int> all;
      for (int i = 1; i <= 100; ++i) all.push_back(i);
      eval(all, "every fraction 0.01..1.00");
    };
    if (opt.exhaustive) {
      every();
      res.monotonic_basis = "observed over every fraction 0.01..1.00";
    } else {
      // k-ary search (k = threads, at least 3) between lo (fails, or 0) and hi (completes), one
      // decode of the trace per round; then the neighbours of the answer are checked.
      unsigned k = std::max(3u, opt.threads ? opt.threads : std::thread::hardware_concurrency());
      int lo = 0, hi = 100, round = 0;
      eval({100}, "fraction 1.00");
      if (seen.at(100).completed) {
        while (hi - lo > 1) {
          std::vector<int> idx;
          for (unsigned j = 1; j <= k; ++j) {
            int x = lo + static_cast<int>((hi - lo) * j / (k + 1));
            if (x > lo && x < hi && (idx.empty() || idx.back() != x)) idx.push_back(x);
          }
          if (idx.empty()) idx.push_back(lo + 1);
          eval(idx, fmt::format("bisection round {}", ++round));
          for (int x : idx) {
            if (seen.at(x).completed) {
              hi = x;
              break;
            }
            lo = x;
          }
        }
        std::vector<int> near;
        for (int x = hi - opt.verify; x <= hi + opt.verify; ++x)
          if (x >= 1 && x <= 100) near.push_back(x);
        eval(near, "checking the answer's neighbours");
        bool breaks_above = false;  // a failure at or above the answer: bisection cannot be trusted
        for (const auto& [x, p] : seen) breaks_above = breaks_above || (x >= hi && !p.completed);
        if (breaks_above) every();
      }
      res.monotonic_basis = seen.size() == 100
                                ? "observed over every fraction 0.01..1.00 (bisection met a non-monotonic outcome)"
                            : !seen.at(100).completed
                                ? "fraction 1.00 does not fit, so none can (--exhaustive replays every fraction)"
                                : fmt::format("bisection; checked {} fractions on each side of the answer", opt.verify);
    }
    for (const auto& [x, p] : seen) res.runs.push_back(p);
    // Safe answer: the fraction above the highest one that fails (every evaluated larger one
    // completes; the search evaluated that next one); none when 1.00 fails.
    int safe = 0;  // the highest failing fraction index: the answer is (safe + 1) / 100; 100 = none
    for (auto it = seen.rbegin(); it != seen.rend(); ++it)
      if (!it->second.completed) {
        safe = it->first;
        break;
      }
    for (const auto& [x, p] : seen)
      if (x <= safe && p.completed) res.anomalies.push_back(p.value);
    res.monotonic = res.anomalies.empty();
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

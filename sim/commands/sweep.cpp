#include "sim/commands/sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/base/error.h"
#include "sim/base/text.h"
#include "sim/commands/settings.h"

namespace fragsim {

std::uint64_t kary_search(std::uint64_t lo, std::uint64_t hi, unsigned k,
                          const std::function<std::vector<bool>(const std::vector<std::uint64_t>&)>& eval) {
  while (hi - lo > 1) {
    std::vector<std::uint64_t> xs;
    for (unsigned j = 1; j <= k; ++j) {
      std::uint64_t x = lo + (hi - lo) * j / (k + 1);
      if (x > lo && x < hi && (xs.empty() || xs.back() != x)) xs.push_back(x);
    }
    if (xs.empty()) xs.push_back(lo + 1);
    std::vector<bool> ok = eval(xs);
    std::uint64_t new_lo = lo, new_hi = hi;
    for (size_t i = 0; i < xs.size(); ++i)
      if (ok[i]) new_hi = std::min(new_hi, xs[i]);
    for (size_t i = 0; i < xs.size(); ++i)
      if (!ok[i] && xs[i] < new_hi) new_lo = std::max(new_lo, xs[i]);
    lo = new_lo;
    hi = new_hi;
  }
  return hi;
}

namespace {

// The run of the answer's value, if the sweep has one.
const SweepPoint* answer_point(const SweepResult& r) {
  if (!r.value) return nullptr;
  const auto at = std::find_if(r.runs.begin(), r.runs.end(), [&](const SweepPoint& p) { return p.value == *r.value; });
  return at == r.runs.end() ? nullptr : &*at;
}

// Replays settings from one decode of the trace and remembers every point, by key.
class Points {
 public:
  Points(const SweepOptions& opt, const Registry& reg, std::function<RunOptions(std::uint64_t)> options)
      : opt_(opt), reg_(reg), options_(std::move(options)) {}

  // Replays the keys not seen yet; `what` names the pass for the progress line.
  void eval(std::vector<std::uint64_t> keys, const std::string& what) {
    keys.erase(std::remove_if(keys.begin(), keys.end(), [&](std::uint64_t x) { return seen_.count(x) > 0; }),
               keys.end());
    if (keys.empty()) return;
    if (opt_.on_pass) opt_.on_pass(fmt::format("{}: {} setting{}", what, keys.size(), keys.size() == 1 ? "" : "s"));
    std::vector<RunOptions> runs;
    for (auto x : keys) runs.push_back(options_(x));
    std::vector<RunResult> rs = run_simulations(runs, reg_, opt_.threads);
    for (size_t i = 0; i < rs.size(); ++i) {
      const RunResult& r = rs[i];
      SweepPoint p{0, r.completed, r.ooms.size(), std::nullopt, r.trace_digest, std::nullopt, {}, false, 0, 0, 0, 0};
      for (const SpaceResult& s : r.spaces) {
        if (s.prior && s.prior->rebuilt)
          p.prior_rebuilt = true, p.prior_blocks += s.prior->blocks, p.prior_regions += s.prior->regions;
        if (s.prior) {  // per space: the spaces (a set's ranks) are separate memories, no sum holds anywhere
          p.held_before = std::max(p.held_before, std::max(s.prior->region_bytes, s.prior->live));
          ++p.held_before_spaces;
        }
      }
      if (!r.ooms.empty()) p.first_oom_event = r.ooms[0].event_index;
      if (!r.fatal.empty()) p.fatal_event = r.fatal_event, p.fatal = r.fatal;
      seen_.emplace(keys[i], p);
    }
  }
  std::vector<bool> ok(const std::vector<std::uint64_t>& keys, const std::string& what) {
    eval(keys, what);
    std::vector<bool> v;
    for (auto x : keys) v.push_back(seen_.at(x).completed);
    return v;
  }
  const std::map<std::uint64_t, SweepPoint>& seen() const { return seen_; }

 private:
  const SweepOptions& opt_;
  const Registry& reg_;
  std::function<RunOptions(std::uint64_t)> options_;
  std::map<std::uint64_t, SweepPoint> seen_;
};

Recording recording_of(const RunOptions& o) {
  return o.source ? o.source()->recording() : read_recording(o.trace, o.lenient);
}

RunOptions point_base(const RunOptions& base) {
  RunOptions o = base;
  o.placements.clear();
  o.sink = nullptr;
  o.keep_live_buffers = false;
  o.keep_going = false;
  o.check = false;
  return o;
}

// Settings replayed per pass. Fixed, so that a sweep visits the same settings — and reports the
// same runs — on any machine and with any --jobs.
constexpr unsigned kSearchWidth = 4;
// Capacities above a min-capacity answer replayed to find a failure there: evenly up to twice the
// answer (a band of failures wider than a sixteenth of the answer is found).
constexpr std::uint64_t kCapacityLadder = 16;
// A memory fraction is searched on a grid of millionths (a key k is the fraction k / kFractionUnits).
constexpr std::uint64_t kFractionUnits = 1'000'000;
double fraction_of(std::uint64_t k) { return static_cast<double>(k) / static_cast<double>(kFractionUnits); }

// The settings run `o` holds beside its memory fraction that its framework does not do unset
// (PolicyInfo::stated: a capture's growth on demand), in the policy's own words.
// A set of recordings (or a recording of several devices) keeps each device's own recorded settings:
// none is stated, as one stated value would override them all (trial 22: a JAX host that grew on
// demand beside one that preallocated was told to replay both with XLA_PYTHON_CLIENT_PREALLOCATE=false).
std::vector<StatedSetting> stated_settings(const RunOptions& o, const Registry& reg) {
  const PolicyInfo& info = reg.find(o.policy.name);
  if (!info.stated) return {};
  if (const Recording& rec = recording_of(o); rec.processes > 1 || rec.devices.size() > 1) return {};
  return info.stated(resolved_config(o, recording_of(o), reg), o.vocab);
}

// The replay of a fraction states those settings too, where the request does not (a --set of the
// key, an --env of the variable): pasted, it runs the configuration the answer was found in, not the
// framework's default.
RunRequest with_stated(RunRequest q, const RunOptions& o, const Registry& reg) {
  auto name = [](const std::string& s) { return s.substr(0, s.find('=')); };
  for (const StatedSetting& s : stated_settings(o, reg)) {
    const bool given =
        std::any_of(q.sets.begin(), q.sets.end(), [&](const std::string& x) { return name(x) == s.key; }) ||
        std::any_of(q.envs.begin(), q.envs.end(), [&](const std::string& x) { return name(x) == name(s.env); });
    if (!given && !s.env.empty()) q.envs.push_back(s.env);
  }
  return q;
}

void fraction_sweep(const SweepOptions& opt, const Registry& reg, const FractionKnob& knob, SweepResult& res) {
  // A fraction that caps nothing: the search runs, and says what its answer means (trial 16: ".01"
  // for a 624.5 MiB peak on a 2 GiB device, read as a share that fits).
  if (!knob.not_a_cap.empty())
    res.notes.push_back(
        fmt::format("{}: the memory fraction is {}; --find min-capacity tells how much memory the "
                    "trace needs",
                    knob.spelling(opt.base.vocab.framework).name, knob.not_a_cap));
  // A fraction is of the device's total: where the recording shows a device's usable memory, the
  // preset's total when it explains it (the engine keeps it then), else that usable memory.
  if (opt.base.recorded_devices) {
    Recording rec = recording_of(opt.base);
    const SpaceSpec* hbm = opt.base.hw.space(Space::kHbm);
    for (const auto& d : rec.devices)
      if (hbm && total_explains_usable(hbm->capacity, d.usable))
        res.notes.push_back(fmt::format(
            "each fraction is of device {}'s total memory, {} ({} B): the {} preset's, {} above the usable memory "
            "inferred from the recording ({} or {} overrides it)",
            d.device, human_bytes(hbm->capacity), hbm->capacity, opt.base.hw.name,
            human_bytes(hbm->capacity - d.usable), opt.request.names("--hw"), opt.request.names("--capacity")));
      else
        res.notes.push_back(fmt::format(
            "each fraction is of device {}'s usable memory inferred from the recording, {} ({} B), not of the "
            "{} preset's ({} or {} overrides it)",
            d.device, human_bytes(d.usable), d.usable, opt.base.hw.name, opt.request.names("--hw"),
            opt.request.names("--capacity")));
  }
  // Fractions are replayed on a grid of millionths: hundredths first (0.01..1.00). Where even 0.01
  // fits, a tenth of that step below it (0.001..0.01), and so on; an answer found below 0.01 is then
  // refined between it and the failure below it to two significant digits (0.0035; 0.01 itself too:
  // 0.0099). A finer pass's ten steps must span at least one allocation granule of the device (finer
  // still, the limits it tries would barely differ). Issue 47: "<= 0.01" was the answer for any small trace on
  // a large device (0.01 of an MI300X is 2 GB). cuda-async's fraction caps nothing: every one fits,
  // and no finer step says more.
  Points pts(opt, reg, [&](std::uint64_t k) {
    RunOptions o = point_base(opt.base);
    o.policy.config[knob.key] = fraction_of(k);
    return o;
  });
  const SpaceSpec* hbm = opt.base.hw.space(Space::kHbm);
  auto refines_to = [&](std::uint64_t step) {  // a pass of ten such steps spans a granule at least
    return step >= 1 && knob.not_a_cap.empty() &&
           (!hbm ||
            10 * static_cast<double>(hbm->capacity) * fraction_of(step) >= static_cast<double>(hbm->granularity));
  };
  // The highest fraction replayed that fails (0: none).
  auto highest_failure = [&] {
    for (auto it = pts.seen().rbegin(); it != pts.seen().rend(); ++it)
      if (!it->second.completed) return it->first;
    return std::uint64_t{0};
  };
  std::vector<std::string> basis;
  // One pass: the fractions base + i * step for i in 1..n, the last known to fit unless it is 1.00.
  for (std::uint64_t base = 0, step = kFractionUnits / 100, n = 100;;) {
    auto key = [&](std::uint64_t i) { return base + i * step; };
    const std::string span =
        fmt::format("{}..{}", fraction_number(fraction_of(key(1))), fraction_number(fraction_of(key(n))));
    auto keys = [&](std::uint64_t a, std::uint64_t b) {
      std::vector<std::uint64_t> ks;
      for (std::uint64_t i = a; i <= b; ++i) ks.push_back(key(i));
      return ks;
    };
    bool every = false;
    auto every_fraction = [&] {
      pts.eval(keys(1, n), "every fraction " + span);
      every = true;
    };
    if (opt.exhaustive) {
      every_fraction();
    } else {
      std::uint64_t lo = 0, hi = n;
      if (opt.hint) {
        const auto h = static_cast<double>(std::llround(*opt.hint * static_cast<double>(kFractionUnits)));
        const auto i = std::clamp<std::uint64_t>(
            static_cast<std::uint64_t>(
                std::llround(std::max(0.0, h - static_cast<double>(base)) / static_cast<double>(step))),
            1, n);
        pts.eval(i > 1 ? keys(i - 1, i) : keys(i, i), "the hint and the fraction below it");
        if (pts.seen().at(key(i)).completed)
          hi = i, lo = i > 1 && !pts.seen().at(key(i - 1)).completed ? i - 1 : 0;
        else
          lo = i;
      }
      if (hi == n) pts.eval(keys(n, n), "fraction " + fraction_number(fraction_of(key(n))));
      if (pts.seen().at(key(hi)).completed) {
        int round = 0;
        hi = kary_search(lo, hi, kSearchWidth, [&](const std::vector<std::uint64_t>& xs) {
          std::vector<std::uint64_t> ks;
          for (auto x : xs) ks.push_back(key(x));
          return pts.ok(ks, fmt::format("bisection round {}", ++round));
        });
        const auto v = static_cast<std::uint64_t>(std::max(opt.verify, 0));
        pts.eval(keys(hi > v ? hi - v : 1, std::min(n, hi + v)), "checking the answer's neighbours");
        bool breaks_above = false;  // a failure at or above the answer: the bisection cannot be trusted
        for (const auto& [x, p] : pts.seen()) breaks_above = breaks_above || (x >= key(hi) && !p.completed);
        if (breaks_above) every_fraction();
      }
    }
    const bool top_fails = pts.seen().count(kFractionUnits) && !pts.seen().at(kFractionUnits).completed;
    basis.push_back(every       ? fmt::format("observed over every fraction {}{}", span,
                                        opt.exhaustive ? "" : " (the bisection met a non-monotonic outcome)")
                    : top_fails ? "fraction 1.00 does not fit, so none can (--exhaustive replays every fraction)"
                    : base == 0 && n == 100
                        ? fmt::format("bisection; checked {} fractions on each side of the answer", opt.verify)
                        : fmt::format("then bisection over {}, {} checked on each side", span, opt.verify));
    // Finer: below the lowest fraction when every one fits; between the failure and the answer when
    // the answer lies below 0.01 with fewer than two significant digits.
    const std::uint64_t fails = highest_failure();
    const auto above = pts.seen().upper_bound(fails);
    if (above == pts.seen().end() || !refines_to(step / 10)) break;
    if (fails == 0) {
      base = 0;
    } else if (above->first <= kFractionUnits / 100 && above->first <= 10 * step && above->first - fails == step) {
      // (An answer of 0.01 or 0.001 itself, one step above a failure, is refined too: trial 22 found
      // 0.0099 fitting where the answer said 0.01.)
      base = fails;
    } else {
      break;
    }
    step /= 10, n = 10;
  }
  res.monotonic_basis = fmt::format("{}", fmt::join(basis, "; "));
  // In the words of the framework that recorded the trace (TensorFlow: per_process_gpu_memory_fraction).
  const Framework fw = opt.base.vocab.framework;
  const std::uint64_t lowest = pts.seen().begin()->first;
  res.range = fmt::format("{} from {} to 1.00, {} fractions replayed", knob.spelling(fw).name,
                          fraction_number(fraction_of(lowest)), pts.seen().size());
  // The answer: the lowest fraction replayed above the highest one that fails (every larger one
  // replayed completes); the lowest replayed, a bound, when none fails.
  const std::uint64_t safe = highest_failure();
  for (const auto& [x, p] : pts.seen()) {
    SweepPoint q = p;
    q.value = fraction_of(x);
    res.runs.push_back(q);
    if (x <= safe && p.completed) res.anomalies.push_back(q.value);
  }
  if (const auto above = pts.seen().upper_bound(safe); above != pts.seen().end()) {
    const double v = fraction_of(above->first);
    res.value = v;
    res.bound = safe == 0;
    res.setting = framework_setting(opt.base, opt.request, reg, knob.setting(v, fw), knob.by_env(fw));
    RunRequest q = with_stated(knob.by_env(fw) ? with_env(opt.request, knob.argument(v, fw), knob.key)
                                               : with_set(opt.request, knob.argument(v, fw)),
                               opt.base, reg);
    q.keep_going = q.check = false;
    res.command = command_line(q);
  }
}

void capacity_sweep(const SweepOptions& opt, const Registry& reg, SweepResult& res) {
  const SpaceSpec* hbm = opt.base.hw.space(Space::kHbm);
  if (!hbm)
    throw InputError(opt.request.names.with("--find", "min-capacity") + ": hardware '" + opt.base.hw.name +
                     "' has no hbm space");
  const Bytes g = std::max<Bytes>(hbm->granularity, 1);
  // The runtime's own holdback below capacity (TPU) stays what the preset says.
  const Bytes holdback = hbm->runtime_holdback();
  if (opt.base.recorded_devices)
    res.notes.push_back(
        "each capacity tried applies to every device of the run (memory a recording inferred for a "
        "device is not used)");
  if (holdback)
    res.notes.push_back(fmt::format("the TPU runtime's limit stays {} below each capacity tried, as on the preset",
                                    human_bytes(holdback)));
  // A fraction the policy took from the recording (a recorded OOM was the allocator's own cap)
  // keeps that cap in bytes whatever the capacity: more memory never lifts it.
  const PolicyInfo& info = reg.find(opt.base.policy.name);
  if (info.fraction && !opt.base.policy.config.contains(info.fraction->key)) {
    const Recording rec = recording_of(opt.base);
    if (std::any_of(rec.devices.begin(), rec.devices.end(), [](const auto& d) { return d.cap.has_value(); }) &&
        resolved_config(opt.base, rec, reg).contains(info.fraction->key))
      res.notes.push_back(fmt::format(
          "{}'s {} is inferred from the recording (its OOM came with room on the device: the allocator's own cap), "
          "the same cap in bytes at every capacity tried; {} {} replays without it",
          info.name, info.fraction->key, info.fraction->by_env(opt.base.vocab.framework) ? "--env" : "--set",
          info.fraction->argument(1.0, opt.base.vocab.framework)));
  }
  Points pts(opt, reg, [&](std::uint64_t k) {
    RunOptions o = point_base(opt.base);
    SpaceSpec* s = o.hw.space(Space::kHbm);
    s->set_capacity(k * g);
    o.recorded_devices = false;
    return o;
  });
  int pass = 0;
  auto what = [&] { return fmt::format("capacity pass {}", ++pass); };
  // An upper bound that completes: the reserve plus 2 GiB, doubling, up to 64 TiB.
  std::uint64_t lo = 0, hi = std::max<std::uint64_t>(1, (hbm->reserve + 2 * kGiB) / g);
  const std::uint64_t top = (std::uint64_t{1} << 46) / g;
  if (opt.hint) {  // the hint's step and the one below it bound the search when they decide it
    const std::uint64_t k = std::clamp<std::uint64_t>(static_cast<std::uint64_t>(*opt.hint) / g, 1, top);
    pts.eval(k > 1 ? std::vector<std::uint64_t>{k - 1, k} : std::vector<std::uint64_t>{k}, what());
    if (pts.seen().at(k).completed)
      hi = k, lo = k > 1 && !pts.seen().at(k - 1).completed ? k - 1 : 0;
    else
      lo = k, hi = std::min(top, 2 * k);
  }
  // From a capacity that fails (lo), doubling until one completes (hi), up to the top.
  auto completes_above = [&] {
    while (!pts.ok({hi}, what())[0]) {
      lo = hi;
      if (hi >= top) break;
      hi = std::min(top, hi * 2);
    }
    return pts.seen().at(hi).completed;
  };
  bool found = completes_above();
  if (found) {
    hi = kary_search(lo, hi, kSearchWidth, [&](const std::vector<std::uint64_t>& ks) { return pts.ok(ks, what()); });
    // The outcome need not be monotonic (a framework's limit rule with a step in it, a placement
    // that lands otherwise): the answer's neighbours, and a ladder of capacities up to twice it, are
    // replayed too, and a failure among them moves the answer above the highest one — the smallest
    // capacity from which every larger one tried completes, as the fraction search answers.
    for (int round = 0; found && round < 8; ++round) {
      std::vector<std::uint64_t> ks;
      for (int d = 1; d <= opt.verify; ++d) {
        if (hi > static_cast<std::uint64_t>(d)) ks.push_back(hi - d);
        ks.push_back(std::min(top, hi + d));
      }
      if (opt.verify)
        for (std::uint64_t j = 1; j <= kCapacityLadder; ++j) ks.push_back(std::min(top, hi + hi * j / kCapacityLadder));
      pts.eval(ks, what());
      std::optional<std::uint64_t> fails;  // the highest capacity at or above the answer that fails
      for (auto it = pts.seen().rbegin(); it != pts.seen().rend() && it->first >= hi; ++it)
        if (!it->second.completed) {
          fails = it->first;
          break;
        }
      if (!fails) break;
      lo = *fails;
      const auto above = pts.seen().upper_bound(lo);  // every seen capacity above it completes
      hi = above != pts.seen().end() ? above->first : std::min(top, 2 * lo);
      if (above == pts.seen().end()) found = completes_above();
      if (found)
        hi = kary_search(lo, hi, kSearchWidth, [&](const std::vector<std::uint64_t>& k) { return pts.ok(k, what()); });
    }
    for (const auto& [k, p] : pts.seen())
      if (found && k < hi && p.completed) res.anomalies.push_back(static_cast<double>(k * g));
    res.monotonic_basis =
        fmt::format("bisection; checked {} granularity steps on each side of the answer{}", opt.verify,
                    opt.verify ? fmt::format(" and {} capacities up to twice it", kCapacityLadder) : std::string());
  }
  Bytes searched = pts.seen().empty() ? 0 : pts.seen().rbegin()->first * g;
  res.range = fmt::format(
      "capacities up to {} in steps of {} (the device's allocation granularity){}, {} replayed", human_bytes(searched),
      human_bytes(g),
      searched > hbm->capacity ? fmt::format(", past the run's capacity of {}", human_bytes(hbm->capacity)) : "",
      pts.seen().size());
  for (const auto& [k, p] : pts.seen()) {
    SweepPoint q = p;
    q.value = static_cast<double>(k * g);
    res.runs.push_back(q);
  }
  res.monotonic = res.anomalies.empty();
  if (!found) return;
  Bytes c = hi * g;
  res.value = static_cast<double>(c);
  res.bound = hi == 1;
  res.setting = opt.request.names.with("--capacity", size_arg(c));
  RunRequest q = opt.request;
  q.capacity = size_arg(c);
  q.keep_going = q.check = false;
  res.command = command_line(q);
}

// The search again in each order and history of the re-held state that the answer's run did not
// take (prior_variants: the recording cannot tell them apart), when that run re-held one. Each
// searches on its own, as the run's did; the user cannot choose the order, so the answer from which
// every one fits is replayed with the run's own (it fits there too).
void add_orders(const SweepOptions& opt, SweepResult& res,
                const std::function<void(const SweepOptions&, SweepResult&)>& search) {
  const SweepPoint* at = answer_point(res);
  if (!at || !at->prior_rebuilt) return;
  SweepResult::Orders o{at->prior_blocks, at->prior_regions, {res.value}, res.value, res.setting, res.command};
  const std::vector<PriorVariant> variants = prior_variants(at->prior_regions > 0);
  for (size_t k = 0; k < variants.size(); ++k) {
    SweepOptions vo = opt;
    vo.hint = res.value;  // orders often agree: the answer's step and the one below settle it
    vo.verify = 0;
    vo.base.prior.history = variants[k].history;
    vo.base.prior.descending = variants[k].descending;
    vo.base.prior.range = false;
    if (opt.on_pass)
      vo.on_pass = [&, k](const std::string& what) {
        opt.on_pass(fmt::format("order {} of {}: {}", k + 2, variants.size() + 1, what));
      };
    SweepResult vr;
    vr.find = res.find;
    search(vo, vr);
    o.values.push_back(vr.value);
    if (!vr.value) {
      o.every.reset();
    } else if (o.every && *vr.value > *o.every) {
      o.every = vr.value;
      o.setting = vr.setting;
      o.command = vr.command;
    }
  }
  res.orders = std::move(o);
}

}  // namespace

std::string framework_setting(const RunOptions& o, const RunRequest& req, const Registry& reg,
                              const std::string& setting, bool env) {
  auto variable_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  std::vector<std::string> vars;
  std::string unselectable;
  // A recording of a framework's allocator (a plain trace names none), replayed through another one.
  const PolicyInfo* own =
      o.vocab.framework == Framework::kUnknown
          ? nullptr
          : &reg.find(parse_policy_ref(reg.default_for(recording_of(o), o.hw.kind).ref, "default policy").name);
  if (own && own->name != o.policy.name) {
    std::string selects;
    if (own->what_ifs)
      for (const WhatIf& w : own->what_ifs(nlohmann::json::object(), o.vocab))
        if (w.ref == o.policy.name) selects = w.setting;
    if (!selects.empty())
      vars.push_back(selects);
    else
      unselectable = fmt::format(
          " with fragsim's {}, which no {} setting selects{}", o.policy.name, framework_name(o.vocab.framework),
          o.vocab.platform == Platform::kUnknown ? "" : fmt::format(" on {}", platform_name(o.vocab.platform)));
  }
  const std::string own_var = env ? variable_of(setting) : "";
  std::vector<std::string> given = req.envs;  // then what the run holds that the framework does not do unset
  for (const StatedSetting& s : stated_settings(o, reg)) given.push_back(s.setting);
  for (const std::string& e : given)
    if (variable_of(e) != own_var &&
        std::none_of(vars.begin(), vars.end(), [&](const std::string& v) { return variable_of(v) == variable_of(e); }))
      vars.push_back(e);
  if (vars.empty()) return setting + unselectable;
  return fmt::format("{}{}{}{}", fmt::join(vars, " "), env ? " " : " and ", setting, unselectable);
}

SweepResult run_sweep(const SweepOptions& given, const Registry& reg) {
  SweepOptions opt = given;
  // Every pass replays the trace: a snapshot or a capture is decoded once, not once a pass.
  if (!opt.base.source && decodes_whole(opt.base.trace))
    opt.base.source = decode_once(opt.base.trace, ReaderOptions{opt.base.lenient});
  SweepResult res;
  res.find = opt.find;
  res.policy = opt.base.policy.name;
  res.policy_config = opt.base.policy.config;
  res.hardware = opt.base.hw.to_json();
  res.trace = opt.base.trace;
  if (opt.find == "min-mem-fraction") {
    const PolicyInfo& info = reg.find(opt.base.policy.name);
    if (!info.fraction) {
      std::vector<std::string> with;
      for (const auto& p : reg.all())
        if (p.fraction) with.push_back(p.name);
      RunRequest q = opt.request;
      q.keep_going = q.check = false;
      throw InputError(
          fmt::format("{}: policy {} has no memory fraction (these do: {}); {} finds the memory the trace needs",
                      opt.request.names.with("--find", "min-mem-fraction"), info.name, fmt::join(with, ", "),
                      opt.request.names.python ? std::string("find='min-capacity'")
                                               : "`" + command_line(q, "sweep", {"--find", "min-capacity"}) + "`"));
    }
    auto search = [&](const SweepOptions& o, SweepResult& r) { fraction_sweep(o, reg, *info.fraction, r); };
    search(opt, res);
    add_orders(opt, res, search);
  } else if (opt.find == "min-capacity") {
    auto search = [&](const SweepOptions& o, SweepResult& r) { capacity_sweep(o, reg, r); };
    search(opt, res);
    add_orders(opt, res, search);
  } else {
    throw InputError(opt.request.names("--find") + ": must be min-capacity or min-mem-fraction");
  }
  res.monotonic = res.anomalies.empty();
  if (!res.runs.empty()) res.trace_digest = res.runs.front().trace_digest;
  return res;
}

nlohmann::json sweep_json(const SweepResult& r) {
  // A capacity is a whole number of bytes: written as one (a fraction as the number it is).
  auto value = [&](double v) {
    return r.find == "min-capacity" ? nlohmann::json(static_cast<Bytes>(v)) : nlohmann::json(v);
  };
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& p : r.runs) {
    nlohmann::json j = {{"value", value(p.value)}, {"completed", p.completed}, {"oom_count", p.oom_count}};
    if (p.first_oom_event) j["first_oom_event"] = *p.first_oom_event;
    if (p.fatal_event) j["fatal"] = {{"event_index", *p.fatal_event}, {"message", p.fatal}};
    runs.push_back(j);
  }
  nlohmann::json j = {{"find", r.find},
                      {"policy", {{"name", r.policy}, {"config", r.policy_config}}},
                      {"hardware", r.hardware},
                      {"trace", {{"path", r.trace}, {"digest", r.trace_digest}}},
                      {"value", r.value ? value(*r.value) : nlohmann::json()},
                      {"bound", r.bound},
                      {"setting", r.value ? nlohmann::json(r.setting) : nlohmann::json()},
                      {"command", r.value ? nlohmann::json(r.command) : nlohmann::json()},
                      {"range", r.range},
                      {"monotonic", r.monotonic},
                      {"monotonic_basis", r.monotonic_basis},
                      {"anomalies", r.anomalies},
                      {"runs", runs}};
  if (!r.notes.empty()) j["notes"] = r.notes;
  if (const SweepPoint* at = answer_point(r); at && at->held_before) j["held_before_recording_bytes"] = at->held_before;
  if (r.orders) {
    nlohmann::json vs = nlohmann::json::array();
    for (const auto& v : r.orders->values) vs.push_back(v ? value(*v) : nlohmann::json());
    j["orders"] = {{"blocks", r.orders->blocks},
                   {"regions", r.orders->regions},
                   {"values", vs},
                   {"every", r.orders->every ? value(*r.orders->every) : nlohmann::json()},
                   {"setting", r.orders->every ? nlohmann::json(r.orders->setting) : nlohmann::json()},
                   {"command", r.orders->every ? nlohmann::json(r.orders->command) : nlohmann::json()}};
  }
  return j;
}

namespace {
std::string value_text(const SweepResult& r, double v) {
  return r.find == "min-capacity" ? human_bytes(static_cast<Bytes>(v)) : fraction_number(v);
}
}  // namespace

std::string sweep_orders_text(const SweepResult& r) {
  if (!r.orders) return {};
  const SweepResult::Orders& o = *r.orders;
  const std::string lead = fmt::format(
      "over the {} orders and histories considered for {} held before recording began (the recording "
      "cannot tell them apart)",
      o.values.size(), prior_variants_of(o.blocks, o.regions));
  std::optional<double> lo, hi;
  std::uint64_t none = 0;
  for (const auto& v : o.values) {
    if (!v) {
      ++none;
      continue;
    }
    lo = lo ? std::min(*lo, *v) : *v;
    hi = hi ? std::max(*hi, *v) : *v;
  }
  if (!none && lo == hi) return fmt::format("{}: every one gives {}", lead, value_text(r, *lo));
  std::string s = fmt::format("{}: {}-{}", lead, value_text(r, *lo), value_text(r, *hi));
  if (none) return s + fmt::format("; {} of them fit{} at no value tried", none, none == 1 ? "s" : "");
  return s + fmt::format("; every one fits from {}: `{}`", o.setting, o.command);
}

std::string sweep_text(const SweepResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  for (const auto& n : r.notes) fmt::format_to(out, "note: {}\n", n);
  if (!r.value) {
    // How the largest value tried failed: an OOM, or the allocator's abort with no OOM before it.
    const auto top = std::max_element(r.runs.begin(), r.runs.end(),
                                      [](const SweepPoint& a, const SweepPoint& b) { return a.value < b.value; });
    const std::string fails = top != r.runs.end() && top->fatal_event && top->oom_count == 0
                                  ? fmt::format("aborts (at event {}: {})", *top->fatal_event, top->fatal)
                                  : "OOMs";
    if (r.find == "min-mem-fraction")
      fmt::format_to(out,
                     "no memory fraction works: {} {} even with the whole device (searched {}); "
                     "`--find min-capacity` tells how much memory the trace needs\n",
                     r.policy, fails, r.range);
    else
      fmt::format_to(out, "no capacity works: {} {} even at the largest capacity tried (searched {})\n", r.policy,
                     fails, r.range);
    return s;
  }
  // The answer holds for this run's reading of the memory held before the recording; where another
  // reading needs more, the headline says so (trial 14: a card sized by it OOMed in the other order).
  const bool others_need_more =
      r.orders && std::any_of(r.orders->values.begin(), r.orders->values.end(),
                              [&](const std::optional<double>& v) { return !v || *v > *r.value; });
  const std::string caveat =
      others_need_more ? " in this run's order of the memory held before recording began (another needs more: below)"
                       : "";
  // Where smaller values completed too (the outcome is not monotonic: TensorFlow's reserve for the
  // system steps at 2 GiB free), the answer is no smallest value with no OOM: the headline says what it
  // is, and the smallest one tried that completes (trial: "smallest capacity with no OOM: 784.00 MiB"
  // where 560 MiB completed).
  const std::string what = r.anomalies.empty() ? "with no OOM" : "from which every larger one completes";
  std::string smaller;
  if (!r.anomalies.empty()) {
    const double least = *std::min_element(r.anomalies.begin(), r.anomalies.end());
    smaller = fmt::format("; smaller ones complete too (not monotonic, below), the smallest tried {}",
                          r.find == "min-capacity" ? fmt::format("{} ({} B)", human_bytes(static_cast<Bytes>(least)),
                                                                 static_cast<Bytes>(least))
                                                   : value_text(r, least));
  }
  if (r.find == "min-capacity")
    fmt::format_to(out, "smallest capacity {}: {}{} ({} B){}{}\n", what, r.bound ? "<= " : "",
                   human_bytes(static_cast<Bytes>(*r.value)), static_cast<Bytes>(*r.value), caveat, smaller);
  else
    fmt::format_to(
        out, "smallest memory fraction {}: {}{}{}{}{}\n", what, r.bound ? "<= " : "", value_text(r, *r.value),
        r.bound ? fmt::format(" (the lowest fraction tried: every fraction from {} up fits)", value_text(r, *r.value))
                : "",
        caveat, smaller);
  fmt::format_to(out, "  setting: {}\n", r.setting);
  fmt::format_to(out, "  replay:  {}\n", r.command);
  // A recording that began mid-run shows the window, not what the program needed before it (trial
  // 19: a cut snapshot's 2.03 GiB where its complete recording needs 4.01 GiB, the demand before
  // the cut): the answer says so, as the run does.
  if (const SweepPoint* at = answer_point(r); at && at->held_before)
    fmt::format_to(out,
                   "  the recording began mid-run ({} held then{}): the answer covers its window; the program's demand "
                   "before recording began, which it does not show, may need more\n",
                   human_bytes(at->held_before), at->held_before_spaces > 1 ? " on one device, the most of any" : "");
  if (r.orders) fmt::format_to(out, "  {}\n", sweep_orders_text(r));
  fmt::format_to(out, "  searched {}\n", r.range);
  fmt::format_to(out, "  monotonic: {} ({})\n", r.monotonic ? "yes" : "NO", r.monotonic_basis);
  if (!r.anomalies.empty()) {
    fmt::format_to(out, "  outcomes that break monotonicity at:");
    for (double a : r.anomalies) fmt::format_to(out, " {}", value_text(r, a));
    fmt::format_to(out, "\n");
  }
  return s;
}

}  // namespace fragsim

#include "sim/commands/advice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "sim/base/error.h"
#include "sim/commands/settings.h"
#include "sim/commands/sweep.h"
#include "sim/commands/waste.h"

namespace fragsim {

namespace {

std::string var_of(const std::string& env) { return env.substr(0, env.find('=')); }

// The request with the candidate's setting in place of what it replaces.
RunRequest with_candidate(RunRequest req, const AdviceCandidate& c) {
  auto drops = [&](const std::string& env) {
    std::string v = var_of(env);
    return std::any_of(c.envs.begin(), c.envs.end(), [&](const std::string& e) { return var_of(e) == v; }) ||
           std::find(c.drop_envs.begin(), c.drop_envs.end(), v) != c.drop_envs.end();
  };
  req.envs.erase(std::remove_if(req.envs.begin(), req.envs.end(), drops), req.envs.end());
  req.envs.insert(req.envs.end(), c.envs.begin(), c.envs.end());
  auto same_key = [&](const std::string& s) {
    return std::any_of(c.sets.begin(), c.sets.end(), [&](const std::string& t) { return var_of(t) == var_of(s); });
  };
  req.sets.erase(std::remove_if(req.sets.begin(), req.sets.end(), same_key), req.sets.end());
  req.sets.insert(req.sets.end(), c.sets.begin(), c.sets.end());
  for (const auto& s : c.sets) req.policy = policy_ref_without(req.policy, var_of(s));  // brackets win over --set
  if (!c.policy.empty() && !req.policy.empty()) req.policy = c.policy;
  return req;
}

const SpaceResult* space_of(const RunResult& r, std::uint32_t device, Space space) {
  for (const auto& s : r.spaces)
    if (s.device == device && s.space == space) return &s;
  return nullptr;
}

// A request as the sweep that answers `find` takes it.
std::string sweep_command(RunRequest req, const std::string& find) {
  req.keep_going = req.check = false;
  return command_line(req, "sweep", {"--find", find});
}

// What every replay of one request shares: the recording, and one decode of a snapshot or a
// capture for all of them.
struct ReplayBase {
  Recording recording;
  TraceSource source;
};
ReplayBase replay_base(const RunRequest& req) {
  ReplayBase b{read_recording(req), {}};
  b.source = request_source(req, req.source                 ? req.source
                                 : decodes_whole(req.trace) ? decode_once(req.trace, ReaderOptions{req.lenient})
                                                            : nullptr);
  return b;
}

struct Replayed {
  const AdviceCandidate* candidate;
  RunRequest request;
  RunResult result;
};
// Replays every fixed setting of `cands` (a fraction to search is not one), in parallel. A setting
// the request cannot take (the user's own options conflict with it) is left out.
std::vector<Replayed> replay_candidates(const std::vector<AdviceCandidate>& cands, const RunRequest& req,
                                        const Registry& reg, const ReplayBase& base, unsigned threads) {
  std::vector<Replayed> out;
  std::vector<RunOptions> runs;
  for (const auto& c : cands) {
    if (c.find_fraction) continue;
    RunRequest q = with_candidate(req, c);
    q.keep_going = q.check = false;
    try {
      RunOptions o2 = prepare_run(q, reg, &base.recording);  // InputError when the policy refuses the request's options
      o2.source = base.source;
      runs.push_back(std::move(o2));
    } catch (const InputError&) {
      continue;
    }
    out.push_back({&c, q, {}});
  }
  if (runs.empty()) return out;
  std::vector<RunResult> rs = run_simulations(runs, reg, threads);
  for (size_t i = 0; i < rs.size(); ++i) out[i].result = std::move(rs[i]);
  return out;
}

// Whether a run held the state before its recording where the recording placed it (rebuilt: false)
// or re-held it (true) on any space.
bool holds_prior(const RunResult& x, bool rebuilt) {
  return std::any_of(x.spaces.begin(), x.spaces.end(),
                     [&](const SpaceResult& s) { return s.prior && s.prior->rebuilt == rebuilt; });
}

// A mid-run recording whose state run `r` held where the recording placed it: a setting that
// changes the allocator re-holds that state under itself (sim/engine/engine_prior.cpp), so what its
// replay shows may come from the re-holding alone. The control is the run's own settings with the
// state re-held (--pre-trace rebuilt): a setting's effect is measured against it, not against `r`.
// None when `r` re-held its state already or no replay re-held one.
std::optional<Replayed> control_replay(const RunResult& r, const std::vector<Replayed>& replays, const RunRequest& req,
                                       const Registry& reg, const ReplayBase& base, unsigned threads) {
  if (!holds_prior(r, false) ||
      std::none_of(replays.begin(), replays.end(), [](const Replayed& rp) { return holds_prior(rp.result, true); }))
    return std::nullopt;
  RunRequest q = req;
  q.keep_going = q.check = false;
  q.pre_trace = "rebuilt";
  RunOptions o = prepare_run(q, reg, &base.recording);
  o.source = base.source;
  return Replayed{nullptr, q, std::move(run_simulations({o}, reg, threads).front())};
}

}  // namespace

std::vector<std::string> proven_advice(const RunResult& r, const RunRequest& req, const Registry& reg,
                                       unsigned threads) {
  std::vector<std::string> lines;
  if (r.ooms.empty()) return lines;
  const OomRecord& o = r.ooms.front();
  const SpaceResult* sp = space_of(r, o.device, o.space);
  FRAGSIM_CHECK(sp, "an OOM on a space the run has no result for");
  const std::string where = fmt::format("device {} {}", o.device, space_name(o.space));
  const ReplayBase base = replay_base(req);
  const Recording& recording = base.recording;
  // The answer's range over the orders of the state before the recording, where the sweep found one.
  auto orders_of = [](const SweepResult& sw) { return sw.orders ? "; " + sweep_orders_text(sw) : std::string(); };
  auto sweep = [&](const std::string& find) {
    SweepOptions so;
    so.request = req;
    so.base = prepare_run(req, reg, &recording);
    so.base.source = base.source;
    so.find = find;
    so.threads = threads;
    return run_sweep(so, reg);
  };
  // The memory this policy needs, found by the capacity sweep (each capacity replayed).
  auto capacity_line = [&](const std::string& lead) {
    SweepResult sw = sweep("min-capacity");
    if (!sw.value)
      return fmt::format("{}no capacity tried lets {} fit ({}): the settings given bind first", lead, r.policy_name,
                         sw.range);
    if (sw.bound)  // the lowest capacity tried fits: the answer is an upper bound
      return fmt::format(
          "{}with {} it fits at every capacity tried, down to the lowest, {} (a smaller one may fit "
          "too), verified by replay (`{}` shows the search): `{}`",
          lead, r.policy_name, sw.setting, sweep_command(req, "min-capacity"), sw.command);
    return fmt::format("{}with {} it fits from {} on, verified by replay (`{}` shows the search): `{}`{}", lead,
                       r.policy_name, sw.setting, sweep_command(req, "min-capacity"), sw.command, orders_of(sw));
  };
  // The live buffers alone do not fit: only more memory helps.
  if (sp->usable && sp->peak_requested > sp->usable) {
    lines.push_back(capacity_line(fmt::format(
        "memory: the live buffers on {} alone reach {}, more than the {} it gives allocators: no allocator setting "
        "helps; ",
        where, human_bytes(sp->peak_requested), human_bytes(sp->usable))));
    return lines;
  }
  const PolicyInfo& info = reg.find(r.policy_name);
  RunOptions prepared = prepare_run(req, reg, &recording);
  prepared.source = base.source;
  const Vocabulary vocab = prepared.vocab;  // whose settings to suggest
  std::vector<AdviceCandidate> cands;
  if (info.advise) cands = info.advise({r.policy_config, o.fragmentation, o.kind, o.reserved, o.rounded, vocab});
  const bool fraction =
      info.fraction && info.fraction->not_a_cap.empty() &&
      std::any_of(cands.begin(), cands.end(), [](const AdviceCandidate& c) { return c.find_fraction; });
  std::vector<std::string> tried;
  bool fits = false;
  std::vector<Replayed> replays = replay_candidates(cands, req, reg, base, threads);
  // When the control fits too, the OOM lies in the recorded layout of the memory held before
  // recording began, and a setting's fit proves nothing about the setting.
  const std::optional<Replayed> control = control_replay(r, replays, req, reg, base, threads);
  std::vector<std::string> unproven;  // settings that fit only as the re-held state does
  for (const Replayed& rp : replays) {
    const AdviceCandidate& c = *rp.candidate;
    if (rp.result.completed && control && control->result.completed && holds_prior(rp.result, true)) {
      unproven.push_back(c.setting);
    } else if (rp.result.completed) {
      const SpaceResult* s2 = space_of(rp.result, o.device, o.space);
      lines.push_back(
          fmt::format("{}: {} — verified by replay: the trace fits (no OOM; peak reserved {} on {}); {}: `{}`",
                      c.problem, c.setting, human_bytes(s2 ? s2->peak_reserved : rp.result.peak_reserved), where, c.why,
                      command_line(rp.request)));
      fits = true;
    } else {
      tried.push_back(fmt::format("{} (OOM at event {})", c.setting,
                                  rp.result.ooms.empty() ? rp.result.fatal_event : rp.result.ooms.front().event_index));
    }
  }
  if (fraction) {
    SweepResult sw = sweep("min-mem-fraction");
    // This run's own fraction, where it set one: below the lowest the search tries, it is the
    // failure below the answer (the trial's .0024 run was told ".01 ... a smaller one may fit too").
    const nlohmann::json& own_json = r.policy_config.is_object() && r.policy_config.contains(info.fraction->key)
                                         ? r.policy_config[info.fraction->key]
                                         : nlohmann::json();
    const double own = own_json.is_number() ? own_json.get<double>() : 0.0;
    if (sw.value) {
      lines.push_back(
          sw.bound && own > 0 && own < *sw.value
              ? fmt::format("memory: the smallest fraction with which the trace fits lies between this run's, "
                            "{:g}, which runs out, and {}, the lowest the search tries, which fits, verified by replay "
                            "(`{}` shows the search): `{}`",
                            own, sw.setting, sweep_command(req, "min-mem-fraction"), sw.command)
          : sw.bound ? fmt::format("memory: the trace fits with every fraction tried, down to the lowest, {} (a "
                                   "smaller one may fit too), verified by replay (`{}` shows the search): `{}`",
                                   sw.setting, sweep_command(req, "min-mem-fraction"), sw.command)
                     : fmt::format("memory: {} is the smallest fraction with which the trace fits, verified by replay "
                                   "(`{}` shows the search): `{}`{}",
                                   sw.setting, sweep_command(req, "min-mem-fraction"), sw.command, orders_of(sw)));
      fits = true;
    } else {
      tried.push_back(fmt::format("{} (still OOMs)",
                                  framework_setting(prepared, req, reg, info.fraction->setting(1.0, vocab.framework),
                                                    info.fraction->by_env(vocab.framework))));
    }
  }
  if (!unproven.empty()) {
    const SpaceResult* s2 = space_of(control->result, o.device, o.space);
    lines.push_back(fmt::format(
        "before the recording: with this run's own settings and the memory live when recording began re-held (as "
        "any setting that changes the allocator re-holds it), the trace fits (no OOM; peak reserved {} on {}): this "
        "OOM comes from where the recording placed that memory, which the program's history decides and the "
        "recording does not show, so the fits of {} prove nothing about those settings: `{}`",
        human_bytes(s2 ? s2->peak_reserved : control->result.peak_reserved), where, fmt::join(unproven, ", "),
        command_line(control->request)));
  }
  if (!tried.empty()) lines.push_back(fmt::format("tried by replay, still OOM: {}", fmt::join(tried, "; ")));
  if (!fits) lines.push_back(capacity_line("capacity: "));
  return lines;
}

std::string proven_waste_advice(const RunResult& r, const RunRequest& req, const Registry& reg, unsigned threads) {
  const SpaceResult* sp = r.binding_space();
  if (!sp || wasteful_space(r) != sp) return {};
  std::string plain = waste_advice(r);
  const PolicyInfo& info = reg.find(r.policy_name);
  if (!info.advise) return plain;
  const ReplayBase base = replay_base(req);
  const Vocabulary vocab = prepare_run(req, reg, &base.recording).vocab;
  // The settings the policy proposes against fragmentation, as after a fragmentation OOM, but for
  // those that cost speed on every call: this line credits the memory saved and not the cost.
  std::vector<AdviceCandidate> cands;
  for (AdviceCandidate& c : info.advise({r.policy_config, true, "", sp->peak_reserved, 0, vocab}))
    if (c.problem == "fragmentation" && !c.find_fraction && !c.slow) cands.push_back(std::move(c));
  WasteCredit best;
  const std::vector<Replayed> replays = replay_candidates(cands, req, reg, base, threads);
  // A setting's credit is what it saves against the same state re-held (control_replay), when its
  // replay re-held one: not against the recorded layout.
  const std::optional<Replayed> control = control_replay(r, replays, req, reg, base, threads);
  const SpaceResult* c0 = control ? space_of(control->result, sp->device, sp->space) : nullptr;
  const Bytes baseline = c0 && control->result.ooms.size() <= r.ooms.size()
                             ? std::min(c0->peak_reserved, sp->peak_reserved)
                             : sp->peak_reserved;
  for (const Replayed& rp : replays) {
    const SpaceResult* s2 = space_of(rp.result, sp->device, sp->space);
    // A replay that runs out of memory earlier than the run did proves nothing about its peak: it
    // replayed fewer events (trial 16: "recovers 17.18 MiB ... peak reserved 184.00 MiB" from a replay
    // that stopped at event 46, below the 204.82 MiB live at once).
    const bool earlier =
        !rp.result.ooms.empty() && (r.ooms.empty() || rp.result.ooms.front().event_index < r.ooms.front().event_index);
    if (!s2 || earlier || rp.result.ooms.size() > r.ooms.size() || s2->peak_reserved >= baseline) continue;
    const Bytes recovered = baseline - s2->peak_reserved;
    if (recovered > best.recovered) best = {rp.candidate->setting, recovered, s2->peak_reserved};
  }
  return waste_advice(r, best);
}

}  // namespace fragsim

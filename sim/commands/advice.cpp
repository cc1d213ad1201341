#include "sim/commands/advice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "sim/base/error.h"
#include "sim/commands/settings.h"
#include "sim/commands/sweep.h"

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

}  // namespace

std::vector<std::string> proven_advice(const RunResult& r, const RunRequest& req, const Registry& reg,
                                       unsigned threads) {
  std::vector<std::string> lines;
  if (r.ooms.empty()) return lines;
  const OomRecord& o = r.ooms.front();
  const SpaceResult* sp = space_of(r, o.device, o.space);
  FRAGSIM_CHECK(sp, "an OOM on a space the run has no result for");
  const std::string where = fmt::format("device {} {}", o.device, space_name(o.space));
  const Recording recording = read_recording(req);
  // Every replay below reads the trace: a snapshot or a capture is decoded once for all of them.
  const TraceSource source =
      request_source(req, req.source                 ? req.source
                          : decodes_whole(req.trace) ? decode_once(req.trace, ReaderOptions{req.lenient})
                                                     : nullptr);
  auto sweep = [&](const std::string& find) {
    SweepOptions so;
    so.request = req;
    so.base = prepare_run(req, reg, &recording);
    so.base.source = source;
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
    return fmt::format("{}with {} it fits from {} on, verified by replay (`{}` shows the search): `{}`", lead,
                       r.policy_name, sw.setting, sweep_command(req, "min-capacity"), sw.command);
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
  const Vocabulary vocab = prepare_run(req, reg, &recording).vocab;  // whose settings to suggest
  std::vector<AdviceCandidate> cands;
  if (info.advise) cands = info.advise({r.policy_config, o.fragmentation, o.kind, o.reserved, o.rounded, vocab});
  // Replay every fixed setting, one decode of the trace for all of them.
  std::vector<const AdviceCandidate*> fixed;
  std::vector<RunRequest> reqs;
  std::vector<RunOptions> runs;
  bool fraction = false;
  for (const auto& c : cands) {
    if (c.find_fraction) {
      fraction = info.fraction.has_value();
      continue;
    }
    RunRequest q = with_candidate(req, c);
    q.keep_going = q.check = false;
    try {
      RunOptions o2 = prepare_run(q, reg, &recording);  // InputError when the policy refuses the request's options
      o2.source = source;
      runs.push_back(std::move(o2));
    } catch (const InputError&) {
      continue;  // a setting this request cannot take (the user's own options conflict with it): not suggested
    }
    fixed.push_back(&c);
    reqs.push_back(q);
  }
  std::vector<std::string> tried;
  bool fits = false;
  if (!runs.empty()) {
    std::vector<RunResult> rs = run_simulations(runs, reg, threads);
    for (size_t i = 0; i < rs.size(); ++i) {
      const AdviceCandidate& c = *fixed[i];
      if (rs[i].completed) {
        const SpaceResult* s2 = space_of(rs[i], o.device, o.space);
        lines.push_back(
            fmt::format("{}: {} — verified by replay: the trace fits (no OOM; peak reserved {} on {}); {}: "
                        "`{}`",
                        c.problem, c.setting, human_bytes(s2 ? s2->peak_reserved : rs[i].peak_reserved), where, c.why,
                        command_line(reqs[i])));
        fits = true;
      } else {
        tried.push_back(fmt::format("{} (OOM at event {})", c.setting,
                                    rs[i].ooms.empty() ? rs[i].fatal_event : rs[i].ooms.front().event_index));
      }
    }
  }
  if (fraction) {
    SweepResult sw = sweep("min-mem-fraction");
    if (sw.value) {
      lines.push_back(
          fmt::format("memory: {} is the smallest fraction with which the trace fits, verified by replay "
                      "(`{}` shows the search): `{}`",
                      sw.setting, sweep_command(req, "min-mem-fraction"), sw.command));
      fits = true;
    } else {
      tried.push_back(fmt::format("{} (still OOMs)", info.fraction->setting(1.0, vocab.framework)));
    }
  }
  if (!tried.empty()) lines.push_back(fmt::format("tried by replay, still OOM: {}", fmt::join(tried, "; ")));
  if (!fits) lines.push_back(capacity_line("capacity: "));
  return lines;
}

}  // namespace fragsim

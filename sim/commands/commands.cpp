#include "sim/commands/commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/commands/advice.h"
#include "sim/commands/batch.h"
#include "sim/commands/module_plans.h"
#include "sim/commands/run_args.h"
#include "sim/commands/settings.h"
#include "sim/commands/waste.h"
#include "sim/engine/history.h"
#include "sim/engine/progress.h"
#include "sim/engine/recording_fidelity.h"
#include "sim/report/diff.h"
#include "sim/report/perfetto.h"
#include "sim/report/report.h"
#include "sim/report/report_html.h"
#include "sim/report/snapshot_export.h"
#include "traces/kept_conversions.h"
#include "traces/kineto.h"

namespace fragsim {

namespace {

// One run as `run` replays it: the pass for both fidelity figures, and the history when asked.
RunResult replay_one(const RunRequest& req, const Registry& reg, const RunOutputs& out, unsigned threads, bool progress,
                     const char* what) {
  RunOptions o = prepare_run(req, reg);
  // What an export would refuse is refused before the run writes its placements or Perfetto file.
  if (out.export_events && reg.find(o.policy.name).lower_bound) refuse_unplaced_export(o.policy.name);
  o.device_lists = out.export_events;
  o.keep_live_buffers = out.keep_live_buffers;
  o.placements = out.placements;
  if (!out.perfetto.empty()) o.sink = perfetto_sink(out.perfetto);
  o.window = out.window;
  o.prior.range = true;
  Progress bar(progress, what, reads_of({o}, reg));
  auto rs = run_simulations({o}, reg, threads);
  BestPlans plans({o});  // after the replay: an input it refuses is never read twice at once
  add_both_figures({o}, rs, reg, threads);
  add_prior_range({o}, rs, reg, threads);
  plans.attach(rs);
  if (out.history || out.export_events) add_history({o}, rs, reg, out.history, out.export_events, threads);
  if (out.history) {
    try {
      rs.front().modules = module_plans(req.trace, reg);
    } catch (const InputError& e) {  // the run stands; the page says why it lists no module
      rs.front().notes.push_back(std::string("the page lists no compiled module: ") + e.what());
    }
  }
  enforce_strict(req, rs.front());
  add_outcome_notes(req, rs.front());
  return std::move(rs.front());
}

}  // namespace

RunResult run_request(const RunRequest& req, const Registry& reg, const RunOutputs& out, unsigned threads,
                      bool progress) {
  KeepConversions once;  // every replay below (the run's passes, advice) converts a costly trace once
  RunResult r = replay_one(req, reg, out, threads, progress, "run");
  r.advice = proven_advice(r, req, reg, threads);
  if (std::string w = proven_waste_advice(r, req, reg, threads); !w.empty()) r.advice.push_back(std::move(w));
  return r;
}

std::vector<RunResult> run_compare(const CompareRequest& req, const Registry& reg, const RunOutputs& out,
                                   unsigned threads, bool progress) {
  KeepConversions once;  // as run's
  ComparePlan plan = prepare_compare(req, reg);
  for (auto& o : plan.runs) o.keep_live_buffers = out.keep_live_buffers, o.window = out.window, o.prior.range = true;
  std::vector<RunResult> runs;
  for (size_t first = 0; first < plan.runs.size();) {  // one trace at a time, each decoded once
    size_t last = first;
    while (last < plan.runs.size() && plan.runs[last].trace == plan.runs[first].trace) ++last;
    std::vector<RunOptions> opts(plan.runs.begin() + static_cast<std::ptrdiff_t>(first),
                                 plan.runs.begin() + static_cast<std::ptrdiff_t>(last));
    Progress bar(progress, "compare", reads_of(opts, reg));
    std::vector<RunResult> rs = run_simulations(opts, reg, threads);
    BestPlans plans(opts);  // after the replay, as run's
    add_both_figures(opts, rs, reg, threads);
    add_prior_range(opts, rs, reg, threads);
    plans.attach(rs);
    if (out.history) add_history(opts, rs, reg, true, false, threads);
    for (size_t k = 0; k < rs.size(); ++k) {
      RunResult& r = rs[k];
      enforce_strict(req.base, r);
      add_outcome_notes(req.base, r);
      if (std::string w = proven_waste_advice(r, plan.requests[first + k], reg, threads); !w.empty())
        r.advice.push_back(std::move(w));  // as run's
      runs.push_back(std::move(r));
    }
    first = last;
  }
  return runs;
}

DiffRequest diff_request(const RunRequest& base, const std::string& a, const std::string& b,
                         const std::string& policies) {
  DiffRequest d{base, base};
  d.a.trace = a;
  d.b.trace = b.empty() ? a : b;
  std::vector<std::string> entries = split_policy_list(policies, base.names);
  if (!policies.empty() && entries.size() != 2)
    throw InputError(fmt::format("--policies: diff takes exactly two (A,B), got {}", entries.size()));
  if (entries.size() == 2) {
    if (!b.empty()) throw InputError("diff: --policies compares one trace under two policies; give one TRACE");
    if (!base.policy.empty()) throw InputError("diff: --policy and --policies: give one of them");
    d.a.policy = entries[0];
    d.b.policy = entries[1];
    d.policies = true;
  } else if (b.empty()) {
    throw InputError("diff: give two traces (A B), two reports (A.json B.json), or one trace and --policies A,B");
  }
  return d;
}

std::vector<RunResult> run_diff(const DiffRequest& req, const Registry& reg, const RunOutputs& out, unsigned threads,
                                bool progress) {
  if (req.policies) check_policy_entries({req.a.policy, req.b.policy}, reg, req.a.names);
  KeepConversions once;  // as run's (A and B may be one trace)
  RunOutputs o = out;
  o.placements.clear();
  o.perfetto.clear();
  o.export_events = false;
  std::vector<RunResult> rs;
  for (const RunRequest* q : {&req.a, &req.b}) rs.push_back(replay_one(*q, reg, o, threads, progress, "diff"));
  const bool same_trace = req.a.trace == req.b.trace;
  for (size_t i = 0; i < 2; ++i) {
    const std::string& trace = i ? req.b.trace : req.a.trace;
    rs[i].label = fmt::format(
        "{}: {}", i ? "B" : "A",
        same_trace ? (i ? req.b.policy : req.a.policy).empty() ? rs[i].policy_name : (i ? req.b.policy : req.a.policy)
                   : trace.substr(trace.find_last_of('/') + 1));
  }
  return rs;
}

bool is_report_path(const std::string& path) { return ends_with(path, ".json") && !is_kineto_file(path); }

void check_diff_inputs(bool a_report, bool b_report, bool b_given, const RunRequest& base, const std::string& policies,
                       const Window& window) {
  if (b_given && a_report != b_report)
    throw InputError("diff: A and B are two traces or two reports (.json), not one of each");
  if (a_report && !b_given) throw InputError("diff: a report (.json) is diffed with another report: give B");
  if (!a_report) return;
  const RunRequest none;
  std::vector<std::string> given;
  auto note = [&](bool on, const char* option) {
    if (on) given.push_back(option);
  };
  note(!base.policy.empty(), "--policy");
  note(!policies.empty(), "--policies");
  note(!base.hw.empty(), "--hw");
  note(!base.capacity.empty(), "--capacity");
  note(!base.reserve.empty(), "--reserve");
  note(!base.sets.empty(), "--set");
  note(!base.envs.empty(), "--env");
  note(base.keep_going, "--keep-going");
  note(base.follow_recording, "--follow-recording");
  note(base.shard != none.shard || base.shard_dim != none.shard_dim, "--shard");
  note(!window.whole(), "--from/--to");
  if (!given.empty())
    throw InputError(fmt::format("diff: A and B are reports, read as they are: {} {} to traces only",
                                 fmt::join(given, ", "), given.size() == 1 ? "applies" : "apply"));
}

DiffOutcome diff_of_runs(const DiffRequest& req, const Registry& reg, const RunOutputs& out, unsigned threads,
                         bool progress) {
  auto runs = run_diff(req, reg, out, threads, progress);
  // Labelled "A: ..." and "B: ..." for the page; the diff names each without its letter.
  auto name = [](const RunResult& r) { return r.label.substr(r.label.find(": ") + 2); };
  DiffOutcome d{diff_reports({report_json(runs[0]), name(runs[0])}, {report_json(runs[1]), name(runs[1])}), {}};
  if (out.history) d.html = report_html(runs, d.diff);
  return d;
}

DiffOutcome diff_of_reports(const DiffInput& a, const DiffInput& b, const std::string& label, bool html) {
  DiffInput ra{pick_report(a.report, label, a.name), a.name}, rb{pick_report(b.report, label, b.name), b.name};
  // The schema (pick_report) holds what every reader of a report needs; what only the diff, its
  // texts and its page read (each device entry, the peak's event and buffers, sites and frames) is
  // read as they go — here, all of it, before anything is written. A report that holds something
  // else there (a device entry that is a number) is an input error naming it — the report the diff
  // cannot read against itself — never a JSON library's message.
  try {
    DiffOutcome d{diff_reports(ra, rb), {}};
    (void)diff_text(d.diff), (void)diff_markdown(d.diff);
    if (html) d.html = reports_html({{"A: " + a.name, ra.report}, {"B: " + b.name, rb.report}}, d.diff);
    return d;
  } catch (const nlohmann::json::exception& e) {
    std::string culprit = b.name;
    try {
      const nlohmann::json self = diff_reports(ra, ra);
      (void)diff_text(self), (void)diff_markdown(self), (void)reports_html({{"A: " + a.name, ra.report}}, self);
    } catch (const nlohmann::json::exception&) {
      culprit = a.name;
    }
    const std::string what = e.what();
    throw InputError(fmt::format("{}: not a fragsim report as diff reads one ({})", culprit,
                                 what.substr(what.find("] ") == std::string::npos ? 0 : what.find("] ") + 2)));
  }
}

SweepResult sweep_request(const RunRequest& req, const std::string& find, bool exhaustive, const Registry& reg,
                          unsigned threads, bool progress) {
  KeepConversions once;  // as run's: the run's setup reads the recording, the sweep its events
  SweepOptions so;
  so.request = req;
  so.base = prepare_run(req, reg);
  so.find = find;
  so.threads = threads;
  so.exhaustive = exhaustive;
  Progress bar(progress, "sweep", req.trace, 1);
  so.on_pass = [&](const std::string& what) { bar.stage(what); };
  SweepResult r = run_sweep(so, reg);
  r.notes.insert(r.notes.begin(), so.base.notes.begin(), so.base.notes.end());
  return r;
}

nlohmann::json run_batch(const std::string& manifest, const std::string& shard, const Registry& reg, unsigned threads,
                         bool progress) {
  KeepConversions once;  // as run's: entries may share a trace
  Manifest m = read_manifest(manifest);
  Shard sh = parse_shard(shard);
  std::vector<RunOptions> opts;
  std::vector<RunRequest> requests;
  std::vector<const BatchEntry*> picked;
  std::vector<std::string> labels;
  for (const auto& e : m.entries) {
    if (!sh.has(e.run)) continue;
    std::string label;
    requests.push_back(parse_manifest_line(m, e, &label));
    try {
      opts.push_back(prepare_run(requests.back(), reg));
    } catch (const InputError& er) {
      throw InputError(m.path, e.line, er.what());
    } catch (const EnvError& er) {  // a trace the manifest names cannot be read: the manifest is wrong
      throw InputError(m.path, e.line, er.what());
    }
    picked.push_back(&e);
    labels.push_back(label);
  }
  std::vector<RunResult> rs = [&] {
    Progress bar(progress, "batch", reads_of(opts, reg));
    auto out = run_simulations(opts, reg, threads);
    BestPlans plans(opts);  // after the replay, as run's
    add_both_figures(opts, out, reg, threads);
    plans.attach(out);
    return out;
  }();
  nlohmann::json runs = nlohmann::json::array();
  for (size_t i = 0; i < rs.size(); ++i) {
    try {
      enforce_strict(requests[i], rs[i]);
    } catch (const InputError& er) {
      throw InputError(m.path, picked[i]->line, er.what());
    }
    add_outcome_notes(requests[i], rs[i]);
    rs[i].advice = proven_advice(rs[i], requests[i], reg, threads);
    if (std::string w = proven_waste_advice(rs[i], requests[i], reg, threads); !w.empty())
      rs[i].advice.push_back(std::move(w));
    runs.push_back(
        {{"run", picked[i]->run}, {"line", picked[i]->line}, {"label", labels[i]}, {"report", report_json(rs[i])}});
  }
  return batch_json(m, sh, std::move(runs));
}

}  // namespace fragsim

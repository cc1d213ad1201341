// fragsim command line: Boost.Program_options → option structs → the library calls the tests
// use (style rule 10). Exit codes: specs/contracts.md §4.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "hardware_models/hardware_model.h"
#include "hardware_models/tpu_layout.h"
#include "policies/policy.h"
#include "sim/advice.h"
#include "sim/base/error.h"
#include "sim/base/exit_codes.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "sim/batch.h"
#include "sim/check.h"
#include "sim/compare.h"
#include "sim/engine.h"
#include "sim/progress.h"
#include "sim/report.h"
#include "sim/report_html.h"
#include "sim/report_schema.h"
#include "sim/run_args.h"
#include "sim/run_setup.h"
#include "sim/settings.h"
#include "sim/sweep.h"
#include "sim/trace_info.h"
#include "sim/validate.h"
#include "traces/generators.h"
#include "traces/trace_reader.h"
#include "traces/trace_writer.h"
#include "traces/xla_modules.h"
#include "traces/xprof_capture.h"

namespace po = boost::program_options;
using namespace fragsim;

namespace {

constexpr const char* kUsage = R"(fragsim — trace-driven simulator of accelerator memory allocation and fragmentation

usage: fragsim COMMAND [options]   (fragsim COMMAND --help for each)

commands:
  run TRACE      replay a trace through one allocator policy; report OOMs, peaks, fragmentation
  compare TRACE  several policies on one trace, one table
  sweep TRACE    smallest memory fraction or capacity with no OOM, as the setting to type
  batch MANIFEST a matrix of runs (traces x policies x settings), --shard i/N of it
  merge SHARDS   combine batch shards into the result one process gives
  check          CI gate: compare two reports, exit 1 on a regression
  info TRACE     trace summary: counts, peak requested, size histogram
  validate       a simulation against a real-device replay (fragsim-cuda-replay)
  convert IN OUT convert between .jsonl, .jsonl.zst, .fstrace (and read .pickle)
  gen WORKLOAD   write a synthetic workload trace
  layout SHAPE   TPU tiled-layout padding of an array (--hw tpu-v5e 'bf16[1000,129]')
  list           registered policies, hardware presets, workloads

traces: .jsonl (fragsim trace v1), .jsonl.zst, .fstrace (binary), PyTorch snapshots (.pickle),
        XProf captures (.xplane.pb, .xplane.pb.zst, a profile directory), XLA modules (.hlo_proto.pb)
sizes: 512, 64KiB, 2MiB, 16GiB, 80GB (KiB/MiB/GiB powers of 2; KB/MB/GB powers of 10)
exit codes: 0 ran (OOM is a result), 1 check failed, 2 bad input, 3 environment
)";

struct Parsed {
  po::variables_map vm;
  bool help = false;
};

// Positional arguments are hidden options (named `positionals`, shown in the usage line as
// their upper-case names, never as --trace); `desc` holds the options --help lists.
Parsed parse(const std::vector<std::string>& args, po::options_description& desc,
             const std::vector<std::pair<std::string, int>>& positionals, const std::string& usage,
             po::options_description hidden = po::options_description()) {
  desc.add_options()("help,h", "show this help");
  po::positional_options_description pos;
  for (const auto& [name, n] : positionals) pos.add(name.c_str(), n);
  po::options_description all;
  all.add(desc).add(hidden);
  Parsed p;
  auto shown = [&](std::string m) {  // "--trace" → "TRACE" in Boost's messages
    for (const auto& [name, n] : positionals) {
      std::string upper = name;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      for (const std::string& form : {"'--" + name + "'", "--" + name}) {
        for (size_t at; (at = m.find(form)) != std::string::npos;) m.replace(at, form.size(), upper);
      }
    }
    return m;
  };
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), p.vm);
    if (p.vm.count("help")) {
      std::cout << usage << "\n" << desc << "\n";
      p.help = true;
      return p;
    }
    po::notify(p.vm);
  } catch (const po::required_option& e) {
    std::string name = e.get_option_name();
    throw InputError(shown(name.rfind("--", 0) == 0 && hidden.find_nothrow(name.substr(2), false)
                               ? "missing " + name + " (" + usage.substr(0, usage.find('\n')) + ")"
                               : e.what()));
  } catch (const po::error& e) {
    throw InputError(shown(e.what()));
  }
  return p;
}

// --progress / --no-progress.
struct ProgressArgs {
  bool on = false, off = false;
};
void add_progress_options(po::options_description& d, ProgressArgs& p) {
  d.add_options()("progress", po::bool_switch(&p.on),
                  "show a progress line on stderr (share of the input, events/s, ETA); the default when stderr is a "
                  "terminal")("no-progress", po::bool_switch(&p.off), "never show the progress line");
}
// --progress / --no-progress, else on when standard error is a terminal.
bool want_progress(const ProgressArgs& p) {
  if (p.on && p.off) throw InputError("--progress and --no-progress: choose one");
  return p.on || (!p.off && stderr_is_terminal());
}

// --jobs N: 0 (every core) or 1..1024; `how` says how the command uses them.
void add_jobs_option(po::options_description& d, int& jobs, const std::string& how) {
  d.add_options()("jobs,j", po::value(&jobs)->default_value(0),
                  ("threads at most (0 = every core, else 1..1024): " + how).c_str());
}
unsigned jobs_of(int jobs) {
  if (jobs < 0 || jobs > 1024) throw InputError(fmt::format("--jobs: must be in 0..1024, got {}", jobs));
  return static_cast<unsigned>(jobs);
}

// True when one of the outputs is standard output: the text summary then stays off it.
bool to_stdout(std::initializer_list<std::string> outputs) {
  for (const auto& o : outputs)
    if (o == "-") return true;
  return false;
}

// The hidden positional TRACE of run, compare and sweep.
po::options_description trace_option(std::string* trace) {
  po::options_description h;
  h.add_options()("trace", po::value(trace)->required(), "trace file");
  return h;
}

int cmd_run(const std::vector<std::string>& args, const Registry& reg) {
  RunRequest a;
  ProgressArgs progress;
  std::string json, placements, html, perfetto;
  int jobs = 0;
  po::options_description d("fragsim run options");
  add_run_request_options(d, a);
  add_progress_options(d, progress);
  add_jobs_option(d, jobs,
                  "1 decodes and replays on one thread; otherwise the trace is decoded on one thread while the "
                  "policy replays it on another, and threads beyond those two parse JSONL lines");
  d.add_options()("policy", po::value(&a.policy)->value_name("POLICY"),
                  "allocator policy, POLICY or POLICY[k=v,...] (fragsim list); default: follows the input "
                  "(torch-caching for a PyTorch snapshot, xla-bfc for an XProf capture of a GPU, tpu-padded on a "
                  "TPU, static-heap for an XLA module, else best-fit)")("json", po::value(&json)->value_name("FILE"),
                                                                        "write the report (fragsim report v1) to FILE")(
      "placements", po::value(&placements)->value_name("FILE"),
      "write one JSON line per alloc event (address, block) to FILE")(
      "html", po::value(&html)->value_name("FILE"),
      "write an interactive HTML report to FILE (one self-contained file: memory over time, address maps at the peak "
      "and at OOMs, every OOM)")(
      "perfetto", po::value(&perfetto)->value_name("FILE"),
      "write the replay as a Chrome trace-event JSON file for ui.perfetto.dev or chrome://tracing: memory counters "
      "per device and space, one slice per buffer, OOMs and marks as instant events");
  auto p = parse(args, d, {{"trace", 1}},
                 "usage: fragsim run TRACE [--policy POLICY] [options]\n\nReplays TRACE through one policy and "
                 "prints a summary. After an OOM, each setting fragsim suggests is first replayed on the same trace, "
                 "and printed with the command that reproduces it. The trace is streamed (memory grows with live "
                 "allocations only), except for --policy static-heap, which plans offline like XLA's compiler and so "
                 "reads the whole trace first.",
                 trace_option(&a.trace));
  if (p.help) return 0;
  check_outputs({a.trace, a.hw},
                {{"--json", json}, {"--placements", placements}, {"--html", html}, {"--perfetto", perfetto}});
  const unsigned threads = jobs_of(jobs);
  RunOptions o = prepare_run(a, reg);
  o.keep_live_buffers = !html.empty();
  o.placements = placements;
  o.perfetto = perfetto;
  RunResult r = [&] {
    Progress bar(want_progress(progress), "run", reads_of({o}, reg));
    return std::move(run_simulations({o}, reg, threads).front());
  }();
  r.advice = proven_advice(r, a, reg, threads);
  if (!json.empty()) write_file_atomic(json, report_json(r).dump(2) + "\n");
  if (!html.empty()) write_file_atomic(html, report_html({r}));
  if (!to_stdout({json, placements, html, perfetto})) std::cout << report_text(r);
  return 0;
}

int cmd_compare(const std::vector<std::string>& args, const Registry& reg) {
  CompareRequest c;
  ProgressArgs progress;
  std::string json, html;
  std::vector<std::string> more;
  int jobs = 0;
  po::options_description d("fragsim compare options");
  add_run_request_options(d, c.base);
  add_progress_options(d, progress);
  add_jobs_option(d, jobs, "policies replayed in parallel, the thread decoding the trace (once for all) included");
  d.add_options()("policies", po::value(&c.policies)->value_name("A,B[k=v],..."),
                  "comma-separated policies; NAME[key=value,...] sets options for one entry (default: follows the "
                  "input: ideal, the policy a run would choose, and its what-ifs, e.g. torch-caching with and "
                  "without expandable segments for a PyTorch snapshot)")("json", po::value(&json)->value_name("FILE"),
                                                                         "write a JSON array of reports to FILE")(
      "html", po::value(&html)->value_name("FILE"),
      "write an interactive HTML report to FILE (every policy's memory over time, per device, address maps, OOMs)");
  po::options_description hidden = trace_option(&c.base.trace);
  hidden.add_options()("more", po::value(&more)->composing(), "further traces");
  auto p = parse(args, d, {{"trace", 1}, {"more", -1}},
                 "usage: fragsim compare TRACE [TRACE...] [--policies A,B,...] [options]\n\nRuns each policy on "
                 "each TRACE; prints one table (rows labelled TRACE: POLICY when there are several traces). The "
                 "trace is decoded once and the policies replay it in parallel.",
                 hidden);
  if (p.help) return 0;
  c.traces = {c.base.trace};
  c.traces.insert(c.traces.end(), more.begin(), more.end());
  std::vector<std::string> inputs = c.traces;
  inputs.push_back(c.base.hw);
  check_outputs(inputs, {{"--json", json}, {"--html", html}});
  const unsigned threads = jobs_of(jobs);
  ComparePlan plan = prepare_compare(c, reg);
  for (auto& o : plan.runs) o.keep_live_buffers = !html.empty();
  std::vector<RunResult> runs;
  // One trace at a time (each decoded once for its policies).
  for (size_t first = 0; first < plan.runs.size();) {
    size_t last = first;
    while (last < plan.runs.size() && plan.runs[last].trace == plan.runs[first].trace) ++last;
    std::vector<RunOptions> opts(plan.runs.begin() + static_cast<long>(first),
                                 plan.runs.begin() + static_cast<long>(last));
    Progress bar(want_progress(progress), "compare", reads_of(opts, reg));
    for (auto& r : run_simulations(opts, reg, threads)) runs.push_back(std::move(r));
    first = last;
  }
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : runs) arr.push_back(report_json(r));
  if (!json.empty()) write_file_atomic(json, arr.dump(2) + "\n");
  if (!html.empty() && !runs.empty()) write_file_atomic(html, report_html(runs));
  if (!to_stdout({json, html})) std::cout << compare_table(runs);
  return 0;
}

int cmd_batch(const std::vector<std::string>& args, const Registry& reg) {
  std::string manifest, shard = "1/1", json;
  int jobs = 0;
  ProgressArgs progress;
  po::options_description d("fragsim batch options");
  add_progress_options(d, progress);
  add_jobs_option(d, jobs, "runs in parallel, each trace decoded once for its runs, decoding threads included");
  d.add_options()("shard", po::value(&shard)->default_value("1/1")->value_name("i/N"),
                  "run shard i of N only (1 <= i <= N): the runs whose number (from 0, in file order) % N == i - 1")(
      "json", po::value(&json)->value_name("FILE"),
      "write the batch result (runs with their reports) to FILE, for fragsim merge");
  po::options_description hidden;
  hidden.add_options()("manifest", po::value(&manifest)->required(), "manifest");
  auto p = parse(args, d, {{"manifest", 1}},
                 "usage: fragsim batch MANIFEST [--shard i/N] [--json FILE]\n\nRuns a matrix of traces x policies x "
                 "settings, one run per manifest line (`TRACE --policy P --set k=v ... --label NAME`; '#' starts a "
                 "comment; a relative TRACE is relative to the manifest). --shard splits the runs among independent "
                 "processes (a Slurm job array, a Kubernetes Indexed Job); fragsim merge combines their --json "
                 "results into exactly the result and table of one process. docs/batch.md; scripts/cluster/.",
                 hidden);
  if (p.help) return 0;
  check_outputs({manifest}, {{"--json", json}});
  const unsigned threads = jobs_of(jobs);
  const bool show = want_progress(progress);
  Manifest m = read_manifest(manifest);
  Shard sh = parse_shard(shard);
  std::vector<RunOptions> opts;
  std::vector<RunRequest> requests;
  std::vector<const BatchEntry*> picked;
  std::vector<std::string> labels;
  for (const auto& e : m.entries) {
    if (!sh.has(e.run)) continue;
    std::string label;
    RunRequest q = parse_manifest_line(m, e, &label);
    requests.push_back(q);
    try {
      opts.push_back(prepare_run(q, reg));
    } catch (const InputError& er) {
      throw InputError(m.path, e.line, er.what());
    } catch (const EnvError& er) {  // a trace the manifest names cannot be read: the manifest is wrong
      throw InputError(m.path, e.line, er.what());
    }
    picked.push_back(&e);
    labels.push_back(label);
  }
  std::vector<RunResult> rs = [&] {
    Progress bar(show, "batch", reads_of(opts, reg));
    return run_simulations(opts, reg, threads);
  }();
  for (size_t i = 0; i < rs.size(); ++i) rs[i].advice = proven_advice(rs[i], requests[i], reg, threads);
  nlohmann::json runs = nlohmann::json::array();
  for (size_t i = 0; i < rs.size(); ++i)
    runs.push_back(
        {{"run", picked[i]->run}, {"line", picked[i]->line}, {"label", labels[i]}, {"report", report_json(rs[i])}});
  nlohmann::json out = batch_json(m, sh, std::move(runs));
  if (!json.empty()) write_file_atomic(json, out.dump(2) + "\n");
  if (!to_stdout({json})) std::cout << batch_table(out);
  return 0;
}

int cmd_merge(const std::vector<std::string>& args, const Registry&) {
  std::vector<std::string> files;
  std::string json;
  po::options_description d("fragsim merge options");
  d.add_options()("json", po::value(&json)->value_name("FILE"), "write the merged result to FILE");
  po::options_description hidden;
  hidden.add_options()("shards", po::value(&files)->composing()->required(), "shard results of fragsim batch --json");
  auto p = parse(args, d, {{"shards", -1}},
                 "usage: fragsim merge SHARD.json... [--json FILE]\n\nCombines the results of `fragsim batch MANIFEST "
                 "--shard i/N --json SHARD.json` for every i into the result and table `fragsim batch MANIFEST` gives "
                 "in one process. Exit 2 when the files are not all the shards of one manifest.",
                 hidden);
  if (p.help) return 0;
  check_outputs(files, {{"--json", json}});
  std::vector<std::pair<std::string, nlohmann::json>> shards;
  for (const auto& f : files) shards.emplace_back(f, read_json_file(f));
  nlohmann::json out = merge_batches(shards);
  if (!json.empty()) write_file_atomic(json, out.dump(2) + "\n");
  if (!to_stdout({json})) std::cout << batch_table(out);
  return 0;
}

int cmd_sweep(const std::vector<std::string>& args, const Registry& reg) {
  SweepOptions so;
  RunRequest& a = so.request;
  ProgressArgs progress;
  std::string json;
  int jobs = 0;
  po::options_description d("fragsim sweep options");
  add_run_request_options(d, a);
  add_progress_options(d, progress);
  add_jobs_option(d, jobs, "settings replayed in parallel, the thread decoding the trace included");
  d.add_options()("policy", po::value(&a.policy)->value_name("POLICY"),
                  "allocator policy (default: the one `fragsim run` would choose for the input)")(
      "find", po::value(&so.find)->required()->value_name("WHAT"),
      "min-mem-fraction (to 0.01, for policies with a memory fraction) or min-capacity (to the device granularity)")(
      "exhaustive", po::bool_switch(&so.exhaustive),
      "min-mem-fraction: replay every fraction 0.01..1.00 (lists every outcome that breaks monotonicity) instead of "
      "bisecting and checking 4 fractions on each side of the answer")(
      "json", po::value(&json)->value_name("FILE"),
      "write {find, policy, hardware, trace, value, bound, setting, command, range, monotonic, runs} to FILE (value, "
      "setting and command are null when no setting works)");
  auto p = parse(args, d, {{"trace", 1}},
                 "usage: fragsim sweep TRACE --find min-mem-fraction|min-capacity [--policy POLICY] [options]\n\n"
                 "Finds the smallest memory fraction or capacity with no OOM and prints it as the setting to use,\n"
                 "with the fragsim run that replays it and the range it searched. min-mem-fraction bisects over\n"
                 "0.01..1.00 and checks 4 fractions on each side of the answer (--exhaustive runs every fraction);\n"
                 "min-capacity doubles its range until a capacity fits (past the preset's), bisects, and checks\n"
                 "monotonicity around the answer. Exit 0 with an answer; exit 1 when no setting in range works.",
                 trace_option(&a.trace));
  if (p.help) return 0;
  check_outputs({a.trace, a.hw}, {{"--json", json}});
  so.base = prepare_run(a, reg);
  so.threads = jobs_of(jobs);
  SweepResult r = [&] {
    Progress bar(want_progress(progress), "sweep", a.trace, 1);
    so.on_pass = [&](const std::string& what) { bar.stage(what); };
    return run_sweep(so, reg);
  }();
  r.notes.insert(r.notes.begin(), so.base.notes.begin(), so.base.notes.end());
  if (!json.empty()) write_file_atomic(json, sweep_json(r).dump(2) + "\n");
  if (!to_stdout({json})) std::cout << sweep_text(r);
  return r.value ? 0 : 1;  // no setting works: a failed check, like `check` finding a regression
}

int cmd_check(const std::vector<std::string>& args, const Registry&) {
  CheckOptions o;
  std::string json, markdown, junit;
  bool github = false;
  po::options_description d("fragsim check options");
  d.add_options()("baseline", po::value(&o.baseline_path)->required(), "report of the known-good run(s)")(
      "current", po::value(&o.current_path)->required(), "report of the run(s) to check")(
      "tolerance", po::value(&o.tolerance_pct)->default_value(0),
      "allowed growth of each peak/fragmentation figure, in percent (>= 0)")(
      "allow-different-trace", po::bool_switch(&o.allow_different_trace),
      "compare reports of different traces (by default refused: exit 2)")(
      "allow-different-policy", po::bool_switch(&o.allow_different_policy),
      "compare runs whose policy or settings differ (by default refused: exit 2)")(
      "json", po::value(&json), "write the comparison as JSON to FILE ('-' = stdout)")(
      "markdown", po::value(&markdown), "write a Markdown table to FILE (e.g. $GITHUB_STEP_SUMMARY)")(
      "junit", po::value(&junit), "write JUnit XML to FILE (one test case per figure)")(
      "github", po::bool_switch(&github), "print GitHub Actions ::error annotations for regressions");
  auto p = parse(args, d, {},
                 "usage: fragsim check --baseline OLD.json --current NEW.json [--tolerance PCT] [outputs]\n\n"
                 "CI gate: exit 1 when NEW has a new or earlier OOM, a different OOM count, or a peak (allocated,\n"
                 "reserved) or fragmentation figure grown by more than the tolerance. Reads `run --json` reports\n"
                 "and `compare --json` arrays (runs matched by policy label). Exit 2 for malformed reports and for\n"
                 "reports of different traces or policies unless allowed.");
  if (p.help) return 0;
  check_outputs({o.baseline_path, o.current_path}, {{"--json", json}, {"--markdown", markdown}, {"--junit", junit}});
  CheckResult r = run_check(read_json_file(o.baseline_path), read_json_file(o.current_path), o);
  if (!json.empty()) write_file_atomic(json, check_json(r).dump(2) + "\n");
  if (!markdown.empty()) write_file_atomic(markdown, check_markdown(r));
  if (!junit.empty()) write_file_atomic(junit, check_junit(r));
  if (github) std::cout << check_github(r, o.current_path);
  if (!to_stdout({json, markdown, junit})) std::cout << check_text(r);
  return r.pass ? 0 : 1;
}

int cmd_validate(const std::vector<std::string>& args, const Registry&) {
  ValidateOptions v;
  std::string json;
  po::options_description d("fragsim validate options");
  d.add_options()("sim", po::value(&v.sim)->required(), "fragsim report (run --json) of the trace")(
      "real", po::value(&v.real)->required(), "fragsim-cuda-replay summary (OUT.json) of the same trace")(
      "tolerance", po::value(&v.tolerance_pct)->default_value(5.0), "allowed peak-in-use difference, percent")(
      "fit-cost-model", po::value(&v.fit_out), "write a hardware preset with the fitted latency model to FILE")(
      "json", po::value(&json), "write the comparison as JSON");
  auto p = parse(
      args, d, {},
      "usage: fragsim validate --sim REPORT.json --real REPLAY.json [--tolerance PCT] [--fit-cost-model OUT.json]\n\n"
      "Compares a simulation with a real-device replay: first OOM, peak device memory in use, address\n"
      "granularity, call latency. Exit 1 when the first OOM differs or the peak is outside the tolerance.");
  if (p.help) return 0;
  check_outputs({v.sim, v.real}, {{"--json", json}, {"--fit-cost-model", v.fit_out}});
  ValidateResult r = run_validate(v);
  if (!json.empty()) write_file_atomic(json, r.json.dump(2) + "\n");
  for (const auto& l : r.lines) std::cout << l << "\n";
  std::cout << (r.pass ? "validate: PASS\n" : "validate: FAIL\n");
  return r.pass ? 0 : 1;
}

int cmd_info(const std::vector<std::string>& args, const Registry&) {
  std::string trace, json;
  bool lenient = false;
  po::options_description d("fragsim info options");
  d.add_options()("json", po::value(&json)->value_name("FILE"), "write the summary as JSON")(
      "lenient", po::bool_switch(&lenient), "skip frees of unknown ids");
  auto p = parse(args, d, {{"trace", 1}}, "usage: fragsim info TRACE [--json FILE]", trace_option(&trace));
  if (p.help) return 0;
  check_outputs({trace}, {{"--json", json}});
  auto j = trace_info(trace, lenient);
  if (is_xprof_path(trace) || is_hlo_proto_path(trace)) {  // the compiled modules it embeds
    nlohmann::json mods = nlohmann::json::array();
    for (const auto& m : list_hlo_modules(trace))
      mods.push_back({{"name", m.name},
                      {"module_name", m.module_name},
                      {"logical_buffers", m.logical_buffers},
                      {"allocations", m.allocations},
                      {"heap_traces", m.heap_traces},
                      {"heap_events", m.heap_events},
                      {"largest_allocation_bytes", m.largest_allocation_bytes}});
    j["modules"] = mods;
  }
  if (!json.empty()) write_file_atomic(json, j.dump(2) + "\n");
  if (!to_stdout({json})) std::cout << trace_info_text(j);
  return 0;
}

int cmd_convert(const std::vector<std::string>& args, const Registry&) {
  std::string in, out, module;
  bool lenient = false;
  po::options_description d("fragsim convert options");
  po::options_description hidden;
  hidden.add_options()("in", po::value(&in)->required(), "input trace")("out", po::value(&out)->required(),
                                                                        "output trace");
  d.add_options()("lenient", po::bool_switch(&lenient), "drop frees of unknown ids")(
      "module", po::value(&module),
      "from an XProf capture: write the compile-time heap trace of this XLA module instead (fragsim info lists them)");
  auto p = parse(args, d, {{"in", 1}, {"out", 1}},
                 "usage: fragsim convert IN OUT [--module NAME]\n\nConverts between .jsonl, .jsonl.zst and .fstrace, "
                 "lossless for every key of the trace contract; reads every format fragsim reads.",
                 hidden);
  if (p.help) return 0;
  ReaderOptions ro;
  ro.lenient = lenient;
  check_outputs({in}, {{"OUT", out}});
  auto r = module.empty() ? open_trace(in, ro) : make_hlo_module_reader(in, module);
  auto w = open_trace_writer(out, r->header());
  Event ev;
  std::uint64_t n = 0;
  while (r->next(ev)) {
    w->write(ev);
    ++n;
  }
  w->finish();
  std::cout << fmt::format("wrote {} events to {}\n", n, out);
  return 0;
}

int cmd_gen(const std::vector<std::string>& args, const Registry&) {
  std::string workload, out;
  std::uint64_t seed = 1;
  std::vector<std::string> sets;
  po::options_description d("fragsim gen options");
  po::options_description hidden;
  hidden.add_options()("workload", po::value(&workload)->required(), "workload name (fragsim list)");
  d.add_options()("seed", po::value(&seed)->default_value(1), "PRNG seed (same seed, same trace)")(
      "set", po::value(&sets)->composing(), "workload knob KEY=VALUE (repeatable)")(
      "output,o", po::value(&out)->required(), "output trace (.jsonl, .jsonl.zst, .fstrace)");
  std::string usage = "usage: fragsim gen WORKLOAD [--seed N] [--set KEY=VALUE]... -o FILE\n\nworkloads:\n";
  for (const auto& w : list_workloads()) usage += fmt::format("  {:<12} {}\n", w.name, w.summary);
  auto p = parse(args, d, {{"workload", 1}}, usage, hidden);
  if (p.help) return 0;
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& s : sets) {
    auto [k, v] = parse_setting(s, "--set");
    settings[k] = v;
  }
  auto resolved = generate_workload(workload, seed, settings, out);
  std::cout << fmt::format("wrote {} ({} seed {}, {})\n", out, workload, seed, resolved.dump());
  return 0;
}

int cmd_layout(const std::vector<std::string>& args, const Registry&) {
  std::string hw_name = "tpu-v5e", shape;
  bool json = false;
  po::options_description d("fragsim layout options");
  d.add_options()("hw", po::value(&hw_name)->default_value("tpu-v5e"), "TPU preset (its generation picks the tiles)")(
      "json", po::bool_switch(&json), "print JSON");
  po::options_description hidden;
  hidden.add_options()("shape", po::value(&shape)->required(), "array, e.g. bf16[1000,129] or f32[8,3]{0,1:T(8,128)}");
  auto p = parse(args, d, {{"shape", 1}},
                 "usage: fragsim layout SHAPE [--hw PRESET] [--json]\n\nPadded bytes and tile of an array in TPU "
                 "tiled layout (XLA:TPU's default tiles unless the shape carries a layout).",
                 hidden);
  if (p.help) return 0;
  HardwareModel hw = load_hardware(hw_name);
  if (hw.kind != "tpu") throw InputError("--hw: layout needs a TPU preset, '" + hw.name + "' is a " + hw.kind);
  ArraySpec a = parse_array_spec(shape, "layout");
  TpuLayout l = tpu_layout(a, hw.generation);
  if (l.unpadded == kTooLarge || l.padded == kTooLarge)
    throw InputError(fmt::format("layout: '{}': the array's size does not fit in 64 bits", shape));
  if (json) {
    nlohmann::json j = {{"shape", a.dims},
                        {"dtype", std::string(dtype_name(a.dtype))},
                        {"tile", l.tile},
                        {"unpadded_bytes", l.unpadded},
                        {"padded_bytes", l.padded}};
    if (l.memory_space) j["memory_space"] = l.memory_space;  // S(n), only when the layout names one
    std::cout << j.dump() << "\n";
  } else {
    std::cout << fmt::format(
        "{} on {} (generation {}): tile {}{}\n  unpadded {} ({} B)\n  padded   {} ({} B), {:.2f}x\n", shape, hw.name,
        hw.generation, l.tile, l.memory_space ? fmt::format(", memory space S({})", l.memory_space) : "",
        human_bytes(l.unpadded), l.unpadded, human_bytes(l.padded), l.padded,
        l.unpadded ? static_cast<double>(l.padded) / static_cast<double>(l.unpadded) : 0.0);
    // As XLA:TPU's OOM report lists an allocation.
    std::cout << fmt::format("  as XLA reports it: Size: {}  Unpadded size: {}", xla_tpu_bytes(l.padded),
                             xla_tpu_bytes(l.unpadded));
    if (l.padded > l.unpadded)
      std::cout << fmt::format("  Extra memory due to padding: {} ({:.1f}x expansion)",
                               xla_tpu_bytes(l.padded - l.unpadded),
                               static_cast<double>(l.padded) / static_cast<double>(l.unpadded));
    std::cout << "\n";
  }
  return 0;
}

// `fragsim list POLICY`: every option with its default and meaning, and how to set it.
void list_policy(const PolicyInfo& info) {
  std::cout << fmt::format("{}: {}\n", info.name, info.summary);
  if (info.needs_lifetimes) std::cout << "  reads the whole trace first (it plans with every buffer's lifetime)\n";
  if (info.options.empty()) {
    std::cout << "  no options\n";
    return;
  }
  std::cout << fmt::format("options (--set KEY=VALUE, or --policy '{}[KEY=VALUE,...]'):\n", info.name);
  for (const auto& o : info.options)
    std::cout << fmt::format("  {:<30} default {}\n      {}\n", o.key, o.default_text, o.meaning);
  const auto& e = info.options.front();
  std::cout << fmt::format("example: fragsim run TRACE --policy '{}[{}={}]'\n", info.name, e.key,
                           e.example.is_string() ? e.example.get<std::string>() : e.example.dump());
}

int cmd_list(const std::vector<std::string>& args, const Registry& reg) {
  po::options_description d("fragsim list options");
  std::string what;
  po::options_description hidden;
  hidden.add_options()("what", po::value(&what), "a policy name: list its options");
  auto p = parse(args, d, {{"what", 1}},
                 "usage: fragsim list [POLICY]\n\nLists the policies, hardware presets and workloads; with a policy "
                 "name, that policy's options.",
                 hidden);
  if (p.help) return 0;
  if (!what.empty()) {
    list_policy(reg.find(what, "list"));
    return 0;
  }
  std::cout << "policies (fragsim list POLICY: its options):\n";
  for (const auto& i : reg.all()) std::cout << fmt::format("  {:<14} {}\n", i.name, i.summary);
  std::cout << "hardware presets (--hw):\n";
  for (const auto& n : list_presets()) {
    auto hw = load_hardware(n);
    std::string spaces;
    for (const auto& s : hw.spaces)
      spaces += fmt::format("{}{} {}{}", spaces.empty() ? "" : ", ", space_name(s.space), human_bytes(s.capacity),
                            s.reserve ? fmt::format(" ({} usable)", human_bytes(s.usable())) : "") +
                (s.runtime_limit ? fmt::format(" (runtime limit {})", human_bytes(s.runtime_usable())) : "");
    std::cout << fmt::format("  {:<14} {}\n", n, spaces);
  }
  std::cout << "workloads (gen):\n";
  for (const auto& w : list_workloads()) std::cout << fmt::format("  {:<14} {}\n", w.name, w.summary);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Registry reg;
  register_builtin_policies(reg);
  if (argc >= 2 && std::string(argv[1]) == "--version") {
    std::cout << "fragsim " << FRAGSIM_VERSION << " (fragsim trace v1, report v1)\n";
    return 0;
  }
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  using Fn = int (*)(const std::vector<std::string>&, const Registry&);
  const std::pair<const char*, Fn> kCommands[] = {
      {"run", cmd_run},           {"compare", cmd_compare}, {"sweep", cmd_sweep},     {"check", cmd_check},
      {"validate", cmd_validate}, {"info", cmd_info},       {"convert", cmd_convert}, {"gen", cmd_gen},
      {"layout", cmd_layout},     {"list", cmd_list},       {"batch", cmd_batch},     {"merge", cmd_merge}};
  return run_with_exit_codes("fragsim", [&] {
    std::vector<std::string_view> names;
    for (const auto& [name, fn] : kCommands) {
      if (cmd == name) return fn(args, reg);
      names.push_back(name);
    }
    throw InputError("unknown command '" + cmd + "'" + did_you_mean(cmd, names) + " (fragsim --help lists them)");
  });
}

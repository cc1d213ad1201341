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
#include "sim/base/error.h"
#include "sim/base/exit_codes.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/base/text.h"
#include "sim/batch.h"
#include "sim/check.h"
#include "sim/engine.h"
#include "sim/progress.h"
#include "sim/report.h"
#include "sim/report_html.h"
#include "sim/report_schema.h"
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

Parsed parse(const std::vector<std::string>& args, po::options_description& desc,
             const po::positional_options_description& pos, const std::string& usage) {
  std::vector<std::string> limits;
  desc.add_options()("help,h", "show this help")(
      "limit", po::value(&limits)->composing(),
      ("KEY=VALUE: set a limit on what an input may make fragsim hold instead of its default, which grows with "
       "the input's size; KEY one of " +
       limit_keys() + ", VALUE a size, a count or none (repeatable; fragsim --help, docs/limits.md)")
          .c_str());
  Parsed p;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), p.vm);
    if (p.vm.count("help")) {
      std::cout << usage << "\n" << desc << "\n";
      p.help = true;
      return p;
    }
    po::notify(p.vm);
  } catch (const po::error& e) {
    throw InputError(e.what());
  }
  for (const auto& l : limits) set_limit(l);
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

// Options shared by run, compare, sweep and batch manifest lines: trace, hardware, settings.
struct SimArgs {
  std::string trace, hw, capacity, reserve, policy;  // hw "": the default device (or the recorded one)
  std::vector<std::string> sets, envs;
  bool keep_going = false, lenient = false, check = false;
  ProgressArgs progress;
  std::int64_t shard = 1;  // signed: "-1" is refused as -1, not read as 4294967295
  std::string shard_dim = "major";
};

void add_sim_options(po::options_description& d, SimArgs& a) {
  d.add_options()("trace", po::value(&a.trace)->required(), "trace file")(
      "hw", po::value(&a.hw),
      "hardware preset name or FILE.json (default h100-80g; a recording's inferred device memory is used unless "
      "--hw or --capacity is given)")("capacity", po::value(&a.capacity),
                                      "total HBM as the device reports it (overrides the preset)")(
      "reserve", po::value(&a.reserve), "runtime/CUDA-context reserve (default: the preset's; 0 = none)")(
      "set", po::value(&a.sets)->composing(), "policy option KEY=VALUE (repeatable)")(
      "env", po::value(&a.envs)->composing(), "framework setting VAR=VALUE as the framework reads it (repeatable)")(
      "keep-going", po::bool_switch(&a.keep_going), "continue after an OOM (skip the failed allocation) to list all")(
      "lenient", po::bool_switch(&a.lenient), "count and skip frees of unknown ids (traces that start mid-run)")(
      "check", po::bool_switch(&a.check),
      "validate the policy's invariants after every event (every k-th, k = live buffers / 1024, past 1024)")(
      "shard", po::value(&a.shard)->default_value(1),
      "sharding what-if: each shaped allocation divided across N devices (tpu-padded, static-heap)")(
      "shard-dim", po::value(&a.shard_dim)->default_value("major"), "dim the --shard split divides: major or minor");
  add_progress_options(d, a.progress);
}
// What a set of runs reads, as run_simulations reads it (sim/engine.h): the online runs of a
// trace share one decode of it, and each offline run (its policy plans from lifetimes) reads
// its trace twice.
std::vector<std::pair<std::string, double>> reads_of(const std::vector<RunOptions>& runs, const Registry& reg) {
  std::vector<std::pair<std::string, double>> reads;
  std::set<std::string> decoded;
  for (const auto& o : runs) {
    if (reg.find(o.policy.name).needs_lifetimes)
      reads.emplace_back(o.trace, 2);
    else if (decoded.insert(o.trace).second)
      reads.emplace_back(o.trace, 1);
  }
  return reads;
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

// --hw, else the hardware a recording names (an XProf capture's device plane), else h100-80g.
HardwareModel build_hardware(const SimArgs& a, const nlohmann::json& header = nullptr,
                             std::vector<std::string>* notes = nullptr) {
  std::string name = a.hw.empty() ? "h100-80g" : a.hw;
  std::optional<Bytes> recorded_capacity;
  if (a.hw.empty() && header.is_object() && header.contains("recorded_hardware") &&
      header["recorded_hardware"].is_object()) {
    const auto& r = header["recorded_hardware"];
    name = r.value("preset", name);
    if (r.contains("capacity_bytes") && r["capacity_bytes"].is_number_unsigned())
      recorded_capacity = r["capacity_bytes"].get<Bytes>();
    if (notes)
      notes->push_back(fmt::format("hardware {}{} from the recording: {} (--hw chooses another)", name,
                                   recorded_capacity ? fmt::format(" with {} B", *recorded_capacity) : "",
                                   r.value("basis", std::string("its header"))));
  }
  HardwareModel hw = load_hardware(name);
  SpaceSpec* hbm = hw.space(Space::kHbm);
  if (recorded_capacity && hbm && a.capacity.empty()) hbm->capacity = *recorded_capacity;
  if (!a.capacity.empty()) {
    if (!hbm) throw InputError("--capacity: hardware '" + hw.name + "' has no hbm space");
    hbm->capacity = parse_size(a.capacity, "--capacity");
    check_space(*hbm, "--capacity");
  }
  if (!a.reserve.empty()) {
    if (!hbm) throw InputError("--reserve: hardware '" + hw.name + "' has no hbm space");
    hbm->reserve = parse_size(a.reserve, "--reserve");
    check_space(*hbm, "--reserve");
  }
  return hw;
}

RunOptions build_run(const SimArgs& a, const std::string& policy) {
  RunOptions o;
  o.trace = a.trace;
  // The defaults follow the input: its header may name the hardware and the allocator.
  bool follow_policy = policy.empty() && a.envs.empty();
  nlohmann::json header;
  if (!a.hw.empty()) o.hw = build_hardware(a);  // a bad --hw fails before the trace is read
  if (a.hw.empty() || follow_policy) header = open_trace(a.trace, ReaderOptions{a.lenient})->header();
  if (a.hw.empty()) o.hw = build_hardware(a, header, &o.notes);
  SettingsInput si{policy, a.sets, a.envs};
  std::string why;
  if (follow_policy) {
    si.default_policy = default_policy_for(header, o.hw.kind, &why);
    if (!why.empty()) o.notes.push_back(why);
  }
  o.policy = resolve_settings(si, &o.notes);
  if (a.shard != 1 || a.shard_dim != "major") {
    if (o.policy.name != "tpu-padded" && o.policy.name != "static-heap")
      throw InputError("--shard: only the tpu-padded and static-heap policies model sharding");
    o.policy.config["shard"] = a.shard;
    o.policy.config["shard_dim"] = a.shard_dim;
    o.notes.push_back(fmt::format("sharded {} ways along the {} dim: figures are per device", a.shard, a.shard_dim));
  }
  o.recorded_devices = a.hw.empty() && a.capacity.empty() && a.reserve.empty();
  o.keep_going = a.keep_going;
  o.lenient = a.lenient;
  o.check = a.check;
  return o;
}

// True when one of the outputs is standard output: the text summary then stays off it.
bool to_stdout(std::initializer_list<std::string> outputs) {
  for (const auto& o : outputs)
    if (o == "-") return true;
  return false;
}

int cmd_run(const std::vector<std::string>& args, const Registry& reg) {
  SimArgs a;
  std::string json, placements, html, perfetto;
  int jobs = 0;
  po::options_description d("fragsim run options");
  add_sim_options(d, a);
  add_jobs_option(d, jobs,
                  "1 decodes and replays on one thread; otherwise the trace is decoded on one thread while the "
                  "policy replays it on another, and threads beyond those two parse JSONL lines");
  d.add_options()("policy", po::value(&a.policy),
                  "allocator policy, POLICY or POLICY[k=v,...] (fragsim list); default: follows the input "
                  "(torch-caching for a PyTorch snapshot, xla-bfc for an XProf capture, tpu-padded on a TPU, else "
                  "best-fit)")("json", po::value(&json), "write the report (fragsim report v1) to FILE")(
      "placements", po::value(&placements), "write one JSON line per alloc event (address, block) to FILE")(
      "html", po::value(&html),
      "write an interactive HTML report to FILE (one self-contained file: memory over time, address maps at the peak "
      "and at OOMs, every OOM)")(
      "perfetto", po::value(&perfetto),
      "write the replay as a Chrome trace-event JSON file for ui.perfetto.dev or chrome://tracing: memory counters "
      "per device and space, one slice per buffer, OOMs and marks as instant events");
  po::positional_options_description pos;
  pos.add("trace", 1);
  auto p = parse(args, d, pos,
                 "usage: fragsim run TRACE --policy NAME [options]\n\nReplays TRACE through one policy and prints a "
                 "summary. The trace is streamed (memory grows with live allocations only), except for --policy "
                 "static-heap, which plans offline like XLA's compiler and so reads the whole trace first.");
  if (p.help) return 0;
  check_outputs({a.trace, a.hw},
                {{"--json", json}, {"--placements", placements}, {"--html", html}, {"--perfetto", perfetto}});
  const unsigned threads = jobs_of(jobs);
  RunOptions o = build_run(a, a.policy);
  o.keep_live_buffers = !html.empty();
  o.placements = placements;
  o.perfetto = perfetto;
  RunResult r = [&] {
    Progress progress(want_progress(a.progress), "run", reads_of({o}, reg));
    return std::move(run_simulations({o}, reg, threads).front());
  }();
  if (!json.empty()) write_file_atomic(json, report_json(r).dump(2) + "\n");
  if (!html.empty()) write_file_atomic(html, report_html({r}));
  if (!to_stdout({json, placements, html, perfetto})) std::cout << report_text(r);
  return 0;
}

// "a,b[k=v,k2=v2],c" → entries split on top-level commas.
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      if (!cur.empty()) v.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) v.push_back(cur);
  return v;
}

int cmd_compare(const std::vector<std::string>& args, const Registry& reg) {
  SimArgs a;
  std::string json, policies, html;
  std::vector<std::string> more;
  int jobs = 0;
  po::options_description d("fragsim compare options");
  add_sim_options(d, a);
  add_jobs_option(d, jobs, "policies replayed in parallel, the thread decoding the trace (once for all) included");
  d.add_options()("more", po::value(&more)->composing(),
                  "further traces (positional): every policy runs on each, e.g. the same model with and without "
                  "rematerialisation")("policies", po::value(&policies)->default_value("ideal,best-fit,first-fit"),
                                       "comma-separated policies; NAME[key=value,...] sets options for one entry")(
      "json", po::value(&json), "write a JSON array of reports to FILE")(
      "html", po::value(&html),
      "write an interactive HTML report to FILE (every policy's memory over time with shared zoom, address maps, "
      "OOMs)");
  po::positional_options_description pos;
  pos.add("trace", 1).add("more", -1);
  auto p = parse(args, d, pos,
                 "usage: fragsim compare TRACE [TRACE...] --policies A,B,... [options]\n\nRuns each policy on each "
                 "TRACE; prints one table (rows labelled TRACE: POLICY when there are several traces). The trace is "
                 "decoded once and the policies replay it in parallel.");
  if (p.help) return 0;
  std::vector<std::string> traces{a.trace};
  traces.insert(traces.end(), more.begin(), more.end());
  std::vector<std::string> inputs = traces;
  inputs.push_back(a.hw);
  check_outputs(inputs, {{"--json", json}, {"--html", html}});
  std::vector<RunResult> runs;
  nlohmann::json arr = nlohmann::json::array();
  const std::vector<std::string> entries = split_list(policies);
  for (const auto& entry : entries)  // NAME or NAME[key=value,...]; a bad one fails before any run
    (void)reg.find(parse_policy_ref(entry, "--policies").name, "--policies");
  const unsigned threads = jobs_of(jobs);
  const std::vector<std::string> labels = compare_labels(traces, entries);
  for (const auto& trace : traces) {
    SimArgs ta = a;
    ta.trace = trace;
    std::vector<RunOptions> opts;
    for (const auto& entry : entries) {
      opts.push_back(build_run(ta, entry));
      opts.back().keep_live_buffers = !html.empty();
    }
    std::vector<RunResult> rs = [&] {
      Progress progress(want_progress(a.progress), "compare", reads_of(opts, reg));
      return run_simulations(opts, reg, threads);
    }();
    for (size_t i = 0; i < rs.size(); ++i) {
      runs.push_back(std::move(rs[i]));
      runs.back().label = labels[runs.size() - 1];
      arr.push_back(report_json(runs.back()));
    }
  }
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
  d.add_options()("manifest", po::value(&manifest)->required(), "manifest: one `TRACE [run options]` per line")(
      "shard", po::value(&shard)->default_value("1/1"),
      "run shard i of N only (i/N, 1 <= i <= N): the runs whose number (from 0, in file order) % N == i - 1")(
      "json", po::value(&json), "write the batch result (runs with their reports) to FILE, for fragsim merge");
  po::positional_options_description pos;
  pos.add("manifest", 1);
  auto p = parse(args, d, pos,
                 "usage: fragsim batch MANIFEST [--shard i/N] [--json FILE]\n\nRuns a matrix of traces x policies x "
                 "settings, one run per manifest line (`TRACE --policy P --set k=v ... --label NAME`; '#' starts a "
                 "comment; a relative TRACE is relative to the manifest). --shard splits the runs among independent "
                 "processes (a Slurm job array, a Kubernetes Indexed Job); fragsim merge combines their --json "
                 "results into exactly the result and table of one process. docs/batch.md; scripts/cluster/.");
  if (p.help) return 0;
  const unsigned threads = jobs_of(jobs);
  const bool show = want_progress(progress);
  Manifest m = read_manifest(manifest);
  check_outputs(batch_inputs(m), {{"--json", json}});
  Shard sh = parse_shard(shard);
  std::vector<RunOptions> opts;
  std::vector<const BatchEntry*> picked;
  std::vector<std::string> labels;
  for (const auto& e : m.entries) {
    if (!sh.has(e.run)) continue;
    SimArgs a;
    std::string label;
    po::options_description rd("manifest line");
    add_sim_options(rd, a);
    rd.add_options()("policy", po::value(&a.policy), "")("label", po::value(&label), "");
    po::positional_options_description rpos;
    rpos.add("trace", 1);
    try {
      po::variables_map vm;
      po::store(po::command_line_parser(e.args).options(rd).positional(rpos).run(), vm);
      po::notify(vm);
      opts.push_back(build_run(a, a.policy));
    } catch (const po::error& er) {
      throw InputError(m.path, e.line, er.what());
    } catch (const InputError& er) {
      throw InputError(m.path, e.line, er.what());
    } catch (const EnvError& er) {  // a trace the manifest names cannot be read: the manifest is wrong
      throw InputError(m.path, e.line, er.what());
    }
    picked.push_back(&e);
    labels.push_back(label.empty() ? e.text : label);
  }
  std::vector<RunResult> rs = [&] {
    Progress bar(show, "batch", reads_of(opts, reg));
    return run_simulations(opts, reg, threads);
  }();
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
  d.add_options()("shards", po::value(&files)->composing()->required(), "shard results of fragsim batch --json")(
      "json", po::value(&json), "write the merged result to FILE");
  po::positional_options_description pos;
  pos.add("shards", -1);
  auto p = parse(args, d, pos,
                 "usage: fragsim merge SHARD.json... [--json FILE]\n\nCombines the results of `fragsim batch MANIFEST "
                 "--shard i/N --json SHARD.json` for every i into the result and table `fragsim batch MANIFEST` gives "
                 "in one process. Exit 2 when the files are not all the shards of one manifest.");
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
  SimArgs a;
  std::string json, find;
  int jobs = 0;
  bool exhaustive = false;
  po::options_description d("fragsim sweep options");
  add_sim_options(d, a);
  add_jobs_option(d, jobs, "settings replayed in parallel, the thread decoding the trace included");
  d.add_options()("policy", po::value(&a.policy), "allocator policy (default: chosen by --env, else xla-bfc)")(
      "find", po::value(&find)->required(), "min-mem-fraction (to 0.01) or min-capacity (to the device granularity)")(
      "exhaustive", po::bool_switch(&exhaustive),
      "min-mem-fraction: replay every fraction 0.01..1.00 (lists every outcome that breaks monotonicity) instead of "
      "bisecting and checking 4 fractions on each side of the answer")(
      "json", po::value(&json),
      "write {find, policy, hardware, trace, value, setting, monotonic, runs} to FILE (value and setting are null "
      "when no setting works)");
  po::positional_options_description pos;
  pos.add("trace", 1);
  auto p = parse(args, d, pos,
                 "usage: fragsim sweep TRACE --policy NAME --find min-mem-fraction|min-capacity [options]\n\n"
                 "Finds the smallest memory fraction or capacity with no OOM and prints it as the setting to use.\n"
                 "min-mem-fraction bisects over 0.01..1.00 and checks 4 fractions on each side of the answer\n"
                 "(--exhaustive runs every fraction); both report whether the outcome was monotonic;\n"
                 "min-capacity bisects and checks monotonicity around the answer.\n"
                 "Exit 0 with an answer; exit 1 when no setting in range works.");
  if (p.help) return 0;
  check_outputs({a.trace, a.hw}, {{"--json", json}});
  SweepOptions so;
  so.base = build_run(a, a.policy);
  if (find == "min-mem-fraction" && a.policy.empty() && a.envs.empty() && so.base.policy.name == "best-fit") {
    so.base = build_run(a, "xla-bfc");  // the question is a JAX one unless the input says otherwise
    so.base.notes.push_back("policy xla-bfc: a memory fraction is JAX's setting (--policy chooses another)");
  }
  so.find = find;
  so.threads = jobs_of(jobs);
  so.exhaustive = exhaustive;
  SweepResult r = [&] {
    Progress progress(want_progress(a.progress), "sweep", a.trace, 1);
    so.on_pass = [&](const std::string& what) { progress.stage(what); };
    return run_sweep(so, reg);
  }();
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
  v.json_out = json;  // run_validate checks it against every file it reads
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
  d.add_options()("trace", po::value(&trace)->required(), "trace file")(
      "json", po::value(&json), "write the summary as JSON")("lenient", po::bool_switch(&lenient),
                                                             "skip frees of unknown ids");
  po::positional_options_description pos;
  pos.add("trace", 1);
  auto p = parse(args, d, pos, "usage: fragsim info TRACE [--json FILE]");
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
  d.add_options()("in", po::value(&in)->required(), "input trace")("out", po::value(&out)->required(), "output trace")(
      "lenient", po::bool_switch(&lenient), "drop frees of unknown ids")(
      "module", po::value(&module),
      "from an XProf capture: write the compile-time heap trace of this XLA module instead (fragsim info lists them)");
  po::positional_options_description pos;
  pos.add("in", 1).add("out", 1);
  auto p = parse(
      args, d, pos,
      "usage: fragsim convert IN OUT [--module NAME]\n\nConverts between .jsonl, .jsonl.zst and .fstrace, lossless for "
      "every key of the trace contract.");
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
  d.add_options()("workload", po::value(&workload)->required(), "workload name (fragsim list)")(
      "seed", po::value(&seed)->default_value(1), "PRNG seed (same seed, same trace)")(
      "set", po::value(&sets)->composing(), "workload knob KEY=VALUE (repeatable)")(
      "output,o", po::value(&out)->required(), "output trace (.jsonl, .jsonl.zst, .fstrace)");
  po::positional_options_description pos;
  pos.add("workload", 1);
  std::string usage = "usage: fragsim gen WORKLOAD [--seed N] [--set KEY=VALUE]... -o FILE\n\nworkloads:\n";
  for (const auto& w : list_workloads()) usage += fmt::format("  {:<12} {}\n", w.name, w.summary);
  auto p = parse(args, d, pos, usage);
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
      "shape", po::value(&shape)->required(), "array, e.g. bf16[1000,129] or f32[8,3]{0,1:T(8,128)}")(
      "json", po::bool_switch(&json), "print JSON");
  po::positional_options_description pos;
  pos.add("shape", 1);
  auto p = parse(args, d, pos,
                 "usage: fragsim layout --hw PRESET SHAPE [--json]\n\nPadded bytes and tile of an array in TPU tiled "
                 "layout (XLA:TPU's default tiles unless the shape carries a layout).");
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
  d.add_options()("what", po::value(&what), "a policy name: list its options");
  po::positional_options_description pos;
  pos.add("what", 1);
  auto p = parse(args, d, pos,
                 "usage: fragsim list [POLICY]\n\nLists the policies, hardware presets and workloads; with a policy "
                 "name, that policy's options.");
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
    std::cout << kUsage << "limits on what an input may make fragsim hold (--limit KEY=VALUE on every command "
              << "sets one; docs/limits.md):\n"
              << limits_help();
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

// fragsim command line: Boost.Program_options tables → the library calls the tests use (style
// rule 10; sim/commands/commands.h, sim/commands/listing.h, ...), and the outputs written where asked. Exit codes:
// specs/contracts.md §4.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <iostream>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/exit_codes.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/base/text.h"
#include "sim/cli/cli.h"
#include "sim/commands/batch.h"
#include "sim/commands/check.h"
#include "sim/commands/commands.h"
#include "sim/commands/listing.h"
#include "sim/commands/run_args.h"
#include "sim/engine/progress.h"
#include "sim/report/diff.h"
#include "sim/report/report.h"
#include "sim/report/report_html.h"
#include "sim/report/snapshot_export.h"

namespace po = boost::program_options;
using namespace fragsim;

namespace {

constexpr const char* kUsage = R"(fragsim — trace-driven simulator of accelerator memory allocation and fragmentation

usage: fragsim COMMAND [options]   (fragsim COMMAND --help for each)

commands:
  run TRACE      replay a trace through one allocator policy; report OOMs, peaks, fragmentation, advice
  compare TRACE  several policies on one trace, one table
  sweep TRACE    smallest memory fraction or capacity with no OOM, as the setting to type
  batch MANIFEST a matrix of runs (traces x policies x settings), --shard i/N of it
  merge SHARDS   combine batch shards into the result one process gives
  check          CI gate: compare two reports, exit 1 on a regression
  diff A B       what changed the peak and the first OOM between two runs (traces, reports, or --policies A,B)
  info TRACE     trace summary: counts, peak requested, size histogram
  validate       a simulation against a real-device replay (fragsim-cuda-replay)
  convert IN OUT convert between .jsonl, .jsonl.zst, .fstrace (and read every other format)
  gen WORKLOAD   write a synthetic workload trace
  layout SHAPE   TPU tiled-layout padding of an array (--hw tpu-v5e 'bf16[1000,129]')
  plan INPUT     the best static placement of a trace's (or a MiniMalloc CSV's) buffers: the memory no allocator beats
  list [POLICY]  registered policies, hardware presets, workloads; a policy's options

traces: .jsonl (fragsim trace v1), .jsonl.zst, .fstrace (binary), PyTorch snapshots (.pickle),
        PyTorch profiler traces with memory events (.json, .json.gz, a TensorBoard log directory),
        XProf captures (.xplane.pb, .xplane.pb.zst, a profile log directory), JAX device memory
        profiles (.prof), XLA modules (.hlo_proto.pb); several files, or a directory of one job's
        ranks, are one recording
sizes: a number with a unit: 512B, 64KiB, 2MiB, 16GiB, 80GB (KiB/MiB/GiB powers of 2; KB/MB/GB of 10)
exit codes: 0 ran (OOM is a result), 1 check failed, 2 bad input, 3 environment
)";

using namespace fragsim::cli;

int cmd_run(const Args& args, const Registry& reg) {
  RunRequest a;
  Threads t;
  std::string json, html, snapshot, from, to;
  bool by_stack = false;
  RunOutputs outs;
  po::options_description d("fragsim run options");
  add_run_request_options(d, a);
  t.add(d,
        "1 decodes and replays on one thread; otherwise the trace is decoded on one thread while the policy "
        "replays it on another, and threads beyond those two parse JSONL lines");
  d.add_options()("policy", po::value(&a.policy)->value_name("POLICY"),
                  ("allocator policy, POLICY or POLICY[k=v,...] (fragsim list); default: follows the input (" +
                   defaults_text(reg) + ")")
                      .c_str())("json", po::value(&json)->value_name("FILE"), "write the report (fragsim report v1)")(
      "placements", po::value(&outs.placements)->value_name("FILE"), "one JSON line per alloc (address, block)")(
      "html", po::value(&html)->value_name("FILE"),
      "an interactive HTML report (one self-contained file: memory over time and live buffers per device, the "
      "allocator's state at any event, address maps at each space's peak and at OOMs, live bytes by call site, "
      "findings, every OOM; docs/viewer.md)")(
      "perfetto", po::value(&outs.perfetto)->value_name("FILE"),
      "the replay as a Chrome trace-event JSON file for ui.perfetto.dev: memory counters per device and space, one "
      "slice per buffer, OOMs and marks")("export-snapshot", po::value(&snapshot)->value_name("FILE"),
                                          "the simulated run as a PyTorch memory snapshot (pickle) for memory_viz and "
                                          "torch.cuda._memory_viz: segments, blocks, device traces at the simulated "
                                          "addresses with the recorded frames")(
      "by-stack", po::bool_switch(&by_stack),
      "print the live bytes by call site and stack frame at the peak and at "
      "the first OOM (the JSON report always has them: by_stack)");
  add_window_options(d, &from, &to);
  std::vector<std::string> more;  // further recordings of the job: one run over all
  po::options_description hidden = hidden_option("trace", &a.trace);
  hidden.add_options()("more", po::value(&more)->composing(), "further recordings");
  if (parse(args, d, {{"trace", 1}, {"more", -1}},
            "usage: fragsim run TRACE [TRACE...] [--policy POLICY] [options]\n\nReplays TRACE through one policy "
            "and prints a summary. After an OOM, each setting fragsim suggests is first replayed on the same trace, "
            "and printed with the command that reproduces it. Several snapshots (or a directory of them, "
            "snapshot_rank{N}.pickle) are one job's ranks: one run, rank N as device N. An XProf capture beside a JAX "
            "memory profile (.prof) saved when it began: the profile's buffers are the memory live before the "
            "capture. The trace is streamed "
            "(memory grows with live allocations only), except for policies that plan offline like XLA's compiler "
            "(fragsim list), which read it first.",
            hidden))
    return 0;
  for (const auto& m : more) a.trace += "," + m;  // a set of recordings (traces/recording_set.h)
  check_outputs({a.trace, a.hw}, {{"--json", json},
                                  {"--placements", outs.placements},
                                  {"--html", html},
                                  {"--perfetto", outs.perfetto},
                                  {"--export-snapshot", snapshot}});
  outs.keep_live_buffers = outs.history = !html.empty();
  outs.export_events = !snapshot.empty();
  outs.window = parse_window(from, to);
  RunResult r = run_request(a, reg, outs, t.threads(), t.progress());
  // The export first, in place last: one it refuses leaves no output written.
  std::unique_ptr<AtomicFile> staged = snapshot.empty() ? nullptr : stage_snapshot(r, snapshot);
  write_if(json, [&] { return dump_json(report_json(r), 2) + "\n"; });
  if (!html.empty()) write_file_atomic(html, report_html({r}));
  if (staged) staged->commit();
  if (!to_stdout({json, outs.placements, html, outs.perfetto, snapshot}))
    std::cout << report_text(r) << (by_stack ? by_stack_report(r) : "");
  return 0;
}

int cmd_compare(const Args& args, const Registry& reg) {
  CompareRequest c;
  Threads t;
  std::string json, html, from, to;
  std::vector<std::string> more;
  po::options_description d("fragsim compare options");
  add_run_request_options(d, c.base);
  t.add(d, "policies replayed in parallel, the thread decoding the trace (once for all) included");
  d.add_options()("policies", po::value(&c.policies)->value_name("A,B[k=v],..."),
                  "comma-separated policies; NAME[key=value,...] sets options for one entry (default: follows the "
                  "input: the lower bound, the policy a run would choose with its recorded settings, and that "
                  "policy's what-ifs, each with its framework setting; with --set or --env, those of them the "
                  "keys or variables configure)")("json", po::value(&json)->value_name("FILE"),
                                                  "a JSON array of reports")(
      "html", po::value(&html)->value_name("FILE"),
      "an interactive HTML report: every policy on one chart per device and space, address maps, OOMs");
  add_window_options(d, &from, &to);
  po::options_description hidden = hidden_option("trace", &c.base.trace);
  hidden.add_options()("more", po::value(&more)->composing(), "further traces");
  if (parse(args, d, {{"trace", 1}, {"more", -1}},
            "usage: fragsim compare TRACE [TRACE...] [--policies A,B,...] [options]\n\nRuns each policy on each "
            "TRACE; prints one table (rows labelled TRACE: POLICY when there are several traces; one row per device "
            "and space when a run has several). Each trace is decoded once and its policies replay it in parallel.",
            hidden))
    return 0;
  c.traces = {c.base.trace};
  c.traces.insert(c.traces.end(), more.begin(), more.end());
  std::vector<std::string> inputs = c.traces;
  inputs.push_back(c.base.hw);
  check_outputs(inputs, {{"--json", json}, {"--html", html}});
  RunOutputs outs;
  outs.keep_live_buffers = outs.history = !html.empty();
  outs.window = parse_window(from, to);
  std::vector<RunResult> runs = run_compare(c, reg, outs, t.threads(), t.progress());
  write_if(json, [&] {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : runs) arr.push_back(report_json(r));
    return dump_json(arr, 2) + "\n";
  });
  if (!html.empty() && !runs.empty()) write_file_atomic(html, report_html(runs));
  if (!to_stdout({json, html})) std::cout << compare_table(runs);
  return 0;
}

int cmd_sweep(const Args& args, const Registry& reg) {
  RunRequest a;
  Threads t;
  std::string json, find;
  bool exhaustive = false;
  po::options_description d("fragsim sweep options");
  add_run_request_options(d, a);
  t.add(d, "settings replayed in parallel, the thread decoding the trace included");
  d.add_options()("policy", po::value(&a.policy)->value_name("POLICY"),
                  "allocator policy (default: the one `fragsim run` would choose for the input)")(
      "find", po::value(&find)->required()->value_name("WHAT"),
      "min-mem-fraction (to 0.01, below 0.01 to two significant digits, for policies with a memory fraction) or "
      "min-capacity (to the device granularity)")(
      "exhaustive", po::bool_switch(&exhaustive),
      "min-mem-fraction: replay every fraction 0.01..1.00 instead of bisecting and checking 4 on each side")(
      "json", po::value(&json)->value_name("FILE"),
      "write {find, policy, hardware, trace, value, bound, setting, command, range, monotonic, runs} (value, setting "
      "and command are null when no setting works)");
  if (parse(args, d, {{"trace", 1}},
            "usage: fragsim sweep TRACE --find min-mem-fraction|min-capacity [--policy POLICY] [options]\n\n"
            "Finds the smallest memory fraction or capacity with no OOM and prints it as the setting to use, with\n"
            "the fragsim run that replays it and the range it searched. min-mem-fraction bisects over 0.01..1.00\n"
            "and checks 4 fractions on each side of the answer (--exhaustive runs every fraction); where 0.01\n"
            "fits it searches below, a tenth as fine each time (0.001..0.01, ...), while a step still moves the\n"
            "limit by the device's allocation granularity. With a fraction the setting states what the run holds\n"
            "that the framework does not do unset (XLA_PYTHON_CLIENT_PREALLOCATE=false for a capture that grew on\n"
            "demand). min-capacity doubles its range until a capacity fits (past the run's capacity), bisects,\n"
            "and checks monotonicity around the answer. Exit 0 with an answer; exit 1 when no setting in range\n"
            "works.",
            hidden_option("trace", &a.trace)))
    return 0;
  check_outputs({a.trace, a.hw}, {{"--json", json}});
  SweepResult r = sweep_request(a, find, exhaustive, reg, t.threads(), t.progress());
  write_if(json, [&] { return dump_json(sweep_json(r), 2) + "\n"; });
  if (!to_stdout({json})) std::cout << sweep_text(r);
  return r.value ? 0 : 1;  // no setting works: a failed check, like `check` finding a regression
}

int cmd_batch(const Args& args, const Registry& reg) {
  std::string manifest, shard = "1/1", json;
  Threads t;
  po::options_description d("fragsim batch options");
  t.add(d, "runs in parallel, each trace decoded once for its runs, decoding threads included");
  d.add_options()("shard", po::value(&shard)->default_value("1/1")->value_name("i/N"),
                  "run shard i of N only (1 <= i <= N): the runs whose number (from 0, in file order) % N == i - 1")(
      "json", po::value(&json)->value_name("FILE"), "write the batch result (runs and reports) for fragsim merge");
  if (parse(args, d, {{"manifest", 1}},
            "usage: fragsim batch MANIFEST [--shard i/N] [--json FILE]\n\nRuns a matrix of traces x policies x "
            "settings, one run per manifest line (`TRACE --policy P --set k=v ... --label NAME`; '#' starts a "
            "comment; a relative TRACE is relative to the manifest). --shard splits the runs among independent "
            "processes (a Slurm job array, a Kubernetes Indexed Job); fragsim merge combines their --json results "
            "into exactly the result and table of one process. docs/batch.md; scripts/cluster/.",
            hidden_option("manifest", &manifest)))
    return 0;
  check_outputs(batch_inputs(read_manifest(manifest)), {{"--json", json}});
  nlohmann::json out = run_batch(manifest, shard, reg, t.threads(), t.progress());
  write_if(json, [&] { return dump_json(out, 2) + "\n"; });
  if (!to_stdout({json})) std::cout << batch_table(out);
  return 0;
}

int cmd_merge(const Args& args, const Registry&) {
  std::vector<std::string> files;
  std::string json;
  po::options_description d("fragsim merge options");
  d.add_options()("json", po::value(&json)->value_name("FILE"), "write the merged result to FILE");
  po::options_description hidden;
  hidden.add_options()("shards", po::value(&files)->composing()->required(), "shard results of fragsim batch --json");
  if (parse(args, d, {{"shards", -1}},
            "usage: fragsim merge SHARD.json... [--json FILE]\n\nCombines the results of `fragsim batch MANIFEST "
            "--shard i/N --json SHARD.json` for every i into the result and table `fragsim batch MANIFEST` gives in "
            "one process. Exit 2 when the files are not all the shards of one manifest.",
            hidden))
    return 0;
  std::vector<std::pair<std::string, nlohmann::json>> shards;
  for (const auto& f : files) shards.emplace_back(f, read_json_file(f));
  check_outputs(merge_inputs(shards), {{"--json", json}});
  nlohmann::json out = merge_batches(shards);
  write_if(json, [&] { return dump_json(out, 2) + "\n"; });
  if (!to_stdout({json})) std::cout << batch_table(out);
  return 0;
}

int cmd_check(const Args& args, const Registry&) {
  CheckOptions o;
  std::string json, markdown, junit, gate;
  bool github = false;
  po::options_description d("fragsim check options");
  d.add_options()("baseline", po::value(&o.baseline_path)->required()->value_name("OLD.json"),
                  "report of the known-good run(s)")(
      "current", po::value(&o.current_path)->required()->value_name("NEW.json"), "report of the run(s) to check")(
      "tolerance", po::value(&o.tolerance_pct)->default_value(0)->value_name("PCT"),
      "allowed growth of each peak/fragmentation figure, in percent (>= 0)")(
      "same-trace", po::bool_switch(&o.same_trace),
      "refuse (exit 2) reports of different traces; by default two recordings of one workload are compared, "
      "with a note")("allow-different-trace", po::bool_switch(), "the default (kept for older scripts)")(
      "gate", po::value(&gate)->default_value("recommended")->value_name("recommended|all"),
      "figures whose growth fails the check: those docs/metrics.md recommends (peak allocated, peak reserved, "
      "fragmentation max and at the peak of allocated), or all (also peak requested and at_peak_reserved)")(
      "allow-different-policy", po::bool_switch(&o.allow_different_policy),
      "compare runs whose policy or settings differ (by default refused: exit 2)")(
      "json", po::value(&json)->value_name("FILE"), "the comparison as JSON ('-' = stdout)")(
      "markdown", po::value(&markdown)->value_name("FILE"), "a Markdown table (e.g. $GITHUB_STEP_SUMMARY)")(
      "junit", po::value(&junit)->value_name("FILE"), "JUnit XML (one test case per figure)")(
      "github", po::bool_switch(&github), "print GitHub Actions ::error annotations for regressions");
  if (parse(args, d, {},
            "usage: fragsim check --baseline OLD.json --current NEW.json [--tolerance PCT] [--gate recommended|all] "
            "[--same-trace] [outputs]\n\n"
            "CI gate: exit 1 when NEW has a new or earlier OOM, a different OOM count, or a peak (allocated,\n"
            "reserved) or fragmentation figure grown by more than the tolerance. Reads `run --json` reports,\n"
            "`compare --json` arrays and `batch`/`merge` results (runs matched by label). Peaks a run reached\n"
            "past the event where the baseline stopped are shown, not gated. Reports of different traces are\n"
            "compared as recordings of one workload (a note says so; --same-trace refuses them). Exit 2 for\n"
            "malformed reports and for runs of different policy settings (as resolved) unless allowed."))
    return 0;
  if (gate != "recommended" && gate != "all")
    throw InputError(fmt::format("--gate: '{}': must be recommended or all", gate));
  o.gate_all = gate == "all";
  check_outputs({o.baseline_path, o.current_path}, {{"--json", json}, {"--markdown", markdown}, {"--junit", junit}});
  CheckResult r = run_check(read_json_file(o.baseline_path), read_json_file(o.current_path), o);
  write_if(json, [&] { return dump_json(check_json(r), 2) + "\n"; });
  write_if(markdown, [&] { return check_markdown(r); });
  write_if(junit, [&] { return check_junit(r); });
  if (github) std::cout << check_github(r, o.current_path);
  if (!to_stdout({json, markdown, junit})) std::cout << check_text(r);
  return r.pass ? 0 : 1;
}

int cmd_diff(const Args& args, const Registry& reg) {
  RunRequest base;
  Threads t;
  std::string a, b, policies, label, json, markdown, html, from, to;
  po::options_description d("fragsim diff options");
  add_run_request_options(d, base);
  t.add(d, "as for run, for each of the two runs");
  d.add_options()("policy", po::value(&base.policy)->value_name("POLICY"), "the policy of both runs (default: as run)")(
      "policies", po::value(&policies)->value_name("A,B"), "one TRACE under two policies, POLICY[k=v,...] each")(
      "label", po::value(&label)->value_name("NAME"), "the run of compare --json arrays to compare (by its label)")(
      "json", po::value(&json)->value_name("FILE"), "the diff as JSON (fragsim_diff 1)")(
      "markdown", po::value(&markdown)->value_name("FILE"), "the diff as Markdown (e.g. $GITHUB_STEP_SUMMARY)")(
      "html", po::value(&html)->value_name("FILE"), "the diff in the HTML viewer, with both runs aligned");
  add_window_options(d, &from, &to);
  po::options_description hidden;
  hidden.add_options()("a", po::value(&a)->required(), "A")("b", po::value(&b), "B");
  if (parse(args, d, {{"a", 1}, {"b", 1}},
            "usage: fragsim diff A B [options]   (A, B: two traces, or two reports: run --json / compare --json / "
            "batch)\n"
            "       fragsim diff TRACE --policies A,B [options]\n\nWhat changed the peak and the first OOM between "
            "two runs: each run's peaks and when they happened, reserved memory and fragmentation per device, the "
            "first OOMs, the live bytes at each peak by call site and stack frame side by side, and the largest "
            "buffers added, removed or grown. Traces are replayed as `fragsim run` would (the same options for both); "
            "reports are read as they are. Exit 0 (a diff is not a gate: fragsim check is).",
            hidden))
    return 0;
  check_outputs({a, b, base.hw}, {{"--json", json}, {"--markdown", markdown}, {"--html", html}});
  RunOutputs outs;
  outs.keep_live_buffers = outs.history = !html.empty();
  outs.window = parse_window(from, to);
  const bool reports = is_report_path(a) && is_report_path(b);
  check_diff_inputs(is_report_path(a), is_report_path(b), !b.empty(), base, policies, outs.window);
  DiffOutcome r = reports ? diff_of_reports({read_json_file(a), a}, {read_json_file(b), b}, label, !html.empty())
                          : diff_of_runs(diff_request(base, a, b, policies), reg, outs, t.threads(), t.progress());
  write_if(json, [&] { return dump_json(r.diff, 2) + "\n"; });
  write_if(markdown, [&] { return diff_markdown(r.diff); });
  write_if(html, [&] { return r.html; });
  if (!to_stdout({json, markdown, html})) std::cout << diff_text(r.diff);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  remove_temporaries_on_signals();
  Registry reg;
  register_builtin_policies(reg);
  return run_with_exit_codes("fragsim", [&] {
    if (argc >= 2 && std::string(argv[1]) == "--version") {
      std::cout << "fragsim " << FRAGSIM_VERSION << " (fragsim trace v1, report v1)\n";
      return 0;
    }
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
        std::string(argv[1]) == "help") {
      std::cout << kUsage << "limits on what an input may make fragsim hold (--limit KEY=VALUE on every command "
                << "sets one; docs/limits.md):\n"
                << limits_help();
      return argc < 2 ? 2 : 0;
    }
    std::string cmd = argv[1];
    Args args(argv + 2, argv + argc);
    using Fn = int (*)(const Args&, const Registry&);
    const std::pair<const char*, Fn> kCommands[] = {
        {"run", cmd_run},           {"compare", cmd_compare}, {"sweep", cmd_sweep},     {"check", cmd_check},
        {"validate", cmd_validate}, {"info", cmd_info},       {"convert", cmd_convert}, {"gen", cmd_gen},
        {"layout", cmd_layout},     {"list", cmd_list},       {"batch", cmd_batch},     {"merge", cmd_merge},
        {"diff", cmd_diff},         {"plan", cmd_plan}};
    std::vector<std::string_view> names;
    for (const auto& [name, fn] : kCommands) {
      if (cmd == name) return fn(args, reg);
      names.push_back(name);
    }
    throw InputError("unknown command '" + cmd + "'" + did_you_mean(cmd, names) + " (fragsim --help lists them)");
  });
}

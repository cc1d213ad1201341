// The commands over traces and catalogs that replay nothing: validate, info, convert, gen, layout,
// list (sim/cli/cli.h). The replaying commands and the dispatch: sim/cli/main.cpp.
#include <fmt/format.h>

#include <iostream>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/cli/cli.h"
#include "sim/commands/listing.h"
#include "sim/commands/plan.h"
#include "sim/commands/run_args.h"
#include "sim/commands/trace_info.h"
#include "sim/commands/validate.h"
#include "traces/generators.h"
#include "traces/trace_writer.h"

namespace fragsim::cli {

int cmd_validate(const Args& args, const Registry&) {
  ValidateOptions v;
  std::string json;
  po::options_description d("fragsim validate options");
  d.add_options()("sim", po::value(&v.sim)->required()->value_name("REPORT.json"), "fragsim report (run --json)")(
      "real", po::value(&v.real)->required()->value_name("REPLAY.json"),
      "fragsim-cuda-replay summary (OUT.json) of the same trace")(
      "tolerance", po::value(&v.tolerance_pct)->default_value(5.0), "allowed peak-in-use difference, percent")(
      "fit-cost-model", po::value(&v.fit_out)->value_name("FILE"), "write a preset with the fitted latency model")(
      "json", po::value(&json)->value_name("FILE"), "write the comparison as JSON");
  if (parse(args, d, {},
            "usage: fragsim validate --sim REPORT.json --real REPLAY.json [--tolerance PCT] [--fit-cost-model "
            "OUT.json]\n\nCompares a simulation with a real-device replay: first OOM, peak device memory in use, "
            "address\ngranularity, call latency. Exit 1 when the first OOM differs or the peak is outside the "
            "tolerance."))
    return 0;
  v.json_out = json;  // run_validate checks it against every file it reads
  ValidateResult r = run_validate(v);
  write_if(json, [&] { return dump_json(r.json, 2) + "\n"; });
  for (const auto& l : r.lines) std::cout << l << "\n";
  std::cout << (r.pass ? "validate: PASS\n" : "validate: FAIL\n");
  return r.pass ? 0 : 1;
}

int cmd_info(const Args& args, const Registry&) {
  std::string trace, json;
  bool lenient = false;
  po::options_description d("fragsim info options");
  d.add_options()("json", po::value(&json)->value_name("FILE"), "write the summary as JSON")(
      "lenient", po::bool_switch(&lenient), "skip frees of unknown ids");
  if (parse(args, d, {{"trace", 1}}, "usage: fragsim info TRACE [--json FILE]", hidden_option("trace", &trace)))
    return 0;
  check_outputs({trace}, {{"--json", json}});
  auto j = trace_info(trace, lenient);
  write_if(json, [&] { return dump_json(j, 2) + "\n"; });
  if (!to_stdout({json})) std::cout << trace_info_text(j);
  return 0;
}

int cmd_convert(const Args& args, const Registry&) {
  std::string in, out, module;
  bool lenient = false;
  po::options_description d("fragsim convert options");
  po::options_description hidden;
  hidden.add_options()("in", po::value(&in)->required(), "input trace")("out", po::value(&out)->required(), "output");
  d.add_options()("lenient", po::bool_switch(&lenient), "drop frees of unknown ids")(
      "module", po::value(&module)->value_name("NAME"),
      "from an XProf capture: write the compile-time heap trace of this XLA module instead (fragsim info lists them)");
  if (parse(args, d, {{"in", 1}, {"out", 1}},
            "usage: fragsim convert IN OUT [--module NAME]\n\nConverts between .jsonl, .jsonl.zst and .fstrace, "
            "lossless for every key of the trace contract; reads every format fragsim reads.",
            hidden))
    return 0;
  check_outputs({in}, {{"OUT", out}});
  std::cout << fmt::format("wrote {} events to {}\n", convert_trace(in, out, module, lenient), out);
  return 0;
}

int cmd_gen(const Args& args, const Registry&) {
  std::string workload, out;
  std::uint64_t seed = 1;
  std::vector<std::string> sets;
  po::options_description d("fragsim gen options");
  d.add_options()("seed", po::value(&seed)->default_value(1), "PRNG seed (same seed, same trace)")(
      "set", po::value(&sets)->composing()->value_name("KEY=VALUE"), "workload knob (repeatable)")(
      "output,o", po::value(&out)->required()->value_name("FILE"), "output trace (.jsonl, .jsonl.zst, .fstrace)");
  std::string usage = "usage: fragsim gen WORKLOAD [--seed N] [--set KEY=VALUE]... -o FILE\n\nworkloads:\n";
  for (const auto& w : list_workloads()) usage += fmt::format("  {:<12} {}\n", w.name, w.summary);
  if (parse(args, d, {{"workload", 1}}, usage, hidden_option("workload", &workload))) return 0;
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& s : sets) {
    auto [k, v] = parse_setting(s, "--set");
    settings[k] = v;
  }
  auto resolved = generate_workload(workload, seed, settings, out);
  std::cout << fmt::format("wrote {} ({} seed {}, {})\n", out, workload, seed, dump_json(resolved));
  return 0;
}

int cmd_layout(const Args& args, const Registry&) {
  std::string hw = "tpu-v5e", shape;
  bool json = false;
  po::options_description d("fragsim layout options");
  d.add_options()("hw", po::value(&hw)->default_value("tpu-v5e"), "TPU preset (its generation picks the tiles)")(
      "json", po::bool_switch(&json), "print JSON");
  if (parse(args, d, {{"shape", 1}},
            "usage: fragsim layout SHAPE [--hw PRESET] [--json]\n\nPadded bytes and tile of an array in TPU tiled "
            "layout (XLA:TPU's default tiles unless the shape carries a layout), e.g. bf16[1000,129] or "
            "f32[8,3]{0,1:T(8,128)}.",
            hidden_option("shape", &shape)))
    return 0;
  std::cout << (json ? dump_json(layout_json(shape, hw)) + "\n" : layout_text(shape, hw));
  return 0;
}

int cmd_plan(const Args& args, const Registry&) {
  PlanRequest req;
  std::string csv, json, capacity;
  bool lenient = false;
  po::options_description d("fragsim plan options");
  d.add_options()("output,o", po::value(&csv)->value_name("OUT.csv"),
                  "write the instance with an offset column (MiniMalloc's CSV; device,space columns first for a trace "
                  "of several spaces)")("json", po::value(&json)->value_name("FILE"),
                                        "write the plan as JSON (fragsim_plan 1: height, lower bound, whether proven "
                                        "optimal, time, every offset; docs/plan.md)")(
      "capacity", po::value(&capacity)->value_name("SIZE"),
      "a height to meet (e.g. 1MiB, 1048576B): stop as soon as a plan fits it; default: minimise the height")(
      "time-limit", po::value(&req.time_limit)->value_name("SECONDS"),
      "the time the whole command may take, reading and writing included, shared out among the spaces by "
      "buffer count (default: 3 s per 10,000 buffers, at least 5 s); the best plan found by then is written")(
      "seed", po::value(&req.seed)->default_value(1), "the local search's random choices")(
      "lenient", po::bool_switch(&lenient), "skip frees of unknown ids");
  if (parse(args, d, {{"input", 1}},
            "usage: fragsim plan INPUT [-o OUT.csv] [--json FILE] [--capacity SIZE] [--time-limit SECONDS]\n\n"
            "The lowest heap that holds INPUT's buffers, each at one offset for its whole life: the memory a perfect "
            "placement needs, which no allocator can beat. INPUT is MiniMalloc's planning instance (.csv: "
            "id,lower,upper,size; a buffer lives over [lower, upper)) or any trace fragsim reads (each device and "
            "memory space planned apart; a buffer lives from its alloc to its free, in event order). Prints the "
            "height, the lower bound (the most bytes live at once) and whether the height is proven optimal. Every "
            "plan is checked before it is written: no two buffers that live at once overlap.",
            hidden_option("input", &req.input)))
    return 0;
  if (!capacity.empty()) req.capacity = parse_size_arg(capacity, "--capacity");
  if (req.time_limit < 0) throw InputError("--time-limit: seconds must be 0 or more");
  req.lenient = lenient;
  check_outputs({req.input}, {{"-o", csv}, {"--json", json}});
  PlanOutcome o = run_plan(req);
  write_if(csv, [&] { return plan_csv(o); });
  write_if(json, [&] { return dump_json(plan_json(o), 2) + "\n"; });
  if (!to_stdout({csv, json})) std::cout << plan_text(o);
  return 0;
}

int cmd_list(const Args& args, const Registry& reg) {
  std::string what;
  po::options_description d("fragsim list options");
  po::options_description hidden;
  hidden.add_options()("what", po::value(&what), "a policy name");
  if (parse(args, d, {{"what", 1}},
            "usage: fragsim list [POLICY]\n\nLists the policies, hardware presets and workloads; with a policy name, "
            "that policy's options.",
            hidden))
    return 0;
  std::cout << (what.empty() ? catalog_text(reg) : policy_text(reg.find(what, "list")));
  return 0;
}

}  // namespace fragsim::cli

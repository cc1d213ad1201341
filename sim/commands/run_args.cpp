#include "sim/commands/run_args.h"

#include <boost/program_options.hpp>

#include "sim/base/error.h"

namespace po = boost::program_options;

namespace fragsim {

void add_run_request_options(po::options_description& d, RunRequest& r) {
  d.add_options()("hw", po::value(&r.hw)->value_name("PRESET|FILE"),
                  "hardware preset or FILE.json (default: the device the recording names, else h100-80g; a "
                  "recording's inferred device memory is used unless --hw, --capacity or --reserve is given)")(
      "capacity", po::value(&r.capacity)->value_name("SIZE"),
      "total HBM as the device reports it, with a unit (16GiB, 80GB), overriding the preset's")(
      "reserve", po::value(&r.reserve)->value_name("SIZE"),
      "runtime/CUDA-context reserve, with a unit (default: the preset's; 0 = none)")(
      "set", po::value(&r.sets)->composing()->value_name("KEY=VALUE"),
      "policy option (repeatable; fragsim list POLICY)")(
      "env", po::value(&r.envs)->composing()->value_name("VAR=VALUE"),
      "framework setting as the framework reads it, e.g. XLA_PYTHON_CLIENT_MEM_FRACTION=.5 or "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (repeatable)")(
      "keep-going", po::bool_switch(&r.keep_going), "continue after an OOM (skip the failed allocation) to list all")(
      "lenient", po::bool_switch(&r.lenient), "count and skip frees of unknown ids (traces that start mid-run)")(
      "check", po::bool_switch(&r.check), "validate the policy's invariants after every event")(
      "follow-recording", po::bool_switch(&r.follow_recording),
      "place every allocation that has a recorded address there (the simulated state corrected to the recording) "
      "and let the policy place the others; the report counts the policy's choices that equal the recording "
      "(fidelity.follow_recording)")(
      "pre-trace", po::value(&r.pre_trace)->default_value("auto")->value_name("MODE"),
      "the memory held before a mid-run recording began: auto (as recorded when the run replays the recording's "
      "allocator with its settings and the state fits, else re-held under this run's settings and limits), recorded "
      "(where the recording placed it, whatever the settings), rebuilt (always re-held); docs/report.md, \"Before "
      "the recording\"")(
      "strict", po::bool_switch(&r.strict),
      "a recording with nothing to replay (no allocator events, a state-only snapshot) is an input error (exit 2) "
      "instead of a note")(
      "failed-alloc", po::value(&r.failed_allocs)->composing()->value_name("[DEVICE:]SIZE[@EVENT]"),
      "a request the program failed on, with a unit (2.5GiB, 2684354560B), replayed on DEVICE (default 0) before "
      "event EVENT (the events after it are numbered one more), else after the last event; a DEVICE the trace does "
      "not use or an EVENT past its end is an input error. An XProf capture of a run that failed with "
      "RESOURCE_EXHAUSTED records only the allocations that succeeded (repeatable)")(
      "shard", po::value(&r.shard)->default_value(1)->value_name("N"),
      "sharding what-if: each shaped allocation divided across N devices (policies that model sharding)")(
      "shard-dim", po::value(&r.shard_dim)->default_value("major")->value_name("DIM"),
      "dim the --shard split divides: major or minor");
}

RunRequest parse_manifest_line(const Manifest& m, const BatchEntry& e, std::string* label) {
  RunRequest r;
  po::options_description d("manifest line");
  add_run_request_options(d, r);
  d.add_options()("trace", po::value(&r.trace))("policy", po::value(&r.policy))("label", po::value(label));
  po::positional_options_description pos;
  pos.add("trace", 1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(e.args).options(d).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& er) {
    throw InputError(m.path, e.line, er.what());
  }
  if (label->empty()) *label = e.text;
  return r;
}

}  // namespace fragsim

// Runs a small hand-built trace through one policy and returns the result and placements; and the
// commands of the CLI in process (run_cmd, compare_cmd, sweep_cmd, check_cmd, converted): the
// library call each command makes (sim/commands/commands.h, sim/commands/check.h) and what the CLI prints and writes
// of its result, rendered by the same functions (sim/report/report.h, sim/report/report_html.h, sim/commands/sweep.h);
// refusal and input_error read an input error as the CLI would print it (exit 2, one line).
#pragma once
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/commands/check.h"
#include "sim/commands/commands.h"
#include "sim/engine/engine.h"
#include "sim/report/report.h"
#include "sim/report/report_html.h"
#include "test_util.h"
#include "traces/trace_reader.h"
#include "traces/trace_writer.h"

namespace fragsim::test {

struct SimRun {
  RunResult result;
  std::vector<nlohmann::json> placements;
  const nlohmann::json& stats() const { return result.spaces.at(0).stats; }
};

// Builds JSONL from (op, id, size) triples: op 'a' = alloc, 'f' = free.
struct TraceBuilder {
  std::string text;
  TraceBuilder& alloc(std::uint64_t id, std::uint64_t size, const char* space = nullptr, std::int64_t stream = 0) {
    text += "{\"op\":\"alloc\",\"id\":" + std::to_string(id) + ",\"size\":" + std::to_string(size);
    if (space) text += std::string(",\"space\":\"") + space + "\"";
    if (stream) text += ",\"stream\":" + std::to_string(stream);
    text += "}\n";
    return *this;
  }
  TraceBuilder& free(std::uint64_t id) {
    text += "{\"op\":\"free\",\"id\":" + std::to_string(id) + "}\n";
    return *this;
  }
  TraceBuilder& raw(const std::string& line) {
    text += line + "\n";
    return *this;
  }
};

// Every built-in policy, registered once per test process.
inline const Registry& test_registry() {
  static Registry reg = [] {
    Registry r;
    register_builtin_policies(r);
    return r;
  }();
  return reg;
}

// One hand-built run: a trace text through one policy on a device.
struct SimSpec {
  std::string name;  // names its files in the scratch folder
  std::string text;  // the trace, JSONL
  std::string policy;
  nlohmann::json config = nlohmann::json::object();
  std::string capacity = "80GiB";  // "" keeps the preset's capacity and reserve
  bool keep_going = false;
  bool follow_recording = false;  // --follow-recording
  std::string reserve = "0";
  std::string hw = "h100-80g";
  // --pre-trace: a hand-built trace is no recording of the policy's allocator, so its pre_trace
  // state is re-held unless a test of seeding asks for it as recorded.
  PriorOptions::Mode pre_trace = PriorOptions::Mode::kAuto;
};

// Runs it with --check (every invariant after every event) and reads its placements back.
inline SimRun simulate(const SimSpec& spec) {
  const Registry& reg = test_registry();
  RunOptions o;
  o.trace = write_text(spec.name + ".jsonl", spec.text);
  o.policy.name = spec.policy;
  o.policy.config = spec.config;
  o.hw = load_hardware(spec.hw);
  if (!spec.capacity.empty()) {
    o.hw.space(Space::kHbm)->capacity = parse_size(spec.capacity, "capacity");
    o.hw.space(Space::kHbm)->reserve = parse_size(spec.reserve, "reserve");
  }
  o.check = true;
  o.keep_going = spec.keep_going;
  o.follow_recording = spec.follow_recording;
  o.prior.mode = spec.pre_trace;
  o.placements = tmp_path(spec.name + ".placements.jsonl");
  SimRun r{run_simulation(o, reg), {}};
  r.placements = read_jsonl(o.placements);
  return r;
}

// `fragsim run`: the result (with its advice), its --json report, its text summary, its --html
// page and the page's data (the viewer's JSON; run with kWithHtml, which keeps the live buffers
// for the address maps as --html does) and the lines of its --placements file when one was asked
// for. `threads` as --jobs.
struct CmdRun {
  RunResult result;
  nlohmann::json json;
  std::string text;
  std::vector<nlohmann::json> placements;
  nlohmann::json page() const { return viewer_data({result}); }
  std::string html() const { return report_html({result}); }
};
inline const RunOutputs kWithHtml{.keep_live_buffers = true, .history = true};
inline CmdRun run_cmd(const RunRequest& req, const RunOutputs& out = {}, unsigned threads = 0) {
  CmdRun r{run_request(req, test_registry(), out, threads), {}, {}, {}};
  r.json = report_json(r.result);
  r.text = report_text(r.result);
  if (!out.placements.empty()) r.placements = read_jsonl(out.placements);
  return r;
}
// The JSON report of a run.
inline nlohmann::json run_json(const RunRequest& req) { return run_cmd(req).json; }

// `fragsim compare`: every run, the --json array, the table and the --html page (with_html: the
// runs keep their live buffers, as --html asks). With no traces given, the base's trace is the
// one. `threads` as --jobs.
struct CmdCompare {
  std::vector<RunResult> runs;
  nlohmann::json json = nlohmann::json::array();
  std::string text;
  std::string html() const { return report_html(runs); }
};
inline CmdCompare compare_cmd(CompareRequest req, bool with_html = false, unsigned threads = 0) {
  if (req.traces.empty()) req.traces = {req.base.trace};
  CmdCompare c{
      run_compare(req, test_registry(), RunOutputs{.keep_live_buffers = with_html, .history = with_html}, threads),
      nlohmann::json::array(),
      {}};
  for (const auto& r : c.runs) c.json.push_back(report_json(r));
  c.text = compare_table(c.runs);
  return c;
}

// `fragsim sweep`: the answer, its --json and its text.
struct CmdSweep {
  SweepResult result;
  nlohmann::json json;
  std::string text;
};
inline CmdSweep sweep_cmd(const RunRequest& req, const std::string& find, bool exhaustive = false) {
  CmdSweep s{sweep_request(req, find, exhaustive, test_registry()), {}, {}};
  s.json = sweep_json(s.result);
  s.text = sweep_text(s.result);
  return s;
}

// `fragsim check --baseline BASE --current CUR`: the reports as read from files of those names
// (its lines and errors name them), the other options in `o` (--tolerance, --allow-...). The gate
// passes (exit 0) or not (exit 1); check_text is what it prints.
inline CheckResult check_cmd(const std::string& base_name, const nlohmann::json& base, const std::string& cur_name,
                             const nlohmann::json& cur, CheckOptions o = {}) {
  o.baseline_path = base_name;
  o.current_path = cur_name;
  return run_check(base, cur, o);
}

// `fragsim convert IN OUT [--module NAME]`: the lines it writes (header first).
inline std::vector<nlohmann::json> converted(const std::string& in, const std::string& out,
                                             const std::string& module = "") {
  (void)convert_trace(in, out, module, false);
  return read_jsonl(out);
}

// What the CLI would answer to `f`: the message of the InputError it throws — printed on one line
// after "fragsim: ", exiting 2 — checked to be one line; nothing when it returns (exit 0). Any
// other exception escapes and fails the test, as it would be a bug (exit 1) on the command line.
template <class F>
std::optional<std::string> refusal(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);
    return m;
  }
  return std::nullopt;
}

// The message of the InputError `f` must throw; a failed check (and "") when it throws none.
template <class F>
std::string input_error(F&& f) {
  if (auto m = refusal(std::forward<F>(f))) return *m;
  FAIL_CHECK("no InputError");
  return "";
}

// Every event a trace's reader returns, in order; its header too when asked.
inline std::vector<Event> read_events(const std::string& path, const ReaderOptions& ro = {},
                                      nlohmann::json* header = nullptr) {
  auto r = open_trace(path, ro);
  std::vector<Event> v;
  Event e;
  while (r->next(e)) v.push_back(e);
  if (header) *header = r->header();
  return v;
}

// Two readers' events are the same, field by field.
inline void same_events(const std::vector<Event>& a, const std::vector<Event>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("event " << i);
    CHECK(a[i].op == b[i].op);
    CHECK(a[i].present == b[i].present);
    CHECK(a[i].t == b[i].t);
    CHECK(a[i].id == b[i].id);
    CHECK(a[i].size == b[i].size);
    CHECK(a[i].stream == b[i].stream);
    CHECK(a[i].device == b[i].device);
    CHECK(a[i].space == b[i].space);
    CHECK(a[i].name == b[i].name);
    CHECK(a[i].shape == b[i].shape);
    CHECK(a[i].dtype == b[i].dtype);
    CHECK(a[i].addr == b[i].addr);
  }
}

}  // namespace fragsim::test

// The Python module's native part, `fragsim._fragsim`: the library calls the CLI makes
// (sim/commands/commands.h, sim/commands/check.h, sim/commands/trace_info.h, sim/commands/listing.h), taking Python
// values instead of options. The package (sim/python/fragsim/__init__.py) gives them their signatures and wraps the
// results; docs/python.md describes both.
//
// Threads: a call that reads a trace runs on a thread of its own with the GIL released; the
// caller's thread waits, taking the GIL back every kPoll to let Python handle signals (Ctrl-C:
// KeyboardInterrupt) and to call the progress callback. When either raises, the run is
// cancelled (RunOptions::cancel: it stops within a batch of events, its outputs uncommitted), and
// the exception propagates once it has stopped. Replays use the threads the CLI would (jobs=).
#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/commands/check.h"
#include "sim/commands/commands.h"
#include "sim/commands/listing.h"
#include "sim/commands/trace_info.h"
#include "sim/python/convert.h"
#include "sim/report/report.h"
#include "sim/report/report_html.h"
#include "traces/generators.h"
#include "traces/torch_snapshot.h"

namespace py = pybind11;

namespace fragsim::python {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

// A path as Python names it (str or os.PathLike), as a str: os.fsdecode(os.fspath(p)).
std::string path_of(py::handle p) {
  py::module_ os = py::module_::import("os");
  return py::str(os.attr("fsdecode")(os.attr("fspath")(p)));
}

bool is_path(py::handle p) { return PyUnicode_Check(p.ptr()) || py::hasattr(p, "__fspath__"); }

const Registry& registry() {
  static const Registry reg = [] {
    Registry r;
    register_builtin_policies(r);
    return r;
  }();
  return reg;
}

// Runs work(&cancel) with the GIL released (see the file comment). `progress`: None or a
// callable given the events decoded since the call began.
template <class F>
auto released(F&& work, const py::object& progress) {
  if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
    throw py::type_error("progress: expected a callable (given the events decoded so far) or None");
  std::atomic<bool> cancel{false};
  new_input_epoch();
  const std::uint64_t events0 = input_events_read();
  auto done = std::async(std::launch::async, [&] { return work(&cancel); });
  auto poll = [&] {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!progress.is_none()) progress(input_events_read() - events0);
  };
  try {
    poll();
    for (;;) {
      bool ready;
      {
        py::gil_scoped_release nogil;
        ready = done.wait_for(kPoll) == std::future_status::ready;
      }
      if (ready) break;
      poll();
    }
  } catch (...) {
    cancel = true;
    {
      py::gil_scoped_release nogil;
      done.wait();
    }
    throw;
  }
  return done.get();
}

// ---- options ----

// The keyword arguments the package passes on (None: not given).
class Options {
 public:
  explicit Options(py::dict d) : d_(std::move(d)) {}

  bool given(const char* k) const { return d_.contains(k) && !d_[k].is_none(); }
  py::object get(const char* k) const { return given(k) ? py::object(d_[k]) : py::none(); }
  std::string str(const char* k) const {
    if (!given(k)) return {};
    py::object v = d_[k];
    if (!PyUnicode_Check(v.ptr())) throw py::type_error(fmt::format("{}: expected a str, got {}", k, type_of(v)));
    return v.cast<std::string>();
  }
  std::string path(const char* k) const {
    if (!given(k)) return {};
    return path_of(d_[k]);
  }
  bool flag(const char* k) const { return given(k) && py::bool_(d_[k]); }
  long long integer(const char* k, long long dflt) const {
    if (!given(k)) return dflt;
    py::object v = d_[k];
    if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
      throw py::type_error(fmt::format("{}: expected an int, got {}", k, type_of(v)));
    return v.cast<long long>();
  }
  // A size: a str with a unit ("16GiB"), or an int of bytes, written as the command line takes
  // it (exact, in the largest unit that divides it: commands printed in reports read "600MiB").
  std::string size(const char* k) const {
    if (!given(k)) return {};
    py::object v = d_[k];
    if (PyUnicode_Check(v.ptr())) return v.cast<std::string>();
    if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
      throw py::type_error(
          fmt::format("{}: expected a size, a str with a unit ('16GiB') or an int of bytes, got {}", k, type_of(v)));
    py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
    unsigned long long b = PyLong_AsUnsignedLongLong(i.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw InputError(fmt::format("{}: {} bytes is not a size (0 to 2^64 - 1)", k, std::string(py::str(i))));
    }
    return b == 0 ? "0" : size_arg(b);
  }
  // A mapping {KEY: value} or an iterable of "KEY=VALUE" strings, as "KEY=VALUE" strings. Values
  // are written as --set and --env take them: str as they are, bool as true/false, numbers as
  // Python prints them. `env`: a bool or None is refused (an environment holds strings).
  std::vector<std::string> pairs(const char* k, bool env) const {
    std::vector<std::string> out;
    if (!given(k)) return out;
    py::object v = d_[k];
    if (PyUnicode_Check(v.ptr()))
      throw py::type_error(fmt::format("{}: expected a dict or a list of 'KEY=VALUE' strings, got a str", k));
    if (py::hasattr(v, "items")) {
      for (auto kv : v.attr("items")()) {
        auto p = py::reinterpret_borrow<py::tuple>(kv);
        if (!PyUnicode_Check(p[0].ptr()))
          throw py::type_error(fmt::format("{}: keys must be str, got {}", k, type_of(p[0])));
        out.push_back(p[0].cast<std::string>() + "=" + value(p[1], k, env));
      }
      return out;
    }
    for (auto x : py::reinterpret_borrow<py::iterable>(v)) {
      if (!PyUnicode_Check(x.ptr()))
        throw py::type_error(fmt::format("{}: expected 'KEY=VALUE' strings, got {}", k, type_of(x)));
      out.push_back(x.cast<std::string>());
    }
    return out;
  }
  unsigned jobs() const {
    long long j = integer("jobs", 0);
    if (j < 0 || j > 1024) throw InputError(fmt::format("jobs: must be in 0..1024, got {}", j));
    return static_cast<unsigned>(j);
  }

 private:
  static std::string type_of(py::handle v) { return Py_TYPE(v.ptr())->tp_name; }
  static std::string value(py::handle v, const char* k, bool env) {
    if (PyUnicode_Check(v.ptr())) return v.cast<std::string>();
    if (PyBool_Check(v.ptr()) && !env) return v.ptr() == Py_True ? "true" : "false";
    if (v.is_none() && !env) return "null";
    if ((PyIndex_Check(v.ptr()) || PyFloat_Check(v.ptr())) && !PyBool_Check(v.ptr())) return py::str(v);
    throw py::type_error(fmt::format("{}: a {} value{}", k, type_of(v),
                                     env ? " (an environment variable holds a str: write it as you would export it)"
                                         : " (expected str, bool, int or float)"));
  }
  py::dict d_;
};

RunRequest request_of(const Options& o) {
  RunRequest r;
  r.hw = o.str("hw");
  r.capacity = o.size("capacity");
  r.reserve = o.size("reserve");
  r.policy = o.str("policy");
  r.sets = o.pairs("settings", false);
  r.envs = o.pairs("env", true);
  r.keep_going = o.flag("keep_going");
  r.lenient = o.flag("lenient");
  r.check = o.flag("check");
  r.follow_recording = o.flag("follow_recording");
  if (o.given("pre_trace")) r.pre_trace = o.str("pre_trace");
  r.strict = o.flag("strict");
  long long shard = o.integer("shard", 1);
  if (shard < 1) throw InputError(fmt::format("shard: must be at least 1, got {}", shard));
  r.shard = static_cast<unsigned>(shard);
  if (o.given("shard_dim")) r.shard_dim = o.str("shard_dim");
  return r;
}

// ---- sources ----

// What a call reads: a file (no source), or events held in memory, named `name`.
struct Source {
  std::string name;
  TraceSource source;
};

// A source decoded on its first use, on whichever thread uses it first (the worker), then read
// from memory by every run.
TraceSource decoded_on_first_use(ReaderFactory open) {
  struct State {
    std::mutex m;
    ReaderFactory open, decoded;
  };
  auto st = std::make_shared<State>();
  st->open = std::move(open);
  return [st]() {
    std::lock_guard<std::mutex> l(st->m);
    if (!st->decoded) {
      st->decoded = decode_once(st->open);
      st->open = nullptr;  // the snapshot's objects are no longer needed
    }
    return st->decoded();
  };
}

// A list of the segments torch.cuda.memory_snapshot() returns (what _snapshot() returned up to
// PyTorch 1.13): dicts with "blocks", which no event has.
bool is_segment_list(py::handle src) {
  if (!PyList_Check(src.ptr()) || PyList_GET_SIZE(src.ptr()) == 0) return false;
  py::handle first = PyList_GET_ITEM(src.ptr(), 0);
  return PyDict_Check(first.ptr()) && py::reinterpret_borrow<py::dict>(first).contains("blocks");
}

// A path (str or os.PathLike), a snapshot (a dict, or a list of segments), or events (any other
// iterable: event dicts or JSONL lines). The iterable is consumed here, with the GIL.
Source source_of(py::handle src, const Options& o) {
  const bool lenient = o.flag("lenient");
  if (is_path(src)) {
    if (o.given("name")) throw py::type_error("name: names a source held in memory (a path names itself)");
    return {path_of(src), {}};
  }
  if (PyBytes_Check(src.ptr()) || PyByteArray_Check(src.ptr()))
    throw py::type_error(
        "source: bytes; expected a path, a PyTorch snapshot dict or an iterable of events (dicts or JSONL lines)");
  if (py::isinstance<py::dict>(src) || is_segment_list(src)) {
    std::string name = o.given("name") ? o.str("name") : "<snapshot>";
    std::shared_ptr<const PickleDoc> doc = snapshot_doc(src, name);
    return {name, decoded_on_first_use([doc, name, lenient] {
              return make_torch_snapshot_reader_from(name, *doc, ReaderOptions{lenient});
            })};
  }
  if (!py::hasattr(src, "__iter__"))
    throw py::type_error(fmt::format(
        "source: a {}; expected a path, a PyTorch snapshot dict or an iterable of events (dicts or JSONL lines)",
        Py_TYPE(src.ptr())->tp_name));
  std::string name = o.given("name") ? o.str("name") : "<events>";
  JsonlLines lines(name);
  for (auto item : py::reinterpret_borrow<py::iterable>(src)) add_event(lines, item, name);
  return {name, std::move(lines).reader(ReaderOptions{lenient})};
}

// ---- results ----

// The runs of a run (one) or a compare (several), kept for their text and HTML renderings.
class Runs {
 public:
  explicit Runs(std::vector<RunResult> runs) : runs_(std::move(runs)) {}
  size_t size() const { return runs_.size(); }
  py::object report(size_t i) const { return to_python(report_json(at(i))); }
  // i < 0: all of them (compare's table, one HTML file for every run, the JSON array).
  std::string text(long i) const { return i < 0 ? compare_table(runs_) : report_text(at(i)); }
  void html(const std::string& path, long i) const {
    write_file_atomic(path, report_html(i < 0 ? runs_ : std::vector<RunResult>{at(i)}));
  }
  std::string json_text(long i) const {
    if (i >= 0) return report_json(at(i)).dump(2) + "\n";
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : runs_) arr.push_back(report_json(r));
    return arr.dump(2) + "\n";
  }

 private:
  const RunResult& at(long i) const {
    if (i < 0 || static_cast<size_t>(i) >= runs_.size()) throw py::index_error("no such run");
    return runs_[static_cast<size_t>(i)];
  }
  std::vector<RunResult> runs_;
};

// ---- entry points ----

Runs run(py::handle src, py::dict opts) {
  Options o(std::move(opts));
  RunRequest req = request_of(o);
  Source s = source_of(src, o);
  req.trace = s.name;
  req.source = s.source;
  RunOutputs outs;
  outs.placements = o.path("placements");
  outs.perfetto = o.path("perfetto");
  const std::string html = o.path("html");
  outs.keep_live_buffers = outs.history = !html.empty();
  check_outputs({s.source ? std::string() : s.name, req.hw},
                {{"placements", outs.placements}, {"perfetto", outs.perfetto}, {"html", html}});
  const unsigned threads = o.jobs();
  return released(
      [&](const std::atomic<bool>* cancel) {
        req.cancel = cancel;
        Runs r({run_request(req, registry(), outs, threads)});
        if (!html.empty()) r.html(html, 0);
        return r;
      },
      o.get("progress"));
}

// policies=: "A,B[k=v]" or a list of such entries, as --policies takes them.
std::string policy_list(const Options& o) {
  std::string out;
  if (!o.given("policies")) return out;
  py::object p = o.get("policies");
  if (PyUnicode_Check(p.ptr())) return p.cast<std::string>();
  for (auto x : py::reinterpret_borrow<py::iterable>(p)) {
    if (!PyUnicode_Check(x.ptr()))
      throw py::type_error(fmt::format("policies: expected str entries, got {}", Py_TYPE(x.ptr())->tp_name));
    out += (out.empty() ? "" : ",") + x.cast<std::string>();
  }
  return out;
}

Runs compare(py::tuple sources, py::dict opts) {
  Options o(std::move(opts));
  CompareRequest c;
  c.base = request_of(o);
  c.policies = policy_list(o);
  if (sources.empty()) throw py::type_error("compare: expected at least one source");
  std::vector<std::string> inputs;
  for (auto x : sources) {
    Source s = source_of(x, o);
    c.traces.push_back(s.name);
    c.sources.push_back(s.source);
    if (!s.source) inputs.push_back(s.name);
  }
  c.base.trace = c.traces.front();
  const std::string html = o.path("html");
  inputs.push_back(c.base.hw);
  check_outputs(inputs, {{"html", html}});
  const unsigned threads = o.jobs();
  return released(
      [&](const std::atomic<bool>* cancel) {
        c.base.cancel = cancel;
        RunOutputs outs;
        outs.keep_live_buffers = outs.history = !html.empty();
        Runs r(run_compare(c, registry(), outs, threads));
        if (!html.empty() && r.size()) r.html(html, -1);
        return r;
      },
      o.get("progress"));
}

SweepResult sweep(py::handle src, const std::string& find, py::dict opts) {
  Options o(std::move(opts));
  RunRequest req = request_of(o);
  Source s = source_of(src, o);
  req.trace = s.name;
  req.source = s.source;
  const unsigned threads = o.jobs();
  const bool exhaustive = o.flag("exhaustive");
  return released(
      [&](const std::atomic<bool>* cancel) {
        req.cancel = cancel;
        return sweep_request(req, find, exhaustive, registry(), threads);
      },
      o.get("progress"));
}

// A report given to check: a path (read as the CLI reads it), or the report itself (a dict, a
// compare's list).
nlohmann::json report_of(py::handle r, const std::string& what, std::string* name) {
  if (is_path(r)) {
    *name = path_of(r);
    return read_json_file(*name);
  }
  *name = what;
  return to_json(r, what);
}

CheckResult check(py::handle baseline, py::handle current, py::dict opts) {
  Options o(std::move(opts));
  CheckOptions c;
  nlohmann::json b = report_of(baseline, "baseline", &c.baseline_path);
  nlohmann::json n = report_of(current, "current", &c.current_path);
  if (o.given("tolerance")) c.tolerance_pct = o.get("tolerance").cast<double>();
  c.same_trace = o.flag("same_trace");
  c.allow_different_policy = o.flag("allow_different_policy");
  if (o.given("gate")) {
    std::string gate = o.get("gate").cast<std::string>();
    if (gate != "recommended" && gate != "all")
      throw InputError(fmt::format("gate: '{}': must be 'recommended' or 'all'", gate));
    c.gate_all = gate == "all";
  }
  return run_check(b, n, c);
}

// A report given to diff: a path of a .json file, a dict with "fragsim_report", or a list of them
// (a compare). Anything else is a trace source.
bool is_report(py::handle x) {
  if (is_path(x)) return ends_with(path_of(x), ".json");
  if (py::isinstance<py::dict>(x)) return x.cast<py::dict>().contains("fragsim_report");
  if (!py::isinstance<py::list>(x)) return false;
  py::list l = x.cast<py::list>();
  return l.size() && py::isinstance<py::dict>(l[0]) && l[0].cast<py::dict>().contains("fragsim_report");
}

// `fragsim diff`: two reports as they are, or two sources (one under policies=[A, B]) replayed.
DiffOutcome diff(py::handle a, py::handle b, py::dict opts) {
  Options o(std::move(opts));
  const std::string html = o.path("html"), label = o.str("label");
  const bool a_report = is_report(a), b_report = !b.is_none() && is_report(b);
  check_diff_inputs(a_report, b_report, !b.is_none(), request_of(o), policy_list(o), Window{});
  if (a_report && b_report) {
    DiffInput ra, rb;
    ra.report = report_of(a, "A", &ra.name);
    rb.report = report_of(b, "B", &rb.name);
    DiffOutcome d = diff_of_reports(ra, rb, label, !html.empty());
    if (!html.empty()) write_file_atomic(html, d.html);
    return d;
  }
  Source sa = source_of(a, o), sb = b.is_none() ? Source{} : source_of(b, o);
  if (sa.source && sb.source && sa.name == sb.name) sa.name = "A " + sa.name, sb.name = "B " + sb.name;
  DiffRequest req = diff_request(request_of(o), sa.name, sb.name, policy_list(o));
  req.a.source = sa.source;
  if (!b.is_none())
    req.b.source = sb.source;
  else
    req.b.source = sa.source;
  RunOutputs outs;
  outs.keep_live_buffers = outs.history = !html.empty();
  check_outputs({sa.source ? std::string() : sa.name, sb.source ? std::string() : sb.name, req.a.hw}, {{"html", html}});
  const unsigned threads = o.jobs();
  return released(
      [&](const std::atomic<bool>* cancel) {
        req.a.cancel = req.b.cancel = cancel;
        DiffOutcome d = diff_of_runs(req, registry(), outs, threads);
        if (!html.empty()) write_file_atomic(html, d.html);
        return d;
      },
      o.get("progress"));
}

py::tuple info(py::handle src, py::dict opts) {
  Options o(std::move(opts));
  Source s = source_of(src, o);
  const bool lenient = o.flag("lenient");
  nlohmann::json j =
      released([&](const std::atomic<bool>*) { return trace_info(s.name, lenient, s.source); }, o.get("progress"));
  return py::make_tuple(to_python(j), trace_info_text(j));
}

py::object gen(const std::string& workload, py::handle path, std::uint64_t seed, py::dict opts) {
  Options o(std::move(opts));
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& kv : o.pairs("settings", false)) {
    auto [k, v] = parse_setting(kv, "settings");
    settings[k] = v;
  }
  std::string out = path_of(path);
  nlohmann::json resolved =
      released([&](const std::atomic<bool>*) { return generate_workload(workload, seed, settings, out); }, py::none());
  return to_python(resolved);
}

}  // namespace

}  // namespace fragsim::python

PYBIND11_MODULE(_fragsim, m) {
  using namespace fragsim;
  using namespace fragsim::python;
  m.doc() = "fragsim's native part: use the fragsim package (import fragsim), not this module";
  m.attr("version") = FRAGSIM_VERSION;

  py::register_exception<InputError>(m, "InputError", PyExc_ValueError);
  py::register_exception<EnvError>(m, "EnvError", PyExc_OSError);
  py::register_exception<InternalError>(m, "InternalError", PyExc_RuntimeError);

  py::class_<Runs>(m, "Runs")
      .def("__len__", &Runs::size)
      .def("report", &Runs::report)
      .def("text", &Runs::text)
      .def("html", &Runs::html)
      .def("json_text", &Runs::json_text);
  py::class_<SweepResult>(m, "SweepResult")
      .def("report", [](const SweepResult& r) { return to_python(sweep_json(r)); })
      .def("text", &sweep_text);
  py::class_<DiffOutcome>(m, "DiffOutcome")
      .def("report", [](const DiffOutcome& d) { return to_python(d.diff); })
      .def("text", [](const DiffOutcome& d) { return diff_text(d.diff); })
      .def("markdown", [](const DiffOutcome& d) { return diff_markdown(d.diff); });
  py::class_<CheckResult>(m, "CheckResult")
      .def("report", [](const CheckResult& r) { return to_python(check_json(r)); })
      .def("text", &check_text)
      .def("markdown", &check_markdown)
      .def("junit", &check_junit)
      .def("github", &check_github);

  m.def("run", &run);
  m.def("compare", &compare);
  m.def("sweep", &sweep);
  m.def("check", &check);
  m.def("diff", &diff);
  m.def("info", &info);
  m.def("layout", [](const std::string& shape, const std::string& hw) {
    return py::make_tuple(to_python(layout_json(shape, hw)), layout_text(shape, hw));
  });
  m.def("catalog", [] { return catalog_text(registry()); });
  m.def("policy", [](const std::string& name) { return policy_text(registry().find(name, "list")); });
  m.def("gen", &gen);
  m.def("write_text", [](py::handle path, const std::string& text) { write_file_atomic(path_of(path), text); });
  m.def("events_read", &input_events_read);
}

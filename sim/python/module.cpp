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
#include <filesystem>
#include <future>
#include <limits>
#include <mutex>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/commands/check.h"
#include "sim/commands/commands.h"
#include "sim/commands/listing.h"
#include "sim/commands/plan.h"
#include "sim/commands/trace_info.h"
#include "sim/python/convert.h"
#include "sim/report/diff.h"
#include "sim/report/report.h"
#include "sim/report/report_html.h"
#include "traces/generators.h"
#include "traces/torch_snapshot.h"

namespace py = pybind11;

namespace fragsim::python {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

// A path as Python names it (str, bytes or os.PathLike), as the bytes the OS takes:
// os.fsencode(os.fspath(p)) (a name that is not UTF-8 comes back as it was).
// A str the OS cannot take (a lone surrogate, a NUL byte) is an InputError naming the path, as
// the command line refuses a path it cannot open; another type, os.fspath's TypeError.
std::string path_of(py::handle p) {
  py::module_ os = py::module_::import("os");
  py::object named = os.attr("fspath")(p);
  std::string out;
  try {
    out = py::bytes(os.attr("fsencode")(named));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_UnicodeEncodeError)) throw;
    throw InputError(
        fmt::format("{}: a path the file system cannot name (a character no encoding of file names "
                    "holds: a lone surrogate)",
                    std::string(py::str(py::repr(named)))));
  }
  if (out.find('\0') != std::string::npos)
    throw InputError(fmt::format("{}: a path with a NUL character, which no file name holds",
                                 std::string(py::str(py::repr(named)))));
  return out;
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
// callable given the events decoded since its previous call (at once 0, then every kPoll, and once
// when the work is done): a tqdm bar's `update`. Each input event counts once over the call
// (new_input_epoch, sim/base/io.h), so what it is given sums to the events of the call's inputs,
// however often the command replays them.
template <class F>
auto released(F&& work, const py::object& progress) {
  if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
    throw py::type_error(
        fmt::format("progress=: expected a callable (given the events decoded since its previous call) or None, got {}",
                    python_type(progress)));
  std::atomic<bool> cancel{false};
  new_input_epoch();
  std::uint64_t told = input_events_read();  // the events the callback was given, from the counter's start
  auto poll = [&] {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    const std::uint64_t now = input_events_read(), step = now - told;
    told = now;
    if (!progress.is_none()) progress(step);
  };
  poll();  // at once, before the work starts: 0 whatever the machine's load
  auto done = std::async(std::launch::async, [&] { return work(&cancel); });
  try {
    for (;;) {
      bool ready;
      {
        py::gil_scoped_release nogil;
        ready = done.wait_for(kPoll) == std::future_status::ready;
      }
      poll();  // the last one, once the work is done: the events since the previous call
      if (ready) break;
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
    if (!PyUnicode_Check(v.ptr())) throw py::type_error(fmt::format("{}=: expected a str, got {}", k, python_type(v)));
    return utf8_text(v, k);
  }
  std::string path(const char* k) const {
    if (!given(k)) return {};
    return path_of(d_[k]);
  }
  bool flag(const char* k) const { return given(k) && py::bool_(d_[k]); }
  // An int in [lo, hi]: TypeError for another type, InputError outside the range (never cut to
  // fit: shard=2**32+1 is not shard=1).
  long long integer(const char* k, long long dflt, long long lo, long long hi) const {
    if (!given(k)) return dflt;
    py::object v = d_[k];
    if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
      throw py::type_error(fmt::format("{}=: expected an int, got {}", k, python_type(v)));
    py::int_ i = int_of(v, k);
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    const std::string text = py::str(i);
    if (overflow) throw InputError(fmt::format("{}=: {} does not fit in 64 bits", k, text));
    if (n < lo || n > hi)
      throw InputError(hi == std::numeric_limits<long long>::max()
                           ? fmt::format("{}=: must be at least {}, got {}", k, lo, text)
                           : fmt::format("{}=: must be in {}..{}, got {}", k, lo, hi, text));
    return n;
  }
  // A number (int or float; not a bool): TypeError for another type, InputError for one no double holds.
  double number(const char* k, double dflt) const {
    if (!given(k)) return dflt;
    py::object v = d_[k];
    if (PyBool_Check(v.ptr()) || (!PyFloat_Check(v.ptr()) && !PyIndex_Check(v.ptr())))
      throw py::type_error(fmt::format("{}=: expected a number, got {}", k, python_type(v)));
    const double d = PyFloat_Check(v.ptr()) ? PyFloat_AsDouble(v.ptr()) : PyLong_AsDouble(int_of(v, k).ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw InputError(fmt::format("{}=: {} is beyond what a double holds", k, std::string(py::str(v))));
    }
    return d;
  }
  // A size: a str with a unit ("16GiB"), or an int of bytes, written as the command line takes
  // it (exact, in the largest unit that divides it: commands printed in reports read "600MiB").
  // `least`: an int below it is a number meant in another unit (capacity=16 for 16 GiB), refused
  // with the fix rather than read as a device of 16 bytes.
  std::string size(const char* k, Bytes least = 0) const {
    if (!given(k)) return {};
    py::object v = d_[k];
    if (PyUnicode_Check(v.ptr())) return utf8_text(v, k);
    if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
      throw py::type_error(fmt::format("{}=: expected a size, a str with a unit ('16GiB') or an int of bytes, got {}",
                                       k, python_type(v)));
    py::int_ i = int_of(v, k);
    unsigned long long b = PyLong_AsUnsignedLongLong(i.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw InputError(fmt::format("{}=: {} bytes is not a size (0 to 2^64 - 1)", k, std::string(py::str(i))));
    }
    if (b && b < least) {
      const std::string n = std::to_string(b), flag = fmt::format("--{}", k);
      throw InputError(
          fmt::format("{}={}: an int counts bytes, and {} bytes is no device's memory: write {} ('{}B' "
                      "if you mean bytes)",
                      k, n, n, OptionNames{true}.size_fix(flag, n), n));
    }
    return b == 0 ? "0" : size_arg(b);
  }
  // A mapping {KEY: value} or an iterable of "KEY=VALUE" strings, as "KEY=VALUE" strings. Values
  // are written as --set and --env take them: str as they are, bool as true/false, numbers as
  // Python prints them. `env`: anything but a str is refused (an environment holds strings).
  std::vector<std::string> pairs(const char* k, bool env) const {
    std::vector<std::string> out;
    if (!given(k)) return out;
    py::object v = d_[k];
    if (PyUnicode_Check(v.ptr()))
      throw py::type_error(fmt::format("{}=: expected a dict or a list of 'KEY=VALUE' strings, got a str", k));
    if (py::hasattr(v, "items")) {
      for (const auto& [key, val] : items_of(v, k)) {
        if (!PyUnicode_Check(key.ptr()))
          throw py::type_error(fmt::format("{}=: keys must be str, got {}", k, python_type(key)));
        out.push_back(utf8_text(key, k) + "=" + value(val, k, env));
      }
      return out;
    }
    if (!py::hasattr(v, "__iter__"))
      throw py::type_error(
          fmt::format("{}=: expected a dict or a list of 'KEY=VALUE' strings, got {}", k, python_type(v)));
    for (auto x : py::reinterpret_borrow<py::iterable>(v)) {
      if (!PyUnicode_Check(x.ptr()))
        throw py::type_error(fmt::format("{}=: expected 'KEY=VALUE' strings, got {}", k, python_type(x)));
      out.push_back(utf8_text(x, k));
    }
    return out;
  }
  unsigned jobs() const { return static_cast<unsigned>(integer("jobs", 0, 0, 1024)); }
  // seed= of plan and gen (default 1).
  std::uint64_t seed() const {
    return static_cast<std::uint64_t>(integer("seed", 1, 0, std::numeric_limits<long long>::max()));
  }

 private:
  static std::string value(py::handle v, const char* k, bool env) {
    if (PyUnicode_Check(v.ptr())) return utf8_text(v, k);
    if (PyBool_Check(v.ptr()) && !env) return v.ptr() == Py_True ? "true" : "false";
    if (v.is_none() && !env) return "null";
    if ((PyIndex_Check(v.ptr()) || PyFloat_Check(v.ptr())) && !PyBool_Check(v.ptr()) && !env)
      return utf8_text(py::str(PyFloat_Check(v.ptr()) ? py::object(py::float_(PyFloat_AsDouble(v.ptr())))
                                                      : py::object(int_of(v, k))),
                       k);
    throw py::type_error(fmt::format("{}=: a value is {}{}", k, python_type(v),
                                     env ? " (an environment variable holds a str: write it as you would export it)"
                                         : " (expected str, bool, int or float)"));
  }
  py::dict d_;
};

RunRequest request_of(const Options& o) {
  RunRequest r;
  r.names.python = true;  // messages name the keywords: capacity=, not --capacity
  r.hw = o.str("hw");
  r.capacity = o.size("capacity", kMiB);  // an int below 1 MiB: a number of GiB meant
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
  r.shard = o.integer("shard", 1, 1, std::numeric_limits<long long>::max());  // the policy checks its own range
  if (o.given("shard_dim")) r.shard_dim = o.str("shard_dim");
  return r;
}

// ---- sources ----

// What a call reads: a file (no source), or events held in memory, named `name`, of `held_bytes`
// (what the input limits scale with: the name may be any label, a file's name included).
struct Source {
  std::string name;
  TraceSource source;
  std::uint64_t held_bytes = 0;
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

// The events of an iterable, decoded and held until the replays read them. An iterable may be
// endless: Ctrl-C is honoured while it is read (signals are checked every kSignalItems items, for
// iterators that run no Python code between items, such as itertools.repeat), and the events held
// count against the `objects` limit (two each, as an importer's events: docs/limits.md), of an
// input whose size is the JSONL text a list or tuple of that length would be (kLineBytes a line)
// and nothing for any other iterable (a generator, an open file: 2^19 events unless
// fragsim.set_limit raises it).
// The text of the events counts against the `strings` limit beyond kLineBytes an event: one str
// or list shared by every event (a 1 MiB name, a shape of 100,000 dims) is copied into each line,
// and grew to gigabytes held from a few megabytes of Python objects. Counted 4 times: a decoded
// event holds up to that much (a shape's dimension, "1," in the text, is 8 bytes decoded).
// *text: the bytes of the JSONL lines the events were read as.
constexpr std::uint64_t kSignalItems = 1024, kLineBytes = 64, kDecodedPerTextByte = 4;
TraceSource events_of(py::handle src, const std::string& name, bool lenient, std::uint64_t* text) {
  const bool sized = PyList_Check(src.ptr()) || PyTuple_Check(src.ptr());
  const std::uint64_t basis = sized ? static_cast<std::uint64_t>(PyObject_Length(src.ptr())) * kLineBytes : 0;
  LimitCounter held(Limit::kObjects, name, basis), copied(Limit::kStrings, name, basis);
  // A list or tuple longer than its room (the cap of a limit: a small process's memory) is refused
  // before its first item is converted, not after seconds of converting the items that fit.
  if (sized && basis / kLineBytes > held.max() / 2) held.exceeded();
  JsonlLines lines(name);
  std::uint64_t n = 0;
  for (auto item : py::reinterpret_borrow<py::iterable>(src)) {
    if (++n % kSignalItems == 0 && PyErr_CheckSignals() != 0) throw py::error_already_set();
    held.spend(2);
    const std::size_t bytes = add_event(lines, item, name);
    *text += bytes;
    if (bytes > kLineBytes) copied.spend((bytes - kLineBytes) * kDecodedPerTextByte);
  }
  return std::move(lines).reader(ReaderOptions{lenient});
}

// A path (str or os.PathLike), a snapshot (a dict, or a list of segments), or events (any other
// iterable: event dicts or JSONL lines). The iterable is consumed here, with the GIL.
Source source_of(py::handle src, const Options& o) {
  const bool lenient = o.flag("lenient");
  if (is_path(src)) {
    if (o.given("name")) throw py::type_error("name=: names a source held in memory (a path names itself)");
    return {path_of(src), {}};
  }
  if (PyBytes_Check(src.ptr()) || PyByteArray_Check(src.ptr()))
    throw py::type_error(
        "source: bytes; expected a path, a PyTorch snapshot dict or an iterable of events (dicts or JSONL lines)");
  // A list or tuple of paths, each os.PathLike or a str naming a file or folder that exists (a
  // JSONL line names none): a set of recordings, one per rank, as the command's several files.
  if ((PyList_Check(src.ptr()) || PyTuple_Check(src.ptr())) && PyObject_Length(src.ptr()) > 0) {
    std::vector<std::string> paths;
    for (auto item : py::reinterpret_borrow<py::iterable>(src)) {
      if (!is_path(item)) break;
      std::string p = path_of(item);
      std::error_code ec;
      if (PyUnicode_Check(item.ptr()) && !std::filesystem::exists(p, ec)) break;
      paths.push_back(std::move(p));
    }
    if (!paths.empty() && paths.size() == static_cast<size_t>(PyObject_Length(src.ptr()))) {
      if (o.given("name")) throw py::type_error("name=: names a source held in memory (a path names itself)");
      for (const auto& p : paths)
        if (p.find(',') != std::string::npos)
          throw InputError(p + ": a member of a set of recordings whose path holds a comma (rename it)");
      return {fmt::format("{}", fmt::join(paths, ",")), {}};
    }
  }
  if (py::isinstance<py::dict>(src) || is_segment_list(src)) {
    std::string name = o.given("name") ? o.str("name") : "<snapshot>";
    std::shared_ptr<const PickleDoc> doc = snapshot_doc(src, name);
    const std::uint64_t held = doc->arena.size() * sizeof(PyObj);  // as the snapshot reader counts it
    return {name, decoded_on_first_use([doc, name, lenient] {
              return make_torch_snapshot_reader_from(name, *doc, ReaderOptions{lenient});
            }),
            held};
  }
  if (!py::hasattr(src, "__iter__"))
    throw py::type_error(fmt::format(
        "source: {}; expected a path, a PyTorch snapshot dict or an iterable of events (dicts or JSONL lines)",
        python_type(src)));
  std::string name = o.given("name") ? o.str("name") : "<events>";
  std::uint64_t text = 0;
  TraceSource events = events_of(src, name, lenient, &text);
  return {name, std::move(events), text};
}

// ---- results ----

// The runs of a run (one) or a compare (several), kept for their text and HTML renderings, with
// the files they read: an output of theirs (html(path), json(path)) may not overwrite one.
class Runs {
 public:
  Runs(std::vector<RunResult> runs, std::vector<std::string> inputs)
      : runs_(std::move(runs)), inputs_(std::move(inputs)) {}
  size_t size() const { return runs_.size(); }
  py::object report(size_t i) const { return to_python(report_json(at(i))); }
  // i < 0: all of them (compare's table, one HTML file for every run, the JSON array).
  std::string text(long i) const { return i < 0 ? compare_table(runs_) : report_text(at(i)); }
  void html(py::handle where, long i) const {
    const std::string path = path_of(where);
    check_outputs(inputs_, {{"html", path}});
    write_file_atomic(path, report_html(i < 0 ? runs_ : std::vector<RunResult>{at(i)}));
  }
  std::string json_text(long i) const {
    if (i >= 0) return dump_json(report_json(at(i)), 2) + "\n";
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : runs_) arr.push_back(report_json(r));
    return dump_json(arr, 2) + "\n";
  }
  void write_json(py::handle where, long i) const {
    const std::string path = path_of(where);
    check_outputs(inputs_, {{"json", path}});
    write_file_atomic(path, json_text(i));
  }

  const RunResult& at(long i) const {
    if (i < 0 || static_cast<size_t>(i) >= runs_.size()) throw py::index_error("no such run");
    return runs_[static_cast<size_t>(i)];
  }
  const std::vector<RunResult>& all() const { return runs_; }

 private:
  std::vector<RunResult> runs_;
  std::vector<std::string> inputs_;
};

// ---- entry points ----

Runs run(py::handle src, py::dict opts) {
  Options o(std::move(opts));
  RunRequest req = request_of(o);
  Source s = source_of(src, o);
  req.trace = s.name;
  req.source = s.source;
  req.source_bytes = s.held_bytes;
  RunOutputs outs;
  outs.placements = o.path("placements");
  outs.perfetto = o.path("perfetto");
  const std::string html = o.path("html");
  outs.keep_live_buffers = outs.history = !html.empty();
  std::vector<std::string> inputs = {s.source ? std::string() : s.name, req.hw};
  check_outputs(inputs, {{"placements", outs.placements}, {"perfetto", outs.perfetto}, {"html", html}});
  const unsigned threads = o.jobs();
  return released(
      [&](const std::atomic<bool>* cancel) {
        req.cancel = cancel;
        Runs r({run_request(req, registry(), outs, threads)}, inputs);
        if (!html.empty()) write_file_atomic(html, report_html({r.at(0)}));
        return r;
      },
      o.get("progress"));
}

// policies=: "A,B[k=v]" or a list of such entries, as --policies takes them.
std::string policy_list(const Options& o) {
  std::string out;
  if (!o.given("policies")) return out;
  py::object p = o.get("policies");
  if (PyUnicode_Check(p.ptr())) return utf8_text(p, "policies");
  for (auto x : py::reinterpret_borrow<py::iterable>(p)) {
    if (!PyUnicode_Check(x.ptr()))
      throw py::type_error(fmt::format("policies=: expected str entries, got {}", python_type(x)));
    out += (out.empty() ? "" : ",") + utf8_text(x, "policies");
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
    c.source_bytes.push_back(s.held_bytes);
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
        Runs r(run_compare(c, registry(), outs, threads), inputs);
        if (!html.empty() && r.size()) write_file_atomic(html, report_html(r.all()));
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
  req.source_bytes = s.held_bytes;
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
  c.names.python = true;  // messages name the keywords: tolerance=, not --tolerance
  c.tolerance_pct = o.number("tolerance", 0);
  c.same_trace = o.flag("same_trace");
  c.allow_different_policy = o.flag("allow_different_policy");
  if (o.given("gate")) {
    std::string gate = o.str("gate");
    if (gate != "recommended" && gate != "all")
      throw InputError(fmt::format("gate='{}': must be 'recommended' or 'all'", gate));
    c.gate_all = gate == "all";
  }
  CheckResult r = run_check(b, n, c);
  if (is_path(current)) r.current_file = c.current_path;
  return r;
}

// A report given to diff: a path of a .json file, a dict with "fragsim_report", a list of them
// (a compare), or a batch result (a dict with "fragsim_batch"). Anything else is a trace source.
bool is_report(py::handle x) {
  if (is_path(x)) return is_report_path(path_of(x));
  if (py::isinstance<py::dict>(x))
    return x.cast<py::dict>().contains("fragsim_report") || x.cast<py::dict>().contains("fragsim_batch");
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
    if (!is_path(a) || !is_path(b)) {  // reports held in memory: named by their traces and policies
      ra.report = pick_report(ra.report, label, ra.name);
      rb.report = pick_report(rb.report, label, rb.name);
      auto [na, nb] = report_names(ra.report, rb.report);
      if (!is_path(a)) ra.name = na;
      if (!is_path(b)) rb.name = nb;
    }
    check_outputs({is_path(a) ? ra.name : std::string(), is_path(b) ? rb.name : std::string()}, {{"html", html}});
    DiffOutcome d = diff_of_reports(ra, rb, label, !html.empty());
    if (!html.empty()) write_file_atomic(html, d.html);
    return d;
  }
  Source sa = source_of(a, o), sb = b.is_none() ? Source{} : source_of(b, o);
  if (sa.source && sb.source && sa.name == sb.name) sa.name = "A " + sa.name, sb.name = "B " + sb.name;
  DiffRequest req = diff_request(request_of(o), sa.name, sb.name, policy_list(o));
  req.a.source = sa.source;
  req.a.source_bytes = sa.held_bytes;
  const Source& sb_or_a = b.is_none() ? sa : sb;
  req.b.source = sb_or_a.source;
  req.b.source_bytes = sb_or_a.held_bytes;
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

// `fragsim plan` on a path (a trace or MiniMalloc's CSV): (the fragsim_plan 1 dict, the text).
// capacity, time_limit and seed are read as every keyword is (a size, a number, an int: TypeError
// for another type, InputError out of range), never cast by pybind11.
py::tuple plan(py::handle path, py::dict opts) {
  Options o(std::move(opts));
  PlanRequest req;
  req.input = path_of(path);
  if (o.given("capacity")) req.capacity = parse_size_arg(o.size("capacity"), "capacity");
  req.time_limit = o.number("time_limit", 0);
  if (!(req.time_limit >= 0)) throw InputError("time_limit=: seconds must be 0 or more");
  req.seed = o.seed();
  PlanOutcome out = released(
      [&](const std::atomic<bool>* stop) {
        req.stop = stop;
        return run_plan(req);
      },
      py::none());
  return py::make_tuple(to_python(plan_json(out)), text_of(plan_text(out)));
}

py::tuple info(py::handle src, py::dict opts) {
  Options o(std::move(opts));
  Source s = source_of(src, o);
  const bool lenient = o.flag("lenient");
  nlohmann::json j =
      released([&](const std::atomic<bool>*) { return trace_info(s.name, lenient, s.source); }, o.get("progress"));
  return py::make_tuple(to_python(j), text_of(trace_info_text(j)));
}

py::object gen(const std::string& workload, py::handle path, py::dict opts) {
  Options o(std::move(opts));
  const std::uint64_t seed = o.seed();
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
  // A signal that would end the interpreter (SIGTERM, SIGHUP, ...: those Python leaves at their
  // default) removes the temporaries of unfinished outputs first; Python's own (SIGINT) stay its.
  remove_temporaries_on_signals();
  limits_speak_python();
  m.attr("version") = FRAGSIM_VERSION;

  // The library's three errors, raised with their message as text_of gives it (a message may name a
  // file whose name is not UTF-8: pybind11's own translation would raise UnicodeDecodeError instead).
  static py::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
  static py::exception<EnvError> env_error(m, "EnvError", PyExc_OSError);
  static py::exception<InternalError> internal_error(m, "InternalError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    auto raise = [](py::handle type, const char* what) { PyErr_SetObject(type.ptr(), text_of(what).ptr()); };
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      raise(input_error, e.what());
    } catch (const EnvError& e) {
      raise(env_error, e.what());
    } catch (const InternalError& e) {
      raise(internal_error, e.what());
    }
  });

  // Every text a result renders reaches Python through text_of.
  py::class_<Runs>(m, "Runs")
      .def("__len__", &Runs::size)
      .def("report", &Runs::report)
      .def("text", [](const Runs& r, long i) { return text_of(r.text(i)); })
      .def("html", &Runs::html)
      .def("json_text", [](const Runs& r, long i) { return text_of(r.json_text(i)); })
      .def("write_json", &Runs::write_json);
  py::class_<SweepResult>(m, "SweepResult")
      .def("report", [](const SweepResult& r) { return to_python(sweep_json(r)); })
      .def("text", [](const SweepResult& r) { return text_of(sweep_text(r)); });
  py::class_<DiffOutcome>(m, "DiffOutcome")
      .def("report", [](const DiffOutcome& d) { return to_python(d.diff); })
      .def("text", [](const DiffOutcome& d) { return text_of(diff_text(d.diff)); })
      .def("markdown", [](const DiffOutcome& d) { return text_of(diff_markdown(d.diff)); });
  py::class_<CheckResult>(m, "CheckResult")
      .def("report", [](const CheckResult& r) { return to_python(check_json(r)); })
      .def("text", [](const CheckResult& r) { return text_of(check_text(r)); })
      .def("markdown", [](const CheckResult& r) { return text_of(check_markdown(r)); })
      .def("junit", [](const CheckResult& r) { return text_of(check_junit(r)); })
      .def(
          "github",
          [](const CheckResult& r, const py::object& on) {
            return text_of(check_github(r, on.is_none() ? r.current_file : path_of(on)));
          },
          py::kw_only(), py::arg("on") = py::none());

  m.def("run", &run);
  m.def("compare", &compare);
  m.def("sweep", &sweep);
  m.def("check", &check);
  m.def("diff", &diff);
  m.def("info", &info);
  m.def("plan", &plan);
  m.def("layout", [](const std::string& shape, const std::string& hw) {
    return py::make_tuple(to_python(layout_json(shape, hw)), text_of(layout_text(shape, hw)));
  });
  m.def("catalog", [] { return text_of(catalog_text(registry())); });
  m.def("policy", [](const std::string& name) { return text_of(policy_text(registry().find(name, "list"))); });
  m.def("gen", &gen);
  m.def("events_read", &input_events_read);
  m.def("set_limit", [](const std::string& key_value) { set_limit(key_value); });
  m.def("reset_limits", &reset_limits);
}

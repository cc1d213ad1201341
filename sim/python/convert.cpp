#include "sim/python/convert.h"

#include <fmt/format.h>

#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/base/error.h"

namespace fragsim::python {

namespace {

// A str as UTF-8; nullopt for one that cannot be (a lone surrogate).
std::optional<std::string_view> utf8_of(py::handle s) {
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s.ptr(), &n);
  if (!p) {
    PyErr_Clear();
    return std::nullopt;
  }
  return std::string_view(p, static_cast<size_t>(n));
}

bool is_mapping(py::handle o) { return PyDict_Check(o.ptr()) || (PyMapping_Check(o.ptr()) && py::hasattr(o, "items")); }

// An int, or an object that stands for one (numpy's integers: __index__); bools are not.
bool is_integer(py::handle o) { return !PyBool_Check(o.ptr()) && PyIndex_Check(o.ptr()); }

}  // namespace

std::string python_type(py::handle o) { return fmt::format("an object of type {}", Py_TYPE(o.ptr())->tp_name); }

// ---- reports → Python ----

py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      return py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
    }
    case nlohmann::json::value_t::array: {
      py::list l(j.size());
      for (size_t i = 0; i < j.size(); ++i) l[i] = to_python(j[i]);
      return l;
    }
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = to_python(v);
      return d;
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  return py::none();
}

// ---- Python → JSON (reports given to check) ----

nlohmann::json to_json(py::handle o, const std::string& what) {
  if (o.is_none()) return nullptr;
  if (PyBool_Check(o.ptr())) return o.cast<bool>();
  if (is_integer(o)) {
    py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(o.ptr()));
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (!overflow) return static_cast<std::int64_t>(v);
    unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw py::type_error(fmt::format("{}: an integer beyond 64 bits", what));
    }
    return static_cast<std::uint64_t>(u);
  }
  if (PyFloat_Check(o.ptr())) return PyFloat_AsDouble(o.ptr());
  if (PyUnicode_Check(o.ptr())) {
    auto s = utf8_of(o);
    if (!s) throw py::type_error(fmt::format("{}: a str that is not valid Unicode", what));
    return std::string(*s);
  }
  if (is_mapping(o)) {
    nlohmann::json j = nlohmann::json::object();
    for (auto kv : py::reinterpret_borrow<py::object>(o).attr("items")()) {
      auto pair = py::reinterpret_borrow<py::tuple>(kv);
      if (!PyUnicode_Check(pair[0].ptr()))
        throw py::type_error(fmt::format("{}: a key that is not a str ({})", what, python_type(pair[0])));
      std::string k = pair[0].cast<std::string>();
      j[k] = to_json(pair[1], what + "." + k);
    }
    return j;
  }
  if (PyList_Check(o.ptr()) || PyTuple_Check(o.ptr())) {
    nlohmann::json j = nlohmann::json::array();
    size_t i = 0;
    for (auto x : py::reinterpret_borrow<py::sequence>(o)) j.push_back(to_json(x, fmt::format("{}[{}]", what, i++)));
    return j;
  }
  throw py::type_error(fmt::format("{}: {} is not a JSON value", what, python_type(o)));
}

// ---- a snapshot dict → PickleDoc ----

namespace {

// Builds the tree a pickle of the same objects parses into: strings and containers shared in
// Python are shared here (a pickle's memo), so the tree costs what the objects do.
class SnapshotBuilder {
 public:
  SnapshotBuilder(PickleDoc& doc, std::string name) : doc_(doc), name_(std::move(name)) {}

  PyRef build(py::handle o) {
    if (o.is_none()) return &doc_.none;
    if (PyBool_Check(o.ptr())) return o.ptr() == Py_True ? &doc_.yes : &doc_.no;
    if (is_integer(o)) return integer(o);
    if (PyFloat_Check(o.ptr())) {
      PyRef r = make(PyObj::kFloat);
      r->f = PyFloat_AsDouble(o.ptr());
      return r;
    }
    if (auto it = done_.find(o.ptr()); it != done_.end()) return it->second;
    if (PyUnicode_Check(o.ptr())) {
      auto s = utf8_of(o);
      if (!s) bad("a str that is not valid Unicode (a lone surrogate)");
      PyRef r = make(PyObj::kStr);
      r->s.assign(*s);
      return done_.emplace(o.ptr(), r).first->second;
    }
    if (PyBytes_Check(o.ptr())) {
      PyRef r = make(PyObj::kBytes);
      r->s.assign(PyBytes_AS_STRING(o.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(o.ptr())));
      return done_.emplace(o.ptr(), r).first->second;
    }
    const bool dict = PyDict_Check(o.ptr()), list = PyList_Check(o.ptr()), tuple = PyTuple_Check(o.ptr());
    if (!dict && !list && !tuple)
      bad(fmt::format("{} is not something a snapshot holds (None, bool, int, float, str, bytes, list, tuple, dict)",
                      python_type(o)));
    if (!open_.insert(o.ptr()).second) bad("a container that contains itself");
    PyRef r = make(dict ? PyObj::kDict : list ? PyObj::kList : PyObj::kTuple);
    if (dict) {
      for (auto [k, v] : py::reinterpret_borrow<py::dict>(o)) {
        path_.push_back(PyUnicode_Check(k.ptr()) ? "." + k.cast<std::string>() : "[" + std::string(py::repr(k)) + "]");
        PyRef kr = build(k), vr = build(v);
        adopt(*r, kr);
        adopt(*r, vr);
        r->kv.emplace_back(kr, vr);
        path_.pop_back();
      }
    } else {
      size_t i = 0;
      for (auto x : py::reinterpret_borrow<py::sequence>(o)) {
        path_.push_back(fmt::format("[{}]", i++));
        PyRef xr = build(x);
        adopt(*r, xr);
        r->items.push_back(xr);
        path_.pop_back();
      }
    }
    open_.erase(o.ptr());
    done_.emplace(o.ptr(), r);
    return r;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    std::string at;
    for (const auto& p : path_) at += p;
    if (!at.empty() && at[0] == '.') at.erase(0, 1);
    throw InputError(fmt::format("{}: snapshot: {}{}", name_, at.empty() ? "" : at + ": ", what));
  }
  PyRef make(PyObj::Kind k) {
    PyObj& o = doc_.arena.emplace_back();
    o.kind = k;
    return &o;
  }
  // As the pickle reader keeps them: i (and u) for what fits in 64 signed bits, else u with `big`.
  PyRef integer(py::handle o) {
    py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(o.ptr()));
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    PyRef r = make(PyObj::kInt);
    if (!overflow) {
      r->i = static_cast<std::int64_t>(v);
      r->u = static_cast<std::uint64_t>(v);
      return r;
    }
    unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(i.ptr()) : 0;
    if (overflow < 0 || PyErr_Occurred()) {
      PyErr_Clear();
      bad("integer does not fit in 64 bits");
    }
    r->u = static_cast<std::uint64_t>(u);
    r->i = static_cast<std::int64_t>(u);
    r->big = true;
    return r;
  }
  void adopt(PyObj& parent, PyRef child) {
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxPickleDepth) bad(fmt::format("nesting deeper than {}", kMaxPickleDepth));
  }

  PickleDoc& doc_;
  std::string name_;
  std::vector<std::string> path_;              // where the object being built sits, for messages
  std::unordered_map<PyObject*, PyRef> done_;  // strings and containers built (alive: the root holds them)
  std::unordered_set<PyObject*> open_;         // containers being built
};

}  // namespace

std::unique_ptr<PickleDoc> snapshot_doc(py::handle o, const std::string& name) {
  auto doc = std::make_unique<PickleDoc>();
  doc->root = SnapshotBuilder(*doc, name).build(o);
  return doc;
}

// ---- events → JSONL lines ----

namespace {

constexpr int kMaxEventDepth = 256;  // deeper than any line the reader accepts (it refuses past 64)

// Appends o as JSON text, as json.dumps writes it (a float as repr: nan, inf are there for the
// reader to refuse). Throws InputError naming the line and the top-level key.
class EventWriter {
 public:
  EventWriter(const std::string& name, std::uint64_t line) : name_(name), line_(line) {}

  void write(py::handle o, std::string& out, int depth = 0) {
    if (depth > kMaxEventDepth) bad("JSON nested too deeply");
    if (o.is_none()) {
      out += "null";
    } else if (PyBool_Check(o.ptr())) {
      out += o.ptr() == Py_True ? "true" : "false";
    } else if (is_integer(o)) {
      out += std::string(py::str(py::reinterpret_steal<py::object>(PyNumber_Index(o.ptr()))));
    } else if (PyFloat_Check(o.ptr())) {
      out += std::string(py::repr(py::float_(PyFloat_AsDouble(o.ptr()))));  // a subclass's repr may differ
    } else if (PyUnicode_Check(o.ptr())) {
      auto s = utf8_of(o);
      if (!s) bad("a str that is not valid Unicode (a lone surrogate)");
      append_json_string(out, *s);
    } else if (is_mapping(o)) {
      out += '{';
      bool first = true;
      for (auto kv : py::reinterpret_borrow<py::object>(o).attr("items")()) {
        auto pair = py::reinterpret_borrow<py::tuple>(kv);
        if (!PyUnicode_Check(pair[0].ptr())) bad(fmt::format("a key that is not a str ({})", python_type(pair[0])));
        auto k = utf8_of(pair[0]);
        if (!k) bad("a key that is not valid Unicode (a lone surrogate)");
        if (depth == 0) key_ = std::string(*k);
        if (!first) out += ',';
        first = false;
        append_json_string(out, *k);
        out += ':';
        write(pair[1], out, depth + 1);
      }
      out += '}';
      if (depth == 0) key_.clear();
    } else if (PyList_Check(o.ptr()) || PyTuple_Check(o.ptr())) {
      out += '[';
      bool first = true;
      for (auto x : py::reinterpret_borrow<py::iterable>(o)) {
        if (!first) out += ',';
        first = false;
        write(x, out, depth + 1);
      }
      out += ']';
    } else {
      bad(fmt::format("{} is not a JSON value", python_type(o)));
    }
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    throw InputError(name_, line_, key_.empty() ? what : key_ + ": " + what);
  }
  const std::string& name_;
  std::uint64_t line_;
  std::string key_;  // the event's key being written
};

}  // namespace

void add_event(JsonlLines& lines, py::handle item, const std::string& name) {
  if (PyUnicode_Check(item.ptr())) {  // a JSONL line, as a file object yields it
    auto s = utf8_of(item);
    if (!s) throw InputError(name, lines.lines() + 1, "a line that is not valid Unicode (a lone surrogate)");
    std::string_view line = *s;
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.add(line);
    return;
  }
  std::string text;
  EventWriter(name, lines.lines() + 1).write(item, text);
  lines.add(text);
}

}  // namespace fragsim::python

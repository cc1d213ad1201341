#include "sim/python/convert.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/limits.h"
#include "traces/trace_reader.h"

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

// A str as UTF-8 whatever it holds (a lone surrogate as '?'), for messages.
std::string utf8_lossy(py::handle s) {
  if (auto t = utf8_of(s)) return std::string(*t);
  py::object b = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(s.ptr(), "utf-8", "replace"));
  if (!b) {
    PyErr_Clear();
    return "?";
  }
  return std::string(PyBytes_AS_STRING(b.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(b.ptr())));
}

bool is_mapping(py::handle o) { return PyDict_Check(o.ptr()) || (PyMapping_Check(o.ptr()) && py::hasattr(o, "items")); }

// An int, or an object that stands for one (numpy's integers: __index__); bools are not.
bool is_integer(py::handle o) { return !PyBool_Check(o.ptr()) && PyIndex_Check(o.ptr()); }

// o's __index__ as a Python int, or fail(why) (which throws) when it fails.
template <class Fail>
py::int_ index_or(py::handle o, Fail&& fail) {
  PyObject* i = PyNumber_Index(o.ptr());
  if (!i) {
    py::error_already_set e;
    fail(fmt::format("{} whose __index__ failed ({})", python_type(o), e.what()));
    throw InternalError("index_or: fail() returned");
  }
  return py::reinterpret_steal<py::int_>(i);
}

// The guard of every walk of a Python object tree (convert.h): the containers open on the path
// from the root (a container met again there is inside itself), their number (the depth), and
// the values visited. A walk that copies what it visits meets a container shared from several
// places once per place: the second time, the values under it (counted the first time) are
// charged before it is walked again, so a tree that shares one list at each of 60 levels is
// refused after a few hundred steps, not after 2^24.
class Walk {
 public:
  explicit Walk(std::uint64_t max_values = 0) : max_values_(max_values) {}
  // "" when container o may be entered (then it is, until leave(o)), else why not.
  std::string enter(py::handle o) {
    if (open_.size() >= static_cast<size_t>(kMaxNesting)) return fmt::format("nesting deeper than {}", kMaxNesting);
    if (!open_.insert(o.ptr()).second) return "a container that contains itself";
    if (max_values_ && !charged_)
      if (auto it = sizes_.find(o.ptr()); it != sizes_.end()) {
        values_ += it->second;
        if (values_ > max_values_) return too_many();
        charged_ = o.ptr();  // what lies under it is counted already
      }
    starts_.push_back(values_);
    return {};
  }
  void leave(py::handle o) {
    open_.erase(o.ptr());
    const std::uint64_t start = starts_.back();
    starts_.pop_back();
    if (charged_ == o.ptr())
      charged_ = nullptr;
    else if (max_values_ && !charged_)
      sizes_[o.ptr()] = values_ - start;
  }
  // "" while the values visited stay within the walk's bound, else why not.
  std::string visit() {
    if (max_values_ && !charged_ && ++values_ > max_values_) return too_many();
    return {};
  }

 private:
  std::string too_many() const {
    return fmt::format("more than {} values (a container shared from many places is copied at each)", max_values_);
  }
  std::unordered_set<PyObject*> open_;
  std::unordered_map<PyObject*, std::uint64_t> sizes_;  // values under each container walked
  std::vector<std::uint64_t> starts_;                   // values_ when each open container was entered
  PyObject* charged_ = nullptr;                         // the shared container being walked again
  std::uint64_t max_values_ = 0, values_ = 0;
};

}  // namespace

std::string python_type(py::handle o) { return fmt::format("an object of type {}", Py_TYPE(o.ptr())->tp_name); }

py::str text_of(std::string_view s) {
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "backslashreplace"));
}

std::string utf8_text(py::handle s, const std::string& what) {
  auto t = utf8_of(s);
  if (!t) throw InputError(fmt::format("{}: a str that is not valid Unicode (a lone surrogate)", what));
  return std::string(*t);
}

std::vector<std::pair<py::object, py::object>> items_of(py::handle mapping, const std::string& what) {
  std::vector<std::pair<py::object, py::object>> out;
  if (PyDict_CheckExact(mapping.ptr())) {  // no items() of a subclass to call
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(mapping))
      out.emplace_back(py::reinterpret_borrow<py::object>(k), py::reinterpret_borrow<py::object>(v));
    return out;
  }
  for (auto kv : py::reinterpret_borrow<py::object>(mapping).attr("items")()) {
    if (!PyTuple_Check(kv.ptr()) || PyTuple_GET_SIZE(kv.ptr()) != 2)
      throw py::type_error(fmt::format("{}: items() gave {}, not a (key, value) pair", what, python_type(kv)));
    out.emplace_back(py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(kv.ptr(), 0)),
                     py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(kv.ptr(), 1)));
  }
  return out;
}

py::int_ int_of(py::handle o, const std::string& what) {
  return index_or(o, [&](const std::string& why) { throw py::type_error(what + ": " + why); });
}

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
      for (const auto& [k, v] : j.items())
        d[py::reinterpret_steal<py::object>(
            PyUnicode_DecodeUTF8(k.data(), static_cast<Py_ssize_t>(k.size()), "replace"))] = to_python(v);
      return d;
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  return py::none();
}

// ---- Python → JSON (reports given to check) ----

namespace {

// A report's objects as JSON. Where a value sits ("baseline.trace.header[3]") is written out only
// for a message: the walk keeps the keys and indices on the path.
class JsonBuilder {
 public:
  explicit JsonBuilder(const std::string& what) : what_(what), walk_(kMaxJsonValues) {}

  nlohmann::json build(py::handle o) {
    if (auto why = walk_.visit(); !why.empty()) throw InputError(where() + ": " + why);
    if (o.is_none()) return nullptr;
    if (PyBool_Check(o.ptr())) return o.ptr() == Py_True;
    if (is_integer(o)) {
      py::int_ i = int_of(o, where());
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
      // A whole number ≥ 0 is unsigned, as the JSON reader makes it: a report given as a dict
      // reads as its file does (a byte count is_number_unsigned either way).
      if (!overflow) return v >= 0 ? nlohmann::json(static_cast<std::uint64_t>(v)) : nlohmann::json(v);
      unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
      if (PyErr_Occurred()) {
        PyErr_Clear();
        throw py::type_error(fmt::format("{}: an integer beyond 64 bits", where()));
      }
      return static_cast<std::uint64_t>(u);
    }
    if (PyFloat_Check(o.ptr())) return PyFloat_AsDouble(o.ptr());
    if (PyUnicode_Check(o.ptr())) {
      auto s = utf8_of(o);
      if (!s) throw py::type_error(fmt::format("{}: a str that is not valid Unicode", where()));
      return std::string(*s);
    }
    const bool mapping = is_mapping(o);
    if (!mapping && !PyList_Check(o.ptr()) && !PyTuple_Check(o.ptr()))
      throw py::type_error(fmt::format("{}: {} is not a JSON value", where(), python_type(o)));
    if (auto why = walk_.enter(o); !why.empty()) throw InputError(where() + ": " + why);
    nlohmann::json j;
    if (mapping) {
      j = nlohmann::json::object();
      for (const auto& [key, value] : items_of(o, where())) {
        if (!PyUnicode_Check(key.ptr()))
          throw py::type_error(fmt::format("{}: a key that is not a str ({})", where(), python_type(key)));
        auto k = utf8_of(key);
        if (!k) throw py::type_error(fmt::format("{}: a key that is not valid Unicode", where()));
        path_.emplace_back(*k, 0);
        j[std::string(*k)] = build(value);
        path_.pop_back();
      }
    } else {
      j = nlohmann::json::array();
      size_t i = 0;
      for (auto x : py::reinterpret_borrow<py::sequence>(o)) {
        path_.emplace_back(std::string_view(), i++);
        j.push_back(build(x));
        path_.pop_back();
      }
    }
    walk_.leave(o);
    return j;
  }

 private:
  // "what.key[3]", the first and last steps of a long path only.
  std::string where() const {
    std::string s = what_;
    for (size_t i = 0; i < path_.size(); ++i) {
      if (path_.size() > 24 && i == 12) {
        s += fmt::format("...({} levels)...", path_.size() - 24);
        i = path_.size() - 12;
      }
      const auto& [key, index] = path_[i];
      s += key.data() ? "." + std::string(key) : fmt::format("[{}]", index);
    }
    return s;
  }
  const std::string& what_;
  Walk walk_;
  std::vector<std::pair<std::string_view, size_t>> path_;  // a key (of a str the tree holds), or an index
};

}  // namespace

nlohmann::json to_json(py::handle o, const std::string& what) { return JsonBuilder(what).build(o); }

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
    if (auto why = walk_.enter(o); !why.empty()) bad(why);
    PyRef r = make(dict ? PyObj::kDict : list ? PyObj::kList : PyObj::kTuple);
    if (dict) {
      for (auto [k, v] : py::reinterpret_borrow<py::dict>(o)) {
        const auto key = PyUnicode_Check(k.ptr()) ? utf8_of(k) : std::nullopt;
        path_.push_back(key ? "." + std::string(*key) : "[" + utf8_lossy(py::repr(k)) + "]");
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
    walk_.leave(o);
    done_.emplace(o.ptr(), r);
    return r;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    std::string at;
    for (size_t i = 0; i < path_.size(); ++i) {  // the first and last steps of a long path only
      if (path_.size() > 24 && i == 12) {
        at += fmt::format("...({} levels)...", path_.size() - 24);
        i = path_.size() - 12;
      }
      at += path_[i];
    }
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
    py::int_ i = index_or(o, [&](const std::string& why) { bad(why); });
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
  Walk walk_;                                  // containers being built (memoised: each is walked once)
};

}  // namespace

std::unique_ptr<PickleDoc> snapshot_doc(py::handle o, const std::string& name) {
  auto doc = std::make_unique<PickleDoc>();
  doc->root = SnapshotBuilder(*doc, name).build(o);
  return doc;
}

// ---- events → JSONL lines ----

namespace {

// Appends o as JSON text, as json.dumps writes it (a float as repr: nan, inf are there for the
// reader to refuse). Throws InputError naming the line and the top-level key, also for text longer
// than a line may be (a container shared from many places is written at each: the bound keeps
// that finite).
class EventWriter {
 public:
  EventWriter(const std::string& name, std::uint64_t line) : name_(name), line_(line) {}

  void write(py::handle o, std::string& out) {
    if (out.size() > kMaxLineBytes) bad(fmt::format("longer than a line may be ({} MiB)", kMaxLineBytes >> 20));
    if (auto why = walk_.visit(); !why.empty()) bad(why);
    if (o.is_none()) {
      out += "null";
    } else if (PyBool_Check(o.ptr())) {
      out += o.ptr() == Py_True ? "true" : "false";
    } else if (is_integer(o)) {
      out += std::string(py::str(index_or(o, [&](const std::string& why) { bad(why); })));
    } else if (PyFloat_Check(o.ptr())) {
      out += std::string(py::repr(py::float_(PyFloat_AsDouble(o.ptr()))));  // a subclass's repr may differ
    } else if (PyUnicode_Check(o.ptr())) {
      auto s = utf8_of(o);
      if (!s) bad("a str that is not valid Unicode (a lone surrogate)");
      append_json_string(out, *s);
    } else if (is_mapping(o) || PyList_Check(o.ptr()) || PyTuple_Check(o.ptr())) {
      const bool top = depth_++ == 0;
      if (auto why = walk_.enter(o); !why.empty()) bad(why);
      if (is_mapping(o)) {
        out += '{';
        bool first = true;
        std::vector<std::pair<py::object, py::object>> items;
        try {
          items = items_of(o, "the event");
        } catch (const py::type_error& e) {
          bad(e.what());  // inside a source: an input error naming the line and key
        }
        for (const auto& [key, value] : items) {
          if (!PyUnicode_Check(key.ptr())) bad(fmt::format("a key that is not a str ({})", python_type(key)));
          auto k = utf8_of(key);
          if (!k) bad("a key that is not valid Unicode (a lone surrogate)");
          if (top) key_ = std::string(*k);
          if (!first) out += ',';
          first = false;
          append_json_string(out, *k);
          out += ':';
          write(value, out);
        }
        out += '}';
        if (top) key_.clear();
      } else {
        out += '[';
        bool first = true;
        for (auto x : py::reinterpret_borrow<py::iterable>(o)) {
          if (!first) out += ',';
          first = false;
          write(x, out);
        }
        out += ']';
      }
      walk_.leave(o);
      --depth_;
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
  Walk walk_{kMaxJsonValues};
  int depth_ = 0;
};

}  // namespace

std::size_t add_event(JsonlLines& lines, py::handle item, const std::string& name) {
  if (PyUnicode_Check(item.ptr())) {  // a JSONL line, as a file object yields it
    auto s = utf8_of(item);
    if (!s) throw InputError(name, lines.lines() + 1, "a line that is not valid Unicode (a lone surrogate)");
    std::string_view line = *s;
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.add(line);
    return line.size();
  }
  std::string text;
  EventWriter(name, lines.lines() + 1).write(item, text);
  lines.add(text);
  return text.size();
}

}  // namespace fragsim::python

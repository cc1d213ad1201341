// Python objects ↔ what the library reads and writes, for the Python module (sim/python/module.cpp).
// Every function here needs the GIL; none keeps a Python object past its return, so what they
// build can be used by threads that do not hold it.
//
//   reports, infos (nlohmann::json)  → dict / list / int / float / str / bool / None
//   check's reports (dict, list)     → nlohmann::json
//   a snapshot dict                  → the PickleDoc the snapshot importer reads (traces/pickle.h):
//                                      the objects of `torch.cuda.memory._snapshot()` become the
//                                      tree a pickle of it would have parsed into, no pickling
//   an event dict (or a JSONL line)  → one line of a JsonlLines (traces/jsonl.h): decoded and
//                                      checked exactly as that line of a .jsonl file
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "traces/jsonl.h"
#include "traces/pickle.h"

namespace fragsim::python {

namespace py = pybind11;

[[nodiscard]] py::object to_python(const nlohmann::json& j);

// How messages name a Python value's type: "an object of type set".
[[nodiscard]] std::string python_type(py::handle o);
// Every walk below goes through one guard (a Walk): it stops at a container inside itself, at
// nesting deeper than kMaxNesting (sim/base/limits.h) — checked before it goes one level down, so
// a tree 100,000 deep never reaches the C stack — and, for a walk that copies what it visits (a
// report, an event), after kMaxJsonValues values (a list that holds one list twice, 60 deep, is 2^60
// values; a real compare --json of 4 runs is 34,000).
inline constexpr std::uint64_t kMaxJsonValues = std::uint64_t{1} << 22;

// Text the library made (a summary, a table, an error's message) as a Python str: bytes that are
// not UTF-8 — a file name in another encoding, carried into a message or a command line — as \xNN
// escapes, as the command prints them, never a UnicodeDecodeError in place of the text.
[[nodiscard]] py::str text_of(std::string_view s);

// A str as UTF-8; InputError naming `what` for one that has none (a lone surrogate).
[[nodiscard]] std::string utf8_text(py::handle s, const std::string& what);
// The (key, value) pairs of a mapping's items(); TypeError naming `what` when an item is not a pair.
[[nodiscard]] std::vector<std::pair<py::object, py::object>> items_of(py::handle mapping, const std::string& what);
// An int, or an object that stands for one (__index__: numpy's integers), as a Python int;
// TypeError naming `what` when its __index__ fails.
[[nodiscard]] py::int_ int_of(py::handle o, const std::string& what);

// `what` names the argument in messages (TypeError for a value JSON cannot hold).
[[nodiscard]] nlohmann::json to_json(py::handle o, const std::string& what);

// The snapshot `o` (a dict, or the list of segments torch.cuda.memory_snapshot() returns) as a
// parsed pickle. InputError("NAME: snapshot: segments[3].size: what") for what no pickle of a
// snapshot can hold: a Python type other than None, bool, int, float, str, bytes, list, tuple and
// dict, an integer beyond 64 bits, a container inside itself, nesting deeper than a pickle's.
[[nodiscard]] std::unique_ptr<PickleDoc> snapshot_doc(py::handle o, const std::string& name);

// Adds item as the next line of `lines`: a str is the line itself; anything else is written as
// JSON (a dict as the event object, keys and values as json.dumps writes them, so that a value
// of the wrong type draws the reader's own message). InputError("NAME:LINE: key: what") for a
// value JSON cannot hold (a set, an object).
// Returns the bytes of the line added.
std::size_t add_event(JsonlLines& lines, py::handle item, const std::string& name);

}  // namespace fragsim::python

// A safe reader for the pickle subset of PyTorch memory snapshots (specs/torch-caching.md §8):
// dicts, lists, tuples, ints, floats, strings, bytes (and protocol 5's bytearrays), bools, None
// and the memo — the opcodes Python's pickler writes for these at protocols 2 to 5. A protocol-5
// out-of-band buffer (NEXT_BUFFER, READONLY_BUFFER: its bytes live outside the file) is refused
// with what to do instead, as is a protocol above 5. Any global or
// class reference (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID) is
// refused; nothing is ever executed. Limits: nesting depth 200, lengths checked against the
// bytes that remain, integers up to 64 bits, objects and string bytes within the `objects` and
// `strings` limits of the file's size (sim/base/limits.h), dicts built in linear time whatever
// their size.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/base/limits.h"

namespace fragsim {

struct PyObj;
using PyRef = PyObj*;  // owned by the PickleDoc's arena (a hostile pickle may build cycles: no leak)

struct PyObj {
  enum Kind : std::uint8_t { kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict } kind = kNone;
  bool b = false;
  std::int64_t i = 0;
  bool big = false;  // an integer that needed the full unsigned 64-bit range (u holds it)
  std::uint64_t u = 0;
  double f = 0;
  std::string s;                            // str / bytes
  std::vector<PyRef> items;                 // list / tuple
  std::vector<std::pair<PyRef, PyRef>> kv;  // dict, insertion order
  // A dict of more than 16 entries: string key → position in kv, so that building it is linear
  // and get() constant time however large it is (a hostile snapshot may share one huge dict).
  std::unique_ptr<std::unordered_map<std::string_view, size_t>> index;
  int depth = 0;  // nesting depth (leaves 0)

  PyObj() = default;
  PyObj(Kind k, bool v) : kind(k), b(v) {}

  // Dict lookup by string key (the last value a repeated key was given); nullptr when absent or
  // not a dict.
  const PyObj* get(std::string_view key) const;
  bool is_int() const { return kind == kInt || kind == kBool; }
  std::int64_t as_int() const { return kind == kBool ? (b ? 1 : 0) : i; }
};

struct PickleDoc {
  std::deque<PyObj> arena;  // every object; pointers stay valid
  // Shared immutable singletons: a file of NONE opcodes costs a pointer each, not an object.
  PyObj none, yes{PyObj::kBool, true}, no{PyObj::kBool, false};
  PyRef root = nullptr;
};

// Deepest nesting of containers a snapshot may have (a real one nests about 6 deep): the bound of
// every tree fragsim walks (sim/base/limits.h).
inline constexpr int kMaxPickleDepth = kMaxNesting;

// Largest pickle (after decompression) the reader accepts.
inline constexpr std::uint64_t kMaxPickleBytes = std::uint64_t{2} << 30;

// Parses a whole pickle (PATH may be zstd-compressed: .pickle.zst). Throws InputError("PATH:
// pickle: what (offset N)").
[[nodiscard]] std::unique_ptr<PickleDoc> load_pickle(const std::string& path);
[[nodiscard]] std::unique_ptr<PickleDoc> parse_pickle(const std::string& data, const std::string& path);

}  // namespace fragsim

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
//
// Streaming. The file is read in chunks of 1 MiB (decompressed as it is read: .zst, .gz), never
// held whole; a string longer than a chunk is gathered as it arrives. What a reader does not need
// to keep whole can be handed over as it is read: a ListStream names a dict key (a snapshot's
// `device_traces`) whose value is a list of lists; the items appended to each of those inner lists
// go to the stream's sink, batch by batch (Python appends in batches of 1000), instead of into the
// list, and are then recycled. Memory is then bounded by what the sink keeps (a snapshot's decoded
// entries), the memo (a pointer per memoised object) and what the rest of the document holds, not
// by the file. Recycling is safe because an object is only recycled when nothing else can reach it:
//   - an item handed over: not pushed again by BINGET or DUP, memoised at most once (its memo slot
//     then becomes a tombstone: a later BINGET of it is refused, which no pickle Python writes
//     does, as each trace entry is its own dict), and not pinned by the sink;
//   - a child of such an item: adopted by it alone, never memoised (memoised strings are shared by
//     later entries), never pushed again, not pinned; recycled with its own children likewise.
// The `objects` limit then counts the objects held at once.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
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
  // Reachable other than through its one parent or its creation (pushed again by BINGET or DUP,
  // adopted twice, memoised twice), or kept by a sink: never recycled.
  bool shared = false;
  bool memoised = false;
  std::uint64_t memo = 0;      // its memo slot, when memoised
  std::uint64_t streamed = 0;  // a list: items handed to a ListStream's sink instead of kept in items
  bool adopted = false;        // has a parent container

  // A sink keeps this object (and what it holds): it is never recycled.
  void pin() const { const_cast<PyObj*>(this)->shared = true; }

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

// Items of the lists under a dict key, handed over as they are read (above). `sink(list, outer,
// index, items)`: `list` is element `index` of the list `outer` (the key's value) as far as the
// stream has read it; `items` are valid during the call only, except what the sink pin()s.
struct ListStream {
  std::string key;
  std::function<void(const PyObj& list, const PyObj& outer, std::uint64_t index, std::span<const PyRef> items)> sink;
};

// Parses a pickle read from PATH as a stream (PATH may be compressed: .pickle.zst, .gz), at most
// kMaxPickleBytes after decompression. Throws InputError("PATH: pickle: what (offset N)").
[[nodiscard]] std::unique_ptr<PickleDoc> load_pickle(const std::string& path, const ListStream* stream = nullptr);
[[nodiscard]] std::unique_ptr<PickleDoc> parse_pickle(const std::string& data, const std::string& path,
                                                      const ListStream* stream = nullptr);

}  // namespace fragsim

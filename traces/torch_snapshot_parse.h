// Reading a PyTorch memory snapshot's pickle into plain records (specs/torch-caching.md §8):
// the device traces' entries, the segments and blocks of the state at the dump, and recorded
// stacks as "file:line function" frames. No conversion happens here: traces/torch_snapshot.cpp
// turns these records into fragsim events, traces/torch_snapshot_bounds.h reads what they say
// about the device's memory.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/base/limits.h"
#include "sim/base/units.h"
#include "traces/pickle.h"

namespace fragsim::torch_snapshot {

// Work on a snapshot is bounded by its size, in bytes (sim/base/limits.h): a pickle can reference
// one object many times (its memo), so a small file could otherwise describe an exponential amount
// of data and, through one shared string, copy it many times. Every object visited costs 16 bytes
// and every byte copied out of the pickle one, against the `strings` limit; what the conversion
// keeps — events and stacks — counts against `objects` and `names`.
struct WorkBudget {
  LimitCounter bytes, kept, names;
  explicit WorkBudget(const std::string& path);
  WorkBudget(const std::string& name, std::uint64_t input_bytes);  // an input held in memory, of that size
  void spend(std::uint64_t visits = 1) { bytes.spend(16 * visits); }
  void copy(std::uint64_t n) { bytes.spend(n); }
};

// A pickled value as JSON (allocator_settings, kept in the trace header), nested at most 16 deep.
[[nodiscard]] nlohmann::json to_json(const PyObj& o, WorkBudget& budget, int depth = 0);

// A trace entry as recorded.
enum class Action { kAlloc, kFreeRequested, kFreeCompleted, kSegAlloc, kSegFree, kSegMap, kSegUnmap, kOom, kMark };

struct Entry {
  Action action;
  std::uint64_t t = 0;  // µs
  bool has_t = false;
  std::uint64_t addr = 0;
  Bytes size = 0;
  std::int64_t stream = 0;
  std::uint64_t device_free = 0;  // oom: what cudaMemGetInfo reported free
  bool has_device_free = false;
  const PyObj* frames = nullptr;
  std::uint64_t line = 0;  // 1-based position in its device trace (messages)
};

// A block of a segment at the dump (older layouts give no address: each block starts where the
// previous one ended, from the segment's address).
struct Block {
  std::uint64_t addr;
  Bytes size, requested;
  bool active;
  const PyObj* frames;
};
struct Segment {
  std::uint32_t device;
  std::uint64_t addr;
  Bytes size;
  std::int64_t stream;
  bool expandable, small;
  std::vector<Block> blocks;
};

// Reads records out of one snapshot; InputError("PATH: where entry N: key: ...") on a malformed one.
class Parser {
 public:
  Parser(std::string path, WorkBudget& budget) : path_(std::move(path)), budget_(budget) {}

  // device_traces[dev]: its entries in order; *any_time set when an entry has time_us.
  [[nodiscard]] std::vector<Entry> trace(const PyObj& tr, size_t dev, bool* any_time) const;
  // Entry `line` (1-based) of device_traces[dev].
  [[nodiscard]] Entry entry(const PyObj& e, size_t dev, std::uint64_t line, bool* any_time) const;
  // The `segments` list (nullptr: none).
  [[nodiscard]] std::vector<Segment> segments(const PyObj* segments) const;
  // The frames of a recorded stack, innermost first, at most 48: its Python frames ("file:line
  // function"; C++ frames, no .py file, left out), or where it has none (an allocation of
  // autograd's backward thread, or of C++ code) its C++ functions, without parameters, less those
  // every allocation shares (the unwinder, the caching allocator, the dispatcher's wrappers).
  [[nodiscard]] std::vector<std::string> stack_frames(const PyObj* frames) const;

  [[noreturn]] void bad(const std::string& what) const;

 private:
  std::uint64_t field_u(const PyObj& d, const char* k, std::uint64_t line, const char* where) const;

  std::string path_;
  WorkBudget& budget_;
};

// The call site a stack names: of Python frames, the first outside torch itself, without its
// directory ("" when every frame is torch's); of C++ frames, the autograd node whose backward made
// the allocation ("MeanBackward0 (backward)"), else the outermost ATen operator ("aten::div").
[[nodiscard]] std::string user_frame(const std::vector<std::string>& frames);

}  // namespace fragsim::torch_snapshot

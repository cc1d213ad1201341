// Input limits (docs/limits.md): what one input may make fragsim hold or do. Each is bounded by
// default as a function of the input's size on disk and of the machine,
//
//   limit = min(floor + factor × input bytes, half the memory fragsim may use / cost of one unit),
//
// so that a small file can never claim much memory or time (a file under 1 MB stays within a few
// hundred MB) while a large real recording gets room in proportion. `--limit KEY=VALUE` (every
// command) sets one to a fixed value instead; exceeding one is an input error (exit 2) naming
// the file, the limit, its value and the option that raises it.
//
//   decompressed  bytes a .zst input decompresses to
//   objects       objects an importer decodes into memory: pickle objects, protobuf messages and
//                 repeated values, events an importer builds before replay
//   strings       bytes an importer copies out of its input: strings, names, stack frames (one
//                 shared through a pickle's memo or a capture's metadata counts at each use);
//                 a snapshot's conversion also counts 16 bytes per object it visits
//   devices       distinct devices a trace uses
//   names         bytes of the distinct names (buffers, marks, stack frames) a trace carries
//   marks         bytes of mark names
//   plan_steps    steps of an offline plan (static-heap: placed buffers visited while placing one)
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace fragsim {

// How deep any tree fragsim walks recursively may nest, whatever it came from: JSON files
// (reports, shards, manifests' hardware files: sim/base/io.h parse_json), Python objects handed to
// the module (sim/python/convert.h), pickles (traces/pickle.h). The walks that copy, compare or
// print such a tree recurse; a bound checked while the tree is built keeps every one of them
// within the stack (real inputs nest at most 40 deep: a report echoing a trace header of 32).
inline constexpr int kMaxNesting = 200;

enum class Limit : std::uint8_t { kDecompressed, kObjects, kStrings, kDevices, kNames, kMarks, kPlanSteps, kCount };

// The limit's value for an input of `input_bytes` bytes (the override when --limit set one).
[[nodiscard]] std::uint64_t limit_value(Limit l, std::uint64_t input_bytes);
// "KEY=VALUE" as --limit takes it (VALUE a size with a unit for byte limits, a count otherwise,
// or "none"); InputError naming --limit otherwise. Call before any reader runs.
void set_limit(std::string_view key_value);
// Forgets every --limit (tests).
void reset_limits();
// Limit messages name the Python module's fragsim.set_limit instead of --limit (the module sets it).
void limits_speak_python();
// One line per limit: key, what it counts, its default (for --help).
[[nodiscard]] std::string limits_help();
// "decompressed, objects, ...".
[[nodiscard]] std::string limit_keys();

// An output that lists every device number up to the largest one used (a PyTorch snapshot's
// device_traces: `--export-snapshot`) holds largest + 1 lists, and may not hold more than the
// devices limit of an input of `input_bytes` allows: InputError naming `where` otherwise (device
// 4294967294 of an 88-byte trace would be 8.6 GB of empty lists).
void check_device_lists(std::uint64_t largest, const std::string& where, std::uint64_t input_bytes);

// A running count against one limit for one input.
class LimitCounter {
 public:
  // file: what the message names first ("" when the caller's own message names it).
  LimitCounter(Limit l, std::string file, std::uint64_t input_bytes);
  // Adds n; InputError when the count passes the limit.
  void spend(std::uint64_t n) {
    used_ += n;
    if (used_ > max_ || used_ < n) exceeded();
  }
  std::uint64_t used() const { return used_; }
  std::uint64_t max() const { return max_; }
  [[noreturn]] void exceeded() const;

 private:
  Limit limit_;
  std::string file_;
  std::uint64_t input_bytes_, max_, used_ = 0;
};

}  // namespace fragsim

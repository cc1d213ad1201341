// KeepConversions: while a command runs, a file whose conversion is costly is converted once.
//
// A command replays its input several times (the run, its second fidelity pass, the history, the
// report's best plan, advice, a sweep's replays), and each replay opens the trace again. Readers
// whose conversion dominates a replay's cost — a PyTorch snapshot's pickle decoded
// (traces/torch_snapshot.h), a profiler trace parsed and the allocator's state before its window
// inferred (traces/kineto.h) — ask kept_conversion() for it. While one KeepConversions lives
// (anywhere in the process), the first reader of a file converts it and every later reader of the
// same file shares that conversion, as long as the file is unchanged:
//
//   key    (reader kind, path); the file's size and modification time when it was converted
//          (a file changed since is converted again, and that conversion kept instead);
//   held   until the last KeepConversions goes: nothing outlives the command (a long Python
//          session holds nothing between calls);
//   order  the readers of one file wait for the first one's conversion; different files convert
//          at the same time.
//
// Outside every scope nothing is kept: each reader converts its file itself. Only files are kept:
// what a reader is handed in memory (a snapshot's objects from the Python module, the events of an
// iterable) has no path, size and time to key it, and the caller that holds it decodes it once
// (decode_once, traces/trace_reader.h). A set of recordings (one file per rank) keeps each file.
#pragma once
#include <functional>
#include <memory>
#include <string>

namespace fragsim {

class KeepConversions {
 public:
  KeepConversions();
  ~KeepConversions();
  KeepConversions(const KeepConversions&) = delete;
  KeepConversions& operator=(const KeepConversions&) = delete;
};

// The conversion of the file at `path` by the reader of kind `kind`: while a KeepConversions
// lives, the one kept for the file as it is now, else convert()'s, then kept; outside every scope,
// convert()'s. An exception from convert() passes through and nothing is kept.
[[nodiscard]] std::shared_ptr<const void> kept_conversion(const char* kind, const std::string& path,
                                                          const std::function<std::shared_ptr<const void>()>& convert);
template <class T>
[[nodiscard]] std::shared_ptr<const T> kept_conversion(const char* kind, const std::string& path,
                                                       const std::function<std::shared_ptr<const T>()>& convert) {
  return std::static_pointer_cast<const T>(
      kept_conversion(kind, path, std::function<std::shared_ptr<const void>()>([&] { return convert(); })));
}

}  // namespace fragsim

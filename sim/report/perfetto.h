// Perfetto / Chrome trace export (`--perfetto FILE`): the replay as a Chrome trace-event JSON file
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU, the "JSON
// Object Format"), which ui.perfetto.dev and chrome://tracing open:
//   - one process per device ("device N"), with metadata naming it;
//   - counter tracks ("C") per (device, space): allocated and reserved bytes, and external
//     fragmentation in percent, written only when a value changes;
//   - one async slice ("b"/"e", category = the space) per buffer from its alloc to its free (or to
//     the end of the trace), named by the buffer's name, with its id, sizes and address as args;
//   - instant events ("i") for OOMs (process-scoped, on the failing device) and the trace's marks
//     (global).
// Timestamps are microseconds (the format's unit), converted from the trace's time_unit.
// Streamed through an AtomicFile: memory stays O(devices × spaces) whatever the trace length. The
// engine drives it as a ReplaySink (sim/engine/replay_sink.h) it opens with perfetto_sink(PATH).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "sim/base/io.h"
#include "sim/base/units.h"
#include "sim/engine/replay_sink.h"

namespace fragsim {

class PerfettoWriter : public ReplaySink {
 public:
  // time_unit: ns, us, ms or s (the trace header's).
  PerfettoWriter(const std::string& path, const std::string& time_unit);

  void counter(Tick t, std::uint32_t device, Space space, Bytes allocated, Bytes reserved,
               double fragmentation) override;
  void begin_buffer(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name, Bytes requested,
                    Bytes block, bool has_addr, Addr addr) override;
  void end_buffer(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name) override;
  void oom(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name, Bytes requested, Bytes free,
           Bytes largest_free, std::string_view cause, std::string_view kind) override;
  void mark(Tick t, std::string_view name) override;
  void commit() override;  // closes the JSON and renames the file into place

 private:
  void emit(const std::string& event);
  std::string ts(Tick t) const;
  void process(std::uint32_t device);
  AtomicFile file_;
  double to_us_ = 1e-3;
  bool first_ = true;
  std::string buf_;
  struct Last {
    Bytes allocated = ~Bytes{0}, reserved = ~Bytes{0};
    double frag = -1;
  };
  std::map<std::pair<std::uint32_t, Space>, Last> last_;
  std::map<std::uint32_t, bool> named_;
};

// What RunOptions::sink takes for `run --perfetto PATH`: a PerfettoWriter of PATH for each run.
[[nodiscard]] ReplaySinkFactory perfetto_sink(const std::string& path);

}  // namespace fragsim

// ReplaySink: an output that follows a replay event by event (the Perfetto trace: sim/report/perfetto.h),
// told what happens as the engine replays. The engine owns this interface and knows no format
// behind it; an output implements it. Streamed: what a sink keeps is its own (O(devices × spaces)
// for Perfetto), the engine keeps nothing for it. Calls come in event order, times never decrease.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "sim/base/units.h"

namespace fragsim {

class ReplaySink {
 public:
  virtual ~ReplaySink() = default;
  // A (device, space)'s figures after an event that may have changed them (the sink drops repeats).
  virtual void counter(Tick t, std::uint32_t device, Space space, Bytes allocated, Bytes reserved,
                       double fragmentation) = 0;
  // A buffer placed; addr only when has_addr (a policy that places at addresses).
  virtual void begin_buffer(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name,
                            Bytes requested, Bytes block, bool has_addr, Addr addr) = 0;
  // A buffer freed, or still live when the trace ends (then t is the end of the replay).
  virtual void end_buffer(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name) = 0;
  // An allocation that failed: cause is oom_cause's words, kind OomRecord::kind ("" for the ordinary one).
  virtual void oom(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name, Bytes requested,
                   Bytes free, Bytes largest_free, std::string_view cause, std::string_view kind) = 0;
  // A mark of the trace (a step, a phase).
  virtual void mark(Tick t, std::string_view name) = 0;
  // The replay ended: the output is complete. A sink destroyed without commit() (the run failed)
  // leaves nothing behind.
  virtual void commit() = 0;
};

// Opens a run's sink once its trace's header is read; time_unit: the header's (ns, us, ms or s).
using ReplaySinkFactory = std::function<std::unique_ptr<ReplaySink>(const std::string& time_unit)>;

}  // namespace fragsim

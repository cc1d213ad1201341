// A window of a run (`--from`/`--to`): the events whose history reports show — the memory over
// time, the buffers drawn one by one, the allocator's state at each event. The replay itself
// always runs from the first event (the state at the window's start depends on everything
// before it), and the run's figures (peaks, OOMs) stay the whole run's.
// A bound is an event index ("1200") or a time from the trace's first event with a unit
// ("2.5s", "300ms", "40us", "1000ns").
#pragma once
#include <cstdint>
#include <string>

#include "sim/base/units.h"

namespace fragsim {

struct Window {
  struct Bound {
    bool set = false, is_time = false;
    std::uint64_t event = 0;  // an event index
    double seconds = 0;       // a time from the first event
  };
  Bound from, to;
  std::string from_text, to_text;  // as given

  bool whole() const { return !from.set && !to.set; }
  // Does the event at `index`, `since_start` seconds after the first event, lie in the window?
  bool contains(std::uint64_t index, double since_start) const;
  // After this event, nothing later lies in the window.
  bool past(std::uint64_t index, double since_start) const;
  // "events 1200 to 5000", "from 2.5s": how reports name it.
  std::string text() const;
};

// --from, --to ("" = open). InputError naming the option for a value that is neither.
[[nodiscard]] Window parse_window(const std::string& from, const std::string& to);

}  // namespace fragsim

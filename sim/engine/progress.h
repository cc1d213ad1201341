// Progress: a live status line on standard error for long replays, e.g.
//   fragsim run: 42% of train.fstrace · 18.4 M events · 6.1 M events/s · ETA 4 s
// The share is the input bytes read (sim/base/io.h counts them as every reader pulls them: for
// a compressed file, compressed bytes) over the file's size times the passes the command
// expects to make; events are those the trace readers have decoded, each input event once however
// often the command replays it (sim/base/io.h: the epoch is the process's, or a Python call's; a
// new bar does not begin one, so a diff of one trace under two policies counts it once). A background thread redraws
// the line four times a second with '\r' and erases it when the Progress object dies, so
// nothing of it is ever left on the terminal, and nothing is written when it is disabled
// (by default it is on only when standard error is a terminal: --progress / --no-progress).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fragsim {

class Progress {
 public:
  // enabled: draw at all; reads: each trace the command reads (their sizes are the unit of
  // work) with how many times it expects to read it. One trace is named, several are counted.
  Progress(bool enabled, std::string command, const std::vector<std::pair<std::string, double>>& reads);
  Progress(bool enabled, std::string command, const std::string& file, double passes)
      : Progress(enabled, std::move(command), {{file, passes}}) {}
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // A new stage of one pass over the file (a sweep's round): shown before the share, which
  // starts again from 0 with it (e.g. "capacity round 3: 8 settings").
  void stage(const std::string& what);
  // The line as it would be drawn now (for tests).
  std::string line() const;

 private:
  void loop();
  bool enabled_;
  std::string command_, name_;
  double pass_bytes_ = 0;  // one read of every trace
  double total_bytes_ = 0;
  std::uint64_t bytes0_ = 0, events0_ = 0;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::string stage_;
  bool stop_ = false;
  size_t drawn_ = 0;  // width of the last line drawn
  std::thread thread_;
};

// Whether standard error is a terminal (the default for --progress).
bool stderr_is_terminal();

}  // namespace fragsim

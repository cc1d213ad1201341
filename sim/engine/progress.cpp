#include "sim/engine/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "sim/base/io.h"

namespace fragsim {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(bool enabled, std::string command, const std::vector<std::pair<std::string, double>>& reads)
    : enabled_(enabled), command_(std::move(command)) {
  std::vector<std::string> names;
  for (const auto& [file, passes] : reads) {
    std::error_code ec;
    auto size = std::filesystem::file_size(file, ec);
    double bytes = ec ? 0 : static_cast<double>(size);
    total_bytes_ += bytes * std::max(passes, 1.0);
    if (std::find(names.begin(), names.end(), file) == names.end()) {
      names.push_back(file);
      pass_bytes_ += bytes;
    }
  }
  name_ =
      names.size() == 1 ? std::filesystem::path(names[0]).filename().string() : fmt::format("{} traces", names.size());
  bytes0_ = input_bytes_read();
  events0_ = input_events_read();
  start_ = std::chrono::steady_clock::now();
  if (enabled_) thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (drawn_) std::fprintf(stderr, "\r%*s\r", static_cast<int>(drawn_), "");
  std::fflush(stderr);
}

void Progress::stage(const std::string& what) {
  std::lock_guard<std::mutex> l(m_);
  stage_ = what;
  bytes0_ = input_bytes_read();
  events0_ = input_events_read();
  start_ = std::chrono::steady_clock::now();
  total_bytes_ = pass_bytes_;  // one pass
}

std::string Progress::line() const {
  std::string stage;
  double secs, bytes, events, total;
  {
    std::lock_guard<std::mutex> l(m_);
    stage = stage_;
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    bytes = static_cast<double>(input_bytes_read() - bytes0_);
    events = static_cast<double>(input_events_read() - events0_);
    total = total_bytes_;
  }
  std::string s = fmt::format("fragsim {}: ", command_);
  if (!stage.empty()) s += stage + " · ";
  double share = total > 0 ? std::min(bytes / total, 0.99) : 0;
  s += fmt::format("{:.0f}% of {} · {:.1f} M events", share * 100, name_, events / 1e6);
  if (secs > 0) s += fmt::format(" · {:.1f} M events/s", events / secs / 1e6);
  if (share > 0.01) s += fmt::format(" · ETA {:.0f} s", secs * (1 - share) / share);
  return s;
}

void Progress::loop() {
  std::unique_lock<std::mutex> l(m_);
  // The first draw waits a second: short commands never show a line.
  auto next = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!cv_.wait_until(l, next, [&] { return stop_; })) {
    l.unlock();
    std::string s = line();
    size_t width = s.size();
    std::fprintf(stderr, "\r%s%*s", s.c_str(), static_cast<int>(drawn_ > width ? drawn_ - width : 0), "");
    std::fflush(stderr);
    drawn_ = std::max(drawn_, width);
    l.lock();
    next = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
  }
}

}  // namespace fragsim

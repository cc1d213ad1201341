#include "sim/engine/window.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

#include "sim/base/error.h"

namespace fragsim {

namespace {

Window::Bound parse_bound(const std::string& text, const char* option) {
  Window::Bound b;
  if (text.empty()) return b;
  b.set = true;
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == text.size() && digits <= 19) {
    b.event = std::stoull(text);
    return b;
  }
  static const std::pair<const char*, double> kUnits[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
  for (const auto& [unit, scale] : kUnits) {
    std::string u = unit;
    if (text.size() <= u.size() || text.compare(text.size() - u.size(), u.size(), u) != 0) continue;
    std::string num = text.substr(0, text.size() - u.size());
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (!num.empty() && end == num.c_str() + num.size() && std::isfinite(v) && v >= 0 &&
        (std::isdigit(static_cast<unsigned char>(num[0])) || num[0] == '.')) {
      b.is_time = true;
      b.seconds = v * scale;
      return b;
    }
    break;
  }
  throw InputError(fmt::format(
      "{}: '{}' is neither an event index (a whole number) nor a time from the first event with a unit (2.5s, "
      "300ms, 40us, 1000ns)",
      option, text));
}

bool before(const Window::Bound& b, std::uint64_t index, double since) {  // the event lies before b
  return b.is_time ? since < b.seconds : index < b.event;
}

}  // namespace

bool Window::contains(std::uint64_t index, double since_start) const {
  if (from.set && before(from, index, since_start)) return false;
  if (to.set && !before(to, index, since_start) && !(to.is_time ? since_start == to.seconds : index == to.event))
    return false;
  return true;
}

bool Window::past(std::uint64_t index, double since_start) const {
  return to.set && (to.is_time ? since_start >= to.seconds : index >= to.event);
}

std::string Window::text() const {
  if (whole()) return "the whole run";
  if (from.set && to.set) return fmt::format("from {} to {}", from_text, to_text);
  return from.set ? "from " + from_text : "up to " + to_text;
}

Window parse_window(const std::string& from, const std::string& to) {
  Window w;
  w.from = parse_bound(from, "--from");
  w.to = parse_bound(to, "--to");
  w.from_text = from.empty() ? "" : (w.from.is_time ? from : "event " + from);
  w.to_text = to.empty() ? "" : (w.to.is_time ? to : "event " + to);
  if (w.from.set && w.to.set && w.from.is_time == w.to.is_time &&
      (w.from.is_time ? w.from.seconds > w.to.seconds : w.from.event > w.to.event))
    throw InputError(fmt::format("--from {} is after --to {}", from, to));
  return w;
}

}  // namespace fragsim

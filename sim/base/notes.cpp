#include "sim/base/notes.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <optional>
#include <set>

namespace fragsim {

namespace {

struct DeviceWord {
  size_t at = 0, digits = 0;  // the number's position and length
  std::uint64_t device = 0;
};

// The first "device N" of a note (N digits, then no more digits).
std::optional<DeviceWord> device_word(const std::string& s) {
  static const std::string kWord = "device ";
  for (size_t p = s.find(kWord); p != std::string::npos; p = s.find(kWord, p + 1)) {
    if (p > 0 && std::isalnum(static_cast<unsigned char>(s[p - 1]))) continue;
    size_t d = p + kWord.size(), e = d;
    while (e < s.size() && e - d < 9 && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
    if (e == d || (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e])))) continue;
    return DeviceWord{d, e - d, std::stoull(s.substr(d, e - d))};
  }
  return std::nullopt;
}

// "0-3, 5, 7": runs of three or more consecutive devices as ranges.
std::string device_list(const std::set<std::uint64_t>& ds) {
  std::string out;
  for (auto it = ds.begin(); it != ds.end();) {
    auto end = it;
    while (std::next(end) != ds.end() && *std::next(end) == *end + 1) ++end;
    const size_t run = static_cast<size_t>(std::distance(it, end)) + 1;
    if (!out.empty()) out += ", ";
    if (run >= 3) {
      out += fmt::format("{}-{}", *it, *end);
      it = std::next(end);
    } else {
      out += std::to_string(*it);
      ++it;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> once_per_device(const std::vector<std::string>& notes) {
  // Each note's text with its device number left out, and the devices it was said for.
  std::vector<std::string> keys;
  std::map<std::string, std::set<std::uint64_t>> devices;
  std::map<std::string, DeviceWord> where;  // in the first note of the key
  std::map<std::string, std::string> first;
  for (const auto& n : notes) {
    auto w = device_word(n);
    std::string key = w ? n.substr(0, w->at) + '\x01' + n.substr(w->at + w->digits) : n;
    if (!devices.count(key)) {
      keys.push_back(key);
      first[key] = n;
      if (w) where[key] = *w;
    }
    if (w)
      devices[key].insert(w->device);
    else
      devices[key];
  }
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const auto& ds = devices[k];
    if (ds.size() < 2) {
      out.push_back(first[k]);
      continue;
    }
    const DeviceWord& w = where[k];
    const std::string& n = first[k];
    // "device N" → "devices 0-7"
    out.push_back(n.substr(0, w.at - 1) + "s " + device_list(ds) + n.substr(w.at + w.digits));
  }
  return out;
}

}  // namespace fragsim

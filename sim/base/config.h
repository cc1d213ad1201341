// ConfigReader: how every module reads its own JSON config (style rule 5).
// Each getter takes a default, records the resolved value (echoed into the report), and
// finish() rejects keys nobody asked for, naming them, the owner and every key the module knows
// (including keys it reads only when present: has() and the optional_* getters declare them).
// Numbers must be finite; sizes fit in 64 bits.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

// The values a numeric option accepts, as its reader checks them and as `fragsim list` states them
// (one object serves both, so that the documented bounds are the checked ones).
struct Range {
  double lo = 0, hi = 0;
  bool lo_open = true;   // lo itself refused
  bool hi_open = false;  // hi itself refused
  bool integer = false;  // whole numbers only
  bool contains(double v) const;
  // "> 20 and <= 8796093022207", "> 0 and < 1", "an integer from 1 to 1048576", "an integer >= 0" (an upper
  // bound at the largest 64-bit integer is the type's, not stated).
  std::string text() const;
  bool operator==(const Range&) const = default;
};
// (lo, hi], the bounds of most fractions and sizes.
constexpr Range open_closed(double lo, double hi) { return {lo, hi, true, false, false}; }
// [lo, hi] of whole numbers.
constexpr Range integers(double lo, double hi) { return {lo, hi, false, false, true}; }

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& cfg, std::string owner);
  bool flag(const std::string& key, bool def);
  double number(const std::string& key, double def);
  // A number in (lo, hi] (finite); the message names the range.
  double number_in(const std::string& key, double def, double lo, double hi);
  double number_in(const std::string& key, double def, const Range& range);
  std::int64_t integer(const std::string& key, std::int64_t def);
  // An integer in [lo, hi]; the message names the range.
  std::int64_t integer_in(const std::string& key, std::int64_t def, std::int64_t lo, std::int64_t hi);
  std::int64_t integer_in(const std::string& key, std::int64_t def, const Range& range);  // range.integer
  Bytes size(const std::string& key, Bytes def);  // a number of bytes or a size string ("2MiB")
  std::string choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed);
  std::string text(const std::string& key, const std::string& def);
  std::optional<Bytes> optional_size(const std::string& key);
  // Declares key as known and tells whether the config sets it.
  bool has(const std::string& key) {
    used_.insert(key);
    return cfg_.contains(key);
  }
  const nlohmann::json& raw(const std::string& key) const { return cfg_.at(key); }
  // Keys that are documentation or read through raw(): accepted, not echoed.
  void allow(std::initializer_list<const char*> keys) {
    for (auto k : keys) used_.insert(k);
  }
  void record(const std::string& key, nlohmann::json v) { resolved_[key] = std::move(v); }
  // A choice the module made that the config did not state (a recorded setting kept, a key that
  // does not apply here): reports list these notes.
  void note(std::string text) { notes_.push_back(std::move(text)); }
  const std::vector<std::string>& notes() const { return notes_; }
  void finish();  // throws InputError on unknown keys
  const nlohmann::json& resolved() const { return resolved_; }
  const std::set<std::string>& asked() const { return used_; }  // every key read, has()-tested or allowed
  // The range each key read with number_in or integer_in was checked against.
  const std::map<std::string, Range>& ranges() const { return ranges_; }

 private:
  [[noreturn]] void bad(const std::string& key, const std::string& want) const;
  const nlohmann::json* take(const std::string& key);
  nlohmann::json cfg_;
  std::string owner_;
  std::set<std::string> used_;
  std::map<std::string, Range> ranges_;
  nlohmann::json resolved_ = nlohmann::json::object();
  std::vector<std::string> notes_;
};

// "KEY=VALUE" → (KEY, VALUE as JSON when it parses as a JSON scalar, else as a string).
std::pair<std::string, nlohmann::json> parse_setting(const std::string& kv, const std::string& what);

}  // namespace fragsim

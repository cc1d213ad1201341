#include "sim/base/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"

namespace fragsim {

ConfigReader::ConfigReader(const nlohmann::json& cfg, std::string owner)
    : cfg_(cfg.is_null() ? nlohmann::json::object() : cfg), owner_(std::move(owner)) {
  if (!cfg_.is_object()) throw InputError(owner_ + ": config must be a JSON object");
}

void ConfigReader::bad(const std::string& key, const std::string& want) const {
  auto it = cfg_.find(key);
  throw InputError(
      fmt::format("{}: {}: must be {}, got {}", owner_, key, want, it == cfg_.end() ? "nothing" : dump_json(*it)));
}

const nlohmann::json* ConfigReader::take(const std::string& key) {
  used_.insert(key);
  auto it = cfg_.find(key);
  return it == cfg_.end() ? nullptr : &*it;
}

bool ConfigReader::flag(const std::string& key, bool def) {
  bool v = def;
  if (auto* j = take(key)) {
    if (j->is_boolean())
      v = j->get<bool>();
    else if (j->is_number_integer() && (j->get<std::int64_t>() == 0 || j->get<std::int64_t>() == 1))
      v = j->get<std::int64_t>() == 1;
    else if (j->is_string() && (*j == "true" || *j == "True"))
      v = true;
    else if (j->is_string() && (*j == "false" || *j == "False"))
      v = false;
    else
      bad(key, "true or false");
  }
  resolved_[key] = v;
  return v;
}

double ConfigReader::number(const std::string& key, double def) {
  double v = def;
  if (auto* j = take(key)) {
    if (j->is_number()) {
      v = j->get<double>();
    } else if (j->is_string()) {
      const std::string& t = j->get_ref<const std::string&>();
      char* end = nullptr;
      v = t.empty() ? NAN : std::strtod(t.c_str(), &end);
      if (t.empty() || *end) bad(key, "a number");
    } else {
      bad(key, "a number");
    }
    if (!std::isfinite(v)) bad(key, "a finite number");
  }
  resolved_[key] = v;
  return v;
}

bool Range::contains(double v) const {
  return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi) && (!integer || v == std::floor(v));
}

std::string Range::text() const {
  const bool top = integer && hi >= 9.2e18;  // INT64_MAX: the type's bound
  if (integer) return top ? fmt::format("an integer >= {}", lo) : fmt::format("an integer from {} to {}", lo, hi);
  return fmt::format("{} {} and {} {}", lo_open ? ">" : ">=", lo, hi_open ? "<" : "<=", hi);
}

double ConfigReader::number_in(const std::string& key, double def, double lo, double hi) {
  return number_in(key, def, open_closed(lo, hi));
}

double ConfigReader::number_in(const std::string& key, double def, const Range& range) {
  ranges_[key] = range;
  double v = number(key, def);
  if (!range.contains(v)) bad(key, "a number " + range.text());
  return v;
}

std::optional<Bytes> ConfigReader::optional_size(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return size(key, 0);
}

std::int64_t ConfigReader::integer(const std::string& key, std::int64_t def) {
  std::int64_t v = def;
  if (auto* j = take(key)) {
    if (j->is_number_integer())
      v = j->get<std::int64_t>();
    else
      bad(key, "an integer");
  }
  resolved_[key] = v;
  return v;
}

std::int64_t ConfigReader::integer_in(const std::string& key, std::int64_t def, std::int64_t lo, std::int64_t hi) {
  return integer_in(key, def, integers(static_cast<double>(lo), static_cast<double>(hi)));
}

std::int64_t ConfigReader::integer_in(const std::string& key, std::int64_t def, const Range& range) {
  ranges_[key] = range;
  std::int64_t v = integer(key, def);
  if (!range.contains(static_cast<double>(v))) bad(key, range.text());
  return v;
}

Bytes ConfigReader::size(const std::string& key, Bytes def) {
  Bytes v = def;
  if (auto* j = take(key)) {
    if (j->is_number_unsigned() || (j->is_number_integer() && j->get<std::int64_t>() >= 0))
      v = j->get<Bytes>();
    else if (j->is_string())
      v = parse_size(j->get<std::string>(), owner_ + ": " + key);
    else
      bad(key, "a size in bytes (a non-negative integer or a size such as 2MiB)");
  }
  resolved_[key] = v;
  return v;
}

std::string ConfigReader::choice(const std::string& key, const std::string& def,
                                 const std::vector<std::string>& allowed) {
  std::string v = def;
  if (auto* j = take(key)) {
    if (!j->is_string()) bad(key, "a string");
    v = j->get<std::string>();
    bool ok = false;
    for (const auto& a : allowed) ok |= (a == v);
    if (!ok) bad(key, fmt::format("one of {}", fmt::join(allowed, ", ")));
  }
  resolved_[key] = v;
  return v;
}

std::string ConfigReader::text(const std::string& key, const std::string& def) {
  std::string v = def;
  if (auto* j = take(key)) {
    // --set KEY=0.11 reads as a number, whose text ("0.10" is 0.1) is gone (trial 22 #5: jaxlib=0.11
    // was "must be a string, got 0.11"): say how to give it as text.
    if (j->is_number())
      throw InputError(
          fmt::format("{}: {}: must be text, got the number {}: a value that reads as a number is one; "
                      "give it as a JSON string, as typed: --set '{}=\"...\"'",
                      owner_, key, dump_json(*j), key));
    if (!j->is_string()) bad(key, "a string");
    v = j->get<std::string>();
  }
  resolved_[key] = v;
  return v;
}

void ConfigReader::finish() {
  for (auto it = cfg_.begin(); it != cfg_.end(); ++it) {
    if (!used_.count(it.key())) {
      std::vector<std::string_view> known(used_.begin(), used_.end());
      throw InputError(fmt::format("{}: unknown key '{}'{} (known: {})", owner_, it.key(),
                                   did_you_mean(it.key(), known),
                                   used_.empty() ? "none" : fmt::format("{}", fmt::join(used_, ", "))));
    }
  }
}

std::pair<std::string, nlohmann::json> parse_setting(const std::string& kv, const std::string& what) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) throw InputError(fmt::format("{}: expected KEY=VALUE, got '{}'", what, kv));
  std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
  nlohmann::json j = nlohmann::json::parse(v, nullptr, false);
  if (j.is_discarded() || j.is_object() || j.is_array()) j = v;
  return {k, j};
}

}  // namespace fragsim

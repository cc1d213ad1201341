// What a fragsim report (contracts §2, docs/report.md) and a replay summary must hold before any
// tool acts on them: version, required keys and their types. A file that does not hold is an
// input error naming the file and the key (exit 2), never a JSON-library message.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace fragsim {

// Checks a fragsim report v1 (one run). Throws InputError("FILE: KEY: what").
void check_report_schema(const nlohmann::json& j, const std::string& file);
// Checks a fragsim-cuda-replay summary (fragsim_replay 1).
void check_replay_schema(const nlohmann::json& j, const std::string& file);

// Typed access that names the file and key on a mismatch.
class JsonField {
 public:
  JsonField(const nlohmann::json& j, std::string file, std::string path = "")
      : j_(j), file_(std::move(file)), path_(std::move(path)) {}
  JsonField at(const std::string& key) const;  // must be present
  bool has(const std::string& key) const { return j_.is_object() && j_.contains(key); }
  double number() const;      // finite number
  std::uint64_t u64() const;  // non-negative integer
  bool boolean() const;
  std::string string() const;
  const nlohmann::json& array() const;  // an array (elements unchecked)
  const nlohmann::json& object() const;
  const nlohmann::json& raw() const { return j_; }
  [[noreturn]] void bad(const std::string& want) const;

 private:
  const nlohmann::json& j_;
  std::string file_, path_;
};

}  // namespace fragsim

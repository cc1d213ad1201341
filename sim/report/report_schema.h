// What a fragsim report (contracts §2, docs/report.md) and a replay summary must hold before any
// tool acts on them: version, required keys and their types. A file that does not hold is an
// input error naming the file and the key (exit 2), never a JSON-library message.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fragsim {

// Checks a fragsim report v1 (one run). Throws InputError("FILE: KEY: what").
void check_report_schema(const nlohmann::json& j, const std::string& file);
// One run of a report file, as check and diff read them: the file is one report, the array
// `compare --json` writes (each run labelled), or the result of `batch`/`merge` ({"fragsim_batch": 1,
// "runs": [{"label", "report"}, ...]}, labelled by their manifest lines).
struct LabelledRun {
  std::string label;                      // the run's label, else its policy's name
  std::string where;                      // where it sits, for messages: "FILE", "FILE [2]", "FILE: runs[2].report"
  std::string at;                         // ...within the file: "", "[2]", "runs[2].report"
  const nlohmann::json* report{nullptr};  // into the file's JSON, checked against the schema
};
// Every run of a report file, in file order, each checked (check_report_schema). Throws
// InputError on a file that is none of the three, or an empty one.
[[nodiscard]] std::vector<LabelledRun> labelled_runs(const nlohmann::json& j, const std::string& file);
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

#include "sim/report/report_schema.h"

#include <fmt/format.h>

#include <cmath>

#include "sim/base/error.h"
#include "sim/base/io.h"

namespace fragsim {

JsonField JsonField::at(const std::string& key) const {
  std::string p = path_.empty() ? key : path_ + "." + key;
  if (!j_.is_object()) bad("an object");
  auto it = j_.find(key);
  if (it == j_.end()) throw InputError(fmt::format("{}: {}: missing required key", file_, p));
  return JsonField(*it, file_, p);
}

void JsonField::bad(const std::string& want) const {
  std::string got = dump_json(j_);
  if (got.size() > 40) got = got.substr(0, 37) + "...";
  throw InputError(fmt::format("{}: {}: must be {}, got {}", file_, path_.empty() ? "(top level)" : path_, want, got));
}

double JsonField::number() const {
  if (!j_.is_number() || !std::isfinite(j_.get<double>())) bad("a number");
  return j_.get<double>();
}
std::uint64_t JsonField::u64() const {
  if (!j_.is_number_unsigned() && !(j_.is_number_integer() && j_.get<std::int64_t>() >= 0))
    bad("a non-negative integer");
  return j_.get<std::uint64_t>();
}
bool JsonField::boolean() const {
  if (!j_.is_boolean()) bad("true or false");
  return j_.get<bool>();
}
std::string JsonField::string() const {
  if (!j_.is_string()) bad("a string");
  return j_.get<std::string>();
}
const nlohmann::json& JsonField::array() const {
  if (!j_.is_array()) bad("an array");
  return j_;
}
const nlohmann::json& JsonField::object() const {
  if (!j_.is_object()) bad("an object");
  return j_;
}

std::vector<LabelledRun> labelled_runs(const nlohmann::json& j, const std::string& file) {
  auto label = [](const nlohmann::json& r) {
    return r.contains("label") && r["label"].is_string() ? r["label"].get<std::string>()
                                                         : r["policy"]["name"].get<std::string>();
  };
  std::vector<LabelledRun> v;
  if (j.is_object() && j.contains("fragsim_batch")) {
    JsonField b(j, file);
    if (b.at("fragsim_batch").u64() != 1) b.at("fragsim_batch").bad("1 (the batch result version this build reads)");
    const auto& runs = b.at("runs").array();
    for (size_t i = 0; i < runs.size(); ++i) {
      JsonField r(runs[i], file, fmt::format("runs[{}]", i));
      const std::string at = fmt::format("runs[{}].report", i), where = file + ": " + at;
      check_report_schema(r.at("report").object(), where);
      v.push_back({r.at("label").string(), where, at, &runs[i]["report"]});
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string at = fmt::format("[{}]", i), where = file + " " + at;
      check_report_schema(j[i], where);
      v.push_back({label(j[i]), where, at, &j[i]});
    }
  } else {
    check_report_schema(j, file);
    v.push_back({label(j), file, "", &j});
  }
  if (v.empty()) throw InputError(file + ": holds no report (an empty list of runs)");
  return v;
}

void check_report_schema(const nlohmann::json& j, const std::string& file) {
  JsonField r(j, file);
  r.object();
  if (!r.has("fragsim_report")) throw InputError(file + ": not a fragsim report (no fragsim_report key)");
  if (r.at("fragsim_report").u64() != 1) r.at("fragsim_report").bad("1 (the report version this build reads)");
  r.at("trace").object();
  r.at("trace").at("events").u64();
  r.at("policy").at("name").string();
  r.at("policy").at("config").object();
  r.at("hardware").object();
  bool completed = r.at("completed").boolean();
  std::uint64_t n = r.at("oom_count").u64();
  const auto& ooms = r.at("ooms").array();
  if (ooms.size() != n) r.at("oom_count").bad(fmt::format("the number of entries of ooms ({})", ooms.size()));
  // A run completes when no allocation failed and its allocator did not abort the process (fatal).
  const bool aborted = r.has("fatal");
  if (aborted) {
    r.at("fatal").at("event_index").u64();
    r.at("fatal").at("message").string();
  }
  if (completed != (n == 0 && !aborted))
    r.at("completed")
        .bad(n         ? "false (the report lists OOMs)"
             : aborted ? "false (the report has a fatal abort)"
                       : "true (no OOM listed)");
  for (size_t i = 0; i < ooms.size(); ++i) {
    JsonField o(ooms[i], file, fmt::format("ooms[{}]", i));
    o.at("event_index").u64();
    o.at("requested_bytes").u64();
  }
  for (const char* k : {"peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes"}) r.at(k).u64();
  r.at("fragmentation").at("at_peak_reserved").number();
  r.at("fragmentation").at("max").number();
  const auto& devices = r.at("devices").array();
  // No allocator reserves more than its own cap (AllocatorPolicy::reserve_limit, to which run --check
  // holds every policy; limit_bytes in reports written before reserve_limit_bytes): a device entry
  // that says so describes no run fragsim makes.
  for (size_t i = 0; i < devices.size(); ++i) {
    JsonField d(devices[i], file, fmt::format("devices[{}]", i));
    const char* cap_key = d.has("reserve_limit_bytes") ? "reserve_limit_bytes" : "limit_bytes";
    if (d.has(cap_key) && d.has("peak_reserved_bytes")) {
      const std::uint64_t cap = d.at(cap_key).u64();
      if (cap && d.at("peak_reserved_bytes").u64() > cap)
        d.at("peak_reserved_bytes")
            .bad(fmt::format("at most {} ({} B): no allocator reserves more than its own limit", cap_key, cap));
    }
    // Nor more than the memory its device gives (usable_bytes; 0: a space no limit bounds).
    if (d.has("usable_bytes") && d.has("peak_reserved_bytes") && d.at("usable_bytes").u64() &&
        d.at("peak_reserved_bytes").u64() > d.at("usable_bytes").u64())
      d.at("usable_bytes")
          .bad(fmt::format("at least peak_reserved_bytes ({} B): no allocator reserves more than its device gives",
                           d.at("peak_reserved_bytes").u64()));
    // A device entry lists its own OOMs, all of them (check gates each device's first).
    if (d.has("oom_count") && d.has("ooms") && d.at("oom_count").u64() != d.at("ooms").array().size())
      d.at("oom_count").bad(fmt::format("the number of entries of its ooms ({})", d.at("ooms").array().size()));
  }
}

void check_replay_schema(const nlohmann::json& j, const std::string& file) {
  JsonField r(j, file);
  r.object();
  if (!r.has("fragsim_replay")) throw InputError(file + ": not a replay summary (no fragsim_replay key)");
  if (r.at("fragsim_replay").u64() != 1) r.at("fragsim_replay").bad("1");
  const auto& oom = r.at("first_oom").raw();
  if (!oom.is_null()) r.at("first_oom").at("event_index").u64();
  r.at("peak_in_use_bytes").u64();
}

}  // namespace fragsim

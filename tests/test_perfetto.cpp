// `run --perfetto FILE` (issue 13): a Chrome trace-event JSON file (the "JSON Object Format" that
// ui.perfetto.dev and chrome://tracing load) with memory counters, one async slice per buffer,
// and instant events for OOMs and marks, consistent with the JSON report of the same run.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>

#include "sim_helpers.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

// Checks the trace-event format's rules for the phases fragsim writes; returns events by phase.
std::map<std::string, std::vector<nlohmann::json>> check_format(const nlohmann::json& doc) {
  REQUIRE(doc.is_object());
  REQUIRE(doc["traceEvents"].is_array());
  CHECK(doc["displayTimeUnit"] == "ns");  // the format allows "ms" or "ns"
  std::map<std::string, std::vector<nlohmann::json>> by;
  std::map<std::pair<std::string, std::string>, double> open;  // (cat, id) -> begin ts
  for (const auto& e : doc["traceEvents"]) {
    REQUIRE(e.is_object());
    REQUIRE(e["ph"].is_string());
    REQUIRE(e["name"].is_string());
    REQUIRE(e["pid"].is_number_unsigned());
    REQUIRE(e["tid"].is_number_unsigned());
    std::string ph = e["ph"];
    by[ph].push_back(e);
    if (ph == "M") {
      CHECK((e["name"] == "process_name" || e["name"] == "process_sort_index"));
      CHECK(e["args"].is_object());
      continue;
    }
    REQUIRE(e["ts"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    if (ph == "C") {  // counters: every arg a number
      REQUIRE(e["args"].is_object());
      for (const auto& [k, v] : e["args"].items()) CHECK(v.is_number());
    } else if (ph == "b" || ph == "e") {  // async: matched by category and id
      REQUIRE(e["cat"].is_string());
      REQUIRE(e["id"].is_string());
      auto key = std::make_pair(e["cat"].get<std::string>(), e["id"].get<std::string>());
      if (ph == "b") {
        CHECK(open.count(key) == 0);
        open[key] = e["ts"].get<double>();
      } else {
        REQUIRE(open.count(key) == 1);
        CHECK(e["ts"].get<double>() >= open[key]);
        open.erase(key);
      }
    } else if (ph == "i") {
      REQUIRE(e["s"].is_string());
      CHECK((e["s"] == "g" || e["s"] == "p" || e["s"] == "t"));
    } else {
      FAIL("unexpected phase " << ph);
    }
  }
  CHECK(open.empty());  // every slice ends (buffers live at the end close with the trace)
  return by;
}

}  // namespace

TEST_CASE("perfetto: a valid Chrome trace whose slices, OOMs, marks and counters match the run's report") {
  std::string pf = tmp_path("run.perfetto.json");
  auto rep =
      run_cmd({.trace = kSample, .capacity = "1GiB", .policy = "xla-bfc", .keep_going = true}, {.perfetto = pf}).json;
  auto by = check_format(nlohmann::json::parse(read_text(pf)));
  std::uint64_t ooms = rep["oom_count"], allocs = rep["trace"]["allocs"];
  // One slice per placed buffer: every alloc of the trace but the failed ones (no zero-size allocs here).
  CHECK(by["b"].size() == allocs - ooms);
  size_t oom_instants = 0, marks = 0;
  for (const auto& e : by["i"]) {
    if (e["cat"] == "oom") {
      ++oom_instants;
      CHECK(e["s"] == "p");
      CHECK(e["name"].get<std::string>().rfind("OOM: ", 0) == 0);
    } else {
      CHECK(e["cat"] == "mark");
      ++marks;
    }
  }
  CHECK(oom_instants == ooms);
  CHECK(by["i"].front()["name"] == "OOM: " + rep["ooms"][0]["request"]["name"].get<std::string>());
  size_t trace_marks = 0;
  for (const auto& line : read_jsonl(kSample)) trace_marks += line.value("op", "") == "mark";
  CHECK(trace_marks > 0);
  CHECK(marks == trace_marks);
  // The memory counter's maximum is the report's peak allocated; the fragmentation counter is a percentage.
  std::uint64_t max_alloc = 0, max_resv = 0;
  for (const auto& e : by["C"]) {
    if (e["name"] == "hbm memory") {
      max_alloc = std::max<std::uint64_t>(max_alloc, e["args"]["allocated"]);
      max_resv = std::max<std::uint64_t>(max_resv, e["args"]["reserved"]);
    } else {
      CHECK(e["name"] == "hbm external fragmentation %");
      CHECK(e["args"]["percent"].get<double>() <= 100.0);
    }
  }
  CHECK(max_alloc == rep["peak_allocated_bytes"].get<std::uint64_t>());
  CHECK(max_resv == rep["peak_reserved_bytes"].get<std::uint64_t>());
}

TEST_CASE("perfetto: names are JSON-escaped, times follow the trace's time_unit, every device is a process") {
  std::string t = write_text("pf.jsonl",
                             "{\"fragsim_trace\":1,\"time_unit\":\"ms\"}\n"
                             "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"t\":2,\"name\":\"a \\\"quoted\\\"\\n name\"}\n"
                             "{\"op\":\"alloc\",\"id\":2,\"size\":4096,\"t\":3,\"device\":1}\n"
                             "{\"op\":\"free\",\"id\":1,\"t\":5}\n");
  std::string pf = tmp_path("pf.json");
  (void)run_cmd({.trace = t, .policy = "best-fit"}, {.perfetto = pf});
  auto by = check_format(nlohmann::json::parse(read_text(pf)));
  REQUIRE(by["b"].size() == 2);
  CHECK(by["b"][0]["name"] == "a \"quoted\"\n name");
  CHECK(by["b"][0]["ts"].get<double>() == 2000.0);  // 2 ms = 2000 µs
  CHECK(by["e"][0]["ts"].get<double>() == 5000.0);
  CHECK(by["b"][1]["name"] == "id 2");  // unnamed buffers go by id
  CHECK(by["b"][1]["pid"] == 1);
  std::set<std::uint64_t> named;
  for (const auto& m : by["M"])
    if (m["name"] == "process_name") named.insert(m["pid"].get<std::uint64_t>());
  CHECK(named == std::set<std::uint64_t>{0, 1});
}

TEST_CASE("perfetto: a bad trace leaves no output file behind") {
  std::string t = write_text(
      "pfbad.jsonl", "{\"fragsim_trace\":1}\n{\"op\":\"alloc\",\"id\":1,\"size\":4096}\n{\"op\":\"free\",\"id\":9}\n");
  std::string pf = tmp_path("pfbad.json");
  CHECK(input_error([&] { (void)run_cmd({.trace = t, .policy = "best-fit"}, {.perfetto = pf}); }).find(t + ":3") !=
        std::string::npos);  // the file and line of the free of an unknown id
  CHECK_FALSE(std::filesystem::exists(pf));
}

// Trial 21 #6: a set's rank that ran out stops there while the other ranks replay on; its buffers
// still live were ended at the set's last event, long after its own stop (602 of 961 slices).
TEST_CASE("perfetto: a stopped rank's buffers end at its own OOM while the other ranks go on") {
  const std::string dir = tmp_path("perfetto_ranks");
  std::filesystem::create_directories(dir);
  const std::string data = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/torch/";
  std::filesystem::copy_file(data + "transformer_ctx128_fwd.pickle.zst", dir + "/snapshot_rank0.pickle.zst",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(data + "small_mlp_97ev.pickle.zst", dir + "/snapshot_rank1.pickle.zst",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string pf = tmp_path("ranks.perfetto.json");
  auto r = run_cmd({.trace = dir, .capacity = "15GiB"}, {.perfetto = pf});
  REQUIRE(r.json["devices"][0].contains("stopped_at_event"));
  REQUIRE(!r.json["devices"][1].contains("stopped_at_event"));
  auto by = check_format(nlohmann::json::parse(read_text(pf)));
  double oom_ts = -1, last_rank1 = -1;
  for (const auto& e : by["i"])
    if (e["pid"] == 0 && e["name"].get<std::string>().rfind("OOM", 0) == 0) oom_ts = e["ts"].get<double>();
  REQUIRE(oom_ts >= 0);
  size_t rank0_ends = 0;
  for (const auto& e : by["e"]) {
    if (e["pid"] == 0) {
      ++rank0_ends;
      CHECK(e["ts"].get<double>() <= oom_ts);
    }
    if (e["pid"] == 1) last_rank1 = std::max(last_rank1, e["ts"].get<double>());
  }
  CHECK(rank0_ends > 100);
  CHECK(last_rank1 > oom_ts);  // rank 1 replayed on, after rank 0's stop
}

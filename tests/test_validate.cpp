// fragsim validate on checked-in replay fixtures (tests/data: a --dry-run replay, labelled as
// such, and the platform simulation of the same trace), and the replayer's GPU-free parts.
#include <catch2/catch.hpp>
#include <sstream>

#include "hardware_models/hardware_model.h"
#include "sim/base/error.h"
#include "sim/commands/validate.h"
#include "test_util.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {}  // namespace

TEST_CASE("validate: matching simulation and replay pass, with the evidence") {
  ValidateOptions o;
  o.sim = test_data("sim_platform_llm_3g.json");
  o.real = test_data("replay_dryrun_llm_3g.json");
  o.fit_out = tmp_path("fitted.json");
  auto r = run_validate(o);
  CHECK(r.pass);
  CHECK(r.json["first_oom"]["simulated"] == 526);
  CHECK(r.json["first_oom"]["real"] == 526);
  CHECK(r.json["peak_in_use"]["difference_bytes"] == 0.0);
  CHECK(r.json["addresses"]["allocations"] == 268);
  CHECK(r.json["addresses"]["common_alignment_bytes"].get<std::uint64_t>() % (2 << 20) == 0);
  CHECK(r.json["latency_fit"]["alloc_samples"] == 268);
  auto hw = load_hardware(o.fit_out);  // the fitted preset loads with --hw
  CHECK(hw.name == "h100-80g-fitted");
  CHECK(hw.cost.alloc_base_ns >= 0);
  // End to end: the command's verdict line and exit code.
  auto cli_r = cli("validate --sim " + o.sim + " --real " + o.real);
  CHECK(cli_r.code == 0);
  CHECK(cli_r.out.find("validate: PASS") != std::string::npos);
}

TEST_CASE("validate: a different first OOM or a peak outside the tolerance fails with exit 1") {
  auto sim = nlohmann::json::parse(read_text(test_data("sim_platform_llm_3g.json")));
  auto real = nlohmann::json::parse(read_text(test_data("replay_dryrun_llm_3g.json")));
  real["calls_file"] = test_data("replay_dryrun_llm_3g.jsonl");
  // `fragsim validate --sim SIM --real REAL [--tolerance PCT]`: exit 0 when it passes, 1 when not.
  auto validate = [](const std::string& sim_path, const std::string& real_path, double tolerance = 5.0) {
    ValidateOptions o;
    o.sim = sim_path;
    o.real = real_path;
    o.tolerance_pct = tolerance;
    return run_validate(o);
  };
  auto moved = real;
  moved["first_oom"]["event_index"] = 500;
  auto r = validate(test_data("sim_platform_llm_3g.json"), write_text("real_moved.json", moved.dump()));
  CHECK_FALSE(r.pass);
  std::string lines;
  for (const auto& l : r.lines) lines += l + "\n";
  CHECK(lines.find("MISMATCH") != std::string::npos);
  auto bigger = real;
  bigger["peak_in_use_bytes"] = real["peak_in_use_bytes"].get<std::uint64_t>() / 10 * 11;  // 10 % more
  std::string big = write_text("real_bigger.json", bigger.dump());
  CHECK_FALSE(validate(test_data("sim_platform_llm_3g.json"), big).pass);
  CHECK(validate(test_data("sim_platform_llm_3g.json"), big, 12).pass);
  // A replay summary given as the simulation: an input error (exit 2).
  CHECK_THROWS_AS(validate(test_data("replay_dryrun_llm_3g.json"), big), InputError);
}

#ifdef FRAGSIM_REPLAY_BINARY
namespace {
CliResult replay_cli(const std::string& args) {
  std::string o = tmp_path("replay.out"), e = tmp_path("replay.err");
  int rc = std::system((std::string(FRAGSIM_REPLAY_BINARY) + " " + args + " >" + o + " 2>" + e).c_str());
  return {WEXITSTATUS(rc), read_text(o), read_text(e)};
}
}  // namespace

TEST_CASE("fragsim-cuda-replay: help, no device, bad input, and a dry run's outputs") {
  auto h = replay_cli("--help");
  CHECK(h.code == 0);
  CHECK(h.out.find("usage: fragsim-cuda-replay") != std::string::npos);
  // Device 99 does not exist anywhere (and with no driver nothing does): exit 3, one line.
  auto n = replay_cli(std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl --device 99 -o " +
                      tmp_path("nodev"));
  CHECK(n.code == 3);
  CHECK(std::count(n.err.begin(), n.err.end(), '\n') == 1);
  CHECK(n.err.find("CUDA device") != std::string::npos);
  std::string bad = write_text("replay_bad.jsonl", "{\"op\":\"free\",\"id\":3}\n");
  auto b = replay_cli(bad + " --dry-run -o " + tmp_path("bad"));
  CHECK(b.code == 2);
  CHECK(b.err.find("replay_bad.jsonl:1:") != std::string::npos);
  CHECK(replay_cli(bad + " --mode sideways --dry-run").code == 2);
  std::string trace = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/llm_serving_small.jsonl";
  for (const char* mode : {"malloc", "async"}) {
    std::string out = tmp_path(std::string("dry_") + mode);
    auto d = replay_cli(trace + " --dry-run --dry-capacity 3GiB --mode " + mode + " -o " + out);
    REQUIRE(d.code == 0);
    auto j = nlohmann::json::parse(read_text(out + ".json"));
    CHECK(j["mode"] == mode);
    CHECK(j["dry_run"] == true);
    CHECK(j["events"] == 695);
    CHECK(j["first_oom"]["event_index"] == 526);  // as the platform simulation predicts (fixture)
    auto calls = read_jsonl(out + ".jsonl");
    auto allocs = std::count_if(calls.begin(), calls.end(), [](const nlohmann::json& c) { return c["op"] == "alloc"; });
    CHECK(static_cast<std::uint64_t>(allocs) == j["allocs"].get<std::uint64_t>());
    CHECK(std::count_if(calls.begin(), calls.end(),
                        [](const nlohmann::json& c) { return c["op"] == "alloc" && c["ok"] == false; }) == 1);
  }
}
#endif

// Real replays on an H200 (tests/data/device_h200/SOURCES.md): the simulation of each bundled
// sample, on a device of the replay's measured memory (its total, less what was already in use at
// start, as scripts/device-check runs it), reproduces the real first OOM and peak within 10 %.
TEST_CASE(
    "validate: simulations of the bundled samples agree with real H200 replays of cudaMalloc and cudaMallocAsync") {
  struct Case {
    const char *trace, *tag;
  };
  for (const Case& c :
       {Case{"jax_train_small.jsonl", "jax_train.malloc"}, Case{"jax_train_small.jsonl", "jax_train.async"},
        Case{"llm_serving_small.jsonl", "llm_serving.malloc"}, Case{"llm_serving_small.jsonl", "llm_serving.async"},
        Case{"llm_serving_small.jsonl", "llm_serving.malloc.limit2GiB"},
        Case{"llm_serving_small.jsonl", "llm_serving.async.limit2GiB"}}) {
    INFO(c.tag);
    const std::string real = test_data(std::string("device_h200/replay.") + c.tag + ".json");
    const auto summary = nlohmann::json::parse(read_text(real));
    const bool async = summary["mode"] == "async";
    std::string memory;
    if (summary["limit"].is_null()) {
      auto total = summary["device"]["total_bytes"].get<std::uint64_t>();
      auto free = summary["device"]["free_at_start_bytes"].get<std::uint64_t>();
      memory = "--capacity " + std::to_string(total) + "B --reserve " + std::to_string(total - free) + "B";
    } else {
      memory = "--capacity 2GiB --reserve 0B";
      CHECK(summary["first_oom"].is_object());  // the limited replays ran out of memory for real
    }
    const std::string sim = tmp_path(std::string("sim.") + c.tag + ".json");
    REQUIRE(cli("run " + sample(c.trace) + " --hw h200-141g " + memory + " --policy " +
                (async ? "cuda-async --set preallocate=false" : "platform") + " --json " + sim)
                .code == 0);
    auto r = cli("validate --sim " + sim + " --real " + real + " --tolerance 10");
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("validate: PASS") != std::string::npos);
  }
}

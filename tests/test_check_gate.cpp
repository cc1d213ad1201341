// `check` as a CI gate compares a new recording with the last one: reports of two traces of one
// workload are compared (a note names both), and by default the figures docs/metrics.md
// recommends gate while the others are shown. In-process: run_check over run_request's reports.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/units.h"
#include "sim/commands/check.h"
#include "sim/commands/commands.h"
#include "sim/report/diff.h"
#include "sim/report/report.h"
#include "sim_helpers.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

nlohmann::json report_of(const std::string& trace) {
  RunRequest q;
  q.trace = trace;
  q.policy = "xla-bfc";
  q.capacity = "4GiB";
  return report_json(run_request(q, test_registry()));
}

// The sample with one more buffer, 64 MiB (or `size`) held from the start to the end: what a code
// change gives, a new trace of the same workload.
std::string grown_sample(Bytes size = 64 * kMiB) {
  std::string text = read_text(kSample);
  size_t header_end = text.find('\n');
  REQUIRE(header_end != std::string::npos);
  text.insert(header_end + 1, "{\"op\":\"alloc\",\"id\":999999999,\"size\":" + std::to_string(size) + ",\"t\":1}\n");
  return write_text("check_gate_grown_" + std::to_string(size) + ".jsonl", text);
}

// check of two reports with the default options, as `check --baseline old.json --current new.json`.
CheckResult check_of(const nlohmann::json& a, const nlohmann::json& b) {
  CheckOptions o;
  o.baseline_path = "old.json";
  o.current_path = "new.json";
  return run_check(a, b, o);
}

const CheckItem* item(const CheckResult& r, const std::string& metric) {
  for (const auto& i : r.items)
    if (i.metric == metric) return &i;
  return nullptr;
}

}  // namespace

TEST_CASE("check: two recordings of one workload are compared with a note naming both, --same-trace refuses them") {
  nlohmann::json a = report_of(kSample), b = report_of(grown_sample());
  REQUIRE(a["trace"]["digest"] != b["trace"]["digest"]);
  CheckOptions o;
  o.baseline_path = "old.json";
  o.current_path = "new.json";
  CheckResult r = run_check(a, b, o);
  bool named = false;
  for (const auto& n : r.notes)
    named |= n.find("the traces differ") != std::string::npos && n.find("jax_train_small.jsonl") != std::string::npos &&
             n.find("check_gate_grown_67108864.jsonl") != std::string::npos &&
             n.find("--same-trace") != std::string::npos;
  CHECK(named);
  // One more buffer of 64 MiB lives through the peak: peak allocated grew by exactly that.
  REQUIRE(item(r, "peak_allocated_bytes"));
  CHECK(item(r, "peak_allocated_bytes")->current - item(r, "peak_allocated_bytes")->baseline == 67108864.0);
  CHECK_FALSE(r.pass);
  CHECK(check_text(r).find("peak_allocated_bytes grew: ") != std::string::npos);

  o.same_trace = true;
  try {
    (void)run_check(a, b, o);
    FAIL("--same-trace accepted reports of different traces");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("different traces") != std::string::npos);
  }
  CHECK(run_check(a, a, o).pass);  // one trace: --same-trace has nothing to refuse
}

TEST_CASE(
    "check: the recommended figures gate by default, peak requested and at_peak_reserved are shown, gated with --gate "
    "all") {
  nlohmann::json a = report_of(kSample);
  CheckOptions o;
  o.baseline_path = "old.json";
  o.current_path = "new.json";

  // Peak requested grew, nothing the allocator decides did: shown, not gated.
  nlohmann::json b = a;
  b["peak_requested_bytes"] = a["peak_requested_bytes"].get<Bytes>() + 1;
  CheckResult r = run_check(a, b, o);
  CHECK(r.pass);
  REQUIRE(item(r, "peak_requested_bytes"));
  CHECK_FALSE(item(r, "peak_requested_bytes")->gated);
  CHECK_FALSE(item(r, "peak_requested_bytes")->regression);
  CHECK(check_text(r).find("peak_requested_bytes grew") != std::string::npos);  // shown all the same
  CHECK(check_json(r)["items"].size() == r.items.size());
  o.gate_all = true;
  CHECK_FALSE(run_check(a, b, o).pass);
  o.gate_all = false;

  // Each recommended figure fails the gate when it grows.
  for (const char* k : {"peak_allocated_bytes", "peak_reserved_bytes"}) {
    nlohmann::json c = a;
    c[k] = a[k].get<Bytes>() + 1;
    CheckResult rc = run_check(a, c, o);
    CHECK_FALSE(rc.pass);
    REQUIRE(item(rc, k));
    CHECK(item(rc, k)->gated);
  }
  nlohmann::json c = a;
  REQUIRE(c["fragmentation"]["max"].is_number());
  c["fragmentation"]["max"] = c["fragmentation"]["max"].get<double>() + 0.25;
  CHECK_FALSE(run_check(a, c, o).pass);
  // at_peak_reserved (0 for a preallocating allocator) is shown, not gated.
  nlohmann::json d = a;
  REQUIRE(d["fragmentation"]["at_peak_reserved"].is_number());
  d["fragmentation"]["at_peak_reserved"] = d["fragmentation"]["at_peak_reserved"].get<double>() + 0.25;
  CheckResult rd = run_check(a, d, o);
  CHECK(rd.pass);
  REQUIRE(item(rd, "fragmentation.at_peak_reserved"));
  CHECK_FALSE(item(rd, "fragmentation.at_peak_reserved")->gated);
}

TEST_CASE("check: a new OOM's request is shown in bytes a person reads") {
  RunRequest q;
  q.trace = kSample;
  q.policy = "xla-bfc";
  q.capacity = "4GiB";
  nlohmann::json a = report_json(run_request(q, test_registry()));
  q.capacity = "64MiB";
  q.keep_going = true;
  nlohmann::json b = report_json(run_request(q, test_registry()));
  REQUIRE(a["ooms"].empty());
  REQUIRE_FALSE(b["ooms"].empty());
  CheckResult r = check_of(a, b);
  CHECK_FALSE(r.pass);
  const CheckItem* first = item(r, "first_oom_event");
  REQUIRE(first);
  Bytes req = b["ooms"][0]["requested_bytes"].get<Bytes>();
  CHECK(first->message.find(human_bytes(req) + " requested") != std::string::npos);
  CHECK(first->message.find(std::to_string(req)) == std::string::npos);
}

TEST_CASE("check: a growth too small to show in rounded bytes is printed with its exact change, never as none") {
  // 4 KiB more held for the whole run: every peak grows by exactly that, which GiB with two
  // decimals cannot show (x.xx GiB -> x.xx GiB, +0.00%).
  nlohmann::json a = report_of(kSample), b = report_of(grown_sample(4 * kKiB));
  CheckResult r = check_of(a, b);
  CHECK_FALSE(r.pass);
  const CheckItem* peak = item(r, "peak_allocated_bytes");
  REQUIRE(peak);
  REQUIRE(peak->current - peak->baseline == 4096);
  CHECK(peak->regression);
  INFO(peak->message);
  REQUIRE(human_bytes(static_cast<Bytes>(peak->baseline)) == human_bytes(static_cast<Bytes>(peak->current)));
  CHECK(peak->message.find("(+4.00 KiB, +0.") != std::string::npos);
  CHECK(peak->message.find("+0.00%") == std::string::npos);
  CHECK(check_markdown(r).find("\\(\\+4.00 KiB\\)") != std::string::npos);  // escaped for Markdown
  CHECK(signed_percent(0.0049, 2) == "+0.0049%");
  CHECK(signed_percent(-12.345, 1) == "-12.3%");
  CHECK(signed_percent(0, 2) == "+0.00%");
  CHECK(signed_bytes(-917504) == "-896.00 KiB");
  CHECK(signed_bytes(0) == "±0 B");
}

// Two devices 2 MiB apart in 52 GiB read "51.95 GiB vs 51.95 GiB": the note that says they differ
// shows how, and so does diff's setup line.
TEST_CASE("check and diff: hardware that differs below the rounding is shown in bytes") {
  const auto [x, y] = human_bytes_apart(55780048896, 55777951744);
  CHECK(x == "55780048896 B");
  CHECK(y == "55777951744 B");
  CHECK(human_bytes_apart(4096, 8192) == std::pair<std::string, std::string>{"4.00 KiB", "8.00 KiB"});
  CHECK(human_bytes_apart(4096, 4096) == std::pair<std::string, std::string>{"4.00 KiB", "4.00 KiB"});
  nlohmann::json a = report_of(kSample), b = a;
  b["hardware"]["spaces"][0]["capacity_bytes"] = a["hardware"]["spaces"][0]["capacity_bytes"].get<Bytes>() - 2 * kMiB;
  CheckResult r = check_of(a, b);
  bool said = false;
  for (const auto& n : r.notes)
    if (n.find("the hardware differs") != std::string::npos) {
      said = true;
      INFO(n);
      CHECK(n.find(std::to_string(b["hardware"]["spaces"][0]["capacity_bytes"].get<Bytes>()) + " B") !=
            std::string::npos);
    }
  CHECK(said);
}

// XLA's BFC with the whole device (memory fraction 1) on a 2 GiB device: its spatial layout meets
// a state the real allocator CHECK-fails on (two gaps), at event 455 of the sample, before any
// OOM; at 4 GiB the same settings complete. The report of such a run reads back (check, diff,
// merge refused it: "completed: must be true (no OOM listed)"), says where the abort happened,
// and a new abort fails the gate although no OOM is listed.
TEST_CASE("check: a run its allocator aborts reads back, and a new abort fails the gate") {
  auto run_at = [](const std::string& capacity) {
    RunRequest q;
    q.trace = kSample;
    q.policy = "xla-bfc[mem_fraction=1]";
    q.capacity = capacity;
    return run_request(q, test_registry());
  };
  const RunResult aborted = run_at("2GiB"), fits = run_at("4GiB");
  REQUIRE(fits.completed);
  REQUIRE(!aborted.fatal.empty());
  CHECK(aborted.ooms.empty());
  CHECK(aborted.fatal_event == 455);
  const nlohmann::json cur = report_json(aborted), base = report_json(fits);
  CHECK(cur["completed"] == false);
  CHECK(cur["oom_count"] == 0);
  CHECK(cur["fatal"]["device"] == 0);
  CHECK(cur["fatal"]["space"] == "hbm");
  CHECK(cur["devices"][0]["completed"] == false);  // the single space equals the run, as the contract says
  const std::string text = report_text(aborted);
  CHECK(text.find("result: aborted at event 455, no OOM before it") != std::string::npos);
  CHECK(text.find("0 OOMs") == std::string::npos);

  CheckResult same = check_of(cur, cur);
  CHECK(same.pass);
  CheckResult r = check_of(base, cur);
  CHECK_FALSE(r.pass);
  const CheckItem* a = item(r, "fatal_event");
  REQUIRE(a);
  CHECK(a->regression);
  CHECK(a->current == 455);
  CHECK(a->message.find("new abort at event 455") != std::string::npos);
  CheckResult back = check_of(cur, base);
  REQUIRE(item(back, "fatal_event"));
  CHECK_FALSE(item(back, "fatal_event")->regression);

  const std::string d = diff_text(diff_reports({base, "fits.json"}, {cur, "aborted.json"}));
  CHECK(d.find("B aborted at event 455: BFC CHECK failure") != std::string::npos);
  CHECK(d.find("B completes") == std::string::npos);
}

TEST_CASE("check: a report whose peak reserved exceeds its allocator's own limit is refused, not passed") {
  // No allocator reserves more than its own cap (AllocatorPolicy::reserve_limit, which run --check
  // holds every policy to after each event): a report that says so describes no run. check passed
  // one whose device reserved 1 GiB above its limit_bytes (issue 47 item 2: a limit below the
  // reserved memory must be caught).
  const nlohmann::json base = report_of(kSample);
  const nlohmann::json& dev = base["devices"][0];
  REQUIRE(dev["limit_bytes"].get<std::uint64_t>() > 0);
  CHECK(dev["reserve_limit_bytes"] == dev["limit_bytes"]);  // one pool: its cap is the BFC's limit
  CHECK(dev["peak_reserved_bytes"].get<std::uint64_t>() <= dev["limit_bytes"].get<std::uint64_t>());
  CHECK(check_of(base, base).pass);
  for (const char* cap : {"reserve_limit_bytes", "limit_bytes"}) {  // limit_bytes: a report of an older build
    INFO(cap);
    nlohmann::json cur = base;
    if (std::string(cap) == "limit_bytes") cur["devices"][0].erase("reserve_limit_bytes");
    cur["devices"][0]["peak_reserved_bytes"] = dev["limit_bytes"].get<std::uint64_t>() + kGiB;
    std::string err = input_error([&] { (void)check_of(base, cur); });
    CHECK_THAT(err, Catch::Contains("new.json: devices[0].peak_reserved_bytes: must be at most " + std::string(cap)));
    err = input_error([&] { (void)check_of(cur, base); });
    CHECK_THAT(err, Catch::Contains("old.json: devices[0].peak_reserved_bytes"));
  }
  // Nor more than the memory its device gives, and a device's OOMs are those it lists (trial 18 #8:
  // usable_bytes edited to 100 MiB below 266 MiB reserved passed; trial 17 #10: a device's
  // oom_count of 1 with no OOM listed passed a gate on that device's first OOM).
  nlohmann::json small = base;
  small["devices"][0]["usable_bytes"] = dev["peak_reserved_bytes"].get<std::uint64_t>() - 1;
  CHECK_THAT(input_error([&] { (void)check_of(base, small); }),
             Catch::Contains("new.json: devices[0].usable_bytes: must be at least peak_reserved_bytes"));
  nlohmann::json listed = base;
  listed["devices"][0]["oom_count"] = 1;
  CHECK_THAT(input_error([&] { (void)check_of(base, listed); }),
             Catch::Contains("new.json: devices[0].oom_count: must be the number of entries of its ooms (0)"));
}

// Trial 10, finding 14: a fragmentation of 0.00 % growing to 0.85 % was "+16478792.26%" (a
// percentage of almost nothing), and the note on a set of ranks whose GPUs differ named only the
// model's memory ("hbm 79.15 GiB vs hbm 20.00 GiB"), not the T4 rank's 14.56 GiB.
TEST_CASE("check: growth from nothing is said in points or bytes, and the hardware note names each rank's memory") {
  nlohmann::json a = report_of(kSample), b = a;
  a["fragmentation"]["max"] = 5e-8;
  b["fragmentation"]["max"] = 0.0085;
  a["devices"][0]["peak_reserved_bytes"] = 0;
  CheckResult r = check_of(a, b);
  const CheckItem* frag = item(r, "fragmentation.max");
  REQUIRE(frag);
  INFO(frag->message);
  CHECK(frag->regression);  // the gate is unchanged: it grew beyond the tolerance
  CHECK(frag->message.find("0.00% -> 0.85% (+0.85 percentage points from none, tolerance") != std::string::npos);
  CHECK(frag->message.find("16478792") == std::string::npos);
  const CheckItem* bytes = item(r, "device 0 hbm.peak_reserved_bytes");
  REQUIRE(bytes);
  INFO(bytes->message);
  CHECK(bytes->message.find("0 B -> " + human_bytes(b["devices"][0]["peak_reserved_bytes"].get<Bytes>()) + " (+") !=
        std::string::npos);
  CHECK(bytes->message.find("from none") != std::string::npos);
  CHECK(bytes->message.find("+100.00%") == std::string::npos);  // what a base of 0 gave before

  // An A100 rank beside a T4 rank (each with its own memory) against the same set on 20 GiB each.
  const std::string dir = mixed_gpu_ranks("check_mixed_gpus");
  RunRequest q;
  q.trace = dir;
  const nlohmann::json own = report_json(run_request(q, test_registry()));
  q.capacity = "20GiB";
  const nlohmann::json twenty = report_json(run_request(q, test_registry()));
  CheckOptions o;
  o.baseline_path = "own.json";
  o.current_path = "twenty.json";
  bool said = false;
  for (const auto& n : run_check(own, twenty, o).notes)
    if (n.find("the hardware differs") != std::string::npos) {
      said = true;
      INFO(n);
      CHECK(n.find("a100-80g, hbm 79.15 GiB, device 1 (hostB_2.1700000001.pt.trace.json.gz) hbm 14.56 GiB vs "
                   "a100-80g, hbm 20.00 GiB)") != std::string::npos);
    }
  CHECK(said);
}

namespace {

nlohmann::json torch_report(const RunRequest& q) { return report_json(run_request(q, test_registry())); }

}  // namespace

// Trial 11, finding 2: at 22 GiB and 40 GiB the 3-device recording stops at its first OOM, the
// latter later (more memory); its peaks then cover events the baseline never replayed, and check
// failed it with 18 "regressions". A peak of allocated memory reached by the baseline's stop still
// gates, and the reverse (an earlier first OOM) still fails.
TEST_CASE("check: a run that got further than the baseline is not failed for peaks past the baseline's stop") {
  const nlohmann::json small = torch_report({.trace = k3dev, .capacity = "22GiB"});
  const nlohmann::json large = torch_report({.trace = k3dev, .capacity = "40GiB"});
  REQUIRE(small["stopped_early"] == true);
  REQUIRE(large["stopped_early"] == true);
  const double bstop = small["first_oom"]["event_index"].get<double>();
  REQUIRE(large["first_oom"]["event_index"].get<double>() > bstop);
  REQUIRE(large["peak_allocated_bytes"].get<double>() > small["peak_allocated_bytes"].get<double>());
  REQUIRE(large["at_peak_allocated"]["event_index"].get<double>() > bstop);

  CheckResult r = check_of(small, large);
  CHECK(r.pass);
  REQUIRE(item(r, "peak_allocated_bytes"));
  CHECK(item(r, "peak_allocated_bytes")->past_baseline_stop);
  CHECK_FALSE(item(r, "peak_allocated_bytes")->gated);
  CHECK(item(r, "peak_allocated_bytes")->message.find("not gated: reached past event") != std::string::npos);
  bool in_json = false;
  const nlohmann::json json = check_json(r);
  for (const auto& i : json["items"])
    in_json |= i["metric"] == "peak_allocated_bytes" && i.value("past_baseline_stop", false) && !i["gated"].get<bool>();
  CHECK(in_json);
  bool noted = false;
  for (const auto& n : r.notes) noted |= n.find("replayed further than the baseline") != std::string::npos;
  CHECK(noted);

  // The same peak reached by the baseline's stop is one over the same events: it gates.
  nlohmann::json within = large;
  within["at_peak_allocated"]["event_index"] = static_cast<std::uint64_t>(bstop);
  CheckResult w = check_of(small, within);
  CHECK_FALSE(w.pass);
  REQUIRE(item(w, "peak_allocated_bytes"));
  CHECK(item(w, "peak_allocated_bytes")->regression);

  // The other way round, the current run stops earlier: a regression, as before.
  CheckResult back = check_of(large, small);
  CHECK_FALSE(back.pass);
  REQUIRE(item(back, "first_oom_event"));
  CHECK(item(back, "first_oom_event")->regression);
}

// Trial 15: a one-device run that got further than its baseline, its peak of allocated memory reached
// by the baseline's stop: the run's figure at that peak gated, the same figure of its one device entry
// (which carries no peak moment of its own: the run's is the device's) said "not gated: reached past".
TEST_CASE("check: a one-device report's figures at the peak gate as the run's do") {
  const nlohmann::json small = torch_report({.trace = kTrain, .capacity = "1GiB", .policy = "best-fit"});
  const nlohmann::json large = torch_report({.trace = kTrain, .policy = "best-fit"});
  REQUIRE(small["stopped_early"] == true);
  REQUIRE(large["devices"].size() == 1);
  REQUIRE_FALSE(large["devices"][0].contains("at_peak_allocated"));
  const double bstop = small["first_oom"]["event_index"].get<double>();
  nlohmann::json cur = large;
  cur["at_peak_allocated"]["event_index"] = static_cast<std::uint64_t>(bstop);  // reached by the stop
  const std::string k = "reserved_unallocated_bytes";
  cur["fragmentation"]["at_peak_allocated"][k] = small["fragmentation"]["at_peak_allocated"][k].get<double>() + MiB;
  cur["devices"][0]["fragmentation"]["at_peak_allocated"][k] = cur["fragmentation"]["at_peak_allocated"][k];
  CheckResult r = check_of(small, cur);
  for (const std::string& m :
       {"fragmentation.at_peak_allocated." + k, "device 0 hbm.fragmentation.at_peak_allocated." + k}) {
    INFO(m);
    const auto* i = item(r, m);
    REQUIRE(i);
    CHECK_FALSE(i->past_baseline_stop);
    CHECK(i->regression);
  }
}

// Trial 11, finding 7: --set and --env that resolve to the same allocator settings were refused as
// "different policies or settings", and diff said "set up differently".
TEST_CASE("check and diff: settings given by --set and by --env that resolve alike are the same settings") {
  const nlohmann::json set = torch_report({.trace = k3dev, .capacity = "85861MiB", .sets = {"max_split_size_mb=256"}});
  const nlohmann::json env =
      torch_report({.trace = k3dev,
                    .capacity = "85861MiB",
                    .envs = {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:256"}});
  REQUIRE(set["policy"]["config"] != env["policy"]["config"]);
  CheckResult r = check_of(set, env);
  CHECK(r.pass);
  const nlohmann::json d = diff_reports({set, "set.json"}, {env, "env.json"});
  CHECK(diff_text(d).find("set up differently") == std::string::npos);

  // A setting that resolves otherwise is still refused, and diff names it by its key.
  const nlohmann::json plain = torch_report({.trace = k3dev, .capacity = "85861MiB"});
  CHECK_THROWS_AS(check_of(plain, set), InputError);
  const std::string text = diff_text(diff_reports({plain, "plain.json"}, {set, "set.json"}));
  // In PyTorch's words: the variable's text in force, which the recording stated (expandable
  // segments) and --set changed one key of; not fragsim's keys nor its resolved figures.
  CHECK(text.find("set up differently: PYTORCH_CUDA_ALLOC_CONF in force \"expandable_segments:True\" -> "
                  "\"max_split_size_mb:256,expandable_segments:True\"\n") != std::string::npos);
  CHECK(text.find("resolved") == std::string::npos);
  CHECK(text.find("max_split_size_mb null") == std::string::npos);
}

// Trial 11, finding 3: a batch or merge result was "not a fragsim report"; its runs are matched by
// their manifest labels as a compare array's are.
TEST_CASE("check and diff: a batch result is gated run by run, matched by label") {
  const nlohmann::json ok = report_of(kSample);
  RunRequest tight{.trace = kSample, .capacity = "64MiB", .policy = "xla-bfc"};
  const nlohmann::json oom = report_json(run_request(tight, test_registry()));
  REQUIRE(oom["oom_count"].get<int>() > 0);
  auto batch = [](const nlohmann::json& a, const nlohmann::json& b) {
    return nlohmann::json{{"fragsim_batch", 1},
                          {"runs",
                           {{{"run", 0}, {"line", 1}, {"label", "one"}, {"report", a}},
                            {{"run", 1}, {"line", 2}, {"label", "two"}, {"report", b}}}}};
  };
  CheckResult same = check_of(batch(ok, ok), batch(ok, ok));
  CHECK(same.pass);
  CheckOptions o{.baseline_path = "old.json", .current_path = "new.json", .allow_different_policy = true};
  CheckResult worse = run_check(batch(ok, ok), batch(ok, oom), o);
  CHECK_FALSE(worse.pass);
  for (const auto& i : worse.items)
    if (i.regression) CHECK(i.run == "two");
  CHECK(worse.diff_command == "fragsim diff old.json new.json --label two");
  CHECK(pick_report(batch(ok, oom), "two", "new.json") == oom);
}

// Trial 11, finding 13a: the top-level device_calls of a single-device run lacked the `failed`
// its one device entry has (contracts §2: the top-level keys equal that entry).
TEST_CASE("report: a single-device run's top-level device_calls equal its device entry's") {
  const nlohmann::json r = report_of(kSample);
  REQUIRE(r["devices"].size() == 1);
  CHECK(r["device_calls"] == r["devices"][0]["device_calls"]);
}

// Trial 11, finding 12: when the binding device changed, the run-level rows compared device 0's
// figures with device 1's; they are compared per device only.
TEST_CASE("check: the run's figures are not compared when the binding device changed") {
  const nlohmann::json a = torch_report({.trace = k3dev, .capacity = "22GiB"});
  REQUIRE(a.contains("binding"));
  nlohmann::json b = a;
  b["binding"]["device"] = a["binding"]["device"].get<int>() == 0 ? 1 : 0;
  CheckResult r = check_of(a, b);
  CHECK(item(r, "peak_allocated_bytes") == nullptr);
  CHECK(item(r, fmt::format("device {} hbm.peak_allocated_bytes", a["binding"]["device"].get<int>())) != nullptr);
  bool noted = false;
  for (const auto& n : r.notes)
    noted |= n.find("the binding device changed): compared per device only") != std::string::npos;
  CHECK(noted);
  CHECK(item(check_of(a, a), "peak_allocated_bytes") != nullptr);
}

// Trial 11, finding 10: the hardware note named the preset's memory (79.15 GiB) for a run on the
// 22.69 GiB its recording implied.
TEST_CASE("check: the hardware note names the memory a recording implied") {
  const nlohmann::json own = torch_report({.trace = test_data("torch/oom_retry_release.pickle.zst")});
  REQUIRE(own["devices"][0]["usable_inferred"] == true);
  const nlohmann::json twenty =
      torch_report({.trace = test_data("torch/oom_retry_release.pickle.zst"), .capacity = "20GiB"});
  bool said = false;
  for (const auto& n : check_of(own, twenty).notes)
    said |= n.find("device 0 hbm " + human_bytes(own["devices"][0]["usable_bytes"].get<Bytes>()) +
                   " usable, inferred from the recording vs ") != std::string::npos;
  CHECK(said);
}

// Issue 47: a run that stopped at device 0's OOM left device 1's later allocations unreplayed; the
// baseline, run with --keep-going, replayed them. The OOM count and the first OOM were the same, and
// device 1's figures, cut short at the stop, only shrank: check passed and diff said nothing of it.
TEST_CASE("check and diff: a device left unreplayed after another device's OOM fails the gate and is said") {
  const std::string trace = write_text("check_gate_two_devices.jsonl",
                                       "{\"op\":\"alloc\",\"id\":1,\"size\":629145600,\"device\":0}\n"
                                       "{\"op\":\"alloc\",\"id\":10,\"size\":104857600,\"device\":1}\n"
                                       "{\"op\":\"alloc\",\"id\":2,\"size\":629145600,\"device\":0}\n"
                                       "{\"op\":\"alloc\",\"id\":11,\"size\":209715200,\"device\":1}\n"
                                       "{\"op\":\"free\",\"id\":10,\"device\":1}\n"
                                       "{\"op\":\"free\",\"id\":11,\"device\":1}\n"
                                       "{\"op\":\"free\",\"id\":1,\"device\":0}\n");
  RunRequest q;
  q.trace = trace;
  q.policy = "best-fit";
  q.capacity = "1GiB";
  q.reserve = "0";
  q.keep_going = true;
  const nlohmann::json all = report_json(run_request(q, test_registry()));
  q.keep_going = false;
  const nlohmann::json stopped = report_json(run_request(q, test_registry()));
  REQUIRE(all["oom_count"] == 1);
  REQUIRE(stopped["oom_count"] == 1);
  REQUIRE(stopped["devices"][1]["allocs_not_replayed"] == 1);

  CheckResult r = check_of(all, stopped);
  CHECK_FALSE(r.pass);
  const CheckItem* i = item(r, "device 1 hbm.allocs_not_replayed");
  REQUIRE(i);
  CHECK(i->regression);
  CHECK(i->message.find("1 allocation not replayed: the run stopped at event 2, before this device's end (the "
                        "baseline replayed them all)") != std::string::npos);
  const CheckResult reverse = check_of(stopped, all);
  const CheckItem* back = item(reverse, "device 1 hbm.allocs_not_replayed");
  REQUIRE(back);  // replaying further is no regression
  CHECK_FALSE(back->regression);
  CHECK(check_of(stopped, stopped).pass);

  const nlohmann::json d = diff_reports({all, "all.json"}, {stopped, "stopped.json"});
  CHECK(d["devices"][1]["b"]["allocs_not_replayed"] == 1);
  CHECK(d["devices"][1]["change"]["allocs_not_replayed"] == 1);
  const std::string said =
      "B left 1 allocation of device 1 hbm unreplayed (it stopped at event 2, before that device's end); A replayed "
      "them all";
  CHECK(dump_json(d["headline"]).find(said) != std::string::npos);
  CHECK(diff_text(d).find(said) != std::string::npos);
}

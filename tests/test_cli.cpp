// End-to-end through the fragsim binary: what only the command line does — exit codes (an OOM is
// 0, bad input 2, an unreadable file 3, a failed check 1), one-line errors, no half-written
// outputs, --help of every command, progress on stderr — with a run, a check and a compare end to
// end. What the commands compute is tested in process (test_commands.cpp and the others).
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "sim/base/io.h"
#include "sim/engine/progress.h"
#include "test_util.h"

using namespace fragsim::test;

namespace {
const char* kTrace =
    "{\"fragsim_trace\":1,\"source\":\"cli-test\"}\n"
    "{\"op\":\"alloc\",\"id\":1,\"size\":3145728}\n"
    "{\"op\":\"alloc\",\"id\":2,\"size\":1}\n"
    "{\"op\":\"alloc\",\"id\":3,\"size\":5242880}\n"
    "{\"op\":\"free\",\"id\":2}\n"
    "{\"op\":\"alloc\",\"id\":4,\"size\":4194304}\n";
}

TEST_CASE("cli: every command has --help") {
  for (const char* c :
       {"run", "compare", "check", "info", "convert", "gen", "list", "batch", "merge", "sweep", "plan"}) {
    auto r = cli(std::string(c) + " --help");
    INFO(c);
    CHECK(r.code == 0);
    CHECK(r.out.find("usage: fragsim") != std::string::npos);
  }
  CHECK(cli("--help").code == 0);
  CHECK(cli("bogus").code == 2);
}

TEST_CASE("cli: run writes the report — OOM is exit 0 with completed false") {
  std::string t = write_text("cli.jsonl", kTrace), rep = tmp_path("cli.report.json");
  auto r = cli("run " + t + " --policy best-fit --capacity 10MiB --reserve 0 --json " + rep);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(read_text(rep));
  CHECK(j["completed"] == false);
  CHECK(j["oom_count"] == 1);
  CHECK(j["ooms"][0]["event_index"] == 4);
  CHECK(j["ooms"][0]["cause"] == "capacity");
  CHECK(j["peak_requested_bytes"] == 3145728 + 5242880 + 4194304);  // the trace's, not cut at the OOM
  CHECK(r.out.find("OOM at event 4") != std::string::npos);
  // With enough room the same trace completes.
  r = cli("run " + t + " --policy first-fit --capacity 16MiB --reserve 0 --json " + rep);
  CHECK(nlohmann::json::parse(read_text(rep))["completed"] == true);
}

TEST_CASE("cli: bad input exits 2 with one FILE:LINE line and leaves no output behind") {
  std::string t = write_text("clibad.jsonl", "{\"op\":\"alloc\",\"id\":1,\"size\":10}\n{\"op\":\"free\",\"id\":9}\n");
  std::string rep = tmp_path("clibad.json"), pl = tmp_path("clibad.placements");
  std::filesystem::remove(rep);
  auto r = cli("run " + t + " --policy best-fit --json " + rep + " --placements " + pl);
  CHECK(r.code == 2);
  CHECK(r.err == "fragsim: " + t + ":2: id: free of id 9 which is not live\n");
  CHECK_FALSE(std::filesystem::exists(rep));
  CHECK_FALSE(std::filesystem::exists(pl));
  for (const auto& e : std::filesystem::directory_iterator(tmp_dir()))
    CHECK(e.path().string().find(".tmp.") == std::string::npos);
  CHECK(cli("run " + t + " --policy nope").code == 2);
  CHECK(cli("run " + t + " --capacity 12XB").code == 2);
  CHECK(cli("run " + t + " --set bogus=1").code == 2);
  CHECK(cli("run " + tmp_path("missing.jsonl")).code == 3);
  CHECK(cli("run " + t + " --hw nope").code == 2);
}

TEST_CASE("cli: check passes identical reports and fails grown peaks and new OOMs") {
  std::string t = write_text("clichk.jsonl", kTrace);
  std::string a = tmp_path("chk_a.json"), b = tmp_path("chk_b.json");
  REQUIRE(cli("run " + t + " --policy best-fit --capacity 16MiB --reserve 0 --json " + a).code == 0);
  CHECK(cli("check --baseline " + a + " --current " + a).code == 0);
  auto j = nlohmann::json::parse(read_text(a));
  j["peak_reserved_bytes"] = j["peak_reserved_bytes"].get<std::uint64_t>() + 1000;
  write_text("chk_b.json", j.dump());
  CHECK(cli("check --baseline " + a + " --current " + b).code == 1);
  CHECK(cli("check --baseline " + a + " --current " + b + " --tolerance 50").code == 0);
  // A capacity that OOMs is a new OOM.
  REQUIRE(cli("run " + t + " --policy best-fit --capacity 10MiB --reserve 0 --json " + b).code == 0);
  auto r = cli("check --baseline " + a + " --current " + b + " --tolerance 1000");
  CHECK(r.code == 1);
  CHECK(r.out.find("new OOM at event 4") != std::string::npos);
}

TEST_CASE("cli: compare prints one row per policy and writes a JSON array") {
  std::string t = write_text("clicmp.jsonl", kTrace), out = tmp_path("cmp.json");
  auto r = cli("compare " + t + " --policies ideal,best-fit,first-fit --json " + out);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(read_text(out));
  REQUIRE(j.size() == 3);
  CHECK(j[0]["policy"]["name"] == "ideal");
  CHECK(j[0]["peak_requested_bytes"] == j[2]["peak_requested_bytes"]);
  CHECK(r.out.find("first-fit") != std::string::npos);
}

// Regressions (issue 14): library exceptions leaked as wrong exit codes.
TEST_CASE("cli: huge layout dims, overflowing shapes and malformed reports are input errors (exit 2)") {
  auto r = cli("layout 'bf16[99999999999999999999999]'");
  CHECK(r.code == 2);  // was: "stoull", exit 1
  CHECK(r.err.find("does not fit in 64 bits") != std::string::npos);
  r = cli("layout 'bf16[18446744073709551615,18446744073709551615]'");
  CHECK(r.code == 2);  // was: 0 B, exit 0
  std::string t =
      write_text("overflow_shape.jsonl",
                 "{\"op\":\"alloc\",\"id\":1,\"size\":0,\"shape\":[4294967296,4294967296],\"dtype\":\"f32\"}\n");
  r = cli("run " + t);
  CHECK(r.code == 2);  // was: the element count wrapped to 0 and the alloc was accepted
  CHECK(r.err.find("overflow_shape.jsonl:1: shape: ") != std::string::npos);
  std::string bad = write_text("not_a_report.json", "{\"fragsim_report\": 1, \"ooms\": null}");
  r = cli("validate --sim " + bad + " --real " + bad);
  CHECK(r.code == 2);  // was: exit 3 with a raw JSON-library message
  CHECK(r.err.find("not_a_report.json: ") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("cli: no progress line unless stderr is a terminal or --progress asks") {
  const std::string t = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";
  const std::string manifest =
      fragsim::test::write_text("progress.manifest", t + " --policy best-fit\n" + t + " --policy xla-bfc\n");
  for (const std::string& cmd :
       {"run " + t, "compare " + t, "sweep --policy xla-bfc --find min-mem-fraction " + t, "batch " + manifest}) {
    auto r = fragsim::test::cli(cmd);
    INFO(cmd);
    CHECK(r.code == 0);
    CHECK(r.err.empty());
  }
  auto batch_both = fragsim::test::cli("batch " + manifest + " --progress --no-progress");
  CHECK(batch_both.code == 2);
  CHECK(batch_both.err.find("--progress and --no-progress") != std::string::npos);
  auto both = fragsim::test::cli("run " + t + " --progress --no-progress");
  CHECK(both.code == 2);
  CHECK(both.err.find("--progress and --no-progress") != std::string::npos);
  // --progress draws on stderr only: standard output and the report are what they are without it.
  std::string a = fragsim::test::tmp_path("p1.json"), b = fragsim::test::tmp_path("p2.json");
  auto with = fragsim::test::cli("run " + t + " --progress --json " + a);
  auto without = fragsim::test::cli("run " + t + " --json " + b);
  CHECK(with.out == without.out);
  CHECK(fragsim::test::read_text(a) == fragsim::test::read_text(b));
}

TEST_CASE("Progress: the share is the bytes read over the file's size times the passes") {
  std::string f = fragsim::test::write_text("progress.bin", std::string(100000, 'x'));
  fragsim::Progress p(false, "run", f, 2);
  CHECK(p.line().find("0% of progress.bin") != std::string::npos);
  auto src = fragsim::open_source(f);
  char buf[4096];
  while (src->read(buf, sizeof buf)) {
  }
  CHECK(p.line().find("50% of progress.bin") != std::string::npos);  // one pass of two
  p.stage("pass 2");                                                 // a new pass starts from 0
  CHECK(p.line().find("fragsim run: pass 2 · 0% of progress.bin") != std::string::npos);
  // Several traces (a batch): their sizes add up, each as often as it is read; counted, not named.
  std::string g = fragsim::test::write_text("progress2.bin", std::string(300000, 'y'));
  fragsim::Progress q(false, "batch", {{f, 1}, {g, 1}, {f, 2}});
  CHECK(q.line().find("0% of 2 traces") != std::string::npos);
  auto src2 = fragsim::open_source(g);
  while (src2->read(buf, sizeof buf)) {
  }
  CHECK(q.line().find("50% of 2 traces") != std::string::npos);  // 300,000 of 600,000 bytes
}

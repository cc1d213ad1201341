// Hardening, fourth round (issue 50): the newer surfaces — rank and host sets, exports, check per
// device, every output path, signals and standard output. One test per class of the audit, each a
// reproducer of it with variants (other depths, devices, signals, paths, sets); the comment before
// each case says what happened before. The Python module's side is in tests/python/test_fragsim.py
// (class Hardening).
#include <fmt/format.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim_helpers.h"
#include "snapshot_check.h"
#include "test_util.h"
#include "traces/trace_reader.h"
#include "xprof_synth.h"

using namespace fragsim;
using namespace fragsim::test;
namespace fs = std::filesystem;

namespace {

// Exit 2 with one line on stderr naming `what`.
void check_refused(const CliResult& r, const std::string& what) {
  INFO("stderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(what) != std::string::npos);
}

// A fresh, empty folder for one case.
std::string fresh_dir(const std::string& name) {
  std::string d = tmp_path(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The names in a folder (links included), sorted.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// JSON nested `depth` deep: arrays, or objects {"a": ...}.
std::string nested_json(size_t depth, bool objects) {
  std::string s;
  s.reserve(depth * 8);
  for (size_t i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
  s += "1";
  for (size_t i = 0; i < depth; ++i) s += objects ? "}" : "]";
  return s;
}

// A JSONL trace from its lines.
std::string trace_of(const std::string& name, const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return write_text(name, s);
}

}  // namespace

// Before: a report, shard, hardware or calls file nested ~150,000 deep (400 KB) ended check, diff,
// merge, run --hw and validate with SIGSEGV: the JSON parsed, and the first recursive copy of it
// overflowed the stack.
TEST_CASE("nesting: a JSON input nested deeper than 200 levels is an input error in every command that reads one") {
  const std::string dir = fresh_dir("deepjson");
  const std::string report = cli("run " + kSample + " --json " + dir + "/r.json").code == 0 ? dir + "/r.json" : "";
  REQUIRE(!report.empty());
  for (size_t depth : {201, 5000, 150000})
    for (bool objects : {false, true}) {
      INFO(depth << (objects ? " objects" : " arrays"));
      const std::string deep = write_text("deep.json", nested_json(depth, objects));
      // A report whose trace header echoes the deep value: the schema holds, the nesting does not.
      auto r = nlohmann::json::parse(read_text(report));
      std::string text = r.dump();
      text.replace(text.find("\"trace\":{"), 9, "\"trace\":{\"deep\":" + nested_json(depth, objects) + ",");
      const std::string deep_report = write_text("deep_report.json", text);
      for (const std::string& args :
           {"check --baseline " + report + " --current " + deep,
            "check --baseline " + deep_report + " --current " + report, "diff " + report + " " + deep_report,
            "diff " + deep + " " + report, "merge " + deep, "run " + kSample + " --hw " + deep})
        check_refused(cli(args), "nested deeper than 200 levels");
    }
  // Within the bound a file is read as before (and the report still passes against itself).
  CHECK(cli("check --baseline " + report + " --current " + report).code == 0);
  CHECK_NOTHROW(parse_json(nested_json(200, true), "ok.json"));
  CHECK_THROWS_AS(parse_json(nested_json(202, false), "deep.json", 7), InputError);
}

// Before: an 88-byte trace with one allocation on device 4294967294 made --export-snapshot write a
// list per device number (about 8.6 GB, for minutes); device 4294967295 wrapped the count to 0 and
// the export silently lost every event; an export on device 70,000 was refused by fragsim's own
// reader (segments past device 65535).
TEST_CASE("export: device numbers beyond the devices limit are refused before any output, within it read back") {
  const std::string dir = fresh_dir("exportdev");
  for (std::uint64_t device :
       {std::uint64_t{4294967294}, std::uint64_t{4294967295}, std::uint64_t{70000}, std::uint64_t{257}}) {
    INFO(device);
    const std::string t =
        trace_of("dev.jsonl", {fmt::format("{{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"device\":{}}}", device)});
    fs::remove_all(dir);
    fs::create_directories(dir);
    check_refused(cli(fmt::format("run {} --policy best-fit --json {d}/r.json --html {d}/r.html --export-snapshot "
                                  "{d}/s.pickle",
                                  t, fmt::arg("d", dir))),
                  "--limit devices=N raises it");
    CHECK(listing(dir).empty());  // nothing written, no temporary left
  }
  // Raised, the export of device 70,000 is written and read back by fragsim's own reader: the
  // same allocation on the same device.
  const std::string t = trace_of("dev70k.jsonl", {"{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"device\":70000}",
                                                  "{\"op\":\"free\",\"id\":1,\"device\":70000}"});
  REQUIRE(
      cli(fmt::format("run {} --policy best-fit --limit devices=none --export-snapshot {}/s.pickle", t, dir)).code ==
      0);
  auto back = cli(fmt::format("info {}/s.pickle --json -", dir));
  REQUIRE(back.code == 0);
  auto j = nlohmann::json::parse(back.out);
  REQUIRE(j["devices"].size() == 1);
  CHECK(j["devices"][0]["device"] == 70000);
  CHECK(j["devices"][0]["peak_requested_bytes"] == 4096);
  CHECK(j["allocs"] == 1);
  CHECK(j["frees"] == 1);
  // A device past 32 bits on the command line is refused, not clamped to 4294967295.
  check_refused(cli("run " + kSample + " --failed-alloc 4294967296:1GiB"), "beyond the 32-bit device ordinals");
  check_refused(cli("run " + kSample + " --failed-alloc 18446744073709551615:1GiB"), "DEVICE");
  check_refused(cli("run " + kSample + " --failed-alloc 4294967295:1GiB"), "device 4294967295 is not in the trace");
  CHECK(cli("run " + kSample + " --failed-alloc 0:1GiB --policy best-fit").code == 0);
}

// Before: an output was checked against each input as a whole: a member of a rank set given as
// several files or a comma list, a file two levels down an input folder (or a link to one), the
// manifest merge reads, a read-only file and the target of a link planted in another folder were
// all replaced.
TEST_CASE("outputs: never a file the command reads, a read-only file, or the target of a link leaving its folder") {
  const std::string dir = fresh_dir("guard");
  const std::string r0 = dir + "/snapshot_rank0.pickle", r1 = dir + "/snapshot_rank1.pickle";
  fs::copy_file(test_data("two_devices.pickle"), r0);
  fs::copy_file(test_data("two_devices.pickle"), r1);
  const std::string pickle = read_text(r0);
  // Each member of a set, given as several files or as one comma list, through a link to it too.
  fs::create_symlink(r1, dir + "/link_to_rank1.json");
  for (const std::string& out : {r0, r1, dir + "/link_to_rank1.json"}) {
    INFO(out);
    check_refused(cli("run " + r0 + " " + r1 + " --json " + out), "input of this command");
    check_refused(cli("run " + r0 + "," + r1 + " --json " + out), "input of this command");
    check_refused(cli("compare " + r0 + "," + r1 + " --json " + out), "input of this command");
    check_refused(cli("convert " + r0 + "," + r1 + " " + out), "");
  }
  CHECK(read_text(r0) == pickle);
  CHECK(read_text(r1) == pickle);
  // A file at any depth under an input folder, and a link to it from elsewhere.
  const std::string ranks = dir + "/ranks";
  fs::create_directories(ranks + "/a/b");
  fs::copy_file(test_data("two_devices.pickle"), ranks + "/snapshot_rank0.pickle");
  const std::string buried = ranks + "/a/b/notes.txt";
  std::ofstream(buried) << "keep\n";
  fs::create_symlink(buried, dir + "/to_buried.json");
  for (const std::string& out : {buried, dir + "/to_buried.json", ranks + "/snapshot_rank0.pickle"}) {
    INFO(out);
    check_refused(cli("run " + ranks + " --json " + out), "");
  }
  CHECK(read_text(buried) == "keep\n");
  CHECK(cli("run " + ranks + " --json " + ranks + "/a/new_report.json").code == 0);  // a new file there is fine
  // The manifest merge reads (named inside the shard).
  const std::string m = dir + "/m.txt";
  std::ofstream(m) << kSample << " --policy best-fit\n";
  REQUIRE(cli("batch " + m + " --json " + dir + "/shard.json").code == 0);
  const std::string manifest = read_text(m);
  check_refused(cli("merge " + dir + "/shard.json --json " + m), "input of this command");
  CHECK(read_text(m) == manifest);
  // A read-only file, whoever runs this (root included), and a new file in a read-only folder.
  const std::string ro = dir + "/readonly.json";
  std::ofstream(ro) << "precious\n";
  fs::permissions(ro, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  check_refused(cli("run " + kSample + " --json " + ro), "read-only");
  check_refused(cli("check --baseline " + dir + "/shard.json --current " + dir + "/shard.json --markdown " + ro),
                "read-only");
  CHECK(read_text(ro) == "precious\n");
  const std::string ro_dir = dir + "/ro";
  fs::create_directories(ro_dir);
  fs::permissions(ro_dir, fs::perms::owner_read | fs::perms::owner_exec);
  check_refused(cli("run " + kSample + " --json " + ro_dir + "/new.json"), "read-only");
  fs::permissions(ro_dir, fs::perms::owner_all);
  CHECK(listing(ro_dir).empty());
  // A link planted where an output goes, to a file in another folder: never written through (the
  // shell would follow it; a report must not replace ~/.bashrc). One within its folder is followed.
  const std::string elsewhere = fresh_dir("guard_elsewhere") + "/victim.txt";
  std::ofstream(elsewhere) << "victim\n";
  for (const std::string& target : {elsewhere, std::string("../guard_elsewhere/victim.txt")}) {
    for (const char* name : {"/planted.json", "/planted.jsonl"}) {
      fs::remove(dir + name);
      fs::create_symlink(target, dir + name);
    }
    for (const char* opt : {"--json", "--html", "--placements", "--perfetto"})
      check_refused(cli("run " + kSample + " " + opt + " " + dir + "/planted.json"), "another folder");
    check_refused(cli("gen random -o " + dir + "/planted.jsonl"), "another folder");
    check_refused(cli("convert " + kSample + " " + dir + "/planted.jsonl"), "another folder");
  }
  CHECK(read_text(elsewhere) == "victim\n");
  CHECK(fs::is_symlink(dir + "/planted.json"));
  // Every refusal above came before anything was written: no temporary is left in either folder.
  for (const auto& e : fs::recursive_directory_iterator(dir))
    CHECK(e.path().string().find(".tmp.") == std::string::npos);
}

// Trial 17: a descriptor open on a file (/dev/fd/3, /proc/self/fd/N) was written through, past
// every guard: `3<trace.jsonl` made the trace the report, a read-only file was replaced, and
// `3>>$GITHUB_STEP_SUMMARY` truncated the summary. Two new files spelled differently (./x and x)
// were one output written twice; merge replaced a trace its manifest names; a number beyond a
// double's range in a report was an internal error (exit 1, check's "regression"); JSON of 201
// levels passed the 200-level bound.
TEST_CASE("outputs: a descriptor or another spelling names the file it is, and every guard applies to it") {
  const std::string dir = fresh_dir("fdguard");
  const std::string trace = dir + "/t.jsonl";
  fs::copy_file(kSample, trace);
  const std::string kept = read_text(trace);
  check_refused(cli("run " + trace + " --json /dev/fd/3 3<" + trace), "input of this command");
  check_refused(cli("run " + trace + " --html /proc/self/fd/4 4<" + trace), "input of this command");
  CHECK(read_text(trace) == kept);
  const std::string ro = dir + "/ro.json";
  std::ofstream(ro) << "precious\n";
  fs::permissions(ro, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  check_refused(cli("run " + trace + " --json /dev/fd/5 5<" + ro), "read-only");
  CHECK(read_text(ro) == "precious\n");
  REQUIRE(cli("run " + trace + " --json " + dir + "/r.json").code == 0);
  const std::string summary = dir + "/summary.md";
  std::ofstream(summary) << "## earlier step\n";
  REQUIRE(std::system(("env GITHUB_STEP_SUMMARY=" + summary + " " + FRAGSIM_BINARY + " check --baseline " + dir +
                       "/r.json --current " + dir + "/r.json --markdown /dev/fd/3 3>>" + summary + " >/dev/null")
                          .c_str()) == 0);
  CHECK(read_text(summary).rfind("## earlier step\n### fragsim check: passed", 0) == 0);
  // A pipe is still written through.
  CHECK(std::system(("(" + std::string(FRAGSIM_BINARY) + " run " + trace +
                     " --json /dev/fd/3 3>&1 >/dev/null) | grep -q peak_reserved_bytes")
                        .c_str()) == 0);
  // Two new files, one spelled relative and one with ./ (from the folder itself).
  const int two = std::system(("cd " + dir + " && " + FRAGSIM_BINARY + " run t.jsonl --json ./n.json --html n.json 2>" +
                               dir + "/two.err >/dev/null")
                                  .c_str());
  CHECK(WEXITSTATUS(two) == 2);
  CHECK(read_text(dir + "/two.err").find("--json writes the same file") != std::string::npos);
  CHECK(!fs::exists(dir + "/n.json"));
  // merge: the traces its shards' manifest names.
  const std::string m = dir + "/m.txt";
  std::ofstream(m) << trace << " --policy best-fit\n";
  REQUIRE(cli("batch " + m + " --json " + dir + "/shard.json").code == 0);
  check_refused(cli("merge " + dir + "/shard.json --json " + trace), "input of this command");
  CHECK(read_text(trace) == kept);
  // ...also when the batch named its manifest and traces from their own folder and merge runs from
  // another (trial 20: the manifest and its trace were overwritten, exit 0).
  std::ofstream(dir + "/m2.txt") << "t.jsonl --policy best-fit\n";
  REQUIRE(std::system(
              ("cd " + dir + " && " + FRAGSIM_BINARY + " batch m2.txt --json shard2.json >/dev/null 2>&1").c_str()) ==
          0);
  for (const std::string& out : {trace, dir + "/m2.txt"}) {
    const std::string before = read_text(out);
    check_refused(cli("merge " + dir + "/shard2.json --json " + out), "input of this command");
    CHECK(read_text(out) == before);
  }
  // A number no double holds, in a report: an input error naming its line.
  std::string report = read_text(dir + "/r.json");
  const std::string from = "\"oom_count\": 0";
  REQUIRE(report.find(from) != std::string::npos);
  report.replace(report.find(from), from.size(), "\"oom_count\": 1e400");
  const std::string big = write_text("bignum.json", report);
  for (const std::string& args :
       {"check --baseline " + big + " --current " + dir + "/r.json", "diff " + dir + "/r.json " + big})
    check_refused(cli(args), "1e400: a number out of range");
  // At most 200 levels: 200 read, 201 refused.
  CHECK_NOTHROW(parse_json(nested_json(200, false), "ok.json"));
  CHECK_NOTHROW(parse_json(nested_json(200, true), "ok.json"));
  CHECK_THROWS_AS(parse_json(nested_json(201, false), "deep.json"), InputError);
  CHECK_THROWS_AS(parse_json(nested_json(201, true), "deep.json"), InputError);
}

// Before: `check --markdown "$GITHUB_STEP_SUMMARY"` (the docs' own example) replaced the summary
// that earlier steps wrote; GitHub documents the file as appended to.
TEST_CASE("outputs: the GitHub step summary is appended to, whichever command writes it") {
  const std::string dir = fresh_dir("summary");
  REQUIRE(cli("run " + kSample + " --json " + dir + "/r.json").code == 0);
  const std::string summary = dir + "/step_summary_1234";
  std::ofstream(summary) << "## earlier step\n";
  const std::string env = "GITHUB_STEP_SUMMARY=" + summary + " ";
  // cli() runs the binary directly; the variable is given through env(1).
  REQUIRE(std::system(("env " + env + FRAGSIM_BINARY + " check --baseline " + dir + "/r.json --current " + dir +
                       "/r.json --markdown " + summary + " >/dev/null")
                          .c_str()) == 0);
  REQUIRE(std::system(("env " + env + FRAGSIM_BINARY + " diff " + dir + "/r.json " + dir + "/r.json --markdown " +
                       summary + " >/dev/null")
                          .c_str()) == 0);
  const std::string text = read_text(summary);
  CHECK(text.rfind("## earlier step\n", 0) == 0);
  CHECK(text.find("### fragsim check: passed") != std::string::npos);
  CHECK(text.find("### fragsim check") < text.find("### fragsim diff"));
  // Without the variable (or naming another file), an output is replaced as always.
  const std::string other = dir + "/other.md";
  std::ofstream(other) << "old\n";
  REQUIRE(std::system(("env " + env + FRAGSIM_BINARY + " check --baseline " + dir + "/r.json --current " + dir +
                       "/r.json --markdown " + other + " >/dev/null")
                          .c_str()) == 0);
  CHECK(read_text(other).rfind("### fragsim check", 0) == 0);
}

// Before: check compared only the run's first OOM. With --keep-going, a device whose first OOM
// moved earlier while the run's first OOM (another device's) stayed passed the gate, though
// docs/report.md promises the rule for each device entry.
TEST_CASE("check: a device's first OOM moving earlier fails the gate, whichever device has the run's first OOM") {
  const std::string dir = fresh_dir("perdevice");
  auto alloc = [](int id, const char* size, int device) {
    return fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"device\":{}}}", id, size, device);
  };
  const char* small = "1048576";
  const char* huge = "107374182400";  // 100 GiB: past a 4 GiB device
  const std::string base = trace_of("pd_base.jsonl", {alloc(1, small, 0), alloc(2, huge, 0), alloc(3, small, 1),
                                                      alloc(4, small, 1), alloc(5, huge, 1)});
  const std::string cur = trace_of("pd_cur.jsonl", {alloc(1, small, 0), alloc(2, huge, 0), alloc(3, small, 1),
                                                    alloc(5, huge, 1), alloc(4, small, 1)});
  const std::string opts = " --policy best-fit --capacity 4GiB --keep-going --json ";
  REQUIRE(cli("run " + base + opts + dir + "/base.json").code == 0);
  REQUIRE(cli("run " + cur + opts + dir + "/cur.json").code == 0);
  auto b = nlohmann::json::parse(read_text(dir + "/base.json")),
       c = nlohmann::json::parse(read_text(dir + "/cur.json"));
  REQUIRE(b["oom_count"] == 2);  // the same OOM counts and the same first OOM of the run ...
  REQUIRE(c["oom_count"] == 2);
  REQUIRE(b["ooms"][0]["event_index"] == c["ooms"][0]["event_index"]);
  auto r = cli("check --baseline " + dir + "/base.json --current " + dir + "/cur.json --json -");
  CHECK(r.code == 1);  // ... but device 1 runs out at event 3, not 4
  auto j = nlohmann::json::parse(r.out);
  bool flagged = false;
  for (const auto& i : j["items"])
    if (i["metric"] == "device 1 hbm.first_oom_event") {
      flagged = i["regression"].get<bool>();
      CHECK(i["baseline"] == 4);
      CHECK(i["current"] == 3);
    }
  CHECK(flagged);
  // The other way round it moved later: no regression.
  CHECK(cli("check --baseline " + dir + "/cur.json --current " + dir + "/base.json").code == 0);
  // In-process, an ooms list in any order: the earliest event is the first OOM.
  auto shuffled = c;
  for (auto& d : shuffled["devices"]) std::reverse(d["ooms"].begin(), d["ooms"].end());
  std::reverse(shuffled["ooms"].begin(), shuffled["ooms"].end());
  CHECK_FALSE(check_cmd("b.json", b, "c.json", shuffled).pass);
}

// Before: hosts of a profile directory whose captures have no device planes (the TPU runtime's
// allocators TPU:0..3 only) were numbered one device apart: 8 TPUs replayed as 5. A rank with two
// devices beside a rank with one put both ranks' work on one device.
TEST_CASE("sets: each host's and each rank's devices follow the devices the earlier ones use") {
  const std::string prof = fresh_dir("hosts") + "/prof";
  fs::create_directories(prof);
  for (int host = 0; host < 2; ++host) {
    Synth s;
    auto* line = s.line(1000 + host);
    for (int tpu = 0; tpu < 4; ++tpu) {
      s.allocator = fmt::format("TPU:{}", tpu);
      s.event(line, true, tpu * 10, 0x10000 + static_cast<std::uint64_t>(tpu) * 0x1000, 4096, 4096);
    }
    std::ofstream(fmt::format("{}/host{}.xplane.pb", prof, host), std::ios::binary) << s.space.SerializeAsString();
  }
  auto r = cli("info " + prof + " --json -");
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  std::set<std::uint64_t> devices;
  for (const auto& d : j["devices"]) devices.insert(d["device"].get<std::uint64_t>());
  CHECK(devices == std::set<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  // Ranks: rank 0 has two devices, rank 1 one; then ranks of one device each are rank N on device N.
  const std::string ranks = fresh_dir("ranks_mixed");
  fs::copy_file(test_data("two_devices.pickle"), ranks + "/snapshot_rank0.pickle");
  fs::copy_file(test_data("torch/small_mlp_97ev.pickle.zst"), ranks + "/snapshot_rank1.pickle.zst");
  r = cli("info " + ranks + " --json -");
  REQUIRE(r.code == 0);
  j = nlohmann::json::parse(r.out);
  devices.clear();
  for (const auto& d : j["devices"]) devices.insert(d["device"].get<std::uint64_t>());
  CHECK(devices.size() == 3);
  const auto& members = j["header"]["recording_set"];
  REQUIRE(members.size() == 2);
  CHECK(members[0]["devices"] == nlohmann::json({0, 1}));
  CHECK(members[1]["devices"] == nlohmann::json({2}));
  const std::string single = fresh_dir("ranks_single");
  fs::copy_file(test_data("torch/small_mlp_97ev.pickle.zst"), single + "/snapshot_rank3.pickle.zst");
  fs::copy_file(test_data("torch/small_mlp_97ev.pickle.zst"), single + "/snapshot_rank5.pickle.zst");
  j = nlohmann::json::parse(cli("info " + single + " --json -").out);
  CHECK(j["header"]["recording_set"][0]["devices"] == nlohmann::json({3}));
  CHECK(j["header"]["recording_set"][1]["devices"] == nlohmann::json({5}));
}

// Before: a static-heap run's export placed its blocks at heap offsets and its segment at another
// address, so it read back as another run; --export-snapshot was refused (ideal) only after --json
// and --html had been written.
TEST_CASE("export: every policy's export reads back as the run it came from, or is refused before any output") {
  const std::string dir = fresh_dir("roundtrip");
  for (const auto& info : test_registry().all()) {
    const std::string& policy = info.name;
    INFO(policy);
    const std::string hw = info.hardware_kind == "tpu" ? " --hw tpu-v5e" : "";
    const std::string args = fmt::format(
        "run {} --policy {}{} --json {d}/r.json --html {d}/r.html --placements "
        "{d}/p.jsonl --export-snapshot {d}/s.pickle",
        kSample, policy, hw, fmt::arg("d", dir));
    for (const auto& f : listing(dir)) fs::remove(dir + "/" + f);
    auto r = cli(args);
    if (r.code == 2) {  // refused: nothing written
      CHECK(listing(dir).empty());
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      continue;
    }
    REQUIRE(r.code == 0);
    // The placements the run made (hbm), in order, against what the export's allocations say.
    std::vector<std::tuple<std::uint32_t, std::uint64_t, Bytes>> placed;
    auto events = open_trace(kSample);
    std::vector<Event> allocs;
    Event e;
    while (events->next(e))
      if (e.op == Op::kAlloc) allocs.push_back(e);
    const auto lines = read_jsonl(dir + "/p.jsonl");
    REQUIRE(lines.size() == allocs.size());
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i]["ok"].get<bool>() && lines[i]["addr"].is_number() && allocs[i].size > 0)
        placed.emplace_back(allocs[i].device, lines[i]["addr"].get<std::uint64_t>(), allocs[i].size);
    const auto back = exported_allocs(dir + "/s.pickle");
    CHECK(back == placed);
  }
}

// Before: across two traces, buffers with no name, shape or frame were told apart by id and event
// index, which name different things in different traces: diff listed every one of them as both
// added and removed while its own table of call sites said nothing changed.
TEST_CASE("diff: unnamed buffers of two traces are matched by size, not listed as added and removed") {
  std::vector<std::string> a, b = {"{\"op\":\"alloc\",\"id\":900,\"size\":256}", "{\"op\":\"free\",\"id\":900}"};
  for (int i = 0; i < 5; ++i) {
    const std::string line = fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{}}}", i + 1, (i + 1) * MiB);
    a.push_back(line);
    b.push_back(line);
  }
  b.push_back("{\"op\":\"alloc\",\"id\":6,\"size\":8388608}");  // one more, larger than the rest: added
  const std::string ta = trace_of("unnamed_a.jsonl", a), tb = trace_of("unnamed_b.jsonl", b);
  auto r = cli("diff " + ta + " " + tb + " --policy best-fit --json -");
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK_FALSE(j["same_trace"].get<bool>());
  const auto& bufs = j["buffers"];
  CHECK(bufs["removed"].empty());
  REQUIRE(bufs["added"].size() == 1);
  CHECK(bufs["added"][0]["block_bytes"].get<std::uint64_t>() >= 8 * MiB);
  CHECK(bufs["grown"].empty());
  CHECK(bufs["shrunk"].empty());
  // One trace against itself under two policies: still matched by id (the same events).
  r = cli("diff " + ta + " --policies best-fit,first-fit --json -");
  REQUIRE(r.code == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["buffers"]["added"].empty());
  CHECK(j["buffers"]["removed"].empty());
}

// Before: SIGXCPU, SIGALRM, SIGUSR1 and the other signals that end a process by default (all but
// INT, TERM, HUP, QUIT, PIPE and the crash signals) left the output's 100-290 MB temporary behind.
TEST_CASE("signals: every signal that ends the process by default leaves no temporary behind") {
  const std::string dir = fresh_dir("sigall");
  for (const char* sig :
       {"XCPU", "ALRM", "USR1", "USR2", "VTALRM", "PROF", "IO", "PWR", "STKFLT", "RTMIN+3", "RTMAX"}) {
    INFO(sig);
    const std::string out = dir + "/big.jsonl";
    const std::string cmd = std::string("timeout -s ") + sig + " 0.4 " + FRAGSIM_BINARY +
                            " gen random --set events=100000000 -o " + out + " >/dev/null 2>&1";
    const int rc = std::system(cmd.c_str());
    CHECK(WEXITSTATUS(rc) == 124);  // ended by the signal, as asked
    CHECK(listing(dir).empty());
  }
  // A signal inherited as ignored stays ignored (nohup's SIGHUP): the run is not ended by it.
  const std::string out = dir + "/small.jsonl";
  const std::string cmd = std::string("trap '' USR2; ") + FRAGSIM_BINARY + " gen random --set events=2000000 -o " +
                          out + " & p=$!; sleep 0.2; kill -USR2 $p; wait $p";
  CHECK(std::system(cmd.c_str()) == 0);
  CHECK(listing(dir) == std::vector<std::string>{"small.jsonl"});
}

// Before: a write error on standard output (`> /dev/full`) was ignored: exit 0, the answer lost.
TEST_CASE("standard output: a write error is exit 3 with one line, whatever the command printed") {
  if (!fs::exists("/dev/full")) return;
  for (const std::string& args : std::vector<std::string>{
           "run " + kSample, "info " + kSample, "list", "--help", "layout --hw tpu-v5e bf16[8,128]",
           "run " + kSample + " --json -", "compare " + kSample + " --policies best-fit,ideal"}) {
    INFO(args);
    const std::string err = tmp_path("full.err");
    const int rc = std::system((std::string(FRAGSIM_BINARY) + " " + args + " >/dev/full 2>" + err).c_str());
    CHECK(WEXITSTATUS(rc) == 3);
    const std::string text = read_text(err);
    CHECK(std::count(text.begin(), text.end(), '\n') == 1);
    CHECK(text.find("standard output: write error") != std::string::npos);
  }
  CHECK(cli("run " + kSample).code == 0);
}

// Before: a file whose name is not UTF-8 (a file name in another encoding, as Linux allows) ended
// every command that writes JSON with an internal error (exit 1, nlohmann's "invalid UTF-8 byte"):
// run, compare, sweep, info, diff, plan, check and merge --json, and convert of a set whose header
// lists its files. Now every JSON text fragsim makes writes such a name with U+FFFD in its place.
TEST_CASE("names: a file whose name is not UTF-8 is read and reported by every command that writes JSON") {
  const std::string dir = fresh_dir("notutf8");
  const std::string bad = dir +
                          "/a\x80"
                          "b.jsonl",
                    rd = dir + "/rd";
  fs::copy_file(kSample, bad);
  fs::create_directories(rd);
  fs::copy_file(test_data("two_devices.pickle"), rd + "/snapshot_rank0.pickle");
  fs::copy_file(test_data("torch/small_mlp_97ev.pickle.zst"), rd + "/snapshot_rank1\x80.pickle.zst");
  std::ofstream(dir + "/m.txt") << bad << " --policy best-fit\n";
  const std::string replaced = "\xEF\xBF\xBD";  // U+FFFD
  const std::string q = "'" + bad + "'";
  for (const std::string& args :
       {"run " + q + " --policy best-fit --json -", "info " + q + " --json -", "info " + rd + " --json -",
        "compare " + q + " --policies best-fit,ideal --json -",
        "sweep " + q + " --policy best-fit --find min-capacity --json -",
        "diff " + q + " " + q + " --policy best-fit --json -", "plan " + q + " --json -",
        "run " + rd + " --json " + dir + "/r.json",
        "check --baseline " + dir + "/r.json --current " + dir + "/r.json --json -",
        "convert " + rd + " " + dir + "/set.jsonl", "info " + dir + "/set.jsonl --json -",
        "batch " + dir + "/m.txt --json " + dir + "/shard.json", "merge " + dir + "/shard.json --json -"}) {
    INFO(args);
    auto r = cli(args);
    CHECK(r.code == 0);
    CHECK(r.err.find("internal error") == std::string::npos);
    if (r.code != 0 || r.out.empty() || r.out[0] != '{') continue;
    CHECK_NOTHROW(nlohmann::json::parse(r.out));
    if (args.rfind("check", 0) != 0) CHECK(r.out.find(replaced) != std::string::npos);  // check names no file
  }
  CHECK(dump_json(nlohmann::json("a\x80"
                                 "b")) == "\"a" + replaced + "b\"");
}

// Before: a rank past six digits was read as its first six (snapshot_rank1234567 as rank 123456,
// two such ranks as one and numbered in file order).
TEST_CASE("sets: a rank is the whole number its file's name states") {
  const std::string ranks = fresh_dir("ranks_long");
  fs::copy_file(test_data("torch/small_mlp_97ev.pickle.zst"), ranks + "/snapshot_rank1234567.pickle.zst");
  fs::copy_file(test_data("torch/small_mlp_97ev.pickle.zst"), ranks + "/snapshot_rank1234568.pickle.zst");
  auto r = cli("info " + ranks + " --json -");
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  const auto& members = j["header"]["recording_set"];
  REQUIRE(members.size() == 2);
  CHECK(members[0]["devices"] == nlohmann::json({1234567}));
  CHECK(members[1]["devices"] == nlohmann::json({1234568}));
  // Past the 32-bit device ordinals a name states no rank: the files are numbered in order.
  const std::string huge = fresh_dir("ranks_huge");
  fs::copy_file(test_data("torch/small_mlp_97ev.pickle.zst"), huge + "/snapshot_rank4294967296.pickle.zst");
  fs::copy_file(test_data("torch/small_mlp_97ev.pickle.zst"), huge + "/snapshot_rank0.pickle.zst");
  j = nlohmann::json::parse(cli("info " + huge + " --json -").out);
  std::set<std::uint64_t> devices;
  for (const auto& m : j["header"]["recording_set"])
    for (const auto& d : m["devices"]) devices.insert(d.get<std::uint64_t>());
  CHECK(devices == std::set<std::uint64_t>{0, 1});
}

// Before: an output in a folder that does not exist (or a path ending in '/') was found out only
// when it was written, after the command's work: exit 3, the run lost. It is refused first, as a
// read-only one is, by every command and the Python module's writers alike.
TEST_CASE("outputs: a file in a folder that does not exist is refused before the command runs") {
  const std::string dir = fresh_dir("nofolder");
  std::ofstream(dir + "/file.txt") << "keep\n";
  REQUIRE(cli("run " + kSample + " --json " + dir + "/r.json").code == 0);
  for (const std::string& out : {dir + "/missing/r.json", dir + "/missing/", dir + "/file.txt/r.json"})
    for (const std::string& args :
         {"run " + kSample + " --policy best-fit --json " + out, "run " + kSample + " --perfetto " + out,
          "compare " + kSample + " --policies best-fit,ideal --html " + out,
          "check --baseline " + dir + "/r.json --current " + dir + "/r.json --markdown " + out,
          "convert " + kSample + " " + out + (out.back() == '/' ? "" : ".jsonl"), "gen random -o " + out + ".jsonl"}) {
      INFO(args);
      auto r = cli(args);
      check_refused(r, out.back() == '/'                           ? "does not exist"
                       : out.find("file.txt") != std::string::npos ? "is not a folder"
                                                                   : "does not exist");
    }
  CHECK(listing(dir) == std::vector<std::string>{"file.txt", "r.json"});
  CHECK(read_text(dir + "/file.txt") == "keep\n");
}

// Before: a comma-separated set with a piece that is no snapshot or profiler trace (a folder, a
// .jsonl) was opened as one file of that whole name: 'cannot open' (exit 3) naming no piece; the
// same file given twice was replayed as two ranks.
TEST_CASE("sets: a list names the piece that is not a recording and refuses one file given twice") {
  const std::string dir = fresh_dir("oddlists");
  fs::create_directories(dir + "/rd");
  fs::copy_file(test_data("two_devices.pickle"), dir + "/rd/snapshot_rank0.pickle");
  fs::copy_file(test_data("two_devices.pickle"), dir + "/a.pickle");
  fs::copy_file(kSample, dir + "/t.jsonl");
  fs::create_symlink(dir + "/a.pickle", dir + "/link.pickle");
  const std::string a = dir + "/a.pickle";
  check_refused(cli("info " + a + "," + dir + "/rd"), "a set inside a set");
  check_refused(cli("info " + dir + "/t.jsonl," + a), "t.jsonl: not a PyTorch snapshot or profiler trace");
  check_refused(cli("run " + a + "," + dir + "/missing.jsonl --json " + dir + "/r.json"), "missing.jsonl: not a");
  // Trial 10, finding 8: a list whose last piece's name is another format's (a capture, an .fstrace,
  // a JAX memory profile, a dumped module) was opened as one file of that format: exit 3, 'cannot
  // open' naming the whole list. In either order the piece is named.
  const std::string capture = test_data("xprof/tracelens_mi300_jax08_gemm.xplane.pb.zst");
  for (const std::string& other : {capture, dir + "/t.fstrace", dir + "/m.prof", dir + "/h.hlo_proto.pb"}) {
    const std::string piece = fs::path(other).filename().string() + ": not a PyTorch snapshot or profiler trace";
    check_refused(cli("info " + a + "," + other), piece);
    check_refused(cli("info " + other + "," + a), piece);
  }
  for (const std::string& twice : {a + "," + a, a + "," + dir + "/./a.pickle", a + "," + dir + "/link.pickle"})
    check_refused(cli("info " + twice), "given twice");
  check_refused(cli("run " + a + " " + a), "given twice");
  CHECK(cli("info " + a + "," + dir + "/rd/snapshot_rank0.pickle").code == 0);  // two files alike are two ranks
}

// Before: diff read what only it needs of a report (each device entry, the peak's event, buffers
// and sites) without checking it: a report whose device entry was a number, or whose peak's event
// was null or a string, ended diff (its text, Markdown and page) with an internal error (exit 1,
// a JSON library's message): 624 of 4,290 forged reports in a sweep of every key. Found by the
// Python fuzzer at FRAGSIM_FUZZ_SCALE=5.
TEST_CASE("diff: a report holding what diff cannot read is an input error naming it") {
  const std::string dir = fresh_dir("forged");
  REQUIRE(cli("run " + kSample + " --policy best-fit --json " + dir + "/r.json").code == 0);
  const auto good = nlohmann::json::parse(read_text(dir + "/r.json"));
  std::vector<nlohmann::json> forged(5, good);
  forged[0]["devices"] = nlohmann::json::array({1});
  forged[1]["devices"] = nlohmann::json::array({nlohmann::json::array({1})});
  forged[2]["at_peak_allocated"] = nullptr;
  forged[3]["at_peak_allocated"]["event_index"] = nullptr;
  forged[4]["at_peak_allocated"]["event_index"] = "s";
  for (size_t i = 0; i < forged.size(); ++i) {
    INFO(i);
    const std::string f = write_text(fmt::format("forged{}.json", i), forged[i].dump());
    for (const std::string& args :
         {"diff " + dir + "/r.json " + f, "diff " + f + " " + dir + "/r.json",
          "diff " + dir + "/r.json " + f + " --markdown " + dir + "/d.md --html " + dir + "/d.html"})
      check_refused(cli(args), f + ": not a fragsim report as diff reads one");
  }
  CHECK(listing(dir) == std::vector<std::string>{"r.json"});
  CHECK(cli("diff " + dir + "/r.json " + dir + "/r.json").code == 0);
}

// Trial 17 #6: a --hw file naming a space twice (a second 1 GiB "hbm") was accepted: the first was
// used, silently, and the report's hardware listed both.
TEST_CASE("hardware files: each memory space is named once") {
  const std::string dir = fresh_dir("hwdup");
  auto hw =
      nlohmann::json::parse(read_text(std::string(FRAGSIM_SOURCE_DIR) + "/hardware_models/presets/h100-80g.json"));
  REQUIRE(hw["spaces"].is_array());
  nlohmann::json twice = hw["spaces"][0];
  twice["capacity_bytes"] = std::uint64_t{1} << 30;
  hw["spaces"].push_back(twice);
  const std::string file = write_text("hw_twice.json", hw.dump());
  check_refused(cli("run " + kSample + " --hw " + file), "given twice (each space once)");
  CHECK(cli("run " + kSample + " --hw h100-80g").code == 0);
}

// Every input answered correctly or refused cleanly (issue 15): valid edge cases, impossible
// sizes, hostile files within bounded memory, options, output paths, the CI gate, lossless
// conversion, and end-to-end fuzzing of every format through every policy. Each reproducer of the
// audit is a test here; the comment says what happened before.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/commands/trace_info.h"
#include "sim_helpers.h"
#include "traces/generators.h"
#include "traces/pickle.h"
#include "traces/trace_reader.h"
#include "traces/trace_writer.h"

using namespace fragsim;
using namespace fragsim::test;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> policy_names() {
  std::vector<std::string> v;
  for (const auto& i : test_registry().all()) v.push_back(i.name);
  return v;
}

std::string pickle_fixture(const std::string& name) {
  return std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/torch/" + name + ".zst";
}

}  // namespace

// Before: segmentation fault in xla-bfc, platform, cuda-async, torch-caching and static-heap.
TEST_CASE("zero-size buffers occupy nothing, with other buffers live and ids recycled — every policy") {
  TraceBuilder t;
  t.alloc(1, 4096).alloc(2, 0).alloc(3, 8192).free(2).alloc(2, 0).alloc(4, 0).free(4).free(2).alloc(2, 100).free(1);
  t.alloc(1, 0).free(3).free(1).free(2);
  for (const auto& p : policy_names()) {
    INFO(p);
    auto r = simulate({.name = "zero_" + p,
                       .text = t.text,
                       .policy = p,
                       .capacity = "1GiB",
                       .reserve = "0",
                       .hw = p == "tpu-padded" || p == "static-heap" ? "tpu-v5e" : "h100-80g"});
    CHECK(r.result.completed);
    CHECK(r.result.peak_requested == 4096 + 8192 + 100);
    CHECK(r.placements[1]["ok"] == true);
    CHECK(r.placements[1]["block_bytes"] == 0);
    CHECK(r.placements[1]["addr"].is_null());
    // Recycled id 2: a real buffer now, not sharing an address with a live one.
    const auto& p2 = r.placements[6];
    if (!p2["addr"].is_null())
      for (int i : {0, 2})
        if (!r.placements[i]["addr"].is_null()) CHECK(p2["addr"] != r.placements[i]["addr"]);
  }
}

// Before: one alloc of 2^64 − 1 bytes "completed, no OOM" on an 80 GB GPU (six policies), and
// crashed torch-caching with expandable segments.
TEST_CASE("an impossible size is an OOM for every policy, never a fit or a crash") {
  TraceBuilder t;
  t.alloc(1, 1 << 20).alloc(2, ~std::uint64_t{0}).alloc(3, (~std::uint64_t{0}) - 4096);
  std::vector<std::pair<std::string, nlohmann::json>> cases;
  for (const auto& p : policy_names()) cases.push_back({p, nlohmann::json::object()});
  cases.push_back({"torch-caching", {{"alloc_conf", "expandable_segments:True"}}});
  cases.push_back({"torch-caching", {{"alloc_conf", "roundup_power2_divisions:4"}}});
  cases.push_back({"xla-bfc", {{"preallocate", false}}});
  for (const auto& [p, cfg] : cases) {
    INFO(p << " " << cfg.dump());
    auto r =
        simulate({.name = "huge", .text = t.text, .policy = p, .config = cfg, .capacity = "80GiB", .keep_going = true});
    // static-heap plans the whole program: with the two huge buffers it fits nowhere, so the 1 MiB
    // buffer (placed above them) fails too, as a compiled program would.
    CHECK(r.result.ooms.size() == (p == "static-heap" ? 3 : 2));
    for (const auto& o : r.result.ooms) CHECK_FALSE(o.fragmentation);  // capacity, whatever is free
    CHECK(r.result.peak_requested == ~std::uint64_t{0});               // saturates, never wraps
  }
}

// Before: an 8 EiB shaped array padded to 1 KiB and "ran" on a 16 GiB TPU.
TEST_CASE("an enormous shaped array is an OOM on a TPU, not a 1 KiB buffer") {
  std::string line = nlohmann::json({{"op", "alloc"},
                                     {"id", 1},
                                     {"size", std::uint64_t{1} << 63},
                                     {"shape", {std::uint64_t{1} << 62}},
                                     {"dtype", "bf16"}})
                         .dump();
  for (const char* p : {"tpu-padded", "static-heap"}) {
    INFO(p);
    auto r = simulate({.name = std::string("eib_") + p,
                       .text = line + "\n",
                       .policy = p,
                       .capacity = "",
                       .keep_going = true,
                       .reserve = "0",
                       .hw = "tpu-v5e"});
    CHECK(r.result.ooms.size() == 1);
  }
}

TEST_CASE("option values are validated before use — exit 2, never a signal") {
  std::string t = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";
  // Before: segmentation fault.
  CHECK(cli("run " + t + " --env 'PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:[256:'").code == 2);
  CHECK(cli("run " + t + " --env 'PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:['").code == 2);
  CHECK(cli("run " + t + " --env 'PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:'").code == 2);
  // Before: SIGFPE.
  CHECK(cli("sweep " + t + " --find min-mem-fraction --jobs -1").code == 2);
  CHECK(cli("gen llm-serving --set grow_tokens=0 -o " + tmp_path("gen_refused.jsonl")).code == 2);
  // Before: never ended, filling the disk.
  CHECK(cli("gen llm-serving --set concurrency=0 -o " + tmp_path("gen_refused.jsonl")).code == 2);
  CHECK_FALSE(fs::exists(tmp_path("gen_refused.jsonl")));
  // Before: NaN and 1e300 were cast to sizes silently.
  CHECK(cli("run " + t + " --policy xla-bfc --set mem_fraction=nan").code == 2);
  CHECK(cli("run " + t + " --policy torch-caching --set memory_fraction=1e300").code == 2);
  CHECK(cli("run " + t + " --env XLA_PYTHON_CLIENT_MEM_FRACTION=1e300").code == 2);
  CHECK(cli("run " + t + " --policy cuda-async --set mem_fraction=-inf").code == 2);
#ifdef FRAGSIM_REPLAY_BINARY
  CliResult r = {0, "", ""};
  std::string cmd = std::string(FRAGSIM_REPLAY_BINARY) + " " + t + " --dry-run --sample-every 0 -o " + tmp_path("rp");
  CHECK(std::system((cmd + " >/dev/null 2>&1").c_str()) == 2 << 8);  // before: SIGFPE
#endif
}

// Before: a 511-byte pickle took over 4 GiB; 40 MB of NONE opcodes 5.9 GB; "device":100000000
// 11.7 GB; a 256 KiB .zst expanding to one 8 GiB line 6 GB; a deep header overflowed the stack.
TEST_CASE("hostile files are refused in bounded memory — or answered, when they are valid") {
  const long kLimitKiB = 400 * 1024;
  // Billion laughs: 30 levels of 8 references to the previous list (a protocol 2 pickle by hand):
  // {"device_traces": [[]], "segments": [], "allocator_settings": x30}, x0 = [0], x(i+1) = [xi] * 8.
  auto str = [](const std::string& v) {
    std::string o = "X";
    for (int b = 0; b < 4; ++b) o += static_cast<char>((v.size() >> (8 * b)) & 0xff);
    return o + v;
  };
  std::string laughs = std::string("\x80\x02}(") + str("device_traces") + "]]a" + str("segments") + "]" +
                       str("allocator_settings") + "]K" + std::string(1, '\0') + "a";
  std::string level = std::string("q\x01") + "0(";            // memo[1] = top, pop it, mark
  for (int r = 0; r < 8; ++r) level += std::string("h\x01");  // push memo[1] eight times
  level += "l";                                               // a list of the eight
  for (int i = 0; i < 30; ++i) laughs += level;
  laughs += "u.";
  std::string lp = write_text("laughs.pickle", laughs);
  auto m = run_measured(fragsim_cmd("info " + lp));
  CHECK(m.code == 2);
  CHECK(m.maxrss_kib < kLimitKiB);
  // 40 MB of NONE opcodes (then STOP with a malformed stack).
  std::string nones = "\x80\x04" + std::string(40u << 20, 'N') + ".";
  m = run_measured(fragsim_cmd("info " + write_text("nones.pickle", nones)));
  CHECK(m.code == 2);
  CHECK(m.maxrss_kib < kLimitKiB);
  // A valid trace on device 100000000: answered, in little memory.
  std::string dev = write_text("bigdev.jsonl",
                               "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"device\":100000000}\n"
                               "{\"op\":\"alloc\",\"id\":1,\"size\":4096,\"device\":7}\n");
  m = run_measured(fragsim_cmd("run " + dev + " --policy xla-bfc --json " + tmp_path("bigdev.json")));
  CHECK(m.code == 0);
  CHECK(m.maxrss_kib < kLimitKiB);
  auto rep = nlohmann::json::parse(read_text(tmp_path("bigdev.json")));
  CHECK(rep["devices"].size() == 2);
  CHECK(rep["devices"][1]["device"] == 100000000);
  // One 80 MiB line, compressed to a few KiB.
  {
    AtomicFile f(tmp_path("longline.jsonl.zst"), true);
    f.write("{\"op\":\"mark\",\"name\":\"");
    std::string chunk(1 << 20, 'a');
    for (int i = 0; i < 80; ++i) f.write(chunk);
    f.write("\"}\n");
    f.commit();
  }
  m = run_measured(fragsim_cmd("info " + tmp_path("longline.jsonl.zst")));
  CHECK(m.code == 2);
  CHECK(m.maxrss_kib < kLimitKiB);
  // A header nested 100 000 deep (info and convert).
  std::string deep = "{\"fragsim_trace\":1,\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}\n";
  std::string dp = write_text("deep.jsonl", deep + "{\"op\":\"mark\"}\n");
  CHECK(run_measured(fragsim_cmd("info " + dp)).code == 2);
  CHECK(run_measured(fragsim_cmd("convert " + dp + " " + tmp_path("deep.fstrace"))).code == 2);
}

// Before: 80 k crafted colliding ids took 12.6 s, an 80 k-key pickle dict 12.8 s (quadratic).
TEST_CASE("crafted collisions and huge dicts stay linear: answered") {
  std::string ids;
  for (std::uint64_t i = 0; i < 80000; ++i) ids += fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":8}}\n", i << 40);
  // What `fragsim info` prints.
  CHECK(trace_info_text(trace_info(write_text("collide.jsonl", ids), false)).find("80000 live at end") !=
        std::string::npos);
  // {"device_traces": [[]], "segments": [], "k0": 0, ..., "k79999": 0}
  std::string d =
      "\x80\x04}(\x8c\x0d"
      "device_traces]]a\x8c\x08segments]";
  for (int i = 0; i < 80000; ++i) {
    std::string k = std::to_string(i);
    d.push_back('\x8c');  // SHORT_BINUNICODE "k<i>", then BININT1 0
    d.push_back(static_cast<char>(k.size() + 1));
    d.push_back('k');
    d.append(k);
    d.push_back('K');
    d.push_back('\0');
  }
  d += "u.";
  CHECK(trace_info(write_text("bigdict.pickle", d), false)["events"] == 0);  // answered: a snapshot of no events
}

// Before: --keep-going kept about 1 KB of explanation per OOM, twice.
TEST_CASE("keep-going lists every OOM and keeps explanations for the first ten only") {
  TraceBuilder t;
  for (int i = 0; i < 500; ++i) t.alloc(i, 2ULL << 30);
  auto r = simulate({.name = "many_ooms", .text = t.text, .policy = "xla-bfc", .capacity = "4GiB", .keep_going = true});
  REQUIRE(r.result.ooms.size() == 499);
  CHECK(!r.result.ooms[0].explanation.empty());
  CHECK(!r.result.ooms[9].explanation.empty());
  CHECK(r.result.ooms[10].explanation.empty());
  CHECK(r.result.spaces.at(0).ooms.size() == 499);
}

TEST_CASE("outputs: never an input, symlinks kept, special files written through, '-' is stdout") {
  std::string t = write_text("out_in.jsonl", "{\"op\":\"alloc\",\"id\":1,\"size\":4096}\n");
  std::string before = read_text(t);
  // Before: the trace was silently replaced by the report.
  for (const char* opt : {"--json", "--placements", "--html"}) {
    INFO(opt);
    CHECK(cli("run " + t + " " + opt + " " + t).code == 2);
    CHECK(read_text(t) == before);
  }
  CHECK(cli("info " + t + " --json " + t).code == 2);
  CHECK(cli("convert " + t + " " + t).code == 2);
  CHECK(read_text(t) == before);
  CHECK(cli("run " + t + " --json " + tmp_path("same.json") + " --html " + tmp_path("same.json")).code == 2);
  // A symlink stays a symlink; its target gets the report.
  std::string link = tmp_path("report_link.json");
  fs::remove(link);
  fs::create_symlink("report_target.json", link);
  REQUIRE(cli("run " + t + " --json " + link).code == 0);
  CHECK(fs::is_symlink(link));
  CHECK(nlohmann::json::parse(read_text(tmp_path("report_target.json")))["fragsim_report"] == 1);
  // /dev/stdout and '-' (the text summary then stays off stdout).
  auto r = cli("run " + t + " --json -");
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["fragsim_report"] == 1);
  r = cli("run " + t + " --json /dev/stdout");
  CHECK(r.code == 0);
  CHECK(r.out.find("\"fragsim_report\"") != std::string::npos);
}

// Before: SIGINT/SIGTERM/SIGHUP left PATH.tmp.PID files of up to 171 MB.
TEST_CASE("a signal leaves no temporary file behind") {
  std::string dir = tmp_path("sigdir");
  fs::create_directories(dir);
  for (const char* sig : {"TERM", "INT", "HUP"}) {
    INFO(sig);
    std::string out = dir + "/big.jsonl";
    std::string cmd = std::string("timeout -s ") + sig + " 0.4 " + FRAGSIM_BINARY +
                      " gen random --set events=100000000 -o " + out + " >/dev/null 2>&1";
    int rc = std::system(cmd.c_str());
    CHECK(WEXITSTATUS(rc) == 124);  // killed by timeout, as intended
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      ++files;
      INFO(e.path().string());
    }
    CHECK(files == 0);
  }
  // The same signal twice in a row (what `timeout` does: to the process, then to its group): the
  // second must not end the process before the first one's handler removed the temporary.
  std::string out = dir + "/twice.jsonl";
  std::string cmd = std::string("for i in 1 2 3 4 5 6 7 8 9 10; do ") + FRAGSIM_BINARY +
                    " gen random --set events=100000000 -o " + out +
                    " >/dev/null 2>&1 & p=$!; sleep 0.25; kill -TERM $p; kill -TERM $p; wait $p; "
                    "ls " +
                    dir + " | grep -q . && exit 1; done; exit 0";
  CHECK(WEXITSTATUS(std::system(("sh -c '" + cmd + "'").c_str())) == 0);
}

// Before: `cat a.fstrace b.fstrace` silently dropped b (and an alloc that should OOM with it).
TEST_CASE("bytes after an fstrace end record are an error") {
  std::string a = tmp_path("cat_a.fstrace");
  generate_workload("random", 1, {{"events", 100}}, a);
  std::string both = read_text(a) + read_text(a);
  std::string ab = write_text("cat_ab.fstrace", both);
  CHECK(input_error([&] { (void)trace_info(ab, false); }).find("bytes after the end record") != std::string::npos);
}

// Before: check exited 0 on a 4-key object, on "ooms": null with oom_count 3, on another
// trace's report (now compared with a note, refused with --same-trace), and on a 100x regression
// with --tolerance nan.
TEST_CASE("the CI gate cannot be fooled") {
  std::string tr = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";
  std::string other = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/llm_serving_small.jsonl";
  // check's gate in process (check_cmd): refused (exit 2), failed (exit 1) or passed (exit 0).
  auto a = run_cmd({.trace = tr, .policy = "best-fit"}).json, o = run_cmd({.trace = other, .policy = "best-fit"}).json;
  auto four = nlohmann::json::parse("{\"a\":1,\"b\":2,\"c\":3,\"d\":4}");
  CHECK(input_error([&] { (void)check_cmd("gate_a.json", a, "four.json", four); }).find("four.json") !=
        std::string::npos);
  auto j = a;
  j["ooms"] = nullptr;
  j["oom_count"] = 3;
  CHECK(input_error([&] {
          (void)check_cmd("gate_a.json", a, "gate_null.json", j);
        }).find("gate_null.json: ooms: must be an array") != std::string::npos);
  CHECK(input_error([&] {
          (void)check_cmd("gate_a.json", a, "gate_o.json", o, {.same_trace = true});
        }).find("different traces") != std::string::npos);
  // By default two traces are two recordings of one workload: compared, and a note says so.
  CheckResult other_trace = check_cmd("gate_a.json", a, "gate_o.json", o, {.tolerance_pct = 1000000});
  CHECK(other_trace.pass);
  CHECK(other_trace.notes.size() >= 1);
  CHECK(check_text(other_trace).find("the traces differ") != std::string::npos);
  j = a;
  j["peak_reserved_bytes"] = j["peak_reserved_bytes"].get<std::uint64_t>() * 100;
  for (double bad : {std::nan(""), -5.0}) {
    INFO("--tolerance " << bad);
    CHECK(input_error([&] {
            (void)check_cmd("gate_a.json", a, "gate_b.json", j, {.tolerance_pct = bad});
          }).find("--tolerance") != std::string::npos);
  }
  CHECK_FALSE(check_cmd("gate_a.json", a, "gate_b.json", j).pass);
  // A changed OOM count is a regression.
  auto k1 = run_cmd({.trace = tr, .capacity = "1GiB", .reserve = "0", .policy = "best-fit", .keep_going = true}).json;
  auto k = k1;
  REQUIRE(k["oom_count"].get<int>() > 1);
  k["ooms"].erase(k["ooms"].size() - 1);
  k["oom_count"] = k["ooms"].size();
  auto r = check_cmd("gate_k1.json", k1, "gate_k2.json", k, {.tolerance_pct = 1000});
  CHECK_FALSE(r.pass);
  CHECK(check_text(r).find("OOM count changed") != std::string::npos);
}

// Before: convert wrote files that fragsim then rejected.
TEST_CASE("convert is lossless: every format, every sample and real trace reads back identically") {
  std::vector<std::string> sources;
  for (const auto& e : fs::directory_iterator(std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples"))
    if (e.path().extension() != ".md") sources.push_back(e.path().string());
  for (const auto& e : fs::directory_iterator(std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/torch"))
    if (e.path().extension() == ".zst") sources.push_back(e.path().string());
  std::string gen = tmp_path("rt_gen.fstrace");
  generate_workload("tpu-train", 3, {{"layers", 1}, {"steps", 1}}, gen);
  sources.push_back(gen);
  auto read_all = [](const std::string& p) {
    std::vector<Event> v;
    auto r = open_trace(p, {});
    Event ev;
    while (r->next(ev)) v.push_back(ev);
    return std::make_pair(r->header(), v);
  };
  size_t checked = 0;
  for (const auto& src : sources) {
    std::pair<nlohmann::json, std::vector<Event>> want;
    try {
      want = read_all(src);
    } catch (const InputError&) {
      continue;  // a fixture fragsim refuses (an older layout it cannot read) is checked elsewhere
    }
    for (const char* ext : {".jsonl", ".jsonl.zst", ".fstrace"}) {
      INFO(src << " -> " << ext);
      std::string out = tmp_path("rt" + std::string(ext));
      (void)convert_trace(src, out, "", false);
      auto got = read_all(out);
      CHECK(got.first == want.first);
      REQUIRE(got.second.size() == want.second.size());
      for (size_t i = 0; i < got.second.size(); ++i) {
        const Event &x = got.second[i], &y = want.second[i];
        bool same = x.op == y.op && x.present == y.present && x.t == y.t && x.id == y.id && x.size == y.size &&
                    x.stream == y.stream && x.device == y.device && x.space == y.space && x.dtype == y.dtype &&
                    x.addr == y.addr && x.name == y.name && x.shape == y.shape;
        if (!same) FAIL("event " << i << " differs");
      }
      ++checked;
    }
  }
  CHECK(checked >= 3 * 10);
}

// End-to-end fuzzing: seeded byte mutations of every format, through every policy, with and
// without --keep-going, with validate() after every event. Only results or input errors.
TEST_CASE("fuzz: mutated traces of every format through every policy — only results and input errors", "[fuzz]") {
  std::vector<std::pair<std::string, std::string>> seeds;  // (extension, bytes)
  std::string fst = tmp_path("fz.fstrace");
  generate_workload("random", 5, {{"events", 300}, {"live", 20}, {"max_size", 1 << 22}, {"streams", 2}}, fst);
  seeds.push_back({".fstrace", read_text(fst)});
  std::string jl = tmp_path("fz.jsonl");
  generate_workload("tpu-train", 1, {{"layers", 1}, {"steps", 1}, {"hidden", 256}, {"seq", 64}}, jl);
  seeds.push_back({".jsonl", read_text(jl)});
  seeds.push_back({".pickle", read_input(pickle_fixture("small_mlp_97ev.pickle"), kMaxPickleBytes)});
  std::uint64_t s = 20261202;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  std::map<std::string, int> outcomes;
  int k = 0;
  for (const auto& [ext, good] : seeds) {
    for (int m = 0; m < 12; ++m) {
      std::string bytes = good;
      int edits = 1 + static_cast<int>(rnd() % 4);
      for (int e = 0; e < edits; ++e) {
        size_t at = rnd() % bytes.size();
        switch (rnd() % 3) {
          case 0:
            bytes[at] = static_cast<char>(rnd());
            break;
          case 1:
            bytes.erase(at, 1 + rnd() % 8);
            break;
          default:
            bytes.insert(at, std::string(1 + rnd() % 4, static_cast<char>(rnd())));
            break;
        }
      }
      std::string path = write_text("fz" + std::to_string(k++) + ext, bytes);
      for (const auto& p : policy_names()) {
        for (bool keep_going : {false, true}) {
          INFO(path << " " << p << " keep_going " << keep_going);
          RunOptions o;
          o.trace = path;
          o.policy.name = p;
          o.hw = load_hardware(p == "tpu-padded" || p == "static-heap" ? "tpu-v5e" : "h100-80g");
          o.hw.space(Space::kHbm)->capacity = 1ULL << 30;
          o.check = true;
          o.keep_going = keep_going;
          o.lenient = (rnd() % 2) == 0;
          try {
            (void)run_simulation(o, test_registry());
            ++outcomes["result"];
          } catch (const InputError&) {
            ++outcomes["input error"];
          }
        }
      }
    }
  }
  CHECK(outcomes["result"] > 0);
  CHECK(outcomes["input error"] > 0);
  // The two mutants that once crashed and hung the simulator, as `fragsim run` takes them: a result
  // (exit 0) or an input error (exit 2); anything else escapes and fails.
  for (const char* bad : {"mutant_overflow.fstrace", "mutant_hang.fstrace"}) {
    std::string path = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/bad/" + bad;
    for (const auto& p : policy_names()) {
      for (bool keep_going : {false, true}) {
        INFO(bad << " " << p << " keep_going " << keep_going);
        (void)refusal([&] { (void)run_cmd({.trace = path, .policy = p, .keep_going = keep_going, .check = true}); });
      }
    }
  }
}

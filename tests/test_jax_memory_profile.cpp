// JAX device memory profiles (issue 48, item 3): the buffers live at one moment, with sizes,
// devices and Python stacks, read from profiles written as jaxlib writes them (pprof_synth.h).
#include <catch2/catch.hpp>

#include "pprof_synth.h"
#include "sim_helpers.h"
#include "traces/jax_memory_profile.h"
#include "traces/trace_reader.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

// A training script's state after a step on two GPUs: three 8 MiB parameters and a 1 MiB
// optimizer count on device 0 (made in train.py's init, through jax.numpy), a 2 MiB batch on
// device 1, and two compiled executables.
std::string gpu_profile(const std::string& name) {
  PprofWriter w;
  auto jnp = w.frame("/usr/lib/python3/site-packages/jax/_src/numpy/lax_numpy.py", "zeros", 5120);
  auto init = w.frame("/work/train.py", "init_params", 42);
  auto main = w.frame("/work/train.py", "main", 97);
  auto put = w.frame("/usr/lib/python3/site-packages/jax/_src/api.py", "device_put", 2456);
  auto batch = w.frame("/work/data.py", "next_batch", 18);
  w.buffers(3, 8 * MiB, "cuda:0", {jnp, init, main});
  w.buffers(1, MiB, "cuda:0", {jnp, main});
  w.buffers(1, 2 * MiB, "cuda:1", {put, batch, main});
  w.executable(123456);
  w.executable(654321);
  return w.write(name);
}

}  // namespace

TEST_CASE("jax memory profile: the live buffers with their sizes, devices and stacks") {
  std::string path = gpu_profile("state.prof");  // gzipped, named .prof as JAX's documentation does
  REQUIRE(is_jax_memory_profile_path(path));
  auto r = open_trace(path, {});
  CHECK(r->recording().source == RecordingSource::kJaxMemoryProfile);
  CHECK(r->recording().state_only);
  CHECK(r->recording().device_sizes);  // GetOnDeviceSizeInBytes: padded already on a TPU
  std::map<std::uint32_t, Bytes> bytes;
  std::map<std::uint64_t, std::vector<std::string>> stacks;
  std::vector<std::string> names;
  Event e;
  while (r->next(e)) {
    if (e.op == Op::kStack) stacks[e.id.value()] = e.frames;
    if (e.op != Op::kAlloc) continue;
    CHECK(e.has(key::kPreTrace));
    CHECK(!e.has(key::kAddr));
    bytes[e.device] += e.size;
    names.push_back(e.name);
    REQUIRE(stacks.count(e.stack));
    CHECK(stacks[e.stack].back() == "/work/train.py:97 main");  // leaf first, the outermost last
  }
  CHECK(bytes == std::map<std::uint32_t, Bytes>{{0, 25 * MiB}, {1, 2 * MiB}});
  // Named by the innermost frame outside JAX's own code.
  CHECK(std::count(names.begin(), names.end(), "train.py:42 init_params") == 3);
  CHECK(std::count(names.begin(), names.end(), "data.py:18 next_batch") == 1);
  const auto& h = r->header()["jax_memory_profile"];
  CHECK(h["executables"] == 2);
  CHECK(h["executable_bytes"] == 123456 + 654321);
}

TEST_CASE("jax memory profile: info, run and --by-stack show the live set, a TPU's sizes are not padded again") {
  std::string path = gpu_profile("state2.prof");
  auto info = cli("info " + path);
  CHECK(info.code == 0);
  CHECK(info.out.find("device 0: 4 buffers live, 25.00 MiB") != std::string::npos);
  CHECK(info.out.find("2 compiled executables") != std::string::npos);
  auto run = cli("run " + path + " --by-stack");
  CHECK(run.code == 0);
  CHECK(run.out.find("policy xla-bfc") != std::string::npos);
  CHECK(run.out.find("a JAX device memory profile: the 5 buffers live when it was taken") != std::string::npos);
  CHECK(run.out.find("train.py:42 init_params") != std::string::npos);
  auto j = run_json({.trace = path});
  CHECK(j["peak_requested_bytes"] == 27 * MiB);
  // On a TPU: tpu-padded with the TPU runtime, and the sizes as they are (no layout to pad from).
  PprofWriter w;
  auto f = w.frame("/work/tpu.py", "main", 3);
  w.buffers(2, 16384, "TPU_0(process=0,(0,0,0,0))", {f});
  w.buffers(1, 4096, "TPU_1(process=0,(1,0,0,0))", {f});
  std::string tpu = w.write("tpu.prof");
  auto t = run_json({.trace = tpu, .hw = "tpu-v5e"});
  CHECK(t["policy"]["name"] == "tpu-padded");
  CHECK(t["peak_requested_bytes"] == 2 * 16384 + 4096);
  std::set<std::uint64_t> devs;
  for (const auto& d : t["devices"]) devs.insert(d["device"].get<std::uint64_t>());
  CHECK(devs == std::set<std::uint64_t>{0, 1});
}

TEST_CASE("jax memory profile: a file that is no profile is refused in one line") {
  auto garbage = write_text("garbage.prof", std::string("\x1f\x8b\x08\x00", 4) + "not gzip at all");
  auto g = cli("info " + garbage);
  CHECK(g.code == 2);
  CHECK(g.err.find("gzip") != std::string::npos);
  CHECK(std::count(g.err.begin(), g.err.end(), '\n') == 1);
  PprofWriter w;
  w.profile().clear_sample_type();  // a CPU profile's samples, not JAX's
  auto other = w.write("cpu.prof");
  auto o = cli("info " + other);
  CHECK(o.code == 2);
  CHECK(o.err.find("not a JAX device memory profile") != std::string::npos);
  auto raw = write_text("raw.prof", "\x0a\xff\xff\xff\xff\x0f");  // a field longer than the file
  auto rr = cli("info " + raw);
  CHECK(rr.code == 2);
  CHECK(rr.err.find("does not parse") != std::string::npos);
}

namespace {

// A capture's device-0 hbm state before its first event: the sizes of the earlier buffers it frees
// at stated addresses, and the bytes live at none.
std::pair<std::vector<Bytes>, Bytes> state_before(const std::string& capture) {
  std::vector<Bytes> recorded;
  Bytes unknown = 0;
  auto r = open_trace(capture, {});
  Event e;
  while (r->next(e))
    if (e.op == Op::kAlloc && e.has(key::kPreTrace) && e.space == Space::kHbm && e.device == 0)
      (e.has(key::kAddr) ? recorded.push_back(e.size) : void(unknown += e.size));
  return {recorded, unknown};
}

std::string xprof_data(const std::string& name) {
  return std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/xprof/" + name + ".xplane.pb.zst";
}

}  // namespace

TEST_CASE("jax memory profile beside a capture: its buffers are the memory live before the capture") {
  // The T4 capture (tests/data/xprof, a real recording) starts mid-run with 1,912,576 B live at
  // addresses it never states, in the one region its addresses imply. A profile taken then lists
  // what that memory is: here model.py's 1 MiB and 512 KiB parameters and the optimizer's state
  // for the rest, and one 1 MiB array the capture's memory does not hold (left out).
  const std::string capture = xprof_data("ecbm_yg2820_instance-ecbm_20221104-212610");
  auto [recorded, unknown] = state_before(capture);
  REQUIRE(unknown == 1912576);
  PprofWriter w;
  auto init = w.frame("/work/model.py", "init", 12);
  auto opt = w.frame("/work/optim.py", "adam_init", 40);
  auto step = w.frame("/work/train.py", "step", 77);
  w.buffers(1, MiB, "cuda:0", {init});
  w.buffers(1, MiB / 2, "cuda:0", {init});
  w.buffers(1, static_cast<std::int64_t>(unknown - MiB - MiB / 2), "cuda:0", {opt});
  w.buffers(1, MiB, "cuda:0", {step});  // the 1 MiB buffers go largest first: this one finds no room
  const std::string prof = w.write("t4_state.prof");

  auto alone = run_json({.trace = capture});
  for (const std::string& pair : {capture + "," + prof, prof + "," + capture}) {  // either order
    auto r = open_trace(pair, {});
    const auto& h = r->header()["pre_trace_profile"]["devices"][0];
    CHECK(h["placed_buffers"] == 3);
    CHECK(h["placed_bytes"] == unknown);
    CHECK(h["remainder_bytes"] == 0);
    CHECK(h["left_out_buffers"] == 1);
    CHECK(h["left_out_bytes"] == MiB);
    std::map<std::string, Bytes> by_name;
    Event e;
    while (r->next(e))
      if (e.op == Op::kAlloc && e.has(key::kPreTrace) && e.device == 0 && e.space == Space::kHbm)
        by_name[e.name] += e.size;
    CHECK(by_name["model.py:12 init"] == MiB + MiB / 2);
    CHECK(by_name["optim.py:40 adam_init"] == unknown - MiB - MiB / 2);
    CHECK(by_name.count("(live before the capture, never freed during it: address unknown)") == 0);
    // As recorded: each buffer in its share of the memory the capture's addresses imply, every
    // recorded address reproduced as without the profile.
    auto j = run_json({.trace = pair});
    CHECK(j["fidelity"]["allocs_matched"] == alone["fidelity"]["allocs_matched"]);
    CHECK(j["fidelity"]["allocs_matched"] == j["fidelity"]["allocs_compared"]);
    CHECK(j["fidelity"]["initial_state"][0]["unknown_address_buffers"] == 3);
    CHECK(j["fidelity"]["initial_state"][0]["inferred_bytes"] == unknown);
    CHECK(j["fidelity"]["initial_state"][0]["region_base"] == alone["fidelity"]["initial_state"][0]["region_base"]);
    CHECK(j["peak_reserved_bytes"] == alone["peak_reserved_bytes"]);
  }
  // Re-held (docs/report.md "Before the recording"): one request per buffer, the same live bytes,
  // now with their call sites.
  auto rebuilt = run_cmd({.trace = capture + "," + prof, .pre_trace = "rebuilt"});
  CHECK(rebuilt.json["devices"][0]["before_recording"]["held"] == "rebuilt");
  CHECK(rebuilt.json["devices"][0]["before_recording"]["live_bytes"] ==
        alone["devices"][0]["before_recording"]["live_bytes"]);
  CHECK(rebuilt.json.dump().find("model.py:12 init") != std::string::npos);
  CHECK(cli("run " + capture + " " + prof).code == 0);  // two inputs on the command line
}

TEST_CASE("jax memory profile beside a capture: earlier buffers the capture frees take the profile's stacks") {
  // The H200 capture (JAX, step 4 of a training run) frees 18 buffers allocated before it, which
  // account for all 344,049,408 B then in use: a profile of that moment names each of them.
  const std::string capture = xprof_data("h200_jax_train_mid_run");
  auto [recorded, unknown] = state_before(capture);
  REQUIRE(recorded.size() == 18);
  CHECK(unknown == 0);
  PprofWriter w;
  auto step = w.frame("/work/train.py", "step", 77);
  for (Bytes b : recorded) w.buffers(1, static_cast<std::int64_t>(b), "cuda:0", {step});
  const std::string prof = w.write("h200_step4.prof");
  auto r = open_trace(capture + "," + prof, {});
  CHECK(r->header()["pre_trace_profile"]["devices"][0]["matched_recorded_buffers"] == 18);
  CHECK(r->header()["pre_trace_profile"]["devices"][0]["left_out_buffers"] == 0);
  size_t named = 0;
  Event e;
  while (r->next(e))
    if (e.op == Op::kAlloc && e.has(key::kPreTrace) && e.has(key::kAddr)) named += e.name == "train.py:77 step";
  CHECK(named == 18);
  auto alone = run_json({.trace = capture});
  auto j = run_json({.trace = capture + "," + prof});
  CHECK(j["fidelity"]["allocs_matched"] == alone["fidelity"]["allocs_matched"]);
}

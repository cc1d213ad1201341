// What a newcomer reads (issue 54 items 1 and 3) and whose words advice speaks (issue 47 item 3):
// memory from before a recording named for it, notes said once, text that says only what applies,
// and settings in the variables of the framework and platform that recorded the trace.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <map>

#include "policies/policy.h"
#include "sim/base/notes.h"
#include "sim/commands/listing.h"
#include "sim_helpers.h"
#include "test_util.h"
#include "traces/trace_reader.h"

using namespace fragsim;
using namespace fragsim::test;

namespace words {

std::string xprof_path(const std::string& name) { return test_data("xprof/" + name + ".xplane.pb.zst"); }
const std::string kMi300 = xprof_path("tracelens_mi300_jax08_gemm");  // JAX on AMD MI300X (ROCm), SOURCES.md
const std::string kEcbm = xprof_path("ecbm_yg2820_instance-ecbm_20221104-212610");  // TensorFlow on a T4

}  // namespace words

TEST_CASE("words: memory live before a snapshot's recording is named for it, in the segment it lies in") {
  // The training step's snapshot begins with 324 blocks live whose allocations fell before the ring
  // buffer: no frames. They were "(no name or stack)"; now they say when they were allocated and
  // where they lie (the segment the snapshot's dump places them in).
  auto r = cli("run " + kTrain + " --by-stack");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("(allocated before the recording began)  id 1, event "));
  CHECK_THAT(r.out, Catch::Contains("at segment 0x"));
  // By call site they sum to one row; by frame, one row per segment as well.
  // Matched line by line: std::regex recurses per character of its input.
  const size_t row = r.out.find("324  (allocated before the recording began)\n");
  REQUIRE(row != std::string::npos);
  const size_t from = r.out.rfind('\n', row) + 1;
  CHECK_THAT(r.out.substr(from, r.out.find('\n', row) - from),
             Catch::Matches(R"( +[0-9.]+ GiB +[0-9.]+% +324  \(allocated before the recording began\))"));
  CHECK_THAT(r.out, Catch::Contains("  segment 0x"));
}

TEST_CASE("words: a note that holds for several devices is printed once, naming them") {
  CHECK(once_per_device({"a on device 0: x", "b", "a on device 1: x", "a on device 2: x", "a on device 7: x"}) ==
        std::vector<std::string>{"a on devices 0-2, 7: x", "b"});
  CHECK(once_per_device({"device 3: 1 GiB", "device 4: 2 GiB"}) ==
        std::vector<std::string>{"device 3: 1 GiB", "device 4: 2 GiB"});  // different words: both kept
  CHECK(once_per_device({"device 12: x", "device 1: x"}) == std::vector<std::string>{"devices 1, 12: x"});
  // A run of a recording whose four devices share one inferred usable memory: one line, not four.
  std::string trace = "{\"fragsim_trace\":1,\"recorded_devices\":[";
  for (int d = 0; d < 4; ++d)
    trace +=
        fmt::format("{}{{\"device\":{},\"usable_bytes\":8589934592,\"basis\":\"a recorded oom\"}}", d ? "," : "", d);
  trace += "]}\n";
  for (int d = 0; d < 4; ++d)
    trace += fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":1048576,\"device\":{}}}\n", d + 1, d);
  auto r = cli("run " + write_text("four_devices.jsonl", trace));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("note: devices 0-3: usable memory 8.00 GiB (8589934592 B) inferred from the "
                                    "recording: a recorded oom"));
  CHECK_THAT(r.out, !Catch::Contains("note: device 1:"));
}

TEST_CASE("words: the --failed-alloc note comes with an OOM of a capture, not with every capture") {
  auto fits = cli("run " + words::kMi300);
  REQUIRE(fits.code == 0);
  CHECK_THAT(fits.out, Catch::Contains("completed, no OOM"));
  CHECK_THAT(fits.out, !Catch::Contains("--failed-alloc SIZE@EVENT"));
  auto oom = cli("run " + words::kMi300 + " --capacity 600MiB --set preallocate=true");
  REQUIRE(oom.code == 0);
  CHECK_THAT(oom.out, Catch::Contains("1 OOM"));
  CHECK_THAT(oom.out, Catch::Contains("--failed-alloc SIZE@EVENT replays that request"));
}

TEST_CASE("words: fidelity is printed for the runs that model the recording's allocator only") {
  // The MI300X capture's recorded addresses: xla-bfc reproduces all 81; ideal places nothing
  // where an allocator would, and its "0/81" said nothing about the model.
  CompareRequest q;
  q.base.trace = words::kMi300;
  q.policies = "ideal,xla-bfc,xla-bfc[preallocate=true],platform";
  auto c = compare_cmd(q);
  CHECK_THAT(c.text, Catch::Contains("xla-bfc: reproduced 81/81 recorded allocation addresses"));
  CHECK_THAT(c.text, Catch::Contains("xla-bfc[preallocate=true]: reproduced"));  // a what-if of its settings
  CHECK_THAT(c.text, !Catch::Contains("ideal: reproduced"));
  CHECK_THAT(c.text, !Catch::Contains("platform: reproduced"));
  // The JSON keeps every run's fidelity.
  for (const auto& r : c.runs) CHECK(!r.fidelity.is_null());
}

TEST_CASE("words: info prints no heading with nothing under it") {
  auto r = cli("info " + write_text("frees_only.jsonl", "{\"op\":\"mark\",\"name\":\"start\"}\n"));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, !Catch::Contains("size histogram:"));
  CHECK_THAT(r.out, !Catch::Contains("compiled XLA modules"));
  auto some = cli("info " + kSample);
  CHECK_THAT(some.out, Catch::Contains("size histogram:\n    "));  // a heading with its rows
}

TEST_CASE("words: a block beside its request says the difference, not the same size twice") {
  // torch-caching rounds 16 MiB - 300 B up to 16 MiB (512-byte rounding): both print as 16.00 MiB.
  const std::string t = write_text("near_16mib.jsonl",
                                   "{\"op\":\"alloc\",\"id\":1,\"size\":16776916}\n"
                                   "{\"op\":\"alloc\",\"id\":2,\"size\":33554432}\n");
  auto r = cli("run " + t + " --policy torch-caching");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("16.00 MiB (300 B more than requested)"));
  CHECK_THAT(r.out, !Catch::Contains("16.00 MiB (16.00 MiB requested)"));
  CHECK_THAT(r.out, Catch::Contains("32.00 MiB  id 2"));  // no "(32.00 MiB requested)" beside an exact fit
  // A real capture: JAX's 72.01 MiB temp region, padded by less than 0.01 MiB.
  auto jax = cli("run " + words::xprof_path("h200_jax_train_mid_run"));
  CHECK_THAT(jax.out, !Catch::Contains("72.01 MiB (72.01 MiB requested)"));
  CHECK_THAT(jax.out, Catch::Contains("72.01 MiB ("));
}

TEST_CASE("words: an OOM line names its frame once and its size once") {
  // The H200 snapshot's OOM: a 3.50 GiB request at torch_probe.py:62, whose name is that frame.
  auto r = cli("run " + test_data("torch/h200_fraction_oom.pickle.zst"));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("(device 0 hbm): torch_probe.py:62 main\n"));
  CHECK_THAT(r.out, Catch::Contains("    requested 3.50 GiB; allocated 4.89 GiB"));
  CHECK_THAT(r.out, !Catch::Contains("(rounded 3.50 GiB)"));
}

TEST_CASE("words: fragsim list states each bound as the option's reader checks it") {
  // PyTorch refuses max_split_size_mb:20 ("> kLargeBuffer"), accepts 21; the list said ">= 20".
  const std::string t = policy_text(test_registry().find("torch-caching"));
  CHECK_THAT(t, Catch::Contains("max_split_size_mb"));
  CHECK_THAT(t, Catch::Contains("accepts > 20 and <= 8796093022207"));
  CHECK_THAT(t, !Catch::Contains(">= 20"));
  CHECK(input_error([] {
          (void)run_json({.trace = kSample, .policy = "torch-caching", .sets = {"max_split_size_mb=20"}});
        }).find("max_split_size_mb: must be a number > 20") != std::string::npos);
  CHECK_NOTHROW(run_json({.trace = kSample, .policy = "torch-caching", .sets = {"max_split_size_mb=21"}}));
  CHECK_THAT(policy_text(test_registry().find("torch-caching")),
             Catch::Contains("garbage_collection_threshold") && Catch::Contains("accepts > 0 and < 1"));
}

// ---- issue 47 item 3: each framework's own vocabulary ----

TEST_CASE("vocabulary: a capture says which framework and platform recorded it") {
  auto mi = open_trace(words::kMi300, {})->recording();
  CHECK(mi.framework_of() == Framework::kJax);
  CHECK(mi.platform == Platform::kRocm);  // its device plane's vendor: AMD
  auto tf = open_trace(words::kEcbm, {})->recording();
  CHECK(tf.framework_of() == Framework::kTensorFlow);  // its allocator calls carry tf_op
  CHECK(tf.platform == Platform::kCuda);
  auto info = cli("info " + words::kEcbm);
  CHECK_THAT(info.out, Catch::Contains("recorded with: TensorFlow on CUDA ("));
}

TEST_CASE("vocabulary: a JAX capture on TPU is JAX's, though some of its allocator calls carry annotations") {
  // openxla/xprof's tpu_inference_2 (tests/data/xprof/SOURCES.md: JAX on TPU v6e) has 423 allocator
  // calls inside jaxlib's PjitFunction spans and modules named jit_f, jit__psum, ...; 14 of its calls
  // carry an op annotation ("dummy"), which fragsim took for TensorFlow's.
  auto tpu = open_trace(words::xprof_path("xprof_tpu_inference_2"), {})->recording();
  CHECK(tpu.framework_of() == Framework::kJax);
  CHECK(tpu.platform == Platform::kTpu);
  auto info = cli("info " + words::xprof_path("xprof_tpu_inference_2"));
  CHECK_THAT(info.out, Catch::Contains("recorded with: JAX on TPU ("));
  CHECK_THAT(info.out, Catch::Contains("allocator calls inside jaxlib's PjitFunction spans"));
  // JAX reads XLA_PYTHON_CLIENT_* for its GPU client only: on the TPU it is refused as changing
  // nothing, not as TensorFlow's capture.
  auto r = cli("run " + words::xprof_path("xprof_tpu_inference_2") + " --env XLA_PYTHON_CLIENT_MEM_FRACTION=.5");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("for its GPU client only"));
  CHECK_THAT(r.err, !Catch::Contains("TensorFlow"));
}

TEST_CASE("vocabulary: on ROCm, JAX is never told to use cudaMallocAsync") {
  // XLA builds its cudaMallocAsync allocator only for CUDA: on an MI300X, compare's what-ifs leave it out,
  // the variable that asks for it is refused, and advice against fragmentation does not offer it.
  CompareRequest q;
  q.base.trace = words::kMi300;
  auto c = compare_cmd(q);
  CHECK_THAT(c.text, Catch::Contains("xla-bfc[preallocate=true]"));
  CHECK_THAT(c.text, Catch::Contains("platform"));
  CHECK_THAT(c.text, !Catch::Contains("cuda-async"));
  std::string err =
      input_error([] { (void)run_json({.trace = words::kMi300, .envs = {"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async"}}); });
  CHECK_THAT(err, Catch::Contains("only for CUDA"));
  const PolicyInfo& bfc = test_registry().find("xla-bfc");
  const nlohmann::json config = {{"preallocate", true}};
  AdviceInput in{.config = config, .fragmentation = true, .kind = "", .reserved = 0, .rounded = 0};
  in.vocab = {Framework::kJax, Platform::kRocm};
  auto rocm = bfc.advise(in);
  REQUIRE(rocm.size() == 2);
  CHECK(rocm[0].setting == "XLA_PYTHON_CLIENT_PREALLOCATE=false");
  CHECK(rocm[1].setting == "XLA_PYTHON_CLIENT_ALLOCATOR=platform");  // JAX builds it everywhere; slow, so last
  CHECK(rocm[1].slow);
  in.vocab.platform = Platform::kCuda;
  auto cuda = bfc.advise(in);
  REQUIRE(cuda.size() == 3);
  CHECK(cuda[1].setting == "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async");
  CHECK(cuda[2].setting == "XLA_PYTHON_CLIENT_ALLOCATOR=platform");
  // A TensorFlow capture is told TensorFlow's variables.
  in.vocab.framework = Framework::kTensorFlow;
  auto tf = bfc.advise(in);
  REQUIRE(tf.size() == 3);
  CHECK(tf[0].setting == "TF_FORCE_GPU_ALLOW_GROWTH=true");
  CHECK(tf[1].setting == "TF_GPU_ALLOCATOR=cuda_malloc_async");
  CHECK(tf[2].setting == "TF_GPU_ALLOCATOR=cuda_malloc");  // TensorFlow's cuMemAlloc allocator: CUDA only
  in.vocab.platform = Platform::kRocm;
  REQUIRE(bfc.advise(in).size() == 1);
}

TEST_CASE("vocabulary: a TensorFlow capture's sweep speaks per_process_gpu_memory_fraction") {
  auto s = sweep_cmd({.trace = words::kEcbm}, "min-mem-fraction");
  // (from 0.001 since the search refines below 0.01, issue 47: this capture's answer was that floor)
  CHECK_THAT(s.text, Catch::Contains("searched per_process_gpu_memory_fraction from 0.001 to 1.00"));
  CHECK_THAT(s.text, Catch::Contains("setting: tf.compat.v1.GPUOptions(per_process_gpu_memory_fraction="));
  CHECK_THAT(s.text, !Catch::Contains("XLA_PYTHON_CLIENT"));
  // TensorFlow's variables configure it; TF_FORCE_GPU_ALLOW_GROWTH=true grows on demand.
  auto grow = run_json({.trace = words::kEcbm, .envs = {"TF_FORCE_GPU_ALLOW_GROWTH=true"}});
  CHECK(grow["policy"]["config"]["preallocate"] == false);
}

TEST_CASE("vocabulary: TF_GPU_ALLOCATOR=cuda_malloc_async is TensorFlow's pool: grown on demand, allow_growth unread") {
  // TensorFlow builds GpuCudaMallocAsyncAllocator(platform_device_id, total_bytes)
  // (tensorflow/core/common_runtime/gpu/gpu_process_state.cc): the release threshold is the memory
  // limit and reserve_memory keeps its default, false (gpu_cudamallocasync_allocator.h); the pool is
  // preallocated only with TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC=-1 (gpu_cudamallocasync_allocator.cc),
  // and only the BFC reads TF_FORCE_GPU_ALLOW_GROWTH. fragsim preallocated it (13.66 GiB reserved for
  // 51 MiB live) and let TF_FORCE_GPU_ALLOW_GROWTH=true change that.
  auto async_run = run_cmd({.trace = words::kEcbm, .envs = {"TF_GPU_ALLOCATOR=cuda_malloc_async"}});
  const nlohmann::json& async = async_run.json;
  // The threshold is the capture's BFC limit, which TensorFlow makes from the device's free memory
  // less its reserve for the system (gpu_device.cc, SingleVirtualDeviceMemoryLimit), not from a
  // memory fraction: the note called it "the program's memory fraction of the device" (trial finding 4).
  CHECK_THAT(async_run.text, Catch::Contains("the limit the capture's BFC had (TensorFlow's: the device's free memory "
                                             "less its reserve for the system"));
  CHECK_THAT(async_run.text, !Catch::Contains("memory fraction of the device"));
  CHECK(async["policy"]["name"] == "cuda-async");
  CHECK(async["policy"]["config"]["preallocate"] == false);
  CHECK(async["policy"]["config"]["resolved_release_threshold"] == 14648653952);  // the capture's BFC limit
  CHECK(async["peak_reserved_bytes"].get<std::uint64_t>() < 128 * kMiB);
  auto growth = run_cmd(
      {.trace = words::kEcbm, .envs = {"TF_GPU_ALLOCATOR=cuda_malloc_async", "TF_FORCE_GPU_ALLOW_GROWTH=true"}});
  CHECK(growth.json["policy"]["config"] == async["policy"]["config"]);
  CHECK(growth.json["peak_reserved_bytes"] == async["peak_reserved_bytes"]);
  CHECK_THAT(growth.text, Catch::Contains("TF_FORCE_GPU_ALLOW_GROWTH=true changes nothing"));
  auto pre = run_json({.trace = words::kEcbm,
                       .envs = {"TF_GPU_ALLOCATOR=cuda_malloc_async", "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC=-1"}});
  CHECK(pre["policy"]["config"]["preallocate"] == true);
  CHECK(pre["peak_reserved_bytes"].get<std::uint64_t>() >= 14648653952);
  std::string err = input_error([] {
    (void)run_json({.trace = words::kEcbm,
                    .envs = {"TF_GPU_ALLOCATOR=cuda_malloc_async", "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC=4096"}});
  });
  CHECK_THAT(err, Catch::Contains("only -1 (the whole pool) and 0 (none) are modelled"));
}

TEST_CASE("vocabulary: PYTORCH_HIP_ALLOC_CONF is read on ROCm only, after PYTORCH_CUDA_ALLOC_CONF") {
  // c10/cuda/CUDAAllocatorConfig.h (CUDAAllocatorConfig::instance) reads PYTORCH_CUDA_ALLOC_CONF and,
  // under USE_ROCM only, PYTORCH_HIP_ALLOC_CONF when that is unset. Alone on a CUDA device it would
  // change nothing: refused, naming the variable to give (fragsim ignored it with a note while
  // another note said the variable configured the run).
  std::string err = input_error(
      [] { (void)run_json({.trace = k3dev, .envs = {"PYTORCH_HIP_ALLOC_CONF=expandable_segments:True"}}); });
  CHECK_THAT(err, Catch::Contains("give PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
  // Beside PYTORCH_CUDA_ALLOC_CONF it is ignored, on ROCm too.
  for (const char* hw : {"", "mi300x"}) {
    INFO(hw);
    auto both = run_cmd(
        {.trace = k3dev,
         .hw = hw,
         .envs = {"PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256", "PYTORCH_HIP_ALLOC_CONF=expandable_segments:True"}});
    CHECK(both.json["policy"]["config"]["resolved_alloc_conf"] == "max_split_size_mb:256");
    CHECK_THAT(both.text, Catch::Contains("PYTORCH_HIP_ALLOC_CONF is ignored"));
  }
  // Alone on an AMD device it configures the allocator, as PYTORCH_CUDA_ALLOC_CONF does.
  auto hip = run_json({.trace = k3dev, .hw = "mi300x", .envs = {"PYTORCH_HIP_ALLOC_CONF=max_split_size_mb:256"}});
  auto cuda = run_json({.trace = k3dev, .hw = "mi300x", .envs = {"PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256"}});
  CHECK(hip["policy"]["config"]["resolved_alloc_conf"] == "max_split_size_mb:256");
  CHECK(hip["peak_reserved_bytes"] == cuda["peak_reserved_bytes"]);
}

TEST_CASE("vocabulary: PYTORCH_CUDA_ALLOC_CONF replaces the recorded settings, --set changes one key") {
  // k3dev was recorded with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. PyTorch reads the
  // variable whole: setting it to max_split_size_mb:256 turns expandable segments off.
  auto whole = run_cmd({.trace = k3dev, .envs = {"PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256"}});
  CHECK(whole.json["policy"]["config"]["resolved_alloc_conf"] == "max_split_size_mb:256");
  CHECK(whole.json["policy"]["config"]["resolved_expandable_segments"] == false);
  CHECK_THAT(whole.text, Catch::Contains("replaces the snapshot's recorded settings (expandable_segments:True)"));
  CHECK_THAT(whole.text, Catch::Contains("expandable_segments:True dropped"));
  // --set changes the one key and keeps the recorded ones.
  auto one = run_cmd({.trace = k3dev, .sets = {"max_split_size_mb=256"}});
  CHECK(one.json["policy"]["config"]["resolved_alloc_conf"] == "max_split_size_mb:256,expandable_segments:True");
  CHECK(one.json["policy"]["config"]["resolved_expandable_segments"] == true);
}

TEST_CASE("vocabulary: a BFC run's text shows its share of the allocator's limit beside the device's") {
  // The T4 capture's BFC limit is 14,648,653,952 B of the device's 15,843,721,216 B.
  auto r = cli("run " + words::kEcbm);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("of limit"));
  CompareRequest q;
  q.base.trace = words::kEcbm;
  q.policies = "xla-bfc,ideal";
  auto c = compare_cmd(q);
  CHECK_THAT(c.text, Catch::Contains("of dev") && Catch::Contains("of limit"));
}

TEST_CASE("words: when following the recording scores lower, the text says which figure to read") {
  // The TE fused-attention capture (a growing allocator) replayed in one preallocated region: xla-bfc
  // reproduces 3 of 30 addresses running free, and 1 of 30 of its choices when each allocation is
  // moved to where it was recorded (2 of its own buffers displaced by the corrections).
  auto r = cli("run " + words::xprof_path("tracelens_jax_te_fused_attn_934987a2fc2f") +
               " --env XLA_PYTHON_CLIENT_PREALLOCATE=true --follow-recording");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("reproduced 3/30 recorded allocation addresses"));
  CHECK_THAT(r.out, Catch::Contains("following the recording: 1/30"));
  CHECK_THAT(r.out, Catch::Contains("the free-running figure (10.0%) is the better measure here"));
  // Where following scores as high or higher, nothing more is said (the MI300X capture: every
  // choice, 75 of 81 before the regions obtained before it were inferred).
  auto mi = cli("run " + words::kMi300 + " --follow-recording");
  CHECK_THAT(mi.out, Catch::Contains("following the recording: 81/81"));
  CHECK_THAT(mi.out, !Catch::Contains("better measure"));
}

TEST_CASE("vocabulary: a fragmentation OOM on ROCm in growth mode is offered JAX's platform allocator, by replay") {
  // Trial 10, finding 4: the MI300X capture grows on demand, so XLA_PYTHON_CLIENT_PREALLOCATE=false is
  // in force already and cudaMallocAsync is CUDA's only: its fragmentation OOM at 1102 MiB got no
  // setting, though XLA_PYTHON_CLIENT_ALLOCATOR=platform fits there (JAX's docs: very slow).
  auto r = run_cmd({.trace = words::kMi300, .capacity = "1102MiB"});
  INFO(r.text);
  REQUIRE(r.result.ooms.size() == 1);
  CHECK(r.result.ooms[0].fragmentation);
  CHECK_THAT(r.text, Catch::Contains("fragmentation: XLA_PYTHON_CLIENT_ALLOCATOR=platform — verified by replay: the "
                                     "trace fits"));
  CHECK_THAT(r.text, Catch::Contains("which JAX's docs call very slow"));
  CHECK_THAT(r.text, Catch::Contains("--env XLA_PYTHON_CLIENT_ALLOCATOR=platform`"));
  // The waste line credits memory, not speed: the slow allocator is not offered there.
  auto w = run_cmd({.trace = words::kMi300});
  CHECK_THAT(w.text, !Catch::Contains("XLA_PYTHON_CLIENT_ALLOCATOR=platform"));
}

TEST_CASE("vocabulary: a TensorFlow capture's OOM is TensorFlow's ResourceExhaustedError, with its tensor's shape") {
  // Trial 10, finding 5: "JAX raises: RESOURCE_EXHAUSTED ..." was printed for every BFC OOM. TensorFlow's
  // op kernel raises "OOM when allocating tensor with shape[...] and type ... on DEVICE by allocator NAME".
  auto pre = run_cmd({.trace = words::kEcbm, .capacity = "40MiB"});
  INFO(pre.text);
  CHECK_THAT(pre.text,
             Catch::Contains("TensorFlow raises ResourceExhaustedError: OOM when allocating tensor with "
                             "shape[?] and type ? on /job:localhost/replica:0/task:0/device:GPU:0 by "
                             "allocator GPU_0_bfc (the trace gives no shape or type for these 1912576 bytes)"));
  CHECK_THAT(pre.text, !Catch::Contains("JAX raises"));
  // A tensor the capture names: its shape and TensorFlow's name of its type.
  auto mid = run_cmd({.trace = words::kEcbm, .sets = {"memory_limit=40MiB"}});
  INFO(mid.text);
  // The line alone is matched: std::regex recurses per character, and the whole text overflowed the
  // stack under AddressSanitizer.
  const size_t at = mid.text.find("TensorFlow raises ResourceExhaustedError: ");
  REQUIRE(at != std::string::npos);
  CHECK_THAT(mid.text.substr(at, mid.text.find('\n', at) - at),
             Catch::Matches(R"(TensorFlow raises ResourceExhaustedError: OOM when allocating tensor with )"
                            R"(shape\[[0-9,]+\] and type (float|uint8|int32|int64) on )"
                            R"(/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc)"));
  auto jax = run_cmd({.trace = words::kMi300, .capacity = "1102MiB"});
  CHECK_THAT(jax.text, Catch::Contains("JAX raises: RESOURCE_EXHAUSTED: Out of memory while trying to allocate"));
}

TEST_CASE("vocabulary: TensorFlow's limit on other memory is its free memory less TensorFlow's reserve") {
  // Trial 10, finding 9: TensorFlow's default limit is the free memory less MinSystemMemory (gpu_device.cc:
  // 225 MiB below 2 GiB free, else 500/1050/1536/1800 MiB by compute capability), not a share of it;
  // and the recorded device's free memory was computed with this run's reserve, so it moved with
  // --capacity (14.72 GiB at 40 MiB, 14.46 GiB at 300 MiB, 14.27 GiB from 562 MiB).
  auto a100 = run_cmd({.trace = words::kEcbm, .hw = "a100-40g"});
  const Bytes usable = 42481811456 - 524288000;  // a100-40g's capacity less its reserve
  CHECK(a100.json["policy"]["config"]["resolved_memory_limit"] == usable - 1536 * kMiB);  // compute capability 8.0
  CHECK_THAT(a100.text, Catch::Contains("less the 1050 MiB it keeps for the system (compute capability 7.x): 14.67 "
                                        "GiB free; this run's device has 39.08 GiB free, less 1536 MiB (compute "
                                        "capability 8.x)"));
  auto h100 = run_json({.trace = words::kEcbm, .hw = "h100-80g"});
  CHECK(h100["policy"]["config"]["resolved_memory_limit"] == 84987740160ull - 524288000 - 1800 * kMiB);
  for (const char* c : {"40MiB", "300MiB", "600MiB", "4GiB"}) {
    auto r = run_cmd({.trace = words::kEcbm, .capacity = c});
    INFO(c << "\n" << r.text);
    CHECK_THAT(r.text, Catch::Contains("(compute capability 7.x): 14.67 GiB free; this run's device has"));
  }
  // Below 2 GiB free TensorFlow keeps 225 MiB; a reserve not below the free memory leaves all of it.
  auto small = run_json({.trace = words::kEcbm, .capacity = "1500MiB"});
  CHECK(small["policy"]["config"]["resolved_memory_limit"] == (1500 - 500 - 225) * kMiB);
  auto tiny = run_json({.trace = words::kEcbm, .capacity = "600MiB"});
  CHECK(tiny["policy"]["config"]["resolved_memory_limit"] == 100 * kMiB);
}

TEST_CASE("vocabulary: a default policy on hardware of another kind does not claim to be the recording's allocator") {
  // Trial 10, finding 12: a GPU capture on a TPU preset was "an XProf capture of the TPU runtime's
  // allocator", a TPU capture on a GPU one "an XProf capture of XLA's BFC allocator"; TF_GPU_ALLOCATOR
  // was JAX's variable; and the TPU capture on a TPU of another generation reproduced 0/453 addresses
  // without saying its memory was not the recording's.
  auto gpu_on_tpu = run_cmd({.trace = words::xprof_path("tracelens_jax_te_fused_attn_934987a2fc2f"), .hw = "tpu-v5e"});
  CHECK_THAT(gpu_on_tpu.text, !Catch::Contains("the trace is an XProf capture of the TPU runtime's allocator"));
  CHECK_THAT(gpu_on_tpu.text, Catch::Contains("the recording was made on a GPU, whose allocator this is not"));
  const std::string tpu = words::xprof_path("xprof_tpu_inference_2");
  auto tpu_on_gpu = run_cmd({.trace = tpu, .hw = "h100-80g"});
  CHECK_THAT(tpu_on_gpu.text, !Catch::Contains("the trace is an XProf capture of XLA's BFC allocator"));
  CHECK_THAT(tpu_on_gpu.text, Catch::Contains("the recording was made on a TPU, whose allocator this is not"));
  auto own = run_cmd({.trace = tpu});
  CHECK_THAT(own.text, Catch::Contains("the trace is an XProf capture of the TPU runtime's allocator"));
  CHECK(own.json["fidelity"].value("memory_as_recorded", true));
  std::string err =
      input_error([&] { (void)run_json({.trace = tpu, .envs = {"TF_GPU_ALLOCATOR=cuda_malloc_async"}}); });
  CHECK_THAT(err, Catch::Contains("TensorFlow's variable, which JAX reads for its GPU client only"));
  auto v5e = run_cmd({.trace = tpu, .hw = "tpu-v5e"});
  CHECK(v5e.json["fidelity"]["memory_as_recorded"] == false);
  CHECK_THAT(v5e.text, Catch::Contains("against a recording made with other device memory than this run's"));
}

TEST_CASE("vocabulary: compare names a what-if row by the framework's setting beside its entry") {
  // Trial 10, finding 13: a TensorFlow capture's rows were xla-bfc[preallocate=false] and platform,
  // which TensorFlow's users set as TF_FORCE_GPU_ALLOW_GROWTH=true and TF_GPU_ALLOCATOR=cuda_malloc.
  // The --json label stays the entry (check matches runs by it); `setting` carries the words.
  CompareRequest q;
  q.base.trace = words::kEcbm;
  auto tf = compare_cmd(q);
  INFO(tf.text);
  CHECK_THAT(tf.text, Catch::Contains("\nxla-bfc[preallocate=false] (TF_FORCE_GPU_ALLOW_GROWTH=true) "));
  CHECK_THAT(tf.text, Catch::Contains("\nplatform (TF_GPU_ALLOCATOR=cuda_malloc) "));
  CHECK_THAT(tf.text, Catch::Contains("\ncuda-async (TF_GPU_ALLOCATOR=cuda_malloc_async) "));
  std::map<std::string, std::string> setting;
  for (const auto& r : tf.json) setting[r.value("label", "")] = r.value("setting", "");
  CHECK(setting.at("xla-bfc[preallocate=false]") == "TF_FORCE_GPU_ALLOW_GROWTH=true");
  CHECK(setting.at("xla-bfc").empty());
  q.base.trace = words::kMi300;
  auto jax = compare_cmd(q);
  CHECK_THAT(jax.text, Catch::Contains("\nxla-bfc[preallocate=true] (XLA_PYTHON_CLIENT_PREALLOCATE=true) "));
  CHECK_THAT(jax.text, Catch::Contains("\nplatform (XLA_PYTHON_CLIENT_ALLOCATOR=platform) "));
}

TEST_CASE("vocabulary: a bad memory fraction names the variable given") {
  // Trial 10, finding 15: XLA_PYTHON_CLIENT_MEM_FRACTION=abc was reported as XLA_CLIENT_MEM_FRACTION.
  std::string err =
      input_error([] { (void)run_json({.trace = words::kMi300, .envs = {"XLA_PYTHON_CLIENT_MEM_FRACTION=abc"}}); });
  CHECK_THAT(err, Catch::Contains("XLA_PYTHON_CLIENT_MEM_FRACTION: could not convert string to float: 'abc'"));
  CHECK_THAT(err, !Catch::Contains("XLA_CLIENT_MEM_FRACTION:"));
  err = input_error([] { (void)run_json({.trace = words::kMi300, .envs = {"XLA_CLIENT_MEM_FRACTION=abc"}}); });
  CHECK_THAT(err, Catch::Contains("XLA_CLIENT_MEM_FRACTION: could not convert"));
}

TEST_CASE("vocabulary: JAX's cuda_async what-if of a capture keeps its mode: XLA_PYTHON_CLIENT_PREALLOCATE sets both") {
  // Trial 14, item 1: XLA passes the allocator config's `preallocate` to CreateCudaAsyncAllocator as
  // reserve_memory (se_gpu_pjrt_client.cc, GetStreamExecutorGpuDeviceAllocator). The MI355X capture grew
  // on demand (regions of 2 MiB, then 128 MiB), yet its cuda_async what-if on an H100 preallocated the
  // threshold: 76.78 GiB reserved, against 640 MiB with XLA_PYTHON_CLIENT_PREALLOCATE=false.
  const std::string te = words::xprof_path("tracelens_jax_te_fused_attn_934987a2fc2f");
  auto async = run_cmd({.trace = te, .hw = "h100-80g", .envs = {"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async"}});
  INFO(async.text);
  CHECK(async.json["policy"]["config"]["preallocate"] == false);
  CHECK(async.json["peak_reserved_bytes"].get<std::uint64_t>() < kGiB);
  CHECK_THAT(async.text, Catch::Contains("the pool grows on demand, as the capture's BFC did "
                                         "(XLA_PYTHON_CLIENT_PREALLOCATE sets both)"));
  CHECK_THAT(async.text, Catch::Contains("(the program's memory fraction of the device)"));  // JAX's limit
  auto off = run_json({.trace = te,
                       .hw = "h100-80g",
                       .envs = {"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async", "XLA_PYTHON_CLIENT_PREALLOCATE=false"}});
  CHECK(off["peak_reserved_bytes"] == async.json["peak_reserved_bytes"]);
  // The user's setting still decides, and without the recorded settings JAX's default preallocates.
  auto on = run_json({.trace = te,
                      .hw = "h100-80g",
                      .envs = {"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async", "XLA_PYTHON_CLIENT_PREALLOCATE=true"}});
  CHECK(on["policy"]["config"]["preallocate"] == true);
  CHECK(on["peak_reserved_bytes"].get<std::uint64_t>() > 70 * kGiB);
  auto fresh =
      run_json({.trace = te, .hw = "h100-80g", .policy = "cuda-async", .sets = {"use_recorded_settings=false"}});
  CHECK(fresh["policy"]["config"]["preallocate"] == true);
  // A fraction given keeps the mode (as xla-bfc keeps it), and says so.
  auto frac = run_cmd({.trace = te,
                       .hw = "h100-80g",
                       .envs = {"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async", "XLA_PYTHON_CLIENT_MEM_FRACTION=.5"}});
  CHECK(frac.json["policy"]["config"]["preallocate"] == false);
  CHECK_THAT(frac.text, Catch::Contains("the capture's mode kept (a threshold given): the pool grows on demand"));
  // compare's cuda-async row is the same what-if; the MI300X capture (144 GiB reserved) likewise.
  CompareRequest q;
  q.base.trace = te;
  q.base.hw = "h100-80g";
  auto c = compare_cmd(q);
  bool row = false;
  for (const auto& r : c.json)
    if (r.value("label", "") == "cuda-async") {
      row = true;
      CHECK(r["peak_reserved_bytes"] == async.json["peak_reserved_bytes"]);
    }
  CHECK(row);
  auto mi = run_json({.trace = words::kMi300, .policy = "cuda-async"});
  CHECK(mi["policy"]["config"]["preallocate"] == false);
  CHECK(mi["peak_reserved_bytes"].get<std::uint64_t>() < kGiB);
  // A preallocated capture (the H200's, one region) keeps preallocation.
  auto h200 = run_json(
      {.trace = words::xprof_path("h200_jax_fragment_oom"), .envs = {"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async"}});
  CHECK(h200["policy"]["config"]["preallocate"] == true);
}

TEST_CASE("vocabulary: a sweep's setting for another allocator than the recording's starts with the one selecting it") {
  // Trial 14, item 2: `sweep --find min-mem-fraction --policy cuda-async` printed
  // XLA_PYTHON_CLIENT_MEM_FRACTION=.01 alone, which pasted into JAX keeps the BFC.
  const std::string te = words::xprof_path("tracelens_jax_te_fused_attn_934987a2fc2f");
  auto s = sweep_cmd({.trace = te, .hw = "h100-80g", .policy = "cuda-async"}, "min-mem-fraction");
  INFO(s.text);
  CHECK_THAT(s.text,
             Catch::Contains("  setting: XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async XLA_PYTHON_CLIENT_MEM_FRACTION="));
  // Selected by the variable itself: said once; the run's other variables come along.
  auto e = sweep_cmd({.trace = te,
                      .hw = "h100-80g",
                      .envs = {"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async", "XLA_PYTHON_CLIENT_PREALLOCATE=true"}},
                     "min-mem-fraction");
  CHECK_THAT(e.text,
             Catch::Contains("  setting: XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async XLA_PYTHON_CLIENT_PREALLOCATE=true "
                             "XLA_PYTHON_CLIENT_MEM_FRACTION="));
  // The recording's own allocator needs no selection; its growth on demand is stated (issue 47: the
  // fraction alone, pasted, preallocates).
  auto own = sweep_cmd({.trace = te, .hw = "h100-80g"}, "min-mem-fraction");
  CHECK_THAT(own.text,
             Catch::Contains("  setting: XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION="));
  // TensorFlow's words: its variable, then the option.
  auto tf = sweep_cmd({.trace = words::kEcbm, .policy = "cuda-async"}, "min-mem-fraction");
  CHECK_THAT(tf.text, Catch::Contains("  setting: TF_GPU_ALLOCATOR=cuda_malloc_async and "
                                      "tf.compat.v1.GPUOptions(per_process_gpu_memory_fraction="));
}

TEST_CASE("vocabulary: --policy cuda-async on a ROCm capture runs, saying ROCm has no cudaMallocAsync") {
  // Trial 14, item 3: the run said nothing, while the variable form is refused (XLA builds the
  // allocator only for CUDA). --policy is fragsim's own name: the model runs, with a note.
  auto r = run_cmd({.trace = words::kMi300, .policy = "cuda-async"});
  INFO(r.text);
  CHECK_THAT(r.text, Catch::Contains("cuda-async on ROCm: cudaMallocAsync is CUDA's"));
  auto cuda = run_cmd({.trace = words::kMi300, .hw = "h100-80g", .policy = "cuda-async"});
  CHECK_THAT(cuda.text, !Catch::Contains("cuda-async on ROCm"));
  // A sweep of it offers no setting JAX would refuse to start with.
  auto s = sweep_cmd({.trace = words::kMi300, .capacity = "2GiB", .policy = "cuda-async"}, "min-mem-fraction");
  INFO(s.text);
  CHECK_THAT(s.text, Catch::Contains("with fragsim's cuda-async, which no JAX setting selects on ROCm"));
  CHECK_THAT(s.text, !Catch::Contains("XLA_PYTHON_CLIENT_ALLOCATOR"));
  // Advice after a fragmentation OOM there never names it.
  auto oom = run_cmd({.trace = words::kMi300, .capacity = "1102MiB"});
  CHECK_THAT(oom.text, !Catch::Contains("cuda_async"));
  CHECK_THAT(oom.text, !Catch::Contains("cuda-async"));
}

TEST_CASE("vocabulary: a TensorFlow capture without its recorded settings gets TensorFlow's default limit") {
  // Trial 14, item 4: use_recorded_settings=false gave the T4 capture JAX's 0.75 of the device
  // (11.07 GiB); TensorFlow's default is the free memory (the device's 15,843,721,216 B less the base
  // preset's 500 MiB reserve here) less the 1050 MiB it keeps on compute capability 7: 13.24 GiB.
  const Bytes tf_default = 15843721216 - 500 * kMiB - 1050 * kMiB;
  auto r = run_cmd({.trace = words::kEcbm, .sets = {"use_recorded_settings=false"}});
  CHECK(r.json["policy"]["config"]["resolved_memory_limit"] == tf_default);
  CHECK(r.json["policy"]["config"]["mem_fraction"].is_null());  // no per_process_gpu_memory_fraction in force
  CHECK_THAT(r.text, Catch::Contains("TensorFlow's default limit (no per_process_gpu_memory_fraction): this "
                                     "device's 14.27 GiB free less the 1050 MiB it keeps for the system (compute "
                                     "capability 7.x): 13.24 GiB"));
  auto async = run_json({.trace = words::kEcbm, .policy = "cuda-async", .sets = {"use_recorded_settings=false"}});
  CHECK(async["policy"]["config"]["resolved_release_threshold"] == tf_default);
  // With the recorded settings the recorded limit stands, and no default is spoken of.
  auto recorded = run_cmd({.trace = words::kEcbm});
  CHECK(recorded.json["policy"]["config"]["resolved_memory_limit"] == 14648653952);
  CHECK(recorded.json["policy"]["config"]["mem_fraction"].is_null());
  CHECK_THAT(recorded.text, !Catch::Contains("TensorFlow's default limit"));
  // A fraction given is TensorFlow's per_process_gpu_memory_fraction of the total.
  auto half = run_json({.trace = words::kEcbm, .sets = {"use_recorded_settings=false", "mem_fraction=0.5"}});
  CHECK(half["policy"]["config"]["resolved_memory_limit"] == 15843721216 / 2);
}

TEST_CASE("vocabulary: diff and check state the recorded limit's fraction and how another device's was made") {
  // Trial 14, item 5: check called TensorFlow's limit on 782 MiB "its share of this device" (it is the
  // free memory less 225 MiB), and diff said mem_fraction 0.75 -> 0.001 where the capture's was 0.97.
  auto base = run_json({.trace = words::kEcbm});
  auto small = run_json({.trace = words::kEcbm, .capacity = "782MiB"});
  const std::string applied = small["policy"]["config"]["recorded_settings_applied"];
  CHECK_THAT(applied, Catch::Contains("(this device's free memory less TensorFlow's reserve for the system)"));
  CHECK_THAT(applied, !Catch::Contains("share"));
  // check refuses the pair (their recorded settings differ), naming the limit by the rule that made it.
  const std::string err = input_error([&] { (void)check_cmd("base.json", base, "small.json", small); });
  CHECK_THAT(err, Catch::Contains("limit 59768832 B (this device's free memory less TensorFlow's reserve"));
  CHECK_THAT(err, !Catch::Contains("its share of this device"));
  const std::string te = words::xprof_path("tracelens_jax_te_fused_attn_934987a2fc2f");
  CHECK(run_json({.trace = te})["policy"]["config"]["mem_fraction"] == 0.97);
  auto d = cli("diff " + te + " --policies 'xla-bfc,xla-bfc[mem_fraction=0.001]'");
  INFO(d.out << d.err);
  CHECK_THAT(d.out, Catch::Contains("mem_fraction 0.97 -> 0.001"));
  CHECK_THAT(d.out, !Catch::Contains("0.75"));
}

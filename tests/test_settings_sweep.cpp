// --env parsing with JAX's semantics, and the sweep's answers.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "sim/base/error.h"
#include "sim/settings.h"
#include "sim/sweep.h"
#include "sim_helpers.h"
#include "traces/generators.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {
PolicySpec resolve(std::vector<std::string> envs, std::string policy = "", std::vector<std::string> sets = {}) {
  std::vector<std::string> notes;
  return resolve_settings({policy, sets, envs}, &notes);
}
}  // namespace

TEST_CASE("settings: JAX variables select and configure the policy as JAX parses them") {
  auto s = resolve({"XLA_PYTHON_CLIENT_MEM_FRACTION=.5"});
  CHECK(s.name == "xla-bfc");
  CHECK(s.config["mem_fraction"] == 0.5);
  CHECK(resolve({"XLA_PYTHON_CLIENT_ALLOCATOR=PLATFORM"}).name == "platform");  // .lower()
  CHECK(resolve({"XLA_PYTHON_CLIENT_ALLOCATOR=bfc"}).name == "xla-bfc");
  CHECK(resolve({"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async", "XLA_CLIENT_MEM_FRACTION=0.9"}).config["mem_fraction"] ==
        0.9);
  CHECK_THROWS_AS(resolve({"XLA_PYTHON_CLIENT_ALLOCATOR=vmm"}), InputError);
  CHECK_THROWS_WITH(resolve({"XLA_CLIENT_MEM_FRACTION=.5", "XLA_PYTHON_CLIENT_MEM_FRACTION=.6"}),
                    Catch::Contains("specified together"));
  CHECK(resolve({"XLA_CLIENT_MEM_FRACTION=", "XLA_PYTHON_CLIENT_MEM_FRACTION=.6"}).config["mem_fraction"] == 0.6);
  CHECK(resolve({"XLA_CLIENT_MEM_FRACTION= 1_0e-1 "}).config["mem_fraction"] == 1.0);  // Python float()
  CHECK_THROWS_AS(resolve({"XLA_CLIENT_MEM_FRACTION=75%"}), InputError);
  CHECK(resolve({"XLA_PYTHON_CLIENT_PREALLOCATE=false"}).config["preallocate"] == false);
  CHECK(resolve({"XLA_PYTHON_CLIENT_PREALLOCATE=0"}).config["preallocate"] == false);
  CHECK(resolve({"XLA_PYTHON_CLIENT_PREALLOCATE=FALSE"}).config["preallocate"] == true);  // JAX's quirk
  CHECK(resolve({"XLA_PYTHON_CLIENT_PREALLOCATE=no"}).config["preallocate"] == true);
  CHECK(resolve({"XLA_PYTHON_CLIENT_PREALLOCATE="}).config.count("preallocate") == 0);
  CHECK(resolve({"XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB=64"}).config["collective_memory_size"] == 64ULL << 20);
  auto f = resolve({"XLA_FLAGS=--xla_gpu_autotune_level=0 --xla_gpu_enable_allocator_spatial_partitioning=false"});
  CHECK(f.name == "xla-bfc");
  CHECK(f.config["spatial_partitioning"] == false);
  CHECK_THROWS_AS(resolve({"XLA_PYTHON_CLIENT_ALLOCATOR=platform"}, "xla-bfc"), InputError);
  CHECK_THROWS_AS(resolve({"MY_VAR=1"}), InputError);
  CHECK(resolve({}, "", {"alignment=512"}).config["alignment"] == 512);
  CHECK(resolve({"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"}).name == "torch-caching");
}

TEST_CASE("settings: spatial partitioning off via XLA_FLAGS changes placements like JAX") {
  TraceBuilder t;
  t.alloc(1, 200 << 20).alloc(2, 690 << 20).free(1).alloc(3, 100 << 20);
  auto spatial = resolve({}, "xla-bfc");
  spatial.config["memory_limit"] = 1ULL << 30;
  auto classic = resolve({"XLA_FLAGS=--xla_gpu_enable_allocator_spatial_partitioning=false"});
  classic.config["memory_limit"] = 1ULL << 30;
  auto a = simulate("envsp", t.text, spatial.name, spatial.config),
       b = simulate("envcl", t.text, classic.name, classic.config);
  CHECK(a.placements[2]["region_offset"] == 0);
  CHECK(b.placements[2]["region_offset"] == 890 << 20);
}

TEST_CASE("sweep: at the reported fraction the trace completes — 0.01 lower it OOMs") {
  Registry reg;
  register_builtin_policies(reg);
  std::string trace = tmp_path("sweep.fstrace");
  generate_workload("jax-train", 5, {{"layers", 4}, {"steps", 2}, {"hidden", 512}}, trace);
  SweepOptions so;
  so.base.trace = trace;
  so.base.policy.name = "xla-bfc";
  so.base.hw = load_hardware("h100-80g");
  so.base.hw.space(Space::kHbm)->capacity = 2ULL << 30;
  so.find = "min-mem-fraction";
  auto r = run_sweep(so, reg);
  REQUIRE(r.value);
  CHECK(r.runs.size() == 100);
  double f = *r.value;
  CHECK(r.setting == "XLA_PYTHON_CLIENT_MEM_FRACTION=" + fraction_setting(f));
  auto at = [&](double x) {
    auto o = so.base;
    o.policy.config["mem_fraction"] = x;
    return run_simulation(o, reg).completed;
  };
  CHECK(at(f));
  CHECK_FALSE(at(f - 0.01));
  CHECK(fraction_setting(0.83) == ".83");
  CHECK(fraction_setting(0.8) == ".8");
  CHECK(fraction_setting(1.0) == "1.0");

  so.find = "min-capacity";
  auto c = run_sweep(so, reg);
  REQUIRE(c.value);
  auto cap_ok = [&](Bytes cap) {
    auto o = so.base;
    o.hw.space(Space::kHbm)->capacity = cap;
    return run_simulation(o, reg).completed;
  };
  Bytes cap = static_cast<Bytes>(*c.value);
  CHECK(cap % (2 << 20) == 0);
  CHECK(cap_ok(cap));
  CHECK_FALSE(cap_ok(cap - (2 << 20)));
}

TEST_CASE("sweep: torch-caching's memory fraction is set_per_process_memory_fraction") {
  Registry reg;
  register_builtin_policies(reg);
  std::string trace = tmp_path("sweep_torch.fstrace");
  generate_workload("torch-eager", 2, {{"steps", 3}, {"ops_per_step", 50}}, trace);
  SweepOptions so;
  so.base.trace = trace;
  so.base.policy.name = "torch-caching";
  so.base.hw = load_hardware("h100-80g");
  so.base.hw.space(Space::kHbm)->capacity = 4ULL << 30;
  so.find = "min-mem-fraction";
  auto r = run_sweep(so, reg);
  REQUIRE(r.value);
  CHECK(r.setting == fmt::format("torch.cuda.set_per_process_memory_fraction({:.2f})", *r.value));
  auto at = [&](double f) {
    auto o = so.base;
    o.policy.config["memory_fraction"] = f;
    return run_simulation(o, reg).completed;
  };
  CHECK(at(*r.value));
  CHECK_FALSE(at(*r.value - 0.01));
}

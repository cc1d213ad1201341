// Real reports, reproduced to the printed precision (issue 11): every row is an allocation or a
// limit as XLA, JAX or the TPU runtime printed it in a public issue, with the link in the row.
// Sizes are compared as the tool prints them (tsl_bytes / xla_tpu_bytes), so a rounding or
// truncation difference fails the row.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "hardware_models/hardware_model.h"
#include "hardware_models/tpu_layout.h"
#include "sim/base/error.h"
#include "sim/commands/listing.h"
#include "sim_helpers.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

struct AllocationRow {
  const char* shape;     // as printed in the report ("Shape:" or the XLA label)
  const char* preset;    // the chip the report came from (its generation picks default tiles)
  const char* size;      // "Size:" as printed ("" when the report does not show it)
  const char* unpadded;  // "Unpadded size:" as printed ("" when not shown)
  const char* source;
};

// TPU compiler OOM reports: "Largest program allocations in hbm".
const AllocationRow kAllocations[] = {
    {"s32[8388608,8,4]{2,1,0:T(8,128)}", "tpu-v3", "32.00G", "1.00G",
     "https://github.com/DifferentiableUniverseInitiative/flowpm/issues/27"},
    {"f32[256,512,128,2]{3,2,1,0}", "tpu-v3", "8.00G", "128.00M",
     "https://github.com/tensorflow/tensorflow/issues/30803"},
    {"f32[29184,1,2560]{2,1,0:T(2,128)}", "tpu-v3", "570.00M", "285.00M", "https://github.com/pytorch/xla/issues/3041"},
    {"f32[29184,2,2560]{2,1,0:T(2,128)}", "tpu-v3", "570.00M", "570.00M", "https://github.com/pytorch/xla/issues/3041"},
    {"f32[512,245,256]{2,1,0:T(8,128)}", "tpu-v2", "124.00M", "122.50M",
     "https://github.com/sokrypton/ColabFold/issues/62"},
    {"f32[1024,245,64]{1,2,0:T(8,128)}", "tpu-v2", "64.00M", "61.25M",
     "https://github.com/sokrypton/ColabFold/issues/62"},
    {"u32[12582912,1]{1,0:T(8,128)}", "tpu-v3", "6.00G", "48.00M", "https://github.com/pytorch/xla/issues/1965"},
    {"bf16[512,16,3072]{2,1,0:T(8,128)(2,1)}", "tpu-v3", "", "48.00M", "https://github.com/pytorch/xla/issues/1965"},
    {"bf16[2048,1,2048,128]{0,1,3,2:T(4,128)(2,1)}", "tpu-v4", "4.00G", "1.00G",
     "https://github.com/pytorch/xla/issues/6674"},
    // PRED stored as 32 bits (E(32)): 4x its logical size.
    {"pred[64,512,2048]{2,1,0:T(8,128)E(32)}", "tpu-v3", "256.00M", "64.00M",
     "https://github.com/google/trax/issues/525"},
    // A memory-space annotation (S(5): host memory) is read; it does not change the size.
    {"bf16[126,2,8192,16384]{3,2,1,0:T(8,128)(2,1)S(5)}", "tpu-v5p", "63.00G", "63.00G",
     "a report quoted in fragsim issue 11"},
};

// XLA:TPU's default tile choice, as layouts print it: the shape without its tiles must get the
// printed tiles (and so the printed size).
struct TileRow {
  const char* printed;  // shape with XLA's layout
  const char* bare;     // the same shape with only the memory space (or nothing) left
  const char* preset;
  Bytes bytes;  // size of the printed layout (ShapeUtil::ArraySize)
  const char* source;
};
const TileRow kTiles[] = {
    {"f32[1280]{0:T(1024)}", "f32[1280]", "tpu-v5e", 8192, "a report quoted in fragsim issue 11"},
    {"f32[512]{0:T(512)}", "f32[512]", "tpu-v5e", 2048, "a report quoted in fragsim issue 11"},
    {"bf16[]{:T(512)(2,1)}", "bf16[]", "tpu-v5e", 1024, "a report quoted in fragsim issue 11"},
    {"u32[]{:T(128)S(1)}", "u32[]{:S(1)}", "tpu-v5e", 512, "a report quoted in fragsim issue 11 (VMEM scalar)"},
    {"f32[]{:T(256)}", "f32[]", "tpu-v2", 1024, "https://github.com/sokrypton/ColabFold/issues/62 (broadcast operand)"},
    {"u32[]{:T(256)}", "u32[]", "tpu-v3", 1024, "https://github.com/pytorch/xla/issues/1965 (fusion operands)"},
    // From v4 on a 32-bit scalar takes one row of 128 lanes: the v6e capture's shape stat.
    {"f32[]{:T(128)}", "f32[]", "tpu-v6e", 512,
     "openxla/xprof @ 01d85deb : xprof/convert/test_xplanes/tpu_inference_2.xplane.pb, MemoryAllocation 'dummy'"},
    // pred is stored as 32 bits: ranks 1 and 3 of one report.
    {"pred[67108864]{0:T(1024)E(32)}", "pred[67108864]", "tpu-v3", 67108864ULL * 4,
     "https://github.com/google/trax/issues/525 (reshape operand)"},
    {"pred[64,512,2048]{2,1,0:T(8,128)E(32)}", "pred[64,512,2048]", "tpu-v3", 64ULL * 512 * 2048 * 4,
     "https://github.com/google/trax/issues/525"},
    {"f32[245,512,256]{2,1,0:T(8,128)}", "f32[245,512,256]", "tpu-v2", 245ULL * 512 * 256 * 4,
     "https://github.com/sokrypton/ColabFold/issues/62"},
    {"bf16[512,16,3072]{2,1,0:T(8,128)(2,1)}", "bf16[512,16,3072]", "tpu-v3", 512ULL * 16 * 3072 * 2,
     "https://github.com/pytorch/xla/issues/1965"},
};

// HBM limits as the compiler prints them ("Used X of <usable> hbm", "reserved <reserve>").
struct LimitRow {
  const char* preset;
  const char* usable;   // "of ... hbm" ("" when not shown)
  const char* reserve;  // "reserved ..." in "Total hbm usage" ("" when not shown)
  const char* source;
};
const LimitRow kLimits[] = {
    {"tpu-v2", "7.48G", "530.00M", "https://github.com/sokrypton/ColabFold/issues/62"},
    {"tpu-v2", "", "530.00M", "https://github.com/google/flax/issues/1733"},
    {"tpu-v3", "15.48G", "528.00M",
     "https://github.com/DifferentiableUniverseInitiative/flowpm/issues/27 (reserved; older XLA printed 'of 16.00G')"},
    {"tpu-v3", "", "528.00M", "https://github.com/tensorflow/tensorflow/issues/30803"},
    {"tpu-v6e", "31.25G", "", "https://github.com/EnzymeAD/Enzyme-JAX/pull/2422"},
    {"tpu-v4", "30.75G", "", "https://github.com/erfanzar/EasyDeL/issues/166"},
};

}  // namespace

TEST_CASE("real reports: TPU allocations as XLA printed them, size and unpadded size") {
  for (const auto& row : kAllocations) {
    INFO(row.shape << " on " << row.preset << " — " << row.source);
    HardwareModel hw = load_hardware(row.preset);
    TpuLayout l = tpu_layout(parse_array_spec(row.shape, "test"), hw.generation);
    if (*row.size) CHECK(xla_tpu_bytes(l.padded) == row.size);
    if (*row.unpadded) CHECK(xla_tpu_bytes(l.unpadded) == row.unpadded);
  }
  // flowpm#27 prints the padding line too: "Extra memory due to padding: 31.00G (32.0x expansion)".
  auto l = tpu_layout(parse_array_spec("s32[8388608,8,4]{2,1,0:T(8,128)}", "t"), 3);
  CHECK(xla_tpu_bytes(l.padded - l.unpadded) == "31.00G");
  CHECK(fmt::format("{:.1f}x", static_cast<double>(l.padded) / static_cast<double>(l.unpadded)) == "32.0x");
}

TEST_CASE("real reports: the default tiles XLA:TPU prints for scalars, vectors and matrices") {
  for (const auto& row : kTiles) {
    INFO(row.printed << " on " << row.preset << " — " << row.source);
    HardwareModel hw = load_hardware(row.preset);
    ArraySpec printed = parse_array_spec(row.printed, "test");
    TpuLayout as_printed = tpu_layout(printed, hw.generation);
    TpuLayout chosen = tpu_layout(parse_array_spec(row.bare, "test"), hw.generation);
    CHECK(as_printed.padded == row.bytes);
    CHECK(chosen.padded == row.bytes);
    std::string tiles = row.printed;
    tiles = tiles.substr(tiles.find(":T") + 2);
    tiles = tiles.substr(0, tiles.find_first_of("S}"));
    CHECK(chosen.tile == tiles);
  }
}

TEST_CASE("real reports: HBM limits and reserves as the TPU compiler prints them, per chip") {
  for (const auto& row : kLimits) {
    INFO(row.preset << " — " << row.source);
    HardwareModel hw = load_hardware(row.preset);
    const SpaceSpec* hbm = hw.space(Space::kHbm);
    REQUIRE(hbm);
    if (*row.usable) CHECK(xla_tpu_bytes(hbm->usable()) == row.usable);
    if (*row.reserve) CHECK(xla_tpu_bytes(hbm->reserve) == row.reserve);
  }
  // The v6e runtime allocator's limit differs from the compiler's: allocator stats print
  // "Limit: 31.246 GiB" (EnzymeAD/Enzyme-JAX#2422) next to the compiler's "of 31.25G hbm".
  HardwareModel v6e = load_hardware("tpu-v6e");
  CHECK(v6e.space(Space::kHbm)->runtime_usable() == 33550237696);
  CHECK(fmt::format("{:.3f}", static_cast<double>(v6e.space(Space::kHbm)->runtime_usable()) / (1 << 30)) == "31.246");
  CHECK(v6e.space(Space::kHbm)->runtime_usable() != v6e.space(Space::kHbm)->usable());
}

TEST_CASE("real reports: tpu-padded places within the runtime limit, static-heap checks the compiler's") {
  std::string t =
      write_text("v6e_limit.jsonl",
                 "{\"fragsim_trace\":1}\n"
                 "{\"op\":\"alloc\",\"id\":1,\"size\":33552334848,\"shape\":[33552334848],\"dtype\":\"u8\"}\n");
  // 31.248 GiB: above the runtime's 33,550,237,696 B, below the compiler's 31.25 GiB.
  auto runtime = run_cmd({.trace = t, .hw = "tpu-v6e", .policy = "tpu-padded[pad=false]"}).json;
  auto compile = run_cmd({.trace = t, .hw = "tpu-v6e", .policy = "static-heap"}).json;
  CHECK(runtime["completed"] == false);
  CHECK(compile["completed"] == true);
}

TEST_CASE("real reports: JAX's BFC limit on an A100-40GB and sizes as TSL prints them") {
  // jax-ml/jax#20022: "Limit: 31861358592" with the default fraction .75 (a jaxlib before the
  // 2 MiB limit rounding of 0.10.2).
  std::string t = write_text("a100.jsonl", "{\"fragsim_trace\":1}\n{\"op\":\"alloc\",\"id\":1,\"size\":1024}\n");
  auto r = run_cmd({.trace = t, .hw = "a100-40g", .policy = "xla-bfc[jaxlib=0.4.25]"}).json;
  CHECK(r["policy"]["config"]["resolved_memory_limit"] == 31861358592ULL);
  // TSL's HumanReadableNumBytes truncates to whole units before the last step (issue 11's example),
  // and the BFC log lines of tensorflow/tensorflow logs ("585.94MiB (rounded to 614400000)").
  CHECK(tsl_bytes(4000000000) == "3.72GiB");
  CHECK(tsl_bytes(614400000) == "585.94MiB");
  CHECK(tsl_bytes(115200) == "112.5KiB");
  CHECK(tsl_bytes(1023) == "1023B");
  CHECK(xla_tpu_bytes(430080) == "420.0K");  // "global 420.0K" (sokrypton/ColabFold#62)
  CHECK(xla_tpu_bytes(0) == "0B");
}

TEST_CASE("layout: every annotation XLA prints is read, a wrong one names itself") {
  auto a =
      parse_array_spec("f32[10,300]{1,0:D(D,D)T(8,128)L(1024)#(s32)*(s64)E(32)S(1)SC(1:100)P(f32[16,384])M(8)}", "t");
  CHECK(a.tail_alignment == 1024);
  CHECK(a.element_bits == 32);
  CHECK(a.memory_space == 1);
  REQUIRE(a.splits.size() == 1);
  CHECK(a.splits[0].second == std::vector<std::uint64_t>{100});
  // Split dim 1 at 100: pieces of 100 and 200 → 200 → 256 lanes; 10 → 16 sublanes; L(1024) keeps 4096.
  CHECK(tpu_layout(a, 5).padded == 16 * 256 * 4);
  CHECK(tpu_layout(parse_array_spec("f32[10]{0:T(*,4)}", "t"), 5).padded == 12 * 4);
  CHECK(tpu_layout(parse_array_spec("bfloat16[1000,129]", "t"), 5).padded == 512000);  // NumPy dtype names
  CHECK(tpu_layout(parse_array_spec("int8[1000,129]", "t"), 5).tile == "(32,128)(4,1)");
  for (const char* bad : {"f32[3]{0:T(4)X(3)}", "f32[3]{0:T(4)", "f32[3]{0:E(0)}", "f32[3]{0:T()}", "f32[3]{0:S(1)}x",
                          "f32[3]{0:SC(5:1)}", "f32[3]{0:T(0)}"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_array_spec(bad, "t"), InputError);
  }
  // What `fragsim layout` says of it (on its default preset).
  std::string err = input_error([] { (void)layout_text("f32[3]{0:T(4)X(3)}", "tpu-v5e"); });
  CHECK(err.find("unknown layout annotation 'X'") != std::string::npos);
  CHECK(err.find("column 14") != std::string::npos);
}

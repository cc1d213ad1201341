// Structured fuzzers (issue 23): inputs built from the formats' own structure rather than byte
// mutations, which no longer find anything — XProf captures (names, numbers, timestamps, stats,
// shared metadata), XLA modules with random SHARE_WITH graphs, pickles that share objects through
// the memo, --hw files with extreme values, and report pairs for check and merge. Each runs a
// fixed number of inputs from a fixed seed in-process (so the ASan+UBSan build checks every
// step); an input may give a result or an input error, nothing else — no crash, no other
// exception, no hang (every loop is bounded by the input), and for the gates: a regression never
// passes, a merge never returns a result that is not every run exactly once.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "hardware_models/hardware_model.h"
#include "hlo_synth.h"
#include "pickle_synth.h"
#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/commands/batch.h"
#include "sim/commands/check.h"
#include "sim/commands/commands.h"
#include "sim/engine/engine.h"
#include "sim/report/report.h"
#include "sim/report/report_schema.h"
#include "sim/report/snapshot_export.h"
#include "sim_helpers.h"
#include "snapshot_check.h"
#include "test_util.h"
#include "traces/trace_reader.h"
#include "traces/xla_modules.h"
#include "xprof_synth.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

// FRAGSIM_FUZZ_SCALE=k runs k times the inputs and FRAGSIM_FUZZ_SEED=s shifts every seed, for a
// deeper run by hand; the suite runs the fixed default (1, 0).
std::uint64_t env_number(const char* name, std::uint64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : def;
}
int scaled(int n) { return n * static_cast<int>(std::max<std::uint64_t>(1, env_number("FRAGSIM_FUZZ_SCALE", 1))); }
std::uint64_t seed(std::uint64_t s) { return s + 1000003 * env_number("FRAGSIM_FUZZ_SEED", 0); }

// splitmix64: a fixed seed gives the same inputs on every machine.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }
  bool coin(int one_in = 2) { return below(static_cast<std::uint64_t>(one_in)) == 0; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }
};

// Sets limits for one scope (process-wide, as --limit does).
struct LimitScope {
  explicit LimitScope(const std::vector<std::string>& kvs) {
    for (const auto& kv : kvs) set_limit(kv);
  }
  ~LimitScope() { reset_limits(); }
};

// Outcomes of one fuzzer: every input must end in one of these, and the inputs must have reached
// both (a fuzzer whose inputs all fail early, or all pass, tests little).
struct Outcomes {
  int results = 0, input_errors = 0;
  void check(int inputs) const {
    // The counts on standard output (`ctest -V -R fuzz` shows them): how many inputs each fuzzer
    // drove to a result and how many to an input error.
    std::printf("%s: %d inputs, %d results, %d input errors\n", Catch::getResultCapture().getCurrentTestName().c_str(),
                inputs, results, input_errors);
    CHECK(results + input_errors == inputs);
    CHECK(results > 0);
    CHECK(input_errors > 0);
  }
};

// Replays a trace (a file, or a reader factory) through a policy with every invariant checked
// after every event; counts a result or an input error. Anything else propagates: a failure.
void replay(Outcomes& o, const std::string& trace, const std::string& policy, const std::string& hw, bool keep_going,
            TraceSource source = {}) {
  RunOptions opt;
  opt.trace = trace;
  opt.source = std::move(source);
  opt.policy.name = policy;
  opt.check = true;
  opt.keep_going = keep_going;
  try {
    opt.hw = load_hardware(hw);
    (void)run_simulation(opt, test_registry());
    ++o.results;
  } catch (const InputError&) {
    ++o.input_errors;
  } catch (...) {  // a failure: the input is kept for reproduction, beside the scratch folder
    std::error_code ec;
    auto keep = std::filesystem::temp_directory_path() / "fragsim-fuzz-failed";
    std::filesystem::create_directories(keep, ec);
    for (const auto& f : {trace, hw})
      if (std::filesystem::is_regular_file(f, ec))
        std::filesystem::copy_file(f, keep / std::filesystem::path(f).filename(),
                                   std::filesystem::copy_options::overwrite_existing, ec);
    throw;
  }
}

std::uint64_t extreme_u64(Rng& r) {
  static const std::vector<std::uint64_t> k = {
      0,    1, 255, 4096, 1 << 20, (1ULL << 32) - 1, 1ULL << 32, 1ULL << 48, (1ULL << 63) - 1, 1ULL << 63, ~0ULL - 4095,
      ~0ULL};
  return r.coin(3) ? r.next() : r.pick(k);
}

std::int64_t extreme_i64(Rng& r) {
  static const std::vector<std::int64_t> k = {
      0, 1, -1, 1000, INT64_MAX / 1000, INT64_MAX / 1000 + 1, INT64_MAX, INT64_MIN, INT64_MIN + 1};
  return r.coin(3) ? static_cast<std::int64_t>(r.next()) : r.pick(k);
}

// A name of the kinds XLA and TensorFlow give allocators and planes, or not quite.
std::string fuzz_name(Rng& r, const std::string& prefix, const std::string& suffix) {
  switch (r.below(6)) {
    case 0:
      return prefix + std::to_string(r.below(4)) + suffix;
    case 1:
      return prefix + std::string(1 + r.below(30), static_cast<char>('0' + r.below(10))) + suffix;  // long numbers
    case 2:
      return prefix + std::to_string(extreme_u64(r)) + suffix;
    case 3:
      return prefix + std::string(r.below(5000), '9') + suffix;
    case 4:
      return prefix + "x\n\x1b" + std::to_string(r.below(3)) + suffix;
    default:
      return std::string(r.below(40), static_cast<char>(r.next()));
  }
}

}  // namespace

TEST_CASE("fuzz: structured XProf captures (names, numbers, timestamps, shared metadata) — results or input errors",
          "[fuzz]") {
  Rng r{seed(23001)};
  Outcomes o;
  const int kInputs = scaled(120);
  static const std::vector<std::string> kStats = {
      "allocator_name",  "index_on_host",   "addr",           "requested_bytes", "allocation_bytes",
      "bytes_allocated", "bytes_available", "bytes_reserved", "tf_op",           "shape",
      "region_type",     "data_type",       "device_vendor",  "memory_size",     "device_type_string"};
  for (int k = 0; k < kInputs; ++k) {
    Synth s;
    for (int p = static_cast<int>(r.below(3)); p > 0; --p) {
      auto* dev = s.space.add_planes();
      dev->set_name(r.coin() ? fuzz_name(r, "/device:GPU:", "") : fuzz_name(r, "/device:TPU:", ""));
      auto* st = dev->add_stats();
      (*dev->mutable_stat_metadata())[5].set_name(r.coin() ? "memory_size" : "device_type_string");
      st->set_metadata_id(5);
      if (r.coin())
        st->set_uint64_value(extreme_u64(r));
      else
        st->set_str_value(r.coin() ? "TPU v5 Lite" : fuzz_name(r, "", ""));
    }
    std::vector<std::uint64_t> addrs = {0x10000, 0x20000, extreme_u64(r), 0};
    std::string shared = std::string(r.below(3) ? 10 : 100000, 'n');  // a name many events refer to
    std::int64_t shared_id = s.stat(shared);
    int lines = 1 + static_cast<int>(r.below(3));
    for (int l = 0; l < lines; ++l) {
      auto* line = s.line(extreme_i64(r));
      int events = static_cast<int>(r.below(60));
      for (int e = 0; e < events; ++e) {
        auto* ev = line->add_events();
        ev->set_metadata_id(static_cast<std::int64_t>(r.below(4)));  // 1, 2: the allocator events; 0, 3: others
        ev->set_offset_ps(r.coin(4) ? extreme_i64(r) : static_cast<std::int64_t>(r.below(1000000)));
        int stats = static_cast<int>(r.below(10));
        for (int t = 0; t < stats; ++t) {
          auto* st = ev->add_stats();
          const std::string& n = r.pick(kStats);
          st->set_metadata_id(r.coin(10) ? static_cast<std::int64_t>(r.next()) : s.stat(n));
          switch (r.below(6)) {
            case 0:
              st->set_str_value(n == "allocator_name"
                                    ? fuzz_name(r, r.coin() ? "GPU_" : "gpu_async_", r.coin() ? "_bfc" : "")
                                    : fuzz_name(r, "f32[", "]"));
              break;
            case 1:
              st->set_ref_value(r.coin() ? static_cast<std::uint64_t>(shared_id) : r.next());
              break;
            case 2:
              st->set_int64_value(extreme_i64(r));
              break;
            case 3:
              st->set_double_value(r.coin() ? -1.0 : 1e300);
              break;
            default:
              st->set_uint64_value(n == "addr" ? r.pick(addrs) : extreme_u64(r));
          }
        }
      }
    }
    std::string bytes = s.space.SerializeAsString();
    std::string path = tmp_path(fmt::format("fz_cap{}.xplane.pb{}", k, k % 3 == 0 ? ".zst" : ""));
    {
      AtomicFile f(path, k % 3 == 0);
      f.write(bytes);
      f.commit();
    }
    INFO("capture " << k);
    // Every fourth input under small limits, so that each limit's refusal is exercised too.
    std::vector<std::string> limits;
    if (k % 4 == 1) limits = {"objects=300", "strings=200000"};
    LimitScope scope(limits);
    replay(o, path, r.coin() ? "xla-bfc" : "best-fit", "h100-80g", r.coin());
    try {
      (void)list_hlo_modules(path);
    } catch (const InputError&) {
    }
  }
  o.check(kInputs);
}

TEST_CASE("fuzz: XLA modules with random SHARE_WITH graphs — results or input errors, never a hang", "[fuzz]") {
  Rng r{seed(23002)};
  Outcomes o;
  const int kInputs = scaled(200);
  int cycles = 0;
  for (int k = 0; k < kInputs; ++k) {
    int n = 1 + static_cast<int>(r.below(40));
    HloSynth h(n, 1 + static_cast<std::int64_t>(r.below(1 << 16)));
    // A second allocation sometimes, with some of the buffers; instructions that define some of them.
    if (r.coin(3)) {
      auto* a = h.proto.mutable_buffer_assignment()->add_buffer_allocations();
      a->set_index(1);
      a->set_size(static_cast<std::int64_t>(r.next() >> 2));
      for (int i = 0; i < n; i += 1 + static_cast<int>(r.below(3))) {
        auto* as = a->add_assigned();
        as->set_logical_buffer_id(i);
        as->set_offset(extreme_i64(r));
      }
    }
    auto* comp = h.proto.mutable_hlo_module()->add_computations();
    for (int i = 0; i < n; ++i) {
      if (!r.coin()) continue;
      auto* ins = comp->add_instructions();
      ins->set_id(i);
      ins->set_name(fuzz_name(r, "op", ""));
      auto* sh = ins->mutable_shape();
      for (int d = static_cast<int>(r.below(4)); d > 0; --d) {  // nested tuples, sometimes
        sh = sh->add_tuple_shapes();
      }
      sh->set_element_type(static_cast<int>(r.below(25)));
      for (int d = static_cast<int>(r.below(4)); d > 0; --d)
        sh->add_dimensions(r.coin(5) ? -1 : static_cast<std::int64_t>(r.below(64)));
      auto* lb = h.proto.mutable_buffer_assignment()->mutable_logical_buffers(i);
      lb->mutable_defined_at()->set_instruction_id(i);
      for (int d = static_cast<int>(r.below(3)); d > 0; --d)
        lb->mutable_defined_at()->add_shape_index(static_cast<std::int64_t>(r.below(3)) - 1);
    }
    // The trace: allocs, frees and shares among the buffers (and ids that are none of them).
    int events = static_cast<int>(r.below(4 * n + 4));
    bool cyclic = false;
    std::map<std::int64_t, std::int64_t> to;
    for (int e = 0; e < events; ++e) {
      std::int64_t id = r.coin(15) ? static_cast<std::int64_t>(r.next()) : static_cast<std::int64_t>(r.below(n));
      switch (r.below(3)) {
        case 0:
          h.alloc_(id);
          break;
        case 1:
          h.free_(id);
          break;
        default: {
          std::int64_t c = static_cast<std::int64_t>(r.below(n));
          h.share(id, c);
          // A share whose chain comes back to itself: a cycle the reader must refuse.
          std::int64_t x = c;
          for (int hop = 0; hop <= n && to.count(x); ++hop) x = to[x];
          cyclic = cyclic || x == id;
          to[id] = c;
        }
      }
    }
    if (r.coin(4)) h.trace = h.proto.mutable_buffer_assignment()->add_heap_simulator_traces();  // an empty second
    std::string p = h.write(fmt::format("fz_mod{}", k));
    INFO("module " << k);
    Outcomes mo;
    replay(mo, p, "static-heap", "tpu-v5e", r.coin());
    replay(mo, p, "best-fit", "h100-80g", true);
    o.results += mo.results, o.input_errors += mo.input_errors;
    cycles += cyclic;
  }
  o.check(2 * kInputs);
  CHECK(cycles > 0);  // the graphs did hold cycles
}

TEST_CASE("fuzz: snapshot pickles sharing objects through the memo — results or input errors within the budget",
          "[fuzz]") {
  Rng r{seed(23003)};
  Outcomes o;
  const int kInputs = scaled(150);
  static const std::vector<std::string> kActions = {"alloc",        "free_requested", "free_completed", "segment_alloc",
                                                    "segment_free", "segment_map",    "segment_unmap",  "oom",
                                                    "snapshot",     "bogus"};
  for (int k = 0; k < kInputs; ++k) {
    PickleWriter w;
    std::uint32_t memo = 0;
    std::vector<std::uint32_t> strings, frames, stacks, entries;
    w.dict().mark();
    // Objects to share: long file names, frames, stacks.
    for (int i = static_cast<int>(r.below(4)); i >= 0; --i) {
      w.str(std::string(r.coin(3) ? 1 << (10 + r.below(8)) : 8, 'a') + ".py").put(++memo).pop();
      strings.push_back(memo);
    }
    for (int i = static_cast<int>(r.below(4)); i >= 0; --i) {
      w.dict().mark().str("filename").get(r.pick(strings)).str("name").str("f").str("line").integer(r.below(100));
      w.setitems().put(++memo).pop();
      frames.push_back(memo);
    }
    for (int i = static_cast<int>(r.below(3)); i >= 0; --i) {
      w.list().mark();
      for (int f = static_cast<int>(r.below(60)); f > 0; --f) w.get(r.pick(frames));
      w.appends().put(++memo).pop();
      stacks.push_back(memo);
    }
    w.str("segments").list();
    if (r.coin()) {  // a segment with a block
      w.mark().dict().mark().str("device").integer(r.below(3)).str("address").integer(0x100000).str("total_size");
      w.integer(2 << 20).str("stream").integer(0).str("blocks").list().mark().dict().mark().str("size").integer(512);
      w.str("requested_size").integer(512).str("state").str("active_allocated").str("frames").get(r.pick(stacks));
      w.setitems().appends().setitems().appends();
    }
    w.str("device_traces").list().mark();
    for (int d = static_cast<int>(r.below(3)); d >= 0; --d) {
      w.list().mark();
      for (int e = static_cast<int>(r.below(200)); e > 0; --e) {
        if (!entries.empty() && r.coin(6)) {  // an entry shared with an earlier one
          w.get(r.pick(entries));
          continue;
        }
        std::uint64_t addr = 0x100000 + 512 * r.below(8);
        w.entry_open(r.pick(kActions), r.coin(20) ? extreme_u64(r) : addr, r.coin(10) ? extreme_u64(r) : 512);
        w.str("frames").get(r.pick(stacks)).str("time_us").integer(r.below(1000)).setitems();
        if (r.coin(3)) {
          w.put(++memo);
          entries.push_back(memo);
        }
      }
      w.appends();
    }
    w.appends().setitems().stop();
    std::string p = write_text(fmt::format("fz_snap{}.pickle", k), w.out);
    INFO("pickle " << k << ", " << w.out.size() << " bytes");
    std::vector<std::string> limits;
    if (k % 3 == 1) limits = {"strings=1MiB", "names=256KiB"};
    LimitScope scope(limits);
    replay(o, p, "torch-caching", "h100-80g", r.coin());
  }
  o.check(kInputs);
}

TEST_CASE("fuzz: --hw files with extreme values through every policy — results or input errors", "[fuzz]") {
  Rng r{seed(23004)};
  Outcomes o;
  const int kInputs = scaled(100);
  // A trace with sizes from 1 byte to 2^64 - 1, frees and re-allocations, on two streams.
  std::string jl;
  Rng t{7};
  for (std::uint64_t i = 0; i < 60; ++i) {
    std::uint64_t size = t.coin(5) ? extreme_u64(t) : 1 + t.below(64 << 20);
    jl += fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"stream\":{}}}\n", i, size, t.below(2));
    if (i % 3 == 2) jl += fmt::format("{{\"op\":\"free\",\"id\":{}}}\n", i - 1);
  }
  std::string trace = write_text("fz_hw_trace.jsonl", jl);
  std::vector<std::string> policies;
  for (const auto& i : test_registry().all()) policies.push_back(i.name);
  auto pow2 = [&] { return std::uint64_t{1} << r.below(64); };
  for (int k = 0; k < kInputs; ++k) {
    nlohmann::json spaces = nlohmann::json::array();
    for (const char* sp : {"hbm", "vmem", "host"}) {
      if (sp != std::string("hbm") && r.coin()) continue;
      nlohmann::json s = {{"name", sp}, {"capacity_bytes", r.coin() ? pow2() : extreme_u64(r)}};
      if (r.coin()) s["alignment"] = r.coin() ? pow2() : extreme_u64(r);
      if (r.coin()) s["granularity"] = r.coin() ? pow2() : extreme_u64(r);
      if (r.coin(3)) s["reserve_bytes"] = extreme_u64(r);
      if (r.coin(4)) s["scoped_limit_bytes"] = extreme_u64(r);
      if (r.coin(4)) s["runtime_limit_bytes"] = extreme_u64(r);
      spaces.push_back(s);
    }
    nlohmann::json hw = {
        {"name", "fz"}, {"kind", r.coin() ? "gpu" : "tpu"}, {"generation", r.below(8)}, {"spaces", spaces}};
    std::string hp = write_text(fmt::format("fz_hw{}.json", k), hw.dump());
    INFO(hw.dump());
    replay(o, trace, r.pick(policies), hp, r.coin());
  }
  o.check(kInputs);
}

TEST_CASE("fuzz: report pairs for check and shards for merge — a regression never passes, a merge is whole", "[fuzz]") {
  Rng r{seed(23005)};
  // Real reports: two policies on a sample, two devices.
  std::string jl;
  for (int i = 0; i < 200; ++i)
    jl += fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"device\":{}}}\n", i, 4096 * (1 + i % 37), i % 2);
  for (int i = 0; i < 200; i += 3) jl += fmt::format("{{\"op\":\"free\",\"id\":{},\"device\":{}}}\n", i, i % 2);
  std::string trace = write_text("fz_gate.jsonl", jl);
  std::vector<nlohmann::json> reports;
  for (const char* p : {"best-fit", "xla-bfc"}) {
    RunOptions opt;
    opt.trace = trace;
    opt.policy.name = p;
    opt.hw = load_hardware("h100-80g");
    RunResult res = run_simulation(opt, test_registry());
    res.label = p;
    reports.push_back(report_json(res));
  }
  nlohmann::json base = nlohmann::json::array({reports[0], reports[1]});
  // The figures the gate documents, as paths in a report.
  std::vector<std::vector<std::string>> figures = {
      {"peak_requested_bytes"},
      {"peak_allocated_bytes"},
      {"peak_reserved_bytes"},
      {"fragmentation", "max"},
      {"fragmentation", "at_peak_reserved"},
      {"fragmentation", "at_peak_allocated", "external"},
      {"fragmentation", "at_peak_allocated", "reserved_unallocated_share"},
      {"fragmentation", "at_peak_allocated", "reserved_unallocated_bytes"}};
  int passed = 0, failed = 0, refused = 0;
  const int kPairs = scaled(300);
  for (int k = 0; k < kPairs; ++k) {
    nlohmann::json b = base, cur = base;
    double tol = r.coin() ? 0 : static_cast<double>(r.below(50));
    size_t run = r.below(2);
    nlohmann::json& rep = r.coin(3) ? cur[run]["devices"][r.below(cur[run]["devices"].size())] : cur[run];
    bool may_pass = true;  // false: the mutation is one the gate must not pass
    // Peak requested and at_peak_reserved gate only with --gate all (docs/metrics.md).
    bool gate_all = r.coin();
    bool may_refuse = false;  // a figure left out: an input error when the report schema requires it
    auto gated = [&](const std::vector<std::string>& path) {
      return gate_all || !(path[0] == "peak_requested_bytes" || (path.size() > 1 && path[1] == "at_peak_reserved"));
    };
    switch (r.below(8)) {
      case 0:
      case 1: {  // one figure grows (or shrinks) by a factor
        nlohmann::json* v = &rep;
        auto path = r.pick(figures);
        for (const auto& key : path) v = &(*v)[key];
        double f = r.coin() ? 1.0 + static_cast<double>(r.below(200)) / 100.0 : 0.5;
        double before = v->get<double>();
        double after = before * f + (f > 1 ? 1e-3 : 0);
        *v = v->is_number_unsigned() ? nlohmann::json(static_cast<std::uint64_t>(after)) : nlohmann::json(after);
        double now = v->get<double>();
        may_pass = !gated(path) || !(now > before * (1 + tol / 100) && now - before > 1e-12);
        break;
      }
      case 2: {  // a figure or a device entry left out
        nlohmann::json* v = &rep;
        auto path = r.pick(figures);
        for (size_t i = 0; i + 1 < path.size(); ++i) v = &(*v)[path[i]];
        v->erase(path.back());
        may_pass = !gated(path);
        may_refuse = true;  // the schema may require it
        break;
      }
      case 3:  // a run's label changed: nothing to match it with
        cur[run]["label"] = r.coin() ? std::string("x\n::error::") : std::to_string(r.next());
        may_pass = false;
        break;
      case 4:  // a device entry that the baseline does not have, or one removed
        if (r.coin()) {
          cur[run]["devices"].push_back(cur[run]["devices"][0]);
          cur[run]["devices"].back()["device"] = 9;
        } else {
          cur[run]["devices"].erase(0);
        }
        may_pass = false;
        break;
      case 5:  // a figure of the wrong type
        rep["peak_reserved_bytes"] = r.coin() ? nlohmann::json("1") : nlohmann::json(-1);
        may_pass = false;
        break;
      case 6: {  // one device's first OOM moves (issue 50): the run's OOMs and every count stay
        const size_t d = r.below(cur[run]["devices"].size());
        const std::uint64_t moved = 2 + r.below(100);
        for (auto* side : {&b, &cur}) {
          (*side)[run]["ooms"] = {{{"event_index", 1}, {"requested_bytes", 1}},
                                  {{"event_index", 200}, {"requested_bytes", 1}}};
          (*side)[run]["oom_count"] = 2;
          (*side)[run]["completed"] = false;
          auto& dev = (*side)[run]["devices"][d];
          dev["ooms"] = {{{"event_index", side == &b ? 50 : moved}, {"requested_bytes", 1}}};
          dev["oom_count"] = 1;
        }
        may_pass = moved >= 50;
        break;
      }
      default:  // an OOM more
        cur[run]["ooms"].push_back({{"event_index", r.below(400)}, {"requested_bytes", 1}});
        cur[run]["oom_count"] = cur[run]["ooms"].size();
        cur[run]["completed"] = false;
        may_pass = false;
    }
    CheckOptions opt;
    opt.baseline_path = "base.json";
    opt.current_path = "cur.json";
    opt.tolerance_pct = tol;
    opt.gate_all = gate_all;
    INFO("pair " << k << " tolerance " << tol << (gate_all ? " --gate all" : ""));
    try {
      CheckResult res = run_check(b, cur, opt);
      if (!may_pass) CHECK_FALSE(res.pass);
      if (may_pass) CHECK(res.pass);
      (res.pass ? passed : failed)++;
      (void)check_text(res), (void)check_markdown(res), (void)check_junit(res), (void)check_github(res, "f");
    } catch (const InputError&) {
      CHECK((!may_pass || may_refuse));
      ++refused;
    }
  }
  CHECK(passed + failed + refused == kPairs);
  CHECK(passed > 0);
  CHECK(failed > 0);
  CHECK(refused > 0);
  // Merge: the shards of a 6-run batch, mutated; a merge that returns holds every run once.
  Manifest m;
  m.path = tmp_path("fz_manifest.txt");
  m.digest = "0123456789abcdef";
  m.entries.resize(6);
  std::vector<std::pair<std::string, nlohmann::json>> shards;
  for (unsigned s = 1; s <= 3; ++s) {
    nlohmann::json runs = nlohmann::json::array();
    for (unsigned k = s - 1; k < 6; k += 3)
      runs.push_back({{"run", k}, {"line", k + 1}, {"label", fmt::format("r{}", k)}, {"report", reports[k % 2]}});
    shards.emplace_back(fmt::format("shard{}.json", s), batch_json(m, Shard{s, 3}, runs));
  }
  nlohmann::json whole = merge_batches(shards);
  int merged = 0, merge_refused = 0;
  const int kMerges = scaled(200);
  for (int k = 0; k < kMerges; ++k) {
    auto ms = shards;
    nlohmann::json& sh = ms[r.below(3)].second;
    switch (r.below(9)) {
      case 0:
        sh["runs"].push_back(sh["runs"][0]);  // a run twice
        break;
      case 1:
        sh["runs"][r.below(2)]["run"] = r.coin() ? nlohmann::json(r.below(8)) : nlohmann::json("0");
        break;
      case 2:
        sh["runs"][r.below(2)].erase(r.coin() ? "report" : "line");
        break;
      case 3:
        sh["shard"][r.coin() ? "index" : "count"] = r.below(5);
        break;
      case 4:
        sh["runs"][r.below(2)]["report"].erase("ooms");
        break;
      case 5:
        sh["runs"][r.below(2)]["line"] = r.below(10);
        break;
      case 6:
        sh[r.coin() ? "manifest_digest" : "runs_total"] = r.coin() ? nlohmann::json(nullptr) : nlohmann::json(7);
        break;
      case 7:
        ms.push_back(ms[r.below(3)]);  // a shard twice
        break;
      default:
        std::swap(sh["runs"][0], sh["runs"][1]);  // order within a shard: a neutral change
    }
    try {
      nlohmann::json out = merge_batches(ms);
      std::vector<int> seen(6, 0);
      for (const auto& run : out["runs"]) ++seen.at(run["run"].get<size_t>());
      CHECK(seen == std::vector<int>(6, 1));
      for (const auto& run : out["runs"]) check_report_schema(run["report"], "merged");
      (void)batch_table(out);
      ++merged;
    } catch (const InputError&) {
      ++merge_refused;
    }
  }
  CHECK(merged + merge_refused == kMerges);
  CHECK(merged > 0);
  CHECK(merge_refused > 0);
  CHECK(batch_table(whole).find("r5") != std::string::npos);
}

// ---- issue 50: sets of recordings, exports read back, output paths ----

TEST_CASE("fuzz: sets of ranks and hosts — every file's (or host's) device is a device of its own, or an input error",
          "[fuzz]") {
  Rng r{seed(50001)};
  Outcomes o;
  const int kInputs = scaled(60);
  const std::vector<std::string> pool = {test_data("two_devices.pickle"), test_data("torch/small_mlp_97ev.pickle.zst"),
                                         test_data("recorded_settings.pickle")};
  for (int k = 0; k < kInputs; ++k) {
    const std::string dir = tmp_path(fmt::format("fz_set{}", k));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::string path;
    // What each member uses: (member, its own device) pairs, each a device of the run.
    std::set<std::pair<int, std::uint64_t>> used;
    const int n = 1 + static_cast<int>(r.below(4));
    if (r.coin()) {  // PyTorch ranks: a directory or a comma list, names with ranks (maybe repeated) or not
      std::vector<std::string> files;
      for (int i = 0; i < n; ++i) {
        const std::string name =
            r.coin(4) ? fmt::format("part{}", i) : fmt::format("snapshot_rank{}", r.coin(3) ? r.below(3) : i);
        const std::string src = r.pick(pool);
        const std::string f = fmt::format("{}/{}_{}.pickle{}", dir, name, i, ends_with(src, ".zst") ? ".zst" : "");
        std::filesystem::copy_file(src, f);
        if (r.coin(15)) std::filesystem::resize_file(f, std::filesystem::file_size(f) / 2);  // a truncated member
        files.push_back(f);
      }
      if (r.coin()) {
        path = dir;
      } else {
        for (const auto& f : files) path += (path.empty() ? "" : ",") + f;
      }
    } else {  // XProf hosts: allocators TPU:N or GPU_N_bfc, device planes or none
      path = dir + "/plugins/profile/run1";
      std::filesystem::create_directories(path);
      for (int h = 0; h < n; ++h) {
        Synth s;
        auto* line = s.line(1000 + h);
        const bool tpu = r.coin();
        if (r.coin()) s.space.add_planes()->set_name(fmt::format("/device:{}:{}", tpu ? "TPU" : "GPU", r.below(4)));
        for (int a = static_cast<int>(r.below(5)); a >= 0; --a) {
          const std::uint64_t d = r.coin(20) ? extreme_u64(r) : r.below(6);
          s.allocator = tpu ? fmt::format("TPU:{}", d) : fmt::format("GPU_{}_bfc", d);
          s.event(line, true, a * 10, 0x10000 + static_cast<std::uint64_t>(a) * 0x1000, 4096, 4096);
        }
        std::ofstream(fmt::format("{}/host{}.xplane.pb", path, h), std::ios::binary) << s.space.SerializeAsString();
      }
    }
    INFO("set " << k << ": " << path);
    try {
      auto reader = open_trace(path);
      Event e;
      std::set<std::uint64_t> devices;
      while (reader->next(e))
        if (e.op == Op::kAlloc) devices.insert(e.device);
      // Sets of ranks say which run devices each member got: no device is any two members'.
      const nlohmann::json& h = reader->header();
      if (h.contains("recording_set")) {
        std::set<std::uint64_t> seen;
        size_t total = 0;
        for (const auto& m : h["recording_set"])
          for (const auto& d : m["devices"]) {
            seen.insert(d.get<std::uint64_t>());
            ++total;
          }
        CHECK(seen.size() == total);
        for (auto d : devices) CHECK(seen.count(d));
      }
      // Hosts: each host's allocators are devices apart from every other host's.
      if (h.contains("device_names")) {
        std::set<std::string> names;
        for (const auto& [dev, name] : h["device_names"].items()) CHECK(names.insert(name.get<std::string>()).second);
      }
      ++o.results;
    } catch (const InputError&) {
      ++o.input_errors;
    }
  }
  o.check(kInputs);
}

TEST_CASE("fuzz: exports of random runs read back as the runs — or are refused before anything is written", "[fuzz]") {
  Rng r{seed(50002)};
  Outcomes o;
  const int kInputs = scaled(40);
  std::vector<const PolicyInfo*> policies;
  for (const auto& i : test_registry().all())
    if (!i.needs_lifetimes || r.coin()) policies.push_back(&i);
  for (int k = 0; k < kInputs; ++k) {
    std::string jl;
    std::vector<std::pair<std::uint32_t, Bytes>> allocs;  // by event index: (device, size) of an alloc
    std::map<std::uint64_t, std::uint32_t> live;          // id → device
    const std::uint64_t far = r.coin(6) ? r.pick(std::vector<std::uint64_t>{300, 70000, 4294967295ULL}) : 0;
    std::uint64_t next_id = 0, index = 0;
    for (int i = 0; i < 20 + static_cast<int>(r.below(150)); ++i, ++index) {
      if (!live.empty() && r.coin(3)) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(r.below(live.size())));
        jl += fmt::format("{{\"op\":\"free\",\"id\":{},\"device\":{}}}\n", it->first, it->second);
        live.erase(it);
        allocs.emplace_back(0, 0);
        continue;
      }
      const std::uint32_t dev = static_cast<std::uint32_t>(far && r.coin(4) ? far : r.below(3));
      const Bytes size = r.coin(10) ? 0 : 1 + r.below(r.coin() ? 64 << 20 : 4096);
      jl += fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"device\":{}}}\n", next_id, size, dev);
      live[next_id++] = dev;
      allocs.emplace_back(dev, size);
    }
    const std::string t = write_text(fmt::format("fz_export{}.jsonl", k), jl);
    const PolicyInfo& p = *r.pick(policies);
    RunRequest req{.trace = t,
                   .hw = p.hardware_kind == "tpu" ? "tpu-v5e" : "",
                   .capacity = r.coin() ? "2GiB" : "",
                   .policy = p.name};
    req.keep_going = r.coin();
    const std::string out = tmp_path(fmt::format("fz_export{}.pickle", k)), pl = out + ".placements.jsonl";
    INFO("input " << k << ": " << p.name << ", far device " << far);
    try {
      RunResult res = run_request(req, test_registry(), RunOutputs{.placements = pl, .export_events = true}, 1);
      try {
        export_snapshot(res, out);
      } catch (const InputError&) {
        CHECK_FALSE(std::filesystem::exists(out));
        throw;
      }
      std::vector<std::tuple<std::uint32_t, std::uint64_t, Bytes>> placed;
      for (const auto& line : read_jsonl(pl)) {
        const auto [dev, size] = allocs.at(line["i"].get<size_t>());
        if (line["ok"].get<bool>() && line["addr"].is_number() && size > 0)
          placed.emplace_back(dev, line["addr"].get<std::uint64_t>(), size);
      }
      // Device by device, in order: the reader merges the devices' lists by time.
      auto by_device = [](const std::vector<std::tuple<std::uint32_t, std::uint64_t, Bytes>>& v) {
        std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, Bytes>>> m;
        for (const auto& [d, a, n] : v) m[d].emplace_back(a, n);
        return m;
      };
      CHECK(by_device(exported_allocs(out)) == by_device(placed));
      ++o.results;
    } catch (const InputError&) {
      ++o.input_errors;
    }
  }
  o.check(kInputs);
}

TEST_CASE("fuzz: output paths (links, read-only files, set members, files under inputs) — refused or written alone",
          "[fuzz]") {
  namespace fs = std::filesystem;
  Rng r{seed(50003)};
  Outcomes o;
  const int kInputs = scaled(300);
  for (int k = 0; k < kInputs; ++k) {
    const std::string root = tmp_path(fmt::format("fz_out{}", k));
    fs::remove_all(root);
    fs::create_directories(root + "/work/ranks/a/b");
    fs::create_directories(root + "/other");
    // Inputs: two set members, a rank folder with a buried file, a trace; files that are not
    // inputs: one in another folder, a read-only one, one beside the inputs.
    std::map<std::string, std::string> files = {
        {root + "/work/r0.pickle", "rank0"},         {root + "/work/r1.pickle", "rank1"},
        {root + "/work/ranks/a/b/deep.txt", "deep"}, {root + "/work/ranks/snapshot_rank0.pickle", "rank"},
        {root + "/work/t.jsonl", "trace"},           {root + "/other/victim.txt", "victim"},
        {root + "/work/readonly.json", "ro"},        {root + "/work/old.json", "old"}};
    for (const auto& [f, text] : files) std::ofstream(f) << text;
    fs::permissions(root + "/work/readonly.json", fs::perms::owner_read);
    const bool set = r.coin(), folder = r.coin(), trace = r.coin(3);
    const std::vector<std::string> inputs = {
        set ? root + "/work/r0.pickle," + root + "/work/r1.pickle" : root + "/work/r0.pickle",
        folder ? root + "/work/ranks" : root + "/work/t.jsonl", trace ? root + "/work/t.jsonl" : ""};
    std::vector<std::string> input_files = {root + "/work/r0.pickle"};  // what the inputs stand for
    if (set) input_files.push_back(root + "/work/r1.pickle");
    if (folder)
      input_files.insert(input_files.end(),
                         {root + "/work/ranks/a/b/deep.txt", root + "/work/ranks/snapshot_rank0.pickle"});
    if (!folder || trace) input_files.push_back(root + "/work/t.jsonl");
    // Outputs of every kind: an input, a member, a buried file, links to each (from the work
    // folder, and across folders), a read-only file, a new file, an old one, a folder, one in a
    // folder that does not exist (before: written after the work, EnvError), stdout.
    auto link = [&](const std::string& name, const std::string& to) {
      const std::string l = root + "/work/" + name;
      if (!fs::exists(fs::symlink_status(l))) fs::create_symlink(to, l);
      return l;
    };
    const std::vector<std::string> kinds = {root + "/work/r0.pickle",
                                            root + "/work/r1.pickle",
                                            root + "/work/ranks/a/b/deep.txt",
                                            root + "/work/ranks/new.json",
                                            root + "/work/t.jsonl",
                                            root + "/work/readonly.json",
                                            root + "/work/new.json",
                                            root + "/work/old.json",
                                            root + "/work/ranks",
                                            link("to_r1.json", root + "/work/r1.pickle"),
                                            link("to_deep.json", "ranks/a/b/deep.txt"),
                                            link("to_victim.json", root + "/other/victim.txt"),
                                            link("to_old.json", "old.json"),
                                            link("dangling.json", "../other/made.json"),
                                            link("to_ro.json", "readonly.json"),
                                            root + "/work/missing/new.json",  // a folder that does not exist
                                            root + "/work/missing/",
                                            root + "/work/old.json/new.json",  // a file as a folder
                                            root + "/work/n\x80.json",         // a name that is not UTF-8
                                            "-"};
    std::vector<std::pair<std::string, std::string>> outputs;
    for (int i = 0, n = 1 + static_cast<int>(r.below(3)); i < n; ++i)
      outputs.emplace_back(fmt::format("--out{}", i), r.pick(kinds));
    INFO("input " << k << ": " << outputs.front().second);
    std::map<std::string, std::string> before;
    for (const auto& [f, text] : files) before[f] = read_text(f);
    try {
      check_outputs(inputs, outputs);
      std::set<std::string> written;
      for (const auto& [what, out] : outputs) {
        if (out == "-") continue;
        write_file_atomic(out, "written " + what + "\n");
        written.insert(fs::weakly_canonical(out).string());
      }
      for (const auto& [f, text] : before) {
        if (written.count(fs::weakly_canonical(f).string())) continue;
        CHECK(read_text(f) == text);  // every file not written as asked is as it was
      }
      input_files.push_back(root + "/work/readonly.json");
      for (const auto& f : input_files) CHECK(read_text(f) == files[f]);  // never an input, never a read-only file
      CHECK(read_text(root + "/other/victim.txt") == "victim");
      CHECK_FALSE(fs::exists(root + "/other/made.json"));
      ++o.results;
    } catch (const InputError&) {
      for (const auto& [f, text] : before) CHECK(read_text(f) == text);
      ++o.input_errors;
    }
    for (const auto& e : fs::recursive_directory_iterator(root))
      CHECK(e.path().string().find(".tmp.") == std::string::npos);
    fs::permissions(root + "/work/readonly.json", fs::perms::owner_all);
    fs::remove_all(root);
  }
  o.check(kInputs);
}

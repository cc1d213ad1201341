// fragsim-cuda-replay: replays a fragsim-readable trace on a real GPU through cudaMalloc/cudaFree
// (--mode malloc, what the `platform` policy models) or cudaMallocAsync/cudaFreeAsync on one
// stream per trace stream (--mode async, what `cuda-async` models), and records what the driver
// did: success, address and time of every call, cudaMemGetInfo samples, the first OOM, and
// per-call latency percentiles by size class. Outputs (written atomically):
//   OUT.json   summary (fragsim replay v1) — `fragsim validate --real OUT.json`
//   OUT.jsonl  one line per alloc/free call
// Exit codes as fragsim's: 0 ran (OOM is a result), 2 bad input, 3 no usable CUDA device.
#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "hardware_models/cuda_replay/device_api.h"
#include "sim/base/error.h"
#include "sim/base/exit_codes.h"
#include "sim/base/io.h"
#include "traces/trace_reader.h"

namespace po = boost::program_options;
using namespace fragsim;

namespace {

struct Options {
  std::string trace, mode = "malloc", out, limit, dry_capacity = "80GiB";
  int device = 0;
  std::uint64_t sample_every = 1;
  double fraction = 0.75;
  bool keep_going = false, dry_run = false, lenient = false, sync_after_free = false;
};

// Size classes for latency percentiles: powers of 4 from 64 KiB.
std::string size_class(Bytes b) {
  static const std::pair<Bytes, const char*> kClasses[] = {
      {64 * kKiB, "<64KiB"}, {1 * kMiB, "64KiB-1MiB"}, {16 * kMiB, "1-16MiB"}, {256 * kMiB, "16-256MiB"}};
  for (const auto& [lim, name] : kClasses)
    if (b < lim) return name;
  return ">=256MiB";
}

nlohmann::json percentiles(std::map<std::string, std::vector<double>>& by_class) {
  nlohmann::json a = nlohmann::json::array();
  for (auto& [cls, v] : by_class) {
    std::sort(v.begin(), v.end());
    auto q = [&](double p) {
      return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
    };
    a.push_back({{"size_class", cls},
                 {"count", v.size()},
                 {"p50_ns", q(0.5)},
                 {"p90_ns", q(0.9)},
                 {"p99_ns", q(0.99)},
                 {"max_ns", v.back()}});
  }
  return a;
}

int run_replay(const Options& o) {
  if (o.mode != "malloc" && o.mode != "async") throw InputError("--mode: must be malloc or async");
  std::string why;
  std::unique_ptr<replay::Device> dev = o.dry_run
                                            ? replay::open_fake_device(parse_size(o.dry_capacity, "--dry-capacity"))
                                            : replay::open_cuda_device(o.device, &why);
  if (!dev) throw EnvError(why);
  check_outputs({o.trace}, {{"-o", o.out + ".json"}, {"-o", o.out + ".jsonl"}});
  auto reader = open_trace(o.trace, ReaderOptions{o.lenient});  // validate the trace's opening first
  std::size_t free0 = 0, total = 0;
  dev->mem_info(&free0, &total);
  // --limit: take (free − SIZE) as ballast so the trace sees a device of SIZE free bytes.
  void* ballast = nullptr;
  Bytes ballast_bytes = 0;
  if (!o.limit.empty()) {
    Bytes limit = parse_size(o.limit, "--limit");
    if (limit < free0) {
      ballast_bytes = free0 - limit;
      if (int e = dev->malloc(&ballast, ballast_bytes))
        throw EnvError(fmt::format("cannot take {} of ballast: {}", ballast_bytes, dev->error_string(e)));
    }
  }
  if (o.mode == "async")
    dev->set_release_threshold(static_cast<std::uint64_t>(static_cast<double>(total) * o.fraction));
  std::size_t free_start = 0;
  dev->mem_info(&free_start, &total);

  AtomicFile calls(o.out + ".jsonl");
  std::string buf;
  std::vector<std::pair<void*, Bytes>> live;  // per handle
  std::vector<int> stream_of;
  std::map<std::string, std::vector<double>> lat_alloc, lat_free;
  nlohmann::json samples = nlohmann::json::array(), first_oom;
  std::uint64_t events = 0, allocs = 0, frees = 0, failed = 0;
  Bytes peak_in_use = 0;
  bool stopped = false;
  auto sample = [&](std::uint64_t index, const char* why_sampled) {
    std::size_t f = 0, t = 0;
    dev->mem_info(&f, &t);
    Bytes in_use = free_start > f ? free_start - f : 0;
    peak_in_use = std::max(peak_in_use, in_use);
    samples.push_back({{"event_index", index}, {"free", f}, {"total", t}, {"in_use", in_use}, {"at", why_sampled}});
  };
  using Clock = std::chrono::steady_clock;
  Event ev;
  while (reader->next(ev)) {
    ++events;
    if (stopped) continue;
    if (ev.op == Op::kAlloc) {
      ++allocs;
      if (ev.handle >= live.size()) live.resize(ev.handle + 1, {nullptr, 0}), stream_of.resize(ev.handle + 1, 0);
      void* p = nullptr;
      int stream = static_cast<int>(ev.stream);
      auto t0 = Clock::now();
      int e = ev.size == 0 ? 0 : o.mode == "malloc" ? dev->malloc(&p, ev.size) : dev->malloc_async(&p, ev.size, stream);
      double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      bool ok = e == 0;
      if (ok) {
        live[ev.handle] = {p, ev.size};
        stream_of[ev.handle] = stream;
        lat_alloc[size_class(ev.size)].push_back(ns);
      } else {
        ++failed;
        if (first_oom.is_null())
          first_oom = {
              {"event_index", ev.index}, {"id", ev.id}, {"requested_bytes", ev.size}, {"error", dev->error_string(e)}};
        sample(ev.index, "failure");
        if (!o.keep_going) stopped = true;
      }
      fmt::format_to(
          std::back_inserter(buf),
          "{{\"op\":\"alloc\",\"i\":{},\"id\":{},\"bytes\":{},\"stream\":{},\"ok\":{},\"addr\":{},\"ns\":{:.0f}}}\n",
          ev.index, ev.id, ev.size, stream, ok ? "true" : "false", reinterpret_cast<std::uintptr_t>(p), ns);
      if (ok && allocs % o.sample_every == 0) sample(ev.index, "alloc");
    } else if (ev.op == Op::kFree) {
      ++frees;
      auto [p, bytes] = live[ev.handle];
      live[ev.handle] = {nullptr, 0};
      if (!p) continue;  // a failed or zero-size allocation
      auto t0 = Clock::now();
      int e = o.mode == "malloc" ? dev->free(p) : dev->free_async(p, stream_of[ev.handle]);
      double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      if (e) throw EnvError("free failed: " + dev->error_string(e));
      lat_free[size_class(bytes)].push_back(ns);
      if (o.sync_after_free) {  // a sync point: the pool may give memory above its threshold back
        if (int se = o.mode == "malloc" ? dev->synchronize() : dev->synchronize_stream(stream_of[ev.handle]))
          throw EnvError("synchronize failed: " + dev->error_string(se));
        sample(ev.index, "free");
      }
      fmt::format_to(std::back_inserter(buf), "{{\"op\":\"free\",\"i\":{},\"id\":{},\"bytes\":{},\"ns\":{:.0f}}}\n",
                     ev.index, ev.id, bytes, ns);
    }
    if (buf.size() > (1 << 20)) {
      calls.write(buf);
      buf.clear();
    }
  }
  dev->synchronize();
  sample(events, "end");
  for (auto& [p, b] : live)
    if (p) o.mode == "malloc" ? dev->free(p) : dev->free_async(p, 0);
  if (ballast) dev->free(ballast);
  dev->synchronize();
  calls.write(buf);
  calls.commit();
  nlohmann::json summary = {
      {"fragsim_replay", 1},
      {"trace", o.trace},
      {"mode", o.mode},
      {"dry_run", o.dry_run},
      {"device", {{"name", dev->name()}, {"total_bytes", total}, {"free_at_start_bytes", free0}}},
      {"limit", o.limit.empty() ? nlohmann::json() : nlohmann::json(o.limit)},
      {"ballast_bytes", ballast_bytes},
      {"sync_after_free", o.sync_after_free},
      {"release_threshold_fraction", o.mode == "async" ? nlohmann::json(o.fraction) : nlohmann::json()},
      {"events", events},
      {"allocs", allocs},
      {"frees", frees},
      {"failed_allocs", failed},
      {"completed", failed == 0},
      {"first_oom", first_oom},
      {"peak_in_use_bytes", peak_in_use},
      {"samples", samples},
      {"latency", {{"alloc", percentiles(lat_alloc)}, {"free", percentiles(lat_free)}}},
      {"calls_file", o.out + ".jsonl"}};
  write_file_atomic(o.out + ".json", dump_json(summary, 2) + "\n");
  std::cout << fmt::format(
      "replayed {} events on {} ({} mode): {} allocs, {} failed{}; peak in use {}; wrote {}.json\n", events,
      dev->name(), o.mode, allocs, failed,
      first_oom.is_null() ? "" : fmt::format(", first OOM at event {}", first_oom["event_index"].get<std::uint64_t>()),
      human_bytes(peak_in_use), o.out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  remove_temporaries_on_signals();
  Options o;
  po::options_description d("fragsim-cuda-replay options");
  d.add_options()("help,h", "show this help")("trace", po::value(&o.trace),
                                              "trace file (.jsonl, .jsonl.zst, .fstrace, .pickle)")(
      "mode", po::value(&o.mode)->default_value("malloc"),
      "malloc (cudaMalloc/cudaFree) or async (cudaMallocAsync/cudaFreeAsync)")(
      "limit", po::value(&o.limit), "emulate a device with SIZE free bytes: take (free - SIZE) as ballast first")(
      "out,o", po::value(&o.out)->default_value("replay"), "output prefix: OUT.json (summary) and OUT.jsonl (calls)")(
      "device", po::value(&o.device)->default_value(0), "CUDA device ordinal")(
      "sample-every", po::value(&o.sample_every)->default_value(1),
      "cudaMemGetInfo every N allocations (and at every failure)")(
      "fraction", po::value(&o.fraction)->default_value(0.75),
      "async: pool release threshold = total x fraction (as JAX sets it)")("keep-going", po::bool_switch(&o.keep_going),
                                                                           "continue after a failed allocation")(
      "sync-after-free", po::bool_switch(&o.sync_after_free),
      "synchronize the freeing stream after every free and sample cudaMemGetInfo (async: where the pool trims to "
      "its release threshold)")("lenient", po::bool_switch(&o.lenient), "skip frees of unknown ids")(
      "dry-run", po::bool_switch(&o.dry_run), "no GPU: a simulated device (tests the replayer's GPU-free parts)")(
      "dry-capacity", po::value(&o.dry_capacity)->default_value("80GiB"), "capacity of the --dry-run device");
  po::positional_options_description pos;
  pos.add("trace", 1);
  return run_with_exit_codes("fragsim-cuda-replay", [&] {
    po::variables_map vm;
    try {
      po::store(po::command_line_parser(argc, argv).options(d).positional(pos).run(), vm);
      po::notify(vm);
    } catch (const po::error& e) {
      throw InputError(e.what());
    }
    if (vm.count("help")) {
      std::cout << "usage: fragsim-cuda-replay TRACE [--mode malloc|async] [--limit SIZE] [-o OUT]\n\n"
                   "Replays a trace on a real GPU and records what the driver does, for `fragsim validate`.\n\n"
                << d << "\n";
      return 0;
    }
    if (o.trace.empty()) throw InputError("a TRACE is required (fragsim-cuda-replay --help)");
    if (o.sample_every == 0) throw InputError("--sample-every: must be at least 1");
    return run_replay(o);
  });
}

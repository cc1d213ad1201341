#include "sim/commands/trace_info.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "sim/base/text.h"
#include "traces/recording_header.h"
#include "traces/trace_reader.h"
#include "traces/xla_modules.h"
#include "traces/xprof_capture.h"

namespace fragsim {

nlohmann::json trace_info(const std::string& path, bool lenient, const ReaderFactory& source) {
  ReaderOptions ro;
  ro.lenient = lenient;
  auto reader = source ? source() : open_trace(path, ro);
  Event ev;
  std::uint64_t events = 0, allocs = 0, frees = 0, marks = 0, observations = 0, stacks = 0, empty_caches = 0;
  // Sums of sizes up to 2^64 − 1 each: kept in 128 bits, reported saturated at 2^64 − 1.
  using Sum = unsigned __int128;
  auto sat = [](Sum v) { return v > kTooLarge ? kTooLarge : static_cast<Bytes>(v); };
  // Per device and memory space (a profiler trace's CPU memory is its first GPU's host space, no part
  // of the GPU's): live, peak. The sum over them is only the whole trace's, labelled so.
  std::map<std::pair<std::uint32_t, Space>, std::pair<Sum, Sum>> dev;
  std::map<std::string, std::uint64_t> spaces;
  std::map<std::int64_t, std::uint64_t> streams;
  std::vector<std::uint64_t> hist(65, 0);
  Sum live = 0, peak = 0, total = 0;
  std::uint64_t aggregates = 0;  // pre-trace bytes of several unlisted allocations (key::kAggregate)
  Sum aggregate_bytes = 0;
  Bytes largest = 0;
  Tick t0, t1;
  while (reader->next(ev)) {
    if (events == 0) t0 = ev.t;
    t1 = ev.t;
    ++events;
    switch (ev.op) {
      case Op::kAlloc: {
        ++allocs;
        auto& d = dev[{ev.device, ev.space}];
        d.first += ev.size;
        d.second = std::max(d.second, d.first);
        live += ev.size;
        peak = std::max(peak, live);
        ++spaces[std::string(space_name(ev.space))];
        ++streams[ev.stream];
        if (ev.has(key::kAggregate)) {  // live bytes, no allocation's size
          ++aggregates;
          aggregate_bytes += ev.size;
          break;
        }
        total += ev.size;
        largest = std::max(largest, ev.size);
        ++hist[ev.size == 0 ? 0 : 64 - __builtin_clzll(ev.size)];
        break;
      }
      case Op::kFree:
        ++frees;
        dev[{ev.device, ev.live_space}].first -= ev.live_size;
        live -= ev.live_size;
        break;
      case Op::kMark:
        ++marks;
        break;
      case Op::kStack:
        ++stacks;
        break;
      case Op::kEmptyCache:
        ++empty_caches;
        break;
      default:
        ++observations;
        break;
    }
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& [d, v] : dev)
    devices.push_back({{"device", d.first},
                       {"space", space_name(d.second)},
                       {"peak_requested_bytes", sat(v.second)},
                       {"live_at_end_bytes", sat(v.first)}});
  nlohmann::json h = nlohmann::json::array();
  for (int b = 0; b < 65; ++b) {
    if (!hist[b]) continue;
    Bytes lo = b == 0 ? 0 : (1ULL << (b - 1)), hi = b == 0 ? 0 : (b == 64 ? UINT64_MAX : (1ULL << b) - 1);
    h.push_back({{"min_bytes", lo}, {"max_bytes", hi}, {"count", hist[b]}});
  }
  nlohmann::json sp = nlohmann::json::object();
  for (const auto& [k, v] : spaces) sp[k] = v;
  nlohmann::json j = {{"path", path},
                      {"header", reader->header().is_null() ? nlohmann::json::object() : reader->header()},
                      {"events", events},
                      {"allocs", allocs},
                      {"frees", frees},
                      {"marks", marks},
                      {"observations", observations},
                      {"stacks", stacks},
                      {"empty_cache_calls", empty_caches},
                      {"skipped_frees", reader->skipped_frees()},
                      {"live_at_end", reader->live_count()},
                      {"t_first", t0},
                      {"t_last", t1},
                      {"timed", reader->timed()},
                      {"devices", devices},
                      {"spaces", sp},
                      {"streams", streams.size()},
                      {"peak_requested_bytes", sat(peak)},
                      {"total_requested_bytes", sat(total)},
                      {"largest_alloc_bytes", largest},
                      {"size_histogram", h}};
  if (aggregates) j["aggregates"] = {{"count", aggregates}, {"bytes", sat(aggregate_bytes)}};
  if (!source && (is_xprof_path(path) || is_hlo_proto_path(path))) {  // the compiled modules it embeds
    nlohmann::json mods = nlohmann::json::array();
    for (const auto& m : list_hlo_modules(path))
      mods.push_back({{"name", m.name},
                      {"module_name", m.module_name},
                      {"logical_buffers", m.logical_buffers},
                      {"allocations", m.allocations},
                      {"heap_traces", m.heap_traces},
                      {"heap_events", m.heap_events},
                      {"largest_allocation_bytes", m.largest_allocation_bytes}});
    j["modules"] = mods;
  }
  return j;
}

std::string trace_info_text(const nlohmann::json& j) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "{}\n", escape_terminal(j["path"].get<std::string>()));
  for (const auto& line : describe_header(j["header"])) fmt::format_to(out, "  {}\n", escape_terminal(line));
  fmt::format_to(out, "  events {} (allocs {}, frees {}, marks {}, observations {}), {} live at end\n",
                 j["events"].get<std::uint64_t>(), j["allocs"].get<std::uint64_t>(), j["frees"].get<std::uint64_t>(),
                 j["marks"].get<std::uint64_t>(), j["observations"].get<std::uint64_t>(),
                 j["live_at_end"].get<std::uint64_t>());
  if (j["stacks"].get<std::uint64_t>() || j["empty_cache_calls"].get<std::uint64_t>())
    fmt::format_to(out, "  {} stacks of allocating code, {} empty_cache calls\n", j["stacks"].get<std::uint64_t>(),
                   j["empty_cache_calls"].get<std::uint64_t>());
  const std::string unit = j["header"].is_object() ? j["header"].value("time_unit", std::string("ns")) : "ns";
  const double scale = seconds_per_tick(unit);
  std::vector<std::string> spaces;
  for (const auto& [k, v] : j["spaces"].items())
    spaces.push_back(fmt::format("{} {} allocs", k, v.get<std::uint64_t>()));
  const std::string span =
      j["timed"].get<bool>()
          ? fmt::format(
                "time span {:.6g} s (time unit {})",
                static_cast<double>(j["t_last"].get<std::uint64_t>() - j["t_first"].get<std::uint64_t>()) * scale, unit)
          : std::string("no times recorded (events are in the trace's order)");
  fmt::format_to(out, "  {}; {} stream(s); {}\n", span, j["streams"].get<std::uint64_t>(), fmt::join(spaces, ", "));
  // One row per device and memory space; the whole trace's figure is their sum at one moment, which
  // is no one device's memory when a device has several spaces (docs/metrics.md).
  const size_t rows = j["devices"].size();
  std::set<std::uint32_t> devs;
  for (const auto& d : j["devices"]) devs.insert(d["device"].get<std::uint32_t>());
  std::string sum;
  if (rows > devs.size())
    sum = fmt::format(", summed over the {} memory spaces{} at one moment (not any device's memory)", rows,
                      devs.size() > 1 ? fmt::format(" of the {} devices", devs.size()) : "");
  else if (rows > 1)
    sum = fmt::format(", summed over the {} devices at one moment", rows);
  fmt::format_to(out, "  peak requested {} ({} B){}; largest alloc {}\n",
                 human_bytes(j["peak_requested_bytes"].get<Bytes>()), j["peak_requested_bytes"].get<Bytes>(), sum,
                 human_bytes(j["largest_alloc_bytes"].get<Bytes>()));
  for (const auto& d : j["devices"])
    fmt::format_to(out, "  device {} {}: peak requested {}\n", d["device"].get<std::uint32_t>(),
                   d.value("space", std::string("hbm")), human_bytes(d["peak_requested_bytes"].get<Bytes>()));
  if (j.contains("modules") && !j["modules"].empty()) {
    fmt::format_to(out,
                   "  {} compiled XLA modules (fragsim convert TRACE --module NAME out.jsonl writes one's heap):\n",
                   j["modules"].size());
    for (const auto& m : j["modules"])
      fmt::format_to(out, "    {:<40} {} logical buffers, {} allocations (largest {}), {} heap-simulator events\n",
                     escape_terminal(m["name"].get<std::string>()), m["logical_buffers"].get<std::uint64_t>(),
                     m["allocations"].get<std::uint64_t>(), human_bytes(m["largest_allocation_bytes"].get<Bytes>()),
                     m["heap_events"].get<std::uint64_t>());
  }
  if (j.contains("aggregates"))
    fmt::format_to(out,
                   "  {} blocks before the recording stand for {} of allocations it does not list one by one (their "
                   "sizes unknown): left out of the sizes below and of the largest alloc\n",
                   j["aggregates"]["count"].get<std::uint64_t>(), human_bytes(j["aggregates"]["bytes"].get<Bytes>()));
  if (!j["size_histogram"].empty()) fmt::format_to(out, "  size histogram:\n");
  for (const auto& b : j["size_histogram"])
    fmt::format_to(out, "    {:>12} .. {:<12} {:>10}\n", human_bytes(b["min_bytes"].get<Bytes>()),
                   human_bytes(b["max_bytes"].get<Bytes>()), b["count"].get<std::uint64_t>());
  return s;
}

}  // namespace fragsim

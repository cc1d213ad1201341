#include "sim/trace_info.h"

#include <fmt/format.h>

#include <map>

#include "sim/base/text.h"
#include "traces/trace_reader.h"

namespace fragsim {

nlohmann::json trace_info(const std::string& path, bool lenient) {
  ReaderOptions ro;
  ro.lenient = lenient;
  auto reader = open_trace(path, ro);
  Event ev;
  std::uint64_t events = 0, allocs = 0, frees = 0, marks = 0, observations = 0, stacks = 0, empty_caches = 0;
  // Sums of sizes up to 2^64 − 1 each: kept in 128 bits, reported saturated at 2^64 − 1.
  using Sum = unsigned __int128;
  auto sat = [](Sum v) { return v > kTooLarge ? kTooLarge : static_cast<Bytes>(v); };
  std::map<std::uint32_t, std::pair<Sum, Sum>> dev;  // live, peak
  std::map<std::string, std::uint64_t> spaces;
  std::map<std::int64_t, std::uint64_t> streams;
  std::vector<std::uint64_t> hist(65, 0);
  Sum live = 0, peak = 0, total = 0;
  Bytes largest = 0;
  Tick t0, t1;
  while (reader->next(ev)) {
    if (events == 0) t0 = ev.t;
    t1 = ev.t;
    ++events;
    switch (ev.op) {
      case Op::kAlloc: {
        ++allocs;
        auto& d = dev[ev.device];
        d.first += ev.size;
        d.second = std::max(d.second, d.first);
        live += ev.size;
        peak = std::max(peak, live);
        total += ev.size;
        largest = std::max(largest, ev.size);
        ++spaces[std::string(space_name(ev.space))];
        ++streams[ev.stream];
        int b = ev.size == 0 ? 0 : 64 - __builtin_clzll(ev.size);
        ++hist[b];
        break;
      }
      case Op::kFree:
        ++frees;
        dev[ev.device].first -= ev.live_size;
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
    devices.push_back({{"device", d}, {"peak_requested_bytes", sat(v.second)}, {"live_at_end_bytes", sat(v.first)}});
  nlohmann::json h = nlohmann::json::array();
  for (int b = 0; b < 65; ++b) {
    if (!hist[b]) continue;
    Bytes lo = b == 0 ? 0 : (1ULL << (b - 1)), hi = b == 0 ? 0 : (b == 64 ? UINT64_MAX : (1ULL << b) - 1);
    h.push_back({{"min_bytes", lo}, {"max_bytes", hi}, {"count", hist[b]}});
  }
  nlohmann::json sp = nlohmann::json::object();
  for (const auto& [k, v] : spaces) sp[k] = v;
  return {{"path", path},
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
          {"devices", devices},
          {"spaces", sp},
          {"streams", streams.size()},
          {"peak_requested_bytes", sat(peak)},
          {"total_requested_bytes", sat(total)},
          {"largest_alloc_bytes", largest},
          {"size_histogram", h}};
}

namespace {

// A header's value of the type wanted, else `def`: the header of a JSONL trace may claim to be
// anything (an XProf capture's included), and what info prints of it must not throw.
template <class T>
T header_value(const nlohmann::json& o, const char* key, T def) {
  if (!o.is_object() || !o.contains(key)) return def;
  try {
    return o[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    return def;
  }
}

}  // namespace

std::string trace_info_text(const nlohmann::json& j) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "{}\n", escape_terminal(j["path"].get<std::string>()));
  const nlohmann::json& h = j["header"];
  auto dump = [](const nlohmann::json& v) { return escape_terminal(v.dump()); };
  if (h.is_object() && header_value<std::string>(h, "source", "") == "xprof" && h.contains("xprof")) {
    // An XProf capture: what each allocator logged, and what was inferred.
    const auto& x = h["xprof"];
    auto hosts = header_value<std::uint64_t>(x, "hosts", 0);
    fmt::format_to(out, "  XProf capture ({} host{})\n", hosts, hosts == 1 ? "" : "s");
    for (const auto& d : header_value(x, "devices", nlohmann::json::array()))
      if (d.size() > 1) fmt::format_to(out, "    device plane {}\n", dump(d));
    const auto allocators = header_value(x, "allocators", nlohmann::json::array());
    for (const auto& a : allocators)
      fmt::format_to(
          out,
          "    allocator {} (device {} {}): {} allocation and {} deallocation events; limit {}; {} live "
          "before the capture ({} frees of earlier buffers){}\n",
          escape_terminal(header_value<std::string>(a, "allocator", "?")), header_value<std::uint64_t>(a, "device", 0),
          escape_terminal(header_value<std::string>(a, "space", "hbm")), header_value<std::uint64_t>(a, "allocs", 0),
          header_value<std::uint64_t>(a, "frees", 0), human_bytes(header_value<Bytes>(a, "limit_bytes", 0)),
          human_bytes(header_value<Bytes>(a, "live_before_bytes", 0)),
          header_value<std::uint64_t>(a, "frees_of_earlier_buffers", 0),
          a.is_object() && a.contains("mode")
              ? fmt::format("; addresses show {}", a["mode"] == "grow" ? "regions obtained on demand" : "one region")
              : "");
    if (x.is_object() && x.contains("skipped_allocators"))
      fmt::format_to(out, "    not imported (allocators fragsim does not map to a device memory): {}\n",
                     dump(x["skipped_allocators"]));
    if (h.contains("recorded_hardware")) fmt::format_to(out, "    hardware: {}\n", dump(h["recorded_hardware"]));
    if (allocators.empty())
      fmt::format_to(out,
                     "  warning: no allocator events in this capture. Start the capture before the first device "
                     "allocation; some jaxlib versions on CUDA log none (jax-ml/jax#22890)\n");
  } else if (!h.empty()) {
    fmt::format_to(out, "  header: {}\n", dump(h));
  }
  fmt::format_to(out, "  events {} (allocs {}, frees {}, marks {}, observations {}), {} live at end\n",
                 j["events"].get<std::uint64_t>(), j["allocs"].get<std::uint64_t>(), j["frees"].get<std::uint64_t>(),
                 j["marks"].get<std::uint64_t>(), j["observations"].get<std::uint64_t>(),
                 j["live_at_end"].get<std::uint64_t>());
  if (j["stacks"].get<std::uint64_t>() || j["empty_cache_calls"].get<std::uint64_t>())
    fmt::format_to(out, "  {} stacks of allocating code, {} empty_cache calls\n", j["stacks"].get<std::uint64_t>(),
                   j["empty_cache_calls"].get<std::uint64_t>());
  fmt::format_to(out, "  time {} .. {}; {} stream(s); spaces {}\n", j["t_first"].get<std::uint64_t>(),
                 j["t_last"].get<std::uint64_t>(), j["streams"].get<std::uint64_t>(), dump(j["spaces"]));
  fmt::format_to(out, "  peak requested {} ({} B); largest alloc {}\n",
                 human_bytes(j["peak_requested_bytes"].get<Bytes>()), j["peak_requested_bytes"].get<Bytes>(),
                 human_bytes(j["largest_alloc_bytes"].get<Bytes>()));
  for (const auto& d : j["devices"])
    fmt::format_to(out, "  device {}: peak requested {}\n", d["device"].get<int>(),
                   human_bytes(d["peak_requested_bytes"].get<Bytes>()));
  if (j.contains("modules")) {
    fmt::format_to(out,
                   "  {} compiled XLA modules (fragsim convert TRACE --module NAME out.jsonl writes one's heap):\n",
                   j["modules"].size());
    for (const auto& m : j["modules"])
      fmt::format_to(out, "    {:<40} {} logical buffers, {} allocations (largest {}), {} heap-simulator events\n",
                     escape_terminal(m["name"].get<std::string>()), m["logical_buffers"].get<std::uint64_t>(),
                     m["allocations"].get<std::uint64_t>(), human_bytes(m["largest_allocation_bytes"].get<Bytes>()),
                     m["heap_events"].get<std::uint64_t>());
  }
  fmt::format_to(out, "  size histogram:\n");
  for (const auto& b : j["size_histogram"])
    fmt::format_to(out, "    {:>12} .. {:<12} {:>10}\n", human_bytes(b["min_bytes"].get<Bytes>()),
                   human_bytes(b["max_bytes"].get<Bytes>()), b["count"].get<std::uint64_t>());
  return s;
}

}  // namespace fragsim

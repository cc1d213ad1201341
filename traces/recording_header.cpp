#include "traces/recording_header.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/notes.h"

namespace fragsim {

namespace {

bool pow2(std::uint64_t v) { return v && !(v & (v - 1)); }

// allocator_settings as PyTorch writes them; values PyTorch would not have written are ignored,
// as the allocator itself would never have been configured with them.
RecordedTorchSettings torch_settings(const nlohmann::json& s) {
  RecordedTorchSettings t;
  if (!s.is_object()) return t;
  if (auto it = s.find("max_split_size"); it != s.end() && it->is_number_integer()) {
    std::int64_t v = it->get<std::int64_t>();
    if (v > 0 && static_cast<std::uint64_t>(v) < (1ULL << 62)) t.max_split_size = static_cast<Bytes>(v);
  }
  if (auto it = s.find("garbage_collection_threshold"); it != s.end() && it->is_number()) {
    double v = it->get<double>();
    if (v > 0 && v < 1) t.garbage_collection_threshold = v;
  }
  if (auto it = s.find("expandable_segments"); it != s.end() && it->is_boolean())
    t.expandable_segments = it->get<bool>();
  if (auto it = s.find("roundup_power2_divisions"); it != s.end() && it->is_object())
    for (auto d = it->begin(); d != it->end(); ++d) {
      char* end = nullptr;
      std::uint64_t mb = std::strtoull(d.key().c_str(), &end, 10);
      if (*end || !pow2(mb) || !d.value().is_number_integer() || d.value().get<std::int64_t>() < 0) continue;
      auto n = d.value().get<std::uint64_t>();
      if (n != 0 && !pow2(n)) continue;
      t.roundup_power2_divisions.emplace_back(mb, n);
    }
  return t;
}

// The settings an object states (a snapshot's header, or one device's entry of a set's
// device_allocator_settings): its allocator_settings, and what the snapshot's own layout shows of a
// setting they leave out (inferred_allocator_settings).
std::optional<RecordedTorchSettings> recorded_torch_settings(const nlohmann::json& h) {
  std::optional<RecordedTorchSettings> r;
  if (h.contains("allocator_settings")) r = torch_settings(h["allocator_settings"]);
  if (auto it = h.find("inferred_allocator_settings"); it != h.end() && it->is_object()) {
    const RecordedTorchSettings inferred = torch_settings(*it);
    if (inferred.expandable_segments && !(r && r->expandable_segments)) {
      if (!r) r = RecordedTorchSettings{};
      r->expandable_segments = inferred.expandable_segments;
      r->inferred = "expandable_segments:" + std::string(*inferred.expandable_segments ? "True" : "False") + ": " +
                    (it->contains("basis") && (*it)["basis"].is_string() ? (*it)["basis"].get<std::string>()
                                                                         : std::string("inferred"));
    }
  }
  return r;
}

// A recorded_devices entry's allocator_cap: {cap_bytes, request_bytes, device_free_bytes, oom_event}.
template <class Bad>
std::optional<RecordedAllocatorCap> allocator_cap(const nlohmann::json& d, const Bad& bad) {
  auto it = d.find("allocator_cap");
  if (it == d.end()) return std::nullopt;
  const char* keys[] = {"cap_bytes", "request_bytes", "device_free_bytes", "oom_event"};
  for (const char* k : keys)
    if (!it->is_object() || !it->contains(k) || !(*it)[k].is_number_unsigned())
      throw bad("recorded_devices", "allocator_cap needs cap_bytes, request_bytes, device_free_bytes and oom_event");
  return RecordedAllocatorCap{(*it)["cap_bytes"].get<Bytes>(), (*it)["request_bytes"].get<Bytes>(),
                              (*it)["device_free_bytes"].get<Bytes>(), (*it)["oom_event"].get<std::uint64_t>()};
}

// A profiler trace's figures (traces/kineto.h), one line per device.
void describe_kineto(const nlohmann::json& k, std::vector<std::string>* lines) {
  auto n = [](const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : std::uint64_t{0};
  };
  std::string who = k.contains("rank") ? fmt::format(", rank {}", n(k, "rank")) : "";
  if (k.contains("world_size")) who += fmt::format(" of {}", n(k, "world_size"));
  lines->push_back(fmt::format("PyTorch profiler trace: {} memory events{}{}; time: {}", n(k, "events"), who,
                               k.value("with_stack", false) ? ", with Python stacks" : "",
                               k.value("time", std::string("?"))));
  for (const auto& d : k.value("devices", nlohmann::json::array())) {
    if (!d.is_object()) continue;
    std::vector<std::string> what{d.value("platform", std::string("GPU"))};
    if (d.contains("name")) what.push_back(d.value("name", std::string()));
    if (d.contains("memory_bytes")) what.push_back(human_bytes(n(d, "memory_bytes")));
    if (d.contains("compute_capability"))
      what.push_back("compute capability " + d.value("compute_capability", std::string()));
    lines->push_back(fmt::format("device {} ({}): {} allocations, {} frees; peak Total Reserved {}", n(d, "device"),
                                 fmt::join(what, ", "), n(d, "allocations"), n(d, "frees"),
                                 human_bytes(n(d, "peak_reserved_bytes"))));
    lines->push_back(fmt::format(
        "device {} before the window: {} reserved in {} segments, {} live ({} freed in the window at recorded "
        "addresses, {} inferred in ranges it never touches, {} at no address it states); {} reserved and free, "
        "cached on no stream the window allocates on",
        n(d, "device"), human_bytes(n(d, "reserved_before_bytes")), n(d, "segments_before"),
        human_bytes(n(d, "live_before_bytes")), human_bytes(n(d, "freed_in_window_bytes")),
        human_bytes(n(d, "untouched_live_bytes")), human_bytes(n(d, "unplaced_live_bytes")),
        human_bytes(n(d, "idle_free_bytes"))));
    if (auto s = d.find("layout_search"); s != d.end() && s->is_object())
      lines->push_back(fmt::format(
          "device {} layout inferred in {} replays ({} segment boundaries, {} free tails, {} segments extended): "
          "its model reproduces {}/{} recorded addresses",
          n(d, "device"), n(*s, "replays"), n(*s, "boundaries"), n(*s, "tails_freed"), n(*s, "extended"),
          n(*s, "addresses_predicted"), n(*s, "allocations")));
    if (n(d, "cache_releases"))
      lines->push_back(fmt::format(
          "device {}: Total Reserved falls {} time{} (the cache released){}", n(d, "device"), n(d, "cache_releases"),
          n(d, "cache_releases") == 1 ? "" : "s",
          n(d, "cache_releases_maybe_retry")
              ? fmt::format(", {} of them the program's empty_cache or the allocator's retry after a failed "
                            "cudaMalloc (the trace cannot tell)",
                            n(d, "cache_releases_maybe_retry"))
              : std::string(", each the program's empty_cache")));
    if (n(d, "frees_missing") || n(d, "frees_skipped"))
      lines->push_back(
          fmt::format("device {}: {} allocations at a live block's address (its free missing), {} frees "
                      "of no live block, skipped",
                      n(d, "device"), n(d, "frees_missing"), n(d, "frees_skipped")));
  }
  // One host section, or one per rank of a set (`hosts`).
  std::vector<nlohmann::json> hosts;
  if (auto h = k.find("host"); h != k.end() && h->is_object()) hosts.push_back(*h);
  if (auto h = k.find("hosts"); h != k.end() && h->is_array())
    for (const auto& x : *h)
      if (x.is_object()) hosts.push_back(x);
  for (const auto& h : hosts)
    lines->push_back(fmt::format(
        "host memory (CPU events, space host of device {}): {} allocations, {} frees, {} live before the window",
        n(h, "device"), n(h, "allocations"), n(h, "frees"), human_bytes(n(h, "live_before_bytes"))));
  if (n(k, "skipped_other_device_events"))
    lines->push_back(fmt::format("not imported: {} memory events of other device types (neither CPU, CUDA nor HIP)",
                                 n(k, "skipped_other_device_events")));
}

}  // namespace

Recording recording_from_header(const nlohmann::json& h, const std::string& file, std::uint64_t line) {
  Recording r;
  if (!h.is_object()) return r;
  auto bad = [&](const std::string& key, const std::string& what) { return InputError(file, line, key + ": " + what); };
  const std::string source = h.value("source", std::string());
  if (source == "torch-snapshot")
    r.source = RecordingSource::kTorchSnapshot;
  else if (source == "xprof")
    r.source = RecordingSource::kXprof;
  else if (source == "xla-hlo")
    r.source = RecordingSource::kXlaHlo;
  else if (source == "kineto")
    r.source = RecordingSource::kKineto;
  else if (source == "jax-memory-profile")
    r.source = RecordingSource::kJaxMemoryProfile;
  else if (source == "fragsim gen")
    r.source = RecordingSource::kGenerated;
  r.torch_settings = recorded_torch_settings(h);
  if (auto it = h.find("device_allocator_settings"); it != h.end() && it->is_array())
    for (const auto& d : *it)
      if (d.is_object() && d.contains("device") && d["device"].is_number_unsigned() &&
          d["device"].get<std::uint64_t>() <= UINT32_MAX)
        r.device_torch_settings[d["device"].get<std::uint32_t>()] = recorded_torch_settings(d);
  if (auto it = h.find("recorded_devices"); it != h.end() && it->is_array())
    for (const auto& d : *it) {
      if (!d.is_object() || !d.contains("device") || !d["device"].is_number_unsigned() ||
          d["device"].get<std::uint64_t>() > UINT32_MAX || !d.contains("usable_bytes") ||
          !d["usable_bytes"].is_number_unsigned())
        throw bad("recorded_devices", "each entry needs device and usable_bytes");
      r.devices.push_back({d["device"].get<std::uint32_t>(), d["usable_bytes"].get<Bytes>(),
                           d.value("basis", std::string("from the trace header")), allocator_cap(d, bad)});
    }
  if (auto x = h.find("xprof"); x != h.end() && x->is_object())
    if (auto al = x->find("allocators"); al != x->end() && al->is_array())
      for (const auto& a : *al) {
        if (!a.is_object() || !a.contains("device") || !a["device"].is_number_unsigned() ||
            a["device"].get<std::uint64_t>() > UINT32_MAX)
          continue;
        RecordedAllocator ra;
        ra.name = a.value("allocator", std::string());
        ra.device = a["device"].get<std::uint32_t>();
        if (!parse_space(a.value("space", std::string("hbm")), &ra.space)) continue;
        if (a.contains("limit_bytes") && a["limit_bytes"].is_number_unsigned())
          ra.limit = a["limit_bytes"].get<Bytes>();
        if (a.contains("live_before_bytes") && a["live_before_bytes"].is_number_unsigned())
          ra.live_before = a["live_before_bytes"].get<Bytes>();
        std::string mode = a.value("mode", std::string());
        ra.mode = mode == "single_region" ? RecordedAllocator::Mode::kSingleRegion
                  : mode == "grow"        ? RecordedAllocator::Mode::kGrow
                                          : RecordedAllocator::Mode::kUnknown;
        r.allocators.push_back(std::move(ra));
      }
  if (auto hw = h.find("recorded_hardware"); hw != h.end() && hw->is_object()) {
    RecordedHardware rh;
    if (!hw->contains("preset") || !(*hw)["preset"].is_string()) throw bad("recorded_hardware", "needs a preset name");
    rh.preset = (*hw)["preset"].get<std::string>();
    if (hw->contains("capacity_bytes")) {
      if (!(*hw)["capacity_bytes"].is_number_unsigned())
        throw bad("recorded_hardware", "capacity_bytes must be a number of bytes");
      rh.capacity = (*hw)["capacity_bytes"].get<Bytes>();
    }
    rh.basis = hw->value("basis", std::string("the trace header"));
    rh.compute_capability = hw->value("compute_capability", std::string());
    if (auto ds = hw->find("devices"); ds != hw->end()) {
      if (!ds->is_array()) throw bad("recorded_hardware", "devices must be a list");
      for (const auto& d : *ds) {
        if (!d.is_object() || !d.contains("device") || !d["device"].is_number_unsigned() ||
            d["device"].get<std::uint64_t>() > UINT32_MAX || !d.contains("capacity_bytes") ||
            !d["capacity_bytes"].is_number_unsigned())
          throw bad("recorded_hardware", "each of devices needs device and capacity_bytes");
        rh.devices[d["device"].get<std::uint32_t>()] = {d["capacity_bytes"].get<Bytes>(),
                                                        d.value("basis", std::string("the trace header"))};
      }
    }
    r.hardware = std::move(rh);
  }
  if (r.source == RecordingSource::kXlaHlo) {
    if (h.contains("alignment_bytes") && h["alignment_bytes"].is_number_unsigned())
      r.alignment = h["alignment_bytes"].get<Bytes>();
    if (auto t = h.find("heap_traces"); t != h.end() && t->is_array())
      for (const auto& x : *t)
        if (x.is_object() && x.contains("device") && x["device"].is_number_unsigned() &&
            x["device"].get<std::uint64_t>() <= UINT32_MAX && x.contains("alignment_bytes") &&
            x["alignment_bytes"].is_number_unsigned() && x["alignment_bytes"].get<Bytes>() > 0)
          r.alignments[x["device"].get<std::uint32_t>()] = x["alignment_bytes"].get<Bytes>();
    r.device_sizes = h.value("device_sizes", false) == true;
  }
  if (r.source == RecordingSource::kJaxMemoryProfile) r.device_sizes = h.value("device_sizes", false) == true;
  if (auto k = h.find("kineto"); k != h.end() && k->is_object())
    if (auto ds = k->find("devices"); ds != k->end() && ds->is_array())
      for (const auto& d : *ds)
        if (d.is_object() && d.contains("device") && d["device"].is_number_unsigned() &&
            d["device"].get<std::uint64_t>() <= UINT32_MAX && d.contains("peak_reserved_bytes") &&
            d["peak_reserved_bytes"].is_number_unsigned()) {
          Bytes& m = r.held_at_most[d["device"].get<std::uint32_t>()];
          m = std::max(m, d["peak_reserved_bytes"].get<Bytes>());
        }
  if (auto n = h.find("device_names"); n != h.end() && n->is_object())
    for (const auto& [k, v] : n->items()) {
      char* end = nullptr;
      unsigned long long d = std::strtoull(k.c_str(), &end, 10);
      if (!k.empty() && !*end && d <= UINT32_MAX && v.is_string()) r.device_names[static_cast<std::uint32_t>(d)] = v;
    }
  if (auto m = h.find("recording_set"); m != h.end() && m->is_array() && m->size() > 1 && m->size() <= UINT32_MAX) {
    for (size_t i = 0; i < m->size(); ++i) {
      const nlohmann::json& member = (*m)[i];
      if (!member.is_object() || !member.contains("devices") || !member["devices"].is_array())
        throw bad("recording_set", "each member must list its devices");
      for (const auto& d : member["devices"]) {
        if (!d.is_number_unsigned() || d.get<std::uint64_t>() > UINT32_MAX)
          throw bad("recording_set", "a member's devices must be device numbers");
        if (!r.device_process.emplace(d.get<std::uint32_t>(), static_cast<std::uint32_t>(i)).second)
          throw bad("recording_set", fmt::format("device {} is listed by two members", d.get<std::uint64_t>()));
      }
    }
    r.processes = static_cast<std::uint32_t>(m->size());
  }
  if (auto by = h.find("recorded_by"); by != h.end() && by->is_object()) {
    // Names this build does not know are left unknown: the source's own default applies.
    r.recorded_by = framework_named(by->value("framework", std::string()));
    r.platform = platform_named(by->value("platform", std::string()));
    r.recorded_by_basis = by->value("basis", std::string());
  }
  r.state_only = h.value("state_only", false) == true;
  if (auto k = h.find("rank"); k != h.end()) {
    if (!k->is_number_unsigned() || k->get<std::uint64_t>() > UINT32_MAX) throw bad("rank", "must be a rank number");
    r.rank = k->get<std::uint32_t>();
  }
  return r;
}

std::string no_allocator_events_hint() {
  return "start the capture before the first device allocation; some jaxlib versions on CUDA log none "
         "(jax-ml/jax#22890)";
}

std::vector<std::string> describe_header(const nlohmann::json& h) {
  std::vector<std::string> lines;
  if (!h.is_object()) return lines;
  static const std::set<std::string> kKnown = {"fragsim_trace",
                                               "time_unit",
                                               "source",
                                               "allocator_settings",
                                               "device_allocator_settings",
                                               "recorded_devices",
                                               "xprof",
                                               "state_only",
                                               "empty_cache_calls",
                                               "recorded_hardware",
                                               "alignment_bytes",
                                               "module",
                                               "module_name",
                                               "heap_traces",
                                               "note",
                                               "workload",
                                               "seed",
                                               "settings",
                                               "device_names",
                                               "device_sizes",
                                               "recording_set",
                                               "recorded_by",
                                               "kineto",
                                               "rank",
                                               "jax_memory_profile"};
  const std::string source = h.value("source", std::string());
  if (!source.empty()) lines.push_back("recorded by: " + source);
  if (auto by = h.find("recorded_by"); by != h.end() && by->is_object()) {
    std::string who = by->value("framework", std::string()), on = by->value("platform", std::string());
    if (!who.empty() || !on.empty())
      lines.push_back(fmt::format("recorded with: {}{}{}", who, who.empty() || on.empty() ? "" : " on ", on) +
                      (by->contains("basis") ? fmt::format(" ({})", by->value("basis", std::string())) : ""));
  }
  auto settings_text = [](const nlohmann::json& s) {
    std::string conf = s.value("PYTORCH_CUDA_ALLOC_CONF", std::string());
    return conf.empty() ? std::string("PyTorch's defaults, no PYTORCH_CUDA_ALLOC_CONF")
                        : "PYTORCH_CUDA_ALLOC_CONF=" + conf;
  };
  const auto per_device = h.find("device_allocator_settings");
  const bool differ = per_device != h.end() && per_device->is_array() && !per_device->empty();
  if (auto s = h.find("allocator_settings"); s != h.end() && s->is_object())
    lines.push_back("allocator settings: " + settings_text(*s) + (differ ? " (the devices below: their own)" : ""));
  if (differ)
    for (const auto& d : *per_device)
      if (d.is_object() && d.contains("device")) {
        auto s = d.find("allocator_settings");
        lines.push_back(fmt::format("device {}: allocator settings: {}", dump_json(d["device"]),
                                    s != d.end() && s->is_object() ? settings_text(*s) : std::string("none recorded")));
      }
  if (h.value("state_only", false) == true) lines.push_back("a state-only snapshot: no trace of allocations");
  if (auto d = h.find("recorded_devices"); d != h.end() && d->is_array())
    for (const auto& x : *d)
      if (x.is_object() && x.contains("usable_bytes") && x["usable_bytes"].is_number_unsigned()) {
        lines.push_back(fmt::format("device {}: usable memory {} ({})", x.value("device", 0),
                                    human_bytes(x["usable_bytes"].get<Bytes>()), x.value("basis", std::string())));
        if (auto c = x.find("allocator_cap"); c != x.end() && c->is_object()) {
          auto n = [&](const char* k) {
            auto v = c->find(k);
            return v != c->end() && v->is_number_unsigned() ? v->get<std::uint64_t>() : std::uint64_t{0};
          };
          lines.push_back(fmt::format(
              "device {}: the allocator refused {} at event {} with {} free on the device: a cap of its own "
              "(a per-process memory fraction) of at least {}",
              x.value("device", 0), human_bytes(n("request_bytes")), n("oom_event"),
              human_bytes(n("device_free_bytes")), human_bytes(n("cap_bytes"))));
        }
      }
  if (auto x = h.find("xprof"); x != h.end() && x->is_object()) {
    lines.push_back(
        fmt::format("XProf capture ({} host{})", x->value("hosts", 0), x->value("hosts", 0) == 1 ? "" : "s"));
    for (const auto& d : x->value("devices", nlohmann::json::array()))
      if (d.is_object() && d.size() > 1) {
        std::vector<std::string> what;  // "AMD MI300X", "206.00 GiB of memory", "compute capability 9.4"
        std::string name = d.value("vendor", std::string());
        if (d.contains("model")) name += (name.empty() ? "" : " ") + d.value("model", std::string());
        if (!name.empty()) what.push_back(name);
        if (d.contains("memory_bytes") && d["memory_bytes"].is_number_unsigned())
          what.push_back(human_bytes(d["memory_bytes"].get<Bytes>()) + " of memory");
        if (d.contains("compute_capability"))
          what.push_back("compute capability " + d.value("compute_capability", std::string()));
        lines.push_back(fmt::format("device {}: {}", d.value("device", 0), fmt::join(what, ", ")));
      }
    const auto allocators = x->value("allocators", nlohmann::json::array());
    for (const auto& a : allocators)
      if (a.is_object())
        lines.push_back(fmt::format(
            "allocator {} (device {} {}): {} allocation and {} deallocation events; limit {}; {} live before the "
            "capture ({} frees of earlier buffers){}",
            a.value("allocator", "?"), a.value("device", 0), a.value("space", "hbm"), a.value("allocs", 0),
            a.value("frees", 0), human_bytes(a.value("limit_bytes", Bytes{0})),
            human_bytes(a.value("live_before_bytes", Bytes{0})), a.value("frees_of_earlier_buffers", 0),
            a.contains("mode")
                ? fmt::format("; addresses show {}", a["mode"] == "grow" ? "regions obtained on demand" : "one region")
                : ""));
    if (auto sk = x->find("skipped_allocators"); sk != x->end() && sk->is_array() && !sk->empty()) {
      std::vector<std::string> names;
      for (const auto& n : *sk) names.push_back(n.is_string() ? n.get<std::string>() : dump_json(n));
      lines.push_back(
          fmt::format("not imported (allocators fragsim does not map to a device memory): {}", fmt::join(names, ", ")));
    }
    if (allocators.empty())
      lines.push_back("warning: no allocator events in this capture: " + no_allocator_events_hint());
  }
  if (auto k = h.find("kineto"); k != h.end() && k->is_object()) describe_kineto(*k, &lines);
  if (auto m = h.find("jax_memory_profile"); m != h.end() && m->is_object()) {
    for (const auto& d : m->value("devices", nlohmann::json::array()))
      if (d.is_object())
        lines.push_back(fmt::format("device {}: {} buffers live, {}", d.value("device", 0), d.value("buffers", 0),
                                    human_bytes(d.value("bytes", Bytes{0}))));
    lines.push_back(fmt::format("{} compiled executables ({} of code), on no device", m->value("executables", 0),
                                human_bytes(m->value("executable_bytes", Bytes{0}))));
  }
  if (auto hw = h.find("recorded_hardware"); hw != h.end() && hw->is_object())
    lines.push_back(
        fmt::format("hardware: {} ({})", hw->value("preset", std::string("?")), hw->value("basis", std::string())));
  if (auto n = h.find("device_names"); n != h.end() && n->is_object()) {
    // In the devices' order (a JSON object's keys come in string order: 0, 1, 10, 2): decimal
    // numbers without leading zeros order by length, then by their digits.
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& [k, v] : n->items())
      if (v.is_string()) names.emplace_back(k, v.get<std::string>());
    std::stable_sort(names.begin(), names.end(), [](const auto& a, const auto& b) {
      return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
    });
    for (const auto& [k, v] : names) lines.push_back(fmt::format("device {}: {}", k, v));
  }
  if (auto m = h.find("recording_set"); m != h.end() && m->is_array())
    lines.push_back(fmt::format("a set of {} recordings replayed as one run", m->size()));
  if (source == "xla-hlo")
    lines.push_back(fmt::format("XLA module {} ({}), {} heap-simulator trace(s)", h.value("module", std::string()),
                                h.value("module_name", std::string()), h.value("heap_traces", 0)));
  std::vector<std::string> other;
  for (const auto& [k, v] : h.items())
    if (!kKnown.count(k)) other.push_back(k);
  if (!other.empty()) lines.push_back(fmt::format("other header keys: {}", fmt::join(other, ", ")));
  return once_per_device(lines);
}

}  // namespace fragsim

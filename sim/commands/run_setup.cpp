#include "sim/commands/run_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "sim/base/error.h"
#include "sim/commands/settings.h"
#include "traces/recording_header.h"
#include "traces/trace_reader.h"

namespace fragsim {

namespace {

// A recording that names no device but shows how much memory its allocator could obtain (a snapshot's
// OOM): the GPU preset whose total explains that on every device it shows (total_explains_usable), the
// smallest where several do, with a note naming the others; "" when none does.
std::string preset_by_memory(const Recording& recording, const RunRequest& req, std::vector<std::string>* notes) {
  if (recording.devices.empty()) return {};
  const auto widest = std::max_element(recording.devices.begin(), recording.devices.end(),
                                       [](const auto& a, const auto& b) { return a.usable < b.usable; });
  std::vector<std::pair<Bytes, std::string>> fits;
  for (const std::string& p : list_presets()) {
    const HardwareModel hw = load_hardware(p);
    const SpaceSpec* hbm = hw.space(Space::kHbm);
    if (hw.kind != "gpu" || !hbm) continue;
    if (std::all_of(recording.devices.begin(), recording.devices.end(),
                    [&](const RecordedDeviceMemory& d) { return total_explains_usable(hbm->capacity, d.usable); }))
      fits.emplace_back(hbm->capacity, p);
  }
  if (fits.empty()) return {};
  std::sort(fits.begin(), fits.end());
  std::vector<std::string> others;
  for (size_t i = 1; i < fits.size(); ++i) others.push_back(fits[i].second);
  const OptionNames& opt = req.names;
  notes->push_back(fmt::format(
      "hardware {} by its memory: {} does not name its device, and device {}'s usable memory inferred from it, {}, "
      "lies {} below that preset's {} total (the CUDA context and other processes' memory){} ({} names yours{})",
      fits[0].second, req.trace, widest->device, human_bytes(widest->usable),
      human_bytes(fits[0].first - widest->usable), human_bytes(fits[0].first),
      others.empty() ? ""
                     : fmt::format("; {} explain{} it too", fmt::join(others, ", "), others.size() == 1 ? "s" : ""),
      opt("--hw"), req.capacity.empty() ? "" : fmt::format("; its memory: {}", opt.with("--capacity", req.capacity))));
  return fits[0].second;
}

}  // namespace

HardwareModel choose_hardware(const RunRequest& req, const Recording& recording, std::vector<std::string>* notes) {
  const OptionNames& opt = req.names;
  std::string name = req.hw;
  std::optional<Bytes> recorded_capacity;
  if (name.empty() && recording.hardware) {
    name = recording.hardware->preset;
    recorded_capacity = recording.hardware->capacity;
    // (--capacity replaces the memory the recording states: the note says whose it is.)
    notes->push_back(
        fmt::format("hardware {}{} from the recording: {}{} ({} chooses another)", name,
                    recorded_capacity && req.capacity.empty() ? fmt::format(" with {} B", *recorded_capacity) : "",
                    recording.hardware->basis,
                    req.capacity.empty() ? "" : fmt::format("; its memory: {}", opt.with("--capacity", req.capacity)),
                    opt("--hw")));
  } else if (name.empty() && (name = preset_by_memory(recording, req, notes)).empty()) {
    name = "h100-80g";
    notes->push_back(
        fmt::format("hardware h100-80g assumed: {} does not name its device ({} names yours{})", req.trace, opt("--hw"),
                    req.capacity.empty() ? fmt::format(", {} sets its memory", opt("--capacity"))
                                         : fmt::format("; its memory: {}", opt.with("--capacity", req.capacity))));
  }
  HardwareModel hw = load_hardware(name, opt("--hw"));
  SpaceSpec* hbm = hw.space(Space::kHbm);
  if (recorded_capacity && hbm && req.capacity.empty()) hbm->capacity = *recorded_capacity;
  // The recording's own device, where a preset of its family stands in: its compute capability.
  if (req.hw.empty() && recording.hardware && !recording.hardware->compute_capability.empty())
    hw.compute_major = compute_major(recording.hardware->compute_capability);
  // On the recording's own device, the memory its allocator held at once (a profiler trace's Total
  // Reserved) was there to give: a preset's reserve for the runtime that would leave less is
  // lowered to what the recording proves free of it.
  if (hbm && req.hw.empty() && req.capacity.empty() && req.reserve.empty())
    for (const auto& [device, held] : recording.held_at_most) {
      const Bytes total =
          recording.hardware ? recording.hardware->capacity_of(device).value_or(hbm->capacity) : hbm->capacity;
      if (held > total) {  // the recording contradicts the memory it states: said, the preset's reserve kept
        notes->push_back(fmt::format(
            "device {}'s allocator held {} ({} B) at once in the recording, more than the {} ({} B) the recording "
            "states the device has: the memory stated is not the device's ({} sets it)",
            device, human_bytes(held), held, human_bytes(total), total, opt("--capacity")));
        continue;
      }
      if (total - held >= hbm->reserve) continue;
      notes->push_back(fmt::format(
          "device {}'s allocator held {} ({} B) at once in the recording, more than the {} of its {} that {}'s "
          "reserve for the runtime ({}) leaves: the reserve is lowered to {} ({} sets it)",
          device, human_bytes(held), held, human_bytes(total > hbm->reserve ? total - hbm->reserve : 0),
          human_bytes(total), hw.name, human_bytes(hbm->reserve), human_bytes(total - held), opt("--reserve")));
      hbm->reserve = total - held;
    }
  if (!req.capacity.empty()) {
    if (!hbm) throw InputError(opt("--capacity") + ": hardware '" + hw.name + "' has no hbm space");
    Bytes holdback = hbm->runtime_holdback();
    hbm->set_capacity(parse_size_arg(req.capacity, "--capacity", opt));
    check_space(*hbm, opt("--capacity"));
    if (holdback)
      notes->push_back(fmt::format("the TPU runtime's limit stays {} below {}, as on the {} preset",
                                   human_bytes(holdback), opt("--capacity"), hw.name));
  }
  if (!req.reserve.empty()) {
    if (!hbm) throw InputError(opt("--reserve") + ": hardware '" + hw.name + "' has no hbm space");
    hbm->reserve = parse_size_arg(req.reserve, "--reserve", opt);
    check_space(*hbm, opt("--reserve"));
    check_reserve(*hbm, opt.with("--reserve", req.reserve));
  } else if (!req.capacity.empty() && hbm && hbm->reserve >= hbm->capacity) {
    // The preset's reserve stays: a capacity at or below it leaves allocators nothing, and every
    // allocation fails. A result, not an error (a device that small exists nowhere, though).
    notes->push_back(fmt::format(
        "{} is not above the {} hardware {} reserves for the runtime (the CUDA context): "
        "allocators get nothing ({} gives them the whole capacity)",
        opt.with("--capacity", req.capacity), human_bytes(hbm->reserve), hw.name, opt.with("--reserve", "0")));
  }
  return hw;
}

namespace {
// The kind of hardware ("gpu", "tpu") the recording was made on, where it names the platform ("": not).
std::string recorded_kind(const Recording& recording) {
  switch (recording.platform) {
    case Platform::kTpu:
      return "tpu";
    case Platform::kCuda:
    case Platform::kRocm:
      return "gpu";
    default:
      return "";
  }
}
std::string kind_word(const std::string& kind) { return kind == "gpu" ? "GPU" : kind == "tpu" ? "TPU" : kind; }
}  // namespace

Vocabulary vocabulary_of(const Recording& recording, const HardwareModel& hw) {
  return {recording.framework_of(), hw.platform != Platform::kUnknown ? hw.platform : recording.platform};
}

void add_outcome_notes(const RunRequest& req, RunResult& r) {
  if (r.ooms.empty() || !req.failed_allocs.empty()) return;
  if (recording_from_header(r.header, r.trace_path).source == RecordingSource::kXprof)
    r.notes.push_back(fmt::format(
        "an XProf capture records the allocations that succeeded: if the program failed with RESOURCE_EXHAUSTED, "
        "{} replays that request (the size its error names) before event EVENT, where the failing step ran; after "
        "the error the program frees its buffers, so at the capture's end it may fit",
        req.names.with("--failed-alloc", "SIZE@EVENT")));
}

Recording read_recording(const std::string& trace, bool lenient) {
  return open_trace(trace, ReaderOptions{lenient})->recording();
}

Recording read_recording(const RunRequest& req) {
  return req.source ? req.source()->recording() : read_recording(req.trace, req.lenient);
}

nlohmann::json resolved_config(const RunOptions& o, const Recording& recording, const Registry& reg) {
  const PolicyInfo& info = reg.find(o.policy.name);
  const SpaceSpec* hbm = o.hw.space(Space::kHbm);
  if (!hbm && !o.hw.spaces.empty()) hbm = &o.hw.spaces.front();
  if (!hbm) return nlohmann::json::object();
  ConfigContext ctx;
  ctx.registry = &reg;
  ctx.hw = &o.hw;
  ctx.space = hbm;
  ctx.recording = &recording;
  ConfigReader cfg(o.policy.config, "policy " + o.policy.name);
  (void)info.configure(cfg, ctx);
  cfg.finish();
  return cfg.resolved();
}

RunOptions prepare_run(const RunRequest& req, const Registry& reg, const Recording* given) {
  // What can be checked without the trace fails first.
  const OptionNames& opt = req.names;
  if (!req.hw.empty()) (void)load_hardware(req.hw, opt("--hw"));
  if (!req.capacity.empty()) (void)parse_size_arg(req.capacity, "--capacity", opt);
  if (!req.reserve.empty()) (void)parse_size_arg(req.reserve, "--reserve", opt);
  if (!req.policy.empty()) (void)reg.find(parse_policy_ref(req.policy, opt("--policy")).name, opt("--policy"));
  RunOptions o;
  o.trace = req.trace;
  o.source = request_source(req, req.source);
  if (req.source) o.held_bytes = req.source_bytes;
  o.cancel = req.cancel;
  const Recording recording = given ? *given : read_recording(req);
  o.hw = choose_hardware(req, recording, &o.notes);
  o.vocab = vocabulary_of(recording, o.hw);
  SettingsInput si{req.policy, req.sets, req.envs};
  si.recording = recording;
  si.platform = o.vocab.platform;
  si.names = opt;
  const DefaultFor& def = reg.default_for(recording, o.hw.kind);
  si.default_policy = def.ref;
  bool defaulted = false;
  o.policy = resolve_settings(si, reg, &o.notes, &defaulted);
  // A default chosen for the hardware's kind says why in the recording's terms ("an XProf capture
  // of the TPU runtime's allocator"), which hold only for a recording made on that kind.
  if (defaulted && !recorded_kind(recording).empty() && recorded_kind(recording) != o.hw.kind)
    o.notes.push_back(fmt::format(
        "policy {}: the default for {} replayed on a {} ({}); the recording was made on a {}, whose allocator this "
        "is not: the run is a what-if of the {}'s allocator over the recorded buffers ({} chooses another)",
        def.ref, recording.what(), kind_word(o.hw.kind), o.hw.name, kind_word(recorded_kind(recording)),
        kind_word(o.hw.kind), opt("--policy")));
  else if (defaulted)
    o.notes.push_back(fmt::format("policy {}: {} ({} chooses another)", def.ref, def.why, opt("--policy")));
  const PolicyInfo& info = reg.find(o.policy.name, opt("--policy"));
  if (!info.hardware_kind.empty() && info.hardware_kind != o.hw.kind)
    throw InputError(
        fmt::format("{}: it models {} memory, and hardware '{}' is a {} ({}{} names a {} "
                    "preset: fragsim list)",
                    opt.with("--policy", o.policy.name), info.hardware_kind == "tpu" ? "TPU" : info.hardware_kind,
                    o.hw.name, o.hw.kind == "gpu" ? "GPU" : o.hw.kind, req.hw.empty() ? "it was assumed; " : "",
                    opt("--hw"), info.hardware_kind == "tpu" ? "TPU" : info.hardware_kind));
  if (!info.real_hardware_kind.empty() && info.real_hardware_kind != o.hw.kind)
    o.notes.push_back(fmt::format(
        "policy {}: the allocator it models runs on {} hardware, and hardware '{}' is a {}: the replay is a what-if "
        "of that allocator over this memory, not what the {}'s own runtime would do",
        o.policy.name, info.real_hardware_kind == "gpu" ? "GPU" : info.real_hardware_kind, o.hw.name,
        o.hw.kind == "tpu" ? "TPU" : o.hw.kind, o.hw.kind == "tpu" ? "TPU" : o.hw.kind));
  if (req.shard != 1 || req.shard_dim != "major") {
    if (!info.models_sharding) {
      std::vector<std::string> which;
      for (const auto& p : reg.all())
        if (p.models_sharding) which.push_back(p.name);
      throw InputError(fmt::format("{}: policy {} does not model sharding (these do: {})", opt("--shard"),
                                   o.policy.name, fmt::join(which, ", ")));
    }
    set_sharding(o.policy.config, req.shard, req.shard_dim);
    o.shard = static_cast<std::uint64_t>(req.shard);
    o.notes.push_back(
        fmt::format("sharded {} ways along the {} dim: allocated and reserved figures are per device; requested "
                    "figures are the trace's whole arrays (before sharding), so allocated can be below requested",
                    req.shard, req.shard_dim));
  }
  o.recorded_devices = req.hw.empty() && req.capacity.empty() && req.reserve.empty();
  // The recording's own allocator's model: the default policy with the default's options (a
  // what-if of its settings is still that allocator). A plain trace names no allocator: any policy
  // that places buffers may be its model, the lower bound (which places none) is not.
  const PolicySpec recorded = parse_policy_ref(def.ref, "default policy");
  if (recording.source == RecordingSource::kPlain || recording.source == RecordingSource::kGenerated) {
    o.models_recording = !info.lower_bound;
  } else {
    o.models_recording = o.policy.name == recorded.name;
    for (const auto& [k, v] : recorded.config.items())
      o.models_recording = o.models_recording && o.policy.config.contains(k) && o.policy.config[k] == v;
  }
  o.keep_going = req.keep_going;
  o.lenient = req.lenient;
  o.check = req.check;
  o.follow_recording = req.follow_recording;
  o.prior.mode = parse_prior_mode(req.pre_trace, "--pre-trace");
  // The policy's options as its main space reads them: a misspelt or bad option fails here, before
  // any replay, with the caller's context (batch: the manifest's line), not from a replay thread.
  (void)resolved_config(o, recording, reg);
  return o;
}

namespace {
std::string name_of(const std::string& kv) { return kv.substr(0, kv.find('=')); }
void replace_named(std::vector<std::string>& v, const std::string& kv) {
  v.erase(std::remove_if(v.begin(), v.end(), [&](const std::string& x) { return name_of(x) == name_of(kv); }), v.end());
  v.push_back(kv);
}
}  // namespace

RunRequest with_env(RunRequest req, const std::string& var_value, const std::string& config_key) {
  replace_named(req.envs, var_value);
  if (!config_key.empty()) {
    // A --set of the key wins over the variable: it goes too (the sweep's replay of .66 kept the run's
    // --set mem_fraction=0.02 and ran out of memory, issue 47).
    std::erase_if(req.sets, [&](const std::string& s) { return name_of(s) == config_key; });
    req.policy = policy_ref_without(req.policy, config_key);
  }
  return req;
}

RunRequest with_set(RunRequest req, const std::string& key_value) {
  replace_named(req.sets, key_value);
  req.policy = policy_ref_without(req.policy, name_of(key_value));
  return req;
}

void enforce_strict(const RunRequest& req, const RunResult& r) {
  if (req.strict && !r.nothing_to_replay.empty())
    throw InputError(r.trace_path + ": nothing to replay (--strict): " + r.nothing_to_replay);
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,+-@%") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string command_line(const RunRequest& req, const std::string& command, const std::vector<std::string>& extra) {
  std::vector<std::string> a = {"fragsim", command, req.trace};
  auto opt = [&](const char* flag, const std::string& v) {
    if (!v.empty()) a.insert(a.end(), {flag, v});
  };
  opt("--hw", req.hw);
  opt("--capacity", req.capacity);
  opt("--reserve", req.reserve);
  opt("--policy", req.policy);
  for (const auto& s : req.sets) opt("--set", s);
  for (const auto& e : req.envs) opt("--env", e);
  if (req.keep_going) a.push_back("--keep-going");
  if (req.lenient) a.push_back("--lenient");
  if (req.follow_recording) a.push_back("--follow-recording");
  if (req.pre_trace != "auto") opt("--pre-trace", req.pre_trace);
  if (req.strict) a.push_back("--strict");
  for (const auto& f : req.failed_allocs) opt("--failed-alloc", f);
  if (req.shard != 1) opt("--shard", std::to_string(req.shard));
  if (req.shard_dim != "major") opt("--shard-dim", req.shard_dim);
  a.insert(a.end(), extra.begin(), extra.end());
  std::string s;
  for (const auto& w : a) s += (s.empty() ? "" : " ") + shell_quote(w);
  return s;
}

TraceSource request_source(const RunRequest& req, TraceSource base) {
  if (req.failed_allocs.empty()) return base;
  std::vector<AppendedAlloc> allocs;
  static const std::string kName = "the request the program failed on (--failed-alloc)";
  for (const auto& f : req.failed_allocs) {
    AppendedAlloc a;
    std::string_view size = f;
    auto number = [&](std::string_view digits, const char* what) {
      if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string_view::npos)
        throw InputError(fmt::format("--failed-alloc: '{}': {} must be a number", f, what));
      return std::stoull(std::string(digits));
    };
    if (auto colon = size.find(':'); colon != std::string_view::npos) {
      const std::uint64_t device = number(size.substr(0, colon), "DEVICE");
      if (device > UINT32_MAX)
        throw InputError(
            fmt::format("--failed-alloc: '{}': DEVICE {} is beyond the 32-bit device ordinals of a trace", f, device));
      a.device = static_cast<std::uint32_t>(device);
      size.remove_prefix(colon + 1);
    }
    if (auto at = size.find('@'); at != std::string_view::npos) {
      a.before = number(size.substr(at + 1), "EVENT");
      size = size.substr(0, at);
    }
    a.size = parse_size_arg(size, "--failed-alloc");
    a.name = kName;
    allocs.push_back(std::move(a));
  }
  // A snapshot or capture is decoded once for every replay of the run (advice and sweeps replay it).
  if (!base)
    base = decodes_whole(req.trace) ? decode_once(req.trace, ReaderOptions{req.lenient})
                                    : TraceSource([trace = req.trace, lenient = req.lenient] {
                                        return open_trace(trace, ReaderOptions{lenient});
                                      });
  return [base, allocs] { return append_allocs(base(), allocs); };
}

std::vector<std::pair<std::string, double>> reads_of(const std::vector<RunOptions>& runs, const Registry& reg) {
  std::vector<std::pair<std::string, double>> reads;
  std::set<std::string> decoded;
  for (const auto& o : runs) {
    if (reg.find(o.policy.name).needs_lifetimes)
      reads.emplace_back(o.trace, 2);
    else if (decoded.insert(o.trace).second)
      reads.emplace_back(o.trace, 1);
  }
  return reads;
}

}  // namespace fragsim

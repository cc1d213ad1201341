#include "traces/xprof_capture.h"

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "sim/base/array_spec.h"
#include "sim/base/error.h"
#include "sim/base/framework.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "traces/gpu_preset.h"
#include "traces/profile_dirs.h"
#include "traces/proto_scan.h"
#include "traces/recorded_layout.h"
#include "traces/recording_set.h"
#include "traces/xprof_names.h"
#include "traces/xprof_space.h"

namespace fragsim {

namespace {

constexpr std::uint64_t kMaxCaptureBytes = 4ULL << 30;

// One allocator call as the capture logged it.
struct Call {
  __int128 t_ps = 0;  // line timestamp (ns) × 1000 + offset (ps): exact for every int64 pair
  std::uint64_t order = 0;
  bool alloc = true;
  std::string allocator;  // allocator_name, or "TPU:<index_on_host>"; "<host>/" first in a profile directory
  std::uint32_t device_offset = 0;
  std::uint64_t addr = 0, requested = 0, allocation = 0;
  std::optional<std::uint64_t> bytes_allocated, bytes_available, bytes_reserved;
  std::string tf_op, shape, region_type;
  std::int64_t data_type = 0;
  CallSite site;  // where it was made (JAX buffers are named from it, traces/xprof_names.h)
};

// Where an allocator's memory is, in fragsim's terms.
struct Target {
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  bool known = true;
};

// The number in a name of the form PREFIX<decimal digits>SUFFIX (what XLA and TensorFlow name
// allocators and device planes by), nullopt when the name has another form. Parsed by hand, in
// one pass: names come from the capture and may be any length. A number beyond 64 bits is an
// input error.
std::optional<std::uint64_t> numbered(std::string_view name, std::string_view prefix, std::string_view suffix,
                                      const std::string& file) {
  if (name.size() <= prefix.size() + suffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix)
    return std::nullopt;
  std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  std::uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (UINT64_MAX - static_cast<unsigned>(c - '0')) / 10)
      throw InputError(fmt::format("{}: '{}{}{}': the device number does not fit in 64 bits", file, prefix,
                                   digits.size() > 40 ? std::string(digits.substr(0, 40)) + "..." : std::string(digits),
                                   suffix));
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v;
}

// Device `n` of a host whose devices start at `offset`, as a trace's 32-bit device ordinal.
std::uint32_t device_ordinal(std::uint64_t n, std::uint32_t offset, std::string_view name, const std::string& file) {
  if (n > UINT32_MAX - offset)
    throw InputError(
        fmt::format("{}: '{}': device {} (after {} devices of earlier hosts) is beyond the 32-bit device "
                    "ordinals of a trace",
                    file, name.substr(0, 80), n, offset));
  return static_cast<std::uint32_t>(n) + offset;
}

Target target_of(std::string_view allocator, std::uint32_t device_offset, const std::string& file) {
  if (auto slash = allocator.find('/'); slash != std::string_view::npos) allocator = allocator.substr(slash + 1);
  for (auto [prefix, suffix] :
       {std::pair<std::string_view, std::string_view>{"GPU_", "_bfc"}, {"TPU:", ""}, {"gpu_async_", ""}})
    if (auto n = numbered(allocator, prefix, suffix, file))
      return {device_ordinal(*n, device_offset, allocator, file), Space::kHbm, true};
  if (auto n = numbered(allocator, "GPU_collectivememory_", "_bfc", file))
    return {device_ordinal(*n, device_offset, allocator, file), Space::kCollective, true};
  if (allocator.size() >= 9 && allocator.substr(allocator.size() - 9) == "_host_bfc")
    return {device_offset, Space::kHost, true};
  return {0, Space::kHbm, false};
}

// TensorFlow's DataType enum (types.proto) → fragsim's dtypes; kNone for the rest.
Dtype tf_dtype(std::int64_t v) {
  switch (v) {
    case 1:
      return Dtype::kF32;
    case 2:
      return Dtype::kF64;
    case 3:
      return Dtype::kS32;
    case 4:
      return Dtype::kU8;
    case 5:
      return Dtype::kS16;
    case 6:
      return Dtype::kS8;
    case 9:
      return Dtype::kS64;
    case 10:
      return Dtype::kPred;
    case 14:
      return Dtype::kBf16;
    case 17:
      return Dtype::kU16;
    case 19:
      return Dtype::kF16;
    case 22:
      return Dtype::kU32;
    case 23:
      return Dtype::kU64;
    default:
      return Dtype::kNone;
  }
}

// A stat's value as text or number, resolving ref_value through the plane's stat metadata. Text
// is copied out of the capture: each copy counts against the `strings` limit (a name a million
// events refer to costs a million copies).
struct StatReader {
  const xprof::XPlane& plane;
  LimitCounter& strings;
  const std::string& name(std::int64_t id) const {
    static const std::string kNone;
    auto it = plane.stat_metadata().find(id);
    return it == plane.stat_metadata().end() ? kNone : it->second.name();
  }
  std::string text(const xprof::XStat& s) const {
    std::string t;
    if (s.has_str_value())
      t = sanitize_utf8(s.str_value());
    else if (s.has_ref_value())
      t = sanitize_utf8(name(static_cast<std::int64_t>(s.ref_value())));
    else if (s.has_int64_value())
      t = std::to_string(s.int64_value());
    else if (s.has_uint64_value())
      t = std::to_string(s.uint64_value());
    strings.spend(t.size());
    return t;
  }
  std::optional<std::uint64_t> number(const xprof::XStat& s) const {
    if (s.has_uint64_value()) return s.uint64_value();
    if (s.has_int64_value())
      return s.int64_value() < 0 ? std::optional<std::uint64_t>() : std::uint64_t(s.int64_value());
    if (s.has_double_value() && s.double_value() >= 0 && s.double_value() < 1.8e19)
      return static_cast<std::uint64_t>(s.double_value());
    return std::nullopt;
  }
};

struct DeviceInfo {
  std::string vendor, model;
  std::uint64_t memory_size = 0;
  int cc_major = -1, cc_minor = -1;
};

class Importer {
 public:
  // objects: the capture's messages are counted there already; each call and each event this
  // builds adds about two objects' memory (a Call and an Event take about 250 and 200 bytes).
  Importer(std::string path, LimitCounter& objects)
      : path_(std::move(path)), strings_(Limit::kStrings, path_, input_bytes(path_)), objects_(objects) {}

  // A profile directory's capture `file`, which took device numbers [first, first + count).
  void add_member(const std::string& file, std::uint64_t first, std::uint64_t count) {
    members_.push_back({file, first, first + count});
  }
  // Adds one host's capture, its devices numbered from device_offset. Returns how many device
  // numbers it takes: one past the highest its device planes and its allocators name (a host whose
  // capture has no device plane still uses TPU:0..3 through its allocators), at least one.
  std::uint64_t add_host(const xprof::XSpace& space, std::uint32_t device_offset, const std::string& host = {}) {
    std::uint64_t used = 1;
    for (const auto& plane : space.planes()) {
      StatReader sr{plane, strings_};
      // Device planes: "/device:GPU:0" with device_vendor, memory_size, compute_cap_*; TPU planes
      // with device_type_string.
      std::optional<std::uint64_t> gpu = numbered(plane.name(), "/device:GPU:", "", path_);
      std::optional<std::uint64_t> tpu = gpu ? std::nullopt : numbered(plane.name(), "/device:TPU:", "", path_);
      if (gpu || tpu) {
        const std::uint32_t d = device_ordinal(gpu ? *gpu : *tpu, device_offset, plane.name(), path_);
        used = std::max<std::uint64_t>(used, std::uint64_t{d - device_offset} + 1);
        DeviceInfo& info = devices_[d];
        if (!host.empty()) device_names_[std::to_string(d)] = fmt::format("{}:{}", host, d - device_offset);
        for (const auto& s : plane.stats()) {
          const std::string& n = sr.name(s.metadata_id());
          if (n == "device_vendor") info.vendor = sr.text(s);
          if (n == "device_type_string") info.model = sr.text(s);
          if (n == "memory_size") info.memory_size = sr.number(s).value_or(0);
          if (n == "compute_cap_major") info.cc_major = static_cast<int>(sr.number(s).value_or(0));
          if (n == "compute_cap_minor") info.cc_minor = static_cast<int>(sr.number(s).value_or(0));
        }
        if (tpu) tpu_ = true;
      }
      std::optional<CallSites> sites;  // built for planes that hold allocator events
      for (int li = 0; li < plane.lines_size(); ++li)
        for (int ei = 0; ei < plane.lines(li).events_size(); ++ei) {
          const auto& line = plane.lines(li);
          const auto& ev = line.events(ei);
          auto md = plane.event_metadata().find(ev.metadata_id());
          if (md == plane.event_metadata().end()) continue;
          const std::string& en = md->second.name();
          if (en != "MemoryAllocation" && en != "MemoryDeallocation") continue;
          Call c;
          c.alloc = en == "MemoryAllocation";
          c.t_ps = static_cast<__int128>(line.timestamp_ns()) * 1000 + ev.offset_ps();
          c.order = calls_.size();
          for (const auto& s : ev.stats()) {
            const std::string& n = sr.name(s.metadata_id());
            if (n == "allocator_name")
              c.allocator = sr.text(s);
            else if (n == "index_on_host")
              c.allocator = "TPU:" + std::to_string(sr.number(s).value_or(0));
            else if (n == "addr")
              c.addr = sr.number(s).value_or(0);
            else if (n == "requested_bytes")
              c.requested = sr.number(s).value_or(0);
            else if (n == "allocation_bytes")
              c.allocation = sr.number(s).value_or(0);
            else if (n == "bytes_allocated")
              c.bytes_allocated = sr.number(s);
            else if (n == "bytes_available")
              c.bytes_available = sr.number(s);
            else if (n == "bytes_reserved")
              c.bytes_reserved = sr.number(s);
            else if (n == "tf_op")
              c.tf_op = sr.text(s);
            else if (n == "shape")
              c.shape = sr.text(s);
            else if (n == "region_type")
              c.region_type = sr.text(s);
            else if (n == "data_type")
              c.data_type = static_cast<std::int64_t>(sr.number(s).value_or(0));
          }
          if (c.alloc) {
            if (!sites) sites.emplace(plane);
            if (const CallSite* site = sites->at(li, ei)) c.site = *site;
          }
          // TensorFlow annotates the allocations its ops make (ScopedMemoryDebugAnnotation: the op's
          // name, its output or temp region); JAX's PJRT client makes none.
          if (!c.tf_op.empty() || !c.region_type.empty()) ++annotated_calls_;
          if (!c.site.function.empty()) ++jitted_calls_;           // inside jaxlib's PjitFunction span
          if (c.allocator == "gpu_host_bfc") tf_host_bfc_ = true;  // TF's name; XLA's PJRT client's is xla_gpu_host_bfc
          if (!host.empty()) c.allocator = host + "/" + c.allocator;  // as its devices are named: host:N
          c.device_offset = device_offset;
          // A bad device number fails here, at its capture.
          if (const Target t = target_of(c.allocator, device_offset, path_); t.known)
            used = std::max<std::uint64_t>(used, std::uint64_t{t.device - device_offset} + 1);
          objects_.spend(2);
          calls_.push_back(std::move(c));
        }
    }
    namer_.add_modules(space);
    hosts_++;
    return used;
  }

  // The events, read by the name the input was given (`name`: what its progress counts under, as
  // every other reader of that input does).
  std::unique_ptr<TraceReader> finish(std::string name) {
    std::stable_sort(calls_.begin(), calls_.end(), [](const Call& a, const Call& b) {
      return a.t_ps != b.t_ps ? a.t_ps < b.t_ps : a.order < b.order;
    });
    // Per allocator: live buffers by address; buffers live before the capture.
    struct Alloc {
      std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> live;  // addr → (id, block)
      std::vector<std::pair<std::uint64_t, std::uint64_t>> before;            // (addr, block) freed, never allocated
      std::optional<std::uint64_t> start_bytes, limit;
      std::uint64_t allocs = 0, frees = 0, pre_known = 0;
      RecordedLayout layout;                        // every range a buffer of the capture occupied
      std::optional<std::uint64_t> last_allocated;  // bytes_allocated after its latest call
      Target target;
    };
    std::map<std::string, Alloc> by;
    std::vector<Event> body;
    std::map<std::string, std::uint64_t> skipped;
    std::uint64_t next_id = 1;
    __int128 t0 = calls_.empty() ? 0 : calls_.front().t_ps;  // the earliest: every difference is >= 0
    auto t_of = [&](const Call& c) {
      __int128 ns = (c.t_ps - t0) / 1000;
      return Tick(ns > static_cast<__int128>(UINT64_MAX) ? UINT64_MAX : static_cast<std::uint64_t>(ns));
    };
    for (size_t i = 0; i < calls_.size(); ++i) {
      const Call& c = calls_[i];
      Target tg = target_of(c.allocator, c.device_offset, path_);
      if (!tg.known) {
        ++skipped[c.allocator.empty() ? "(no allocator name)" : c.allocator];
        continue;
      }
      Alloc& a = by[c.allocator];
      a.target = tg;
      // The block this call moved: allocation_bytes, else the step of bytes_allocated.
      std::uint64_t block = c.allocation;
      if (!a.start_bytes && c.bytes_allocated) {
        // bytes_allocated is logged after the call: before it, the allocator held this much.
        std::uint64_t step = block ? block : (c.alloc ? c.requested : 0);
        a.start_bytes = c.alloc ? *c.bytes_allocated - std::min(*c.bytes_allocated, step) : *c.bytes_allocated + step;
      }
      if (c.bytes_allocated && c.bytes_available)
        a.limit = *c.bytes_allocated + *c.bytes_available + c.bytes_reserved.value_or(0);
      Event ev;
      ev.t = t_of(c);
      ev.device = tg.device;
      ev.space = tg.space;
      ev.present = key::kT | key::kDevice | key::kId | (tg.space != Space::kHbm ? key::kSpace : 0);
      if (c.alloc) {
        if (a.live.count(c.addr))
          throw InputError(path_, i + 1,
                           fmt::format("addr: {} allocates 0x{:x}, which is still live (the capture is inconsistent)",
                                       c.allocator, c.addr));
        ev.op = Op::kAlloc;
        ev.id = AllocId(next_id++);
        ev.size = c.requested ? c.requested : block;
        ev.addr = Addr(c.addr);
        ev.present |= key::kSize | key::kAddr;
        if (block && block != ev.size) ev.block_size = block, ev.present |= key::kBlockSize;
        describe(c, ev);
        a.live[c.addr] = {ev.id.value(), block ? block : ev.size};
        ++a.allocs;
        a.layout.occupied(Addr(c.addr), block ? block : ev.size);
      } else {
        auto it = a.live.find(c.addr);
        std::uint64_t id;
        if (it == a.live.end()) {  // live before the capture began
          // Its size: allocation_bytes, else the step of bytes_allocated across this free.
          std::uint64_t size = block;
          if (!size && a.last_allocated && c.bytes_allocated && *a.last_allocated >= *c.bytes_allocated)
            size = *a.last_allocated - *c.bytes_allocated;
          id = next_id++;
          a.before.push_back({c.addr, size});
          pre_ids_.push_back({c.allocator, c.addr, id, size});
        } else {
          id = it->second.first;
          a.live.erase(it);
        }
        ev.op = Op::kFree;
        ev.id = AllocId(id);
        ++a.frees;
      }
      if (c.bytes_allocated) a.last_allocated = c.bytes_allocated;
      objects_.spend(2);
      body.push_back(std::move(ev));
    }
    // Pre-capture buffers come first, at their recorded addresses, in address order per allocator.
    std::vector<Event> events;
    for (auto& p : pre_ids_) {
      Alloc& a = by[p.allocator];
      Event ev;
      ev.op = Op::kAlloc;
      ev.t = Tick(0);
      ev.device = a.target.device;
      ev.space = a.target.space;
      ev.id = AllocId(p.id);
      ev.size = std::max<std::uint64_t>(p.size, 1);
      ev.addr = Addr(p.addr);
      ev.name = "(live before the capture)";
      ev.present = key::kT | key::kDevice | key::kId | key::kSize | key::kAddr | key::kPreTrace | key::kName |
                   (a.target.space != Space::kHbm ? key::kSpace : 0);
      a.layout.occupied(ev.addr, ev.size);
      a.pre_known += ev.size;
      events.push_back(std::move(ev));
    }
    // Live bytes never freed nor allocated during the capture: one buffer without an address.
    for (auto& [name, a] : by) {
      std::uint64_t start = a.start_bytes.value_or(0);
      if (start > a.pre_known) {
        Event ev;
        ev.op = Op::kAlloc;
        ev.t = Tick(0);
        ev.device = a.target.device;
        ev.space = a.target.space;
        ev.id = AllocId(next_id++);
        ev.size = start - a.pre_known;
        ev.name = "(live before the capture, never freed during it: address unknown)";
        ev.present = key::kT | key::kDevice | key::kId | key::kSize | key::kPreTrace | key::kName |
                     (a.target.space != Space::kHbm ? key::kSpace : 0);
        events.push_back(std::move(ev));
      }
    }
    for (auto& e : body) events.push_back(std::move(e));
    // Header: what was recorded, per device.
    nlohmann::json devices = nlohmann::json::array(), allocators = nlohmann::json::array();
    for (const auto& [name, a] : by) {
      nlohmann::json j = {{"allocator", name},
                          {"device", a.target.device},
                          {"space", space_name(a.target.space)},
                          {"allocs", a.allocs},
                          {"frees", a.frees},
                          {"live_before_bytes", a.start_bytes.value_or(0)},
                          {"frees_of_earlier_buffers", a.before.size()}};
      if (a.limit) j["limit_bytes"] = *a.limit;
      // One preallocated region explains the addresses when the ranges no buffer occupied fit
      // in what was live before the capture (traces/recorded_layout.h); else regions were
      // obtained on demand.
      if (!a.layout.empty() && a.limit) {
        std::uint64_t unknown = a.start_bytes.value_or(0) - std::min(a.start_bytes.value_or(0), a.pre_known);
        j["mode"] = a.layout.single_region(unknown, *a.limit) ? "single_region" : "grow";
      }
      allocators.push_back(j);
    }
    for (const auto& [d, info] : devices_) {
      nlohmann::json j = {{"device", d}};
      if (!info.vendor.empty()) j["vendor"] = info.vendor;
      if (!info.model.empty()) j["model"] = info.model;
      if (info.memory_size) j["memory_bytes"] = info.memory_size;
      if (info.cc_major >= 0) j["compute_capability"] = fmt::format("{}.{}", info.cc_major, info.cc_minor);
      devices.push_back(j);
    }
    nlohmann::json header = {{"fragsim_trace", 1},
                             {"source", "xprof"},
                             {"time_unit", "ns"},
                             {"xprof", {{"hosts", hosts_}, {"allocators", allocators}, {"devices", devices}}}};
    if (!skipped.empty()) header["xprof"]["skipped_allocators"] = skipped;
    if (!device_names_.empty()) header["device_names"] = device_names_;  // host:device, a profile directory
    // Each host's capture is its own process (Recording::device_process): its allocator runs out alone.
    if (members_.size() > 1) {
      std::set<std::uint32_t> used;  // the devices its planes and its allocators name
      for (const auto& [d, info] : devices_) used.insert(d);
      for (const auto& [name, a] : by) used.insert(a.target.device);
      nlohmann::json set = nlohmann::json::array();
      for (const Member& m : members_) {
        nlohmann::json devs = nlohmann::json::array();
        for (auto it = used.lower_bound(static_cast<std::uint32_t>(m.first)); it != used.end() && *it < m.end; ++it)
          devs.push_back(*it);
        set.push_back({{"file", m.file}, {"devices", std::move(devs)}});
      }
      header["recording_set"] = std::move(set);
    }
    if (auto hw = recorded_hardware(); !hw.is_null()) header["recorded_hardware"] = hw;
    header["recorded_by"] = recorded_by();
    return make_event_reader(std::move(name), std::move(events), std::move(header));
  }

 private:
  void describe(const Call& c, Event& ev) const {
    std::string name = c.tf_op;
    if (name.empty() && c.shape.empty()) {  // a JAX buffer: named from the modules the capture embeds
      BufferName bn = namer_.name(c.requested ? c.requested : c.allocation, c.site);
      name = bn.text;
      Bytes want = 0;
      if (bn.dtype != Dtype::kNone && unpadded_bytes(bn.shape, bn.dtype, &want) && want == ev.size) {
        ev.shape = bn.shape;
        ev.dtype = bn.dtype;
        ev.present |= key::kShape | key::kDtype;
      }
    }
    if (!c.region_type.empty()) name += (name.empty() ? "" : " ") + std::string("(") + c.region_type + ")";
    if (!c.shape.empty()) {
      // XLA prints "f32[]{:T(128)}", TensorFlow "[32,10]" with a data_type.
      try {
        std::string text = c.shape;
        Dtype dt = tf_dtype(c.data_type);
        if (!text.empty() && text.front() == '[' && dt != Dtype::kNone) text = std::string(dtype_name(dt)) + text;
        if (!text.empty() && text.front() != '[') {
          ArraySpec a = parse_array_spec(text, "shape");
          Bytes want = 0;
          if (unpadded_bytes(a.dims, a.dtype, &want) && want == ev.size) {
            ev.shape = a.dims;
            ev.dtype = a.dtype;
            ev.present |= key::kShape | key::kDtype;
          } else {
            name += (name.empty() ? "" : " ") + c.shape;  // a padded or different size: keep the text
          }
        }
      } catch (const InputError&) {
        name += (name.empty() ? "" : " ") + c.shape;
      }
    }
    if (!name.empty()) ev.name = name, ev.present |= key::kName;
  }

  // Whose allocator logged the calls, and on which platform. JAX when the capture holds what only
  // JAX writes: allocator calls inside jaxlib's PjitFunction spans, or modules named as jax.jit
  // names them (jit_NAME; TensorFlow's are __inference_… and cluster_…) — whatever annotations some
  // calls carry (a JAX capture on TPU has calls annotated "dummy"). Else TensorFlow when its op
  // annotations (tf_op, region_type) or its host allocator's name (gpu_host_bfc) are there, else
  // JAX. ROCm for a device plane whose vendor is AMD, CUDA for another GPU's, TPU for a TPU's.
  nlohmann::json recorded_by() const {
    const size_t jit_modules = namer_.jit_modules();
    const bool jax = jitted_calls_ > 0 || jit_modules > 0;
    const bool tf = !jax && (annotated_calls_ > 0 || tf_host_bfc_);
    std::string basis =
        jax ? fmt::format(
                  "{} allocator calls inside jaxlib's PjitFunction spans, {} compiled modules named jit_*: "
                  "JAX's{}",
                  jitted_calls_, jit_modules,
                  annotated_calls_ ? fmt::format(", though {} calls carry op annotations", annotated_calls_) : "")
        : annotated_calls_
            ? fmt::format("{} allocator calls carry TensorFlow's op annotations (tf_op, region_type)", annotated_calls_)
        : tf_host_bfc_ ? std::string("its host allocator is TensorFlow's gpu_host_bfc")
                       : std::string("allocator calls without TensorFlow's op annotations: JAX's");
    Platform platform = Platform::kUnknown;
    if (tpu_) {
      platform = Platform::kTpu;
    } else if (!devices_.empty()) {
      const std::string& vendor = devices_.begin()->second.vendor;
      platform = vendor.find("AMD") != std::string::npos || vendor.find("Advanced Micro") != std::string::npos
                     ? Platform::kRocm
                     : Platform::kCuda;
      basis += vendor.empty() ? "; a GPU device plane that names no vendor: CUDA"
                              : fmt::format("; the device plane's vendor: {}", vendor);
    }
    nlohmann::json j = {{"framework", framework_name(tf ? Framework::kTensorFlow : Framework::kJax)}, {"basis", basis}};
    if (platform != Platform::kUnknown) j["platform"] = platform_name(platform);
    return j;
  }

  // The preset that matches the recorded device, or a base preset and the recorded capacity.
  nlohmann::json recorded_hardware() const {
    if (devices_.empty()) return nullptr;
    const DeviceInfo& d = devices_.begin()->second;
    if (tpu_) {
      std::string preset = tpu_preset(d.model);
      if (preset.empty()) return nullptr;
      return {{"preset", preset}, {"basis", fmt::format("the device plane names a '{}'", d.model)}};
    }
    if (!d.memory_size) return nullptr;
    // The preset of the recorded device's family, by compute capability (NVIDIA: 8.0 A100, 9.0
    // H100/H200, 10.0 B200; AMD: 9.4 the MI300 series, gfx942); its memory is the recording's.
    // Another device has no preset: a base preset's allocation granularity and device-call costs
    // stand in, and the basis says so.
    const bool amd = d.vendor == "AMD";
    const std::string preset = gpu_preset(amd, d.cc_major, d.cc_minor, d.memory_size);
    const std::string base = gpu_base_preset(amd);
    std::string basis = plane_basis(d);
    if (preset.empty())
      basis += fmt::format("; no preset models that device: {}'s allocation granularity and device-call costs stand in",
                           base);
    nlohmann::json hw = {
        {"preset", preset.empty() ? base : preset}, {"capacity_bytes", d.memory_size}, {"basis", basis}};
    if (d.cc_major >= 0) hw["compute_capability"] = fmt::format("{}.{}", d.cc_major, d.cc_minor);
    // Hosts of a profile directory may hold other GPUs: each device keeps the memory its own plane
    // reports, as each rank of a set does (recording_set.h), where they differ.
    if (std::any_of(devices_.begin(), devices_.end(),
                    [&](const auto& e) { return e.second.memory_size && e.second.memory_size != d.memory_size; })) {
      hw["devices"] = nlohmann::json::array();
      for (const auto& [n, info] : devices_)
        if (info.memory_size)
          hw["devices"].push_back({{"device", n}, {"capacity_bytes", info.memory_size}, {"basis", plane_basis(info)}});
    }
    return hw;
  }

  // "the device plane: AMD GPU (compute capability 9.4), memory_size 206141652992 B".
  static std::string plane_basis(const DeviceInfo& d) {
    return fmt::format("the device plane: {} GPU{}, memory_size {} B", d.vendor.empty() ? "a" : d.vendor,
                       d.cc_major >= 0 ? fmt::format(" (compute capability {}.{})", d.cc_major, d.cc_minor) : "",
                       d.memory_size);
  }

  struct Pre {
    std::string allocator;
    std::uint64_t addr, id, size;
  };
  std::string path_;
  LimitCounter strings_;
  LimitCounter& objects_;
  std::vector<Call> calls_;
  std::vector<Pre> pre_ids_;
  std::map<std::uint32_t, DeviceInfo> devices_;
  BufferNamer namer_;  // the compiled modules the capture embeds
  nlohmann::json device_names_ = nlohmann::json::object();
  struct Member {
    std::string file;
    std::uint64_t first, end;  // the device numbers it took: [first, end)
  };
  std::vector<Member> members_;
  bool tpu_ = false;
  std::uint32_t hosts_ = 0;
  std::uint64_t annotated_calls_ = 0;  // allocator calls with TensorFlow's op annotations
  std::uint64_t jitted_calls_ = 0;     // allocator calls inside jaxlib's PjitFunction spans
  bool tf_host_bfc_ = false;           // an allocator named as TensorFlow names its host BFC
};

bool is_capture_file(const std::filesystem::path& p) {
  const std::string s = p.string();
  return ends_with(s, ".xplane.pb") || ends_with(s, ".xplane.pb.zst");
}

}  // namespace

std::string find_profile_run(const std::string& dir) {
  return find_one_run(dir, "*.xplane.pb capture", is_capture_file);
}

std::string tpu_preset(std::string_view model) {
  static const std::pair<const char*, const char*> kTpus[] = {
      {"TPU v2", "tpu-v2"},   {"TPU v3", "tpu-v3"},   {"TPU v4", "tpu-v4"},  {"TPU v5 Lite", "tpu-v5e"},
      {"TPU v5e", "tpu-v5e"}, {"TPU v5p", "tpu-v5p"}, {"TPU v5", "tpu-v5p"}, {"TPU v6 Lite", "tpu-v6e"},
      {"TPU v6e", "tpu-v6e"}, {"TPU7x", "tpu7x"},     {"TPU v7", "tpu7x"}};
  for (const auto& [name, preset] : kTpus)
    if (model.rfind(name, 0) == 0) return preset;
  return {};
}

bool is_xprof_path(const std::string& path) {
  if (is_file_list(path)) return false;  // a set, or a capture and its profile (traces/capture_profile.h)
  if (ends_with(path, ".xplane.pb") || ends_with(path, ".xplane.pb.zst")) return true;
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && !profile_runs(path, is_capture_file).empty();  // any depth
}

std::vector<std::string> xprof_capture_files(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return {path};
  const std::string run = find_profile_run(path);  // a profile folder, any depth
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(run, ec))
    if (ends_with(e.path().string(), ".xplane.pb") || ends_with(e.path().string(), ".xplane.pb.zst"))
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(run + ": a profile directory without *.xplane.pb captures");
  return files;
}

xprof::XSpace load_xspace(const std::string& file, LimitCounter& objects) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  google::protobuf::SetLogHandler(nullptr);  // parse failures are reported as one input error, not logged
  std::string bytes = read_input(file, kMaxCaptureBytes);
  count_proto_objects(bytes, xspace_schema(), 0, objects);
  xprof::XSpace space;
  if (!space.ParseFromString(bytes))
    throw InputError(file, 0, "not an XProf capture: the XSpace protobuf does not parse (corrupt or truncated?)");
  return space;
}

std::unique_ptr<TraceReader> make_xprof_reader(const std::string& path, const ReaderOptions&) {
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(path, ec);
  const std::vector<std::string> files = xprof_capture_files(path);
  const std::string run = folder ? std::filesystem::path(files.front()).parent_path().string() : path;
  LimitCounter objects(Limit::kObjects, path, input_bytes(run));
  Importer im(run, objects);
  std::uint64_t offset = 0;
  std::set<std::string> hosts;
  for (const auto& f : files) {  // hosts after the first number their devices on
    xprof::XSpace space = load_xspace(f, objects);
    std::string host;
    if (folder) {  // <host>.xplane.pb, as the profiler names it
      host = std::filesystem::path(f).filename().string();
      // Two captures of one name (h.xplane.pb beside h.xplane.pb.zst) keep their whole names, which differ.
      if (std::string name = host.substr(0, host.find(".xplane.pb")); hosts.insert(name).second) host = name;
    }
    // Each host's devices follow every device number the earlier hosts used (device planes and
    // allocators alike), so that no two hosts share one.
    if (offset > UINT32_MAX)
      throw InputError(
          fmt::format("{}: its devices come after {} devices of earlier hosts, beyond the 32-bit device "
                      "ordinals of a trace",
                      f, offset));
    const std::uint64_t used = im.add_host(space, static_cast<std::uint32_t>(offset), host);
    if (folder) im.add_member(f, offset, used);
    offset += used;
  }
  return im.finish(path);
}

}  // namespace fragsim

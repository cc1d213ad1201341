#include "hardware_models/hardware_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

#include "sim/base/config.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"

namespace fragsim {

const SpaceSpec* HardwareModel::space(Space s) const {
  for (const auto& sp : spaces)
    if (sp.space == s) return &sp;
  return nullptr;
}

SpaceSpec* HardwareModel::space(Space s) {
  for (auto& sp : spaces)
    if (sp.space == s) return &sp;
  return nullptr;
}

nlohmann::json HardwareModel::to_json() const {
  nlohmann::json sp = nlohmann::json::array();
  for (const auto& s : spaces) {
    nlohmann::json o = {{"name", space_name(s.space)}, {"capacity_bytes", s.capacity}, {"reserve_bytes", s.reserve},
                        {"usable_bytes", s.usable()},  {"alignment", s.alignment},     {"granularity", s.granularity}};
    if (s.scoped_limit) o["scoped_limit_bytes"] = s.scoped_limit;
    if (s.runtime_limit) o["runtime_limit_bytes"] = s.runtime_limit;
    sp.push_back(o);
  }
  return {{"name", name}, {"kind", kind}, {"generation", generation}, {"spaces", sp}};
}

void check_space(const SpaceSpec& s, const std::string& origin) {
  auto bad = [&](const char* key, Bytes v, const std::string& want) {
    throw InputError(fmt::format("{}: spaces[{}].{}: {} {}", origin, space_name(s.space), key,
                                 v < 1024 ? fmt::format("{} B", v) : fmt::format("{} ({} B)", human_bytes(v), v),
                                 want));
  };
  if (s.alignment == 0 || (s.alignment & (s.alignment - 1)) || s.alignment > kMaxSpaceAlignment)
    bad("alignment", s.alignment, fmt::format("must be a power of two of at most {}", human_bytes(kMaxSpaceAlignment)));
  if (s.granularity == 0 || s.granularity > kMaxSpaceAlignment)
    bad("granularity", s.granularity, fmt::format("must be 1 to {}", human_bytes(kMaxSpaceAlignment)));
  for (auto [key, v] : {std::pair<const char*, Bytes>{"capacity_bytes", s.capacity},
                        {"reserve_bytes", s.reserve},
                        {"scoped_limit_bytes", s.scoped_limit},
                        {"runtime_limit_bytes", s.runtime_limit}})
    if (v > kMaxSpaceBytes)
      bad(key, v, fmt::format("is more than the {} per memory space fragsim models", human_bytes(kMaxSpaceBytes)));
}

void check_reserve(const SpaceSpec& s, const std::string& origin) {
  if (s.reserve && s.reserve >= s.capacity)
    throw InputError(fmt::format(
        "{}: a reserve of {} ({} B) in {}, whose capacity is {} ({} B), leaves allocators nothing (the reserve is "
        "memory the runtime holds before any allocator, such as the CUDA context; 0 for none)",
        origin, human_bytes(s.reserve), s.reserve, space_name(s.space), human_bytes(s.capacity), s.capacity));
}

HardwareModel parse_hardware(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw InputError(origin + ": hardware model must be a JSON object");
  ConfigReader top(j, origin);
  HardwareModel hw;
  hw.source = j;
  hw.name = top.text("name", "custom");
  hw.kind = top.choice("kind", "gpu", {"gpu", "tpu"});
  hw.generation = static_cast<int>(top.integer("generation", 0));
  std::string vendor = top.text("vendor", "");  // any text: only nvidia and amd name a platform
  std::transform(vendor.begin(), vendor.end(), vendor.begin(), [](unsigned char c) { return std::tolower(c); });
  hw.platform = hw.kind == "tpu"     ? Platform::kTpu
                : vendor == "nvidia" ? Platform::kCuda
                : vendor == "amd"    ? Platform::kRocm
                                     : Platform::kUnknown;
  if (std::string cc = top.text("compute_capability", ""); !cc.empty() && (hw.compute_major = compute_major(cc)) < 0)
    throw InputError(origin + ": compute_capability: '" + cc + "' is not a compute capability like 8.0");
  top.allow({"description", "sources", "confidence", "notes", "spaces", "cost_model"});
  // Described, not modelled: checked all the same, so that a file with a typo in them is not taken
  // for one that says what it means.
  (void)top.number_in("bandwidth_bytes_per_s", 1, Range{0, 1e18, false, false, false});
  (void)top.integer_in("cores", 1, 1, 1 << 20);
  if (!top.has("spaces") || !top.raw("spaces").is_array() || top.raw("spaces").empty())
    throw InputError(origin + ": spaces: must be a non-empty array");
  for (const auto& s : top.raw("spaces")) {
    ConfigReader r(s, origin + ": spaces[]");
    SpaceSpec sp;
    std::string nm = r.text("name", "hbm");
    if (!parse_space(nm, &sp.space)) throw InputError(origin + ": spaces[].name: unknown space '" + nm + "'");
    if (hw.space(sp.space))  // one memory per name: a second would be listed and never used
      throw InputError(origin + ": spaces[].name: '" + nm + "' given twice (each space once)");
    if (!r.has("capacity_bytes"))
      throw InputError(origin + ": spaces[" + nm + "].capacity_bytes: missing required key");
    sp.capacity = r.size("capacity_bytes", 0);
    sp.reserve = r.size("reserve_bytes", 0);
    sp.alignment = r.size("alignment", 256);
    sp.granularity = r.size("granularity", 1);
    sp.scoped_limit = r.size("scoped_limit_bytes", 0);
    sp.runtime_limit = r.size("runtime_limit_bytes", 0);
    check_space(sp, origin);
    check_reserve(sp, origin + ": spaces[" + nm + "].reserve_bytes");
    r.allow({"note", "notes"});
    r.finish();
    hw.spaces.push_back(sp);
  }
  if (top.has("cost_model")) {
    ConfigReader c(top.raw("cost_model"), origin + ": cost_model");
    // Latencies: none is negative (an hour per call is more than any device takes).
    constexpr Range kNs{0, 3.6e12, false, false, false};  // [0, 1 h]
    hw.cost.alloc_base_ns = c.number_in("alloc_base_ns", 0, kNs);
    hw.cost.alloc_ns_per_mib = c.number_in("alloc_ns_per_mib", 0, kNs);
    hw.cost.free_base_ns = c.number_in("free_base_ns", 0, kNs);
    hw.cost.free_ns_per_mib = c.number_in("free_ns_per_mib", 0, kNs);
    c.allow({"note"});
    c.finish();
  }
  top.finish();
  return hw;
}

int compute_major(const std::string& capability) {
  int major = -1, minor = -1;
  char tail = 0;
  if (std::sscanf(capability.c_str(), "%d.%d%c", &major, &minor, &tail) != 2 || major < 0 || minor < 0) return -1;
  return major;
}

std::optional<SpaceSpec> recorded_hbm(const RecordedHardware& hw, std::optional<std::uint32_t> device) {
  SpaceSpec s;
  try {
    const HardwareModel preset = load_hardware(hw.preset);
    if (const SpaceSpec* p = preset.space(Space::kHbm)) s = *p;
  } catch (const InputError&) {
  }
  if (const std::optional<Bytes> c = device ? hw.capacity_of(*device) : hw.capacity) s.capacity = *c;
  if (!s.capacity) return std::nullopt;
  return s;
}

std::vector<std::string> list_presets() {
  std::vector<std::string> v;
  for (const auto& [n, _] : builtin_presets()) v.push_back(n);
  return v;
}

HardwareModel load_hardware(const std::string& name_or_file, std::string_view what) {
  for (const auto& [n, text] : builtin_presets())
    if (n == name_or_file) return parse_hardware(nlohmann::json::parse(text), "preset " + n);
  if (ends_with(name_or_file, ".json")) return parse_hardware(read_json_file(name_or_file), name_or_file);
  std::vector<std::string> presets = list_presets();
  std::vector<std::string_view> names(presets.begin(), presets.end());
  throw InputError(fmt::format("{}: unknown hardware preset '{}'{} (presets: {}; or a FILE.json)", what, name_or_file,
                               did_you_mean(name_or_file, names), fmt::join(presets, ", ")));
}

}  // namespace fragsim

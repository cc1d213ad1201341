#include "sim/commands/listing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hardware_models/tpu_layout.h"
#include "sim/base/array_spec.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "traces/generators.h"

namespace fragsim {

namespace {

std::string what_of(const DefaultFor& d) {
  Recording r;
  if (d.source) r.source = *d.source;
  std::string source = d.source ? r.what() : std::string();
  if (!source.empty() && !d.hardware_kind.empty()) return source + " on a " + d.hardware_kind;
  if (!source.empty()) return source;
  if (!d.hardware_kind.empty()) return "a " + d.hardware_kind;
  return {};
}

struct Layout {
  HardwareModel hw;
  ArraySpec a;
  TpuLayout l;
};

Layout layout_of(const std::string& shape, const std::string& hw_name) {
  Layout x{load_hardware(hw_name), {}, {}};
  if (x.hw.kind != "tpu") throw InputError("--hw: layout needs a TPU preset, '" + x.hw.name + "' is a " + x.hw.kind);
  x.a = parse_array_spec(shape, "layout");
  x.l = tpu_layout(x.a, x.hw.generation);
  if (x.l.unpadded == kTooLarge || x.l.padded == kTooLarge)
    throw InputError(fmt::format("layout: '{}': the array's size does not fit in 64 bits", shape));
  return x;
}

}  // namespace

std::string defaults_text(const Registry& reg) {
  std::vector<std::string> parts;
  std::string plain;
  for (const auto& i : reg.all())
    for (const auto& d : i.defaults) {
      std::string w = what_of(d);
      if (w.empty())
        plain = d.ref;
      else
        parts.push_back(fmt::format("{} for {}", d.ref, w));
    }
  if (!plain.empty()) parts.push_back("else " + plain);
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string policy_text(const PolicyInfo& info) {
  std::string s = fmt::format("{}: {}\n", info.name, info.summary);
  auto out = std::back_inserter(s);
  for (const auto& d : info.defaults)
    fmt::format_to(out, "  the default{}: {}\n", what_of(d).empty() ? "" : " for " + what_of(d), d.why);
  if (!info.frameworks.empty()) {
    std::vector<std::string> names;
    for (Framework f : info.frameworks) names.push_back(std::string(framework_name(f)) + "'s");
    fmt::format_to(out, "  models {} allocator\n", fmt::join(names, " and "));
  }
  if (!info.hardware_kind.empty()) fmt::format_to(out, "  runs on {} hardware only\n", info.hardware_kind);
  if (info.fraction) {
    std::vector<std::string> ways;
    for (const auto& s : info.fraction->spellings)
      ways.push_back(fmt::format("{} ({})", info.fraction->setting(0.9, s.framework), framework_name(s.framework)));
    fmt::format_to(out, "  memory fraction: {} (fragsim sweep --find min-mem-fraction)\n", fmt::join(ways, ", "));
  }
  if (info.models_sharding) fmt::format_to(out, "  models sharding (--shard N --shard-dim major|minor)\n");
  if (info.needs_lifetimes)
    fmt::format_to(out, "  reads the whole trace first (it plans with every buffer's lifetime)\n");
  if (info.options.empty()) {
    fmt::format_to(out, "  no options\n");
    return s;
  }
  fmt::format_to(out, "options (--set KEY=VALUE, or --policy '{}[KEY=VALUE,...]'):\n", info.name);
  for (const auto& o : info.options) {
    fmt::format_to(out, "  {:<30} default {}\n      {}\n", o.key, o.default_text, o.meaning);
    if (o.range) fmt::format_to(out, "      accepts {}\n", o.range->text());  // the bounds configure checks
  }
  const auto& e = info.options.front();
  fmt::format_to(out, "example: fragsim run TRACE --policy '{}[{}={}]'\n", info.name, e.key,
                 e.example.is_string() ? e.example.get<std::string>() : dump_json(e.example));
  return s;
}

std::string catalog_text(const Registry& reg) {
  std::string s = "policies (fragsim list POLICY: its options):\n";
  auto out = std::back_inserter(s);
  for (const auto& i : reg.all()) fmt::format_to(out, "  {:<14} {}\n", i.name, i.summary);
  fmt::format_to(out, "hardware presets (--hw):\n");
  for (const auto& n : list_presets()) {
    auto hw = load_hardware(n);
    std::string spaces;
    for (const auto& sp : hw.spaces)
      spaces += fmt::format("{}{} {}{}", spaces.empty() ? "" : ", ", space_name(sp.space), human_bytes(sp.capacity),
                            sp.reserve ? fmt::format(" ({} usable)", human_bytes(sp.usable())) : "") +
                (sp.runtime_limit ? fmt::format(" (runtime limit {})", human_bytes(sp.runtime_usable())) : "");
    fmt::format_to(out, "  {:<14} {}\n", n, spaces);
  }
  fmt::format_to(out, "workloads (gen):\n");
  for (const auto& w : list_workloads()) fmt::format_to(out, "  {:<14} {}\n", w.name, w.summary);
  return s;
}

nlohmann::json layout_json(const std::string& shape, const std::string& hw) {
  Layout x = layout_of(shape, hw);
  nlohmann::json j = {{"shape", x.a.dims},
                      {"dtype", std::string(dtype_name(x.a.dtype))},
                      {"tile", x.l.tile},
                      {"unpadded_bytes", x.l.unpadded},
                      {"padded_bytes", x.l.padded}};
  if (x.l.memory_space) j["memory_space"] = x.l.memory_space;  // S(n), only when the layout names one
  return j;
}

std::string layout_text(const std::string& shape, const std::string& hw) {
  Layout x = layout_of(shape, hw);
  const TpuLayout& l = x.l;
  std::string s = fmt::format(
      "{} on {} (generation {}): tile {}{}\n  unpadded {} ({} B)\n  padded   {} ({} B), {:.2f}x\n", shape, x.hw.name,
      x.hw.generation, l.tile, l.memory_space ? fmt::format(", memory space S({})", l.memory_space) : "",
      human_bytes(l.unpadded), l.unpadded, human_bytes(l.padded), l.padded,
      l.unpadded ? static_cast<double>(l.padded) / static_cast<double>(l.unpadded) : 0.0);
  // As XLA:TPU's OOM report lists an allocation.
  s += fmt::format("  as XLA reports it: Size: {}  Unpadded size: {}", xla_tpu_bytes(l.padded),
                   xla_tpu_bytes(l.unpadded));
  if (l.padded > l.unpadded)
    s += fmt::format("  Extra memory due to padding: {} ({:.1f}x expansion)", xla_tpu_bytes(l.padded - l.unpadded),
                     static_cast<double>(l.padded) / static_cast<double>(l.unpadded));
  return s + "\n";
}

}  // namespace fragsim

#include "sim/commands/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hardware_models/hardware_model.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "sim/report/report_schema.h"

namespace fragsim {

namespace {

constexpr size_t kMaxCallLine = 1 << 20;  // one call's JSON line: a few hundred bytes

// Least squares ns = base + per_mib · MiB.
std::pair<double, double> fit(const std::vector<std::pair<double, double>>& pts) {
  if (pts.empty()) return {0, 0};
  double n = static_cast<double>(pts.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : pts) sx += x, sy += y, sxx += x * x, sxy += x * y;
  double den = n * sxx - sx * sx;
  if (std::fabs(den) < 1e-12) return {sy / n, 0};
  double b = (n * sxy - sx * sy) / den;
  return {(sy - b * sx) / n, b};
}

}  // namespace

std::string calls_path(const nlohmann::json& real, const std::string& real_path) {
  JsonField f(real, real_path);
  if (!f.has("calls_file")) return {};
  std::string calls = f.at("calls_file").string();
  if (calls.empty()) return {};
  std::error_code ec;
  if (std::filesystem::exists(calls, ec)) return calls;
  std::string beside =
      (std::filesystem::path(real_path).parent_path() / std::filesystem::path(calls).filename()).string();
  if (std::filesystem::exists(beside, ec)) return beside;
  throw InputError(
      fmt::format("{}: calls_file: {} is neither there nor beside the summary ({})", real_path, calls, beside));
}

ValidateResult run_validate(const ValidateOptions& o) {
  ValidateResult r;
  nlohmann::json sim = read_json_file(o.sim), real = read_json_file(o.real);
  check_report_schema(sim, o.sim);
  check_replay_schema(real, o.real);
  // Every file this reads, the calls file included, is safe from its outputs.
  check_outputs({o.sim, o.real, calls_path(real, o.real)}, {{"--json", o.json_out}, {"--fit-cost-model", o.fit_out}});
  auto& out = r.json;
  // 1. First OOM.
  nlohmann::json sim_oom = sim["ooms"].empty() ? nlohmann::json() : sim["ooms"][0]["event_index"];
  nlohmann::json real_oom = real["first_oom"].is_null() ? nlohmann::json() : real["first_oom"]["event_index"];
  bool same_oom = sim_oom == real_oom;
  r.pass &= same_oom;
  out["first_oom"] = {{"simulated", sim_oom}, {"real", real_oom}, {"match", same_oom}};
  r.lines.push_back(fmt::format("first OOM: simulated {}, real {} -> {}",
                                sim_oom.is_null() ? "none" : dump_json(sim_oom),
                                real_oom.is_null() ? "none" : dump_json(real_oom), same_oom ? "match" : "MISMATCH"));
  // 2. Device memory in use at peak.
  double s = static_cast<double>(sim["peak_reserved_bytes"].get<Bytes>());
  double g = static_cast<double>(real["peak_in_use_bytes"].get<Bytes>());
  double diff = s - g, pct = g > 0 ? 100.0 * diff / g : (s > 0 ? 100.0 : 0.0);
  bool within = std::fabs(pct) <= o.tolerance_pct;
  r.pass &= within;
  out["peak_in_use"] = {{"simulated_bytes", s},
                        {"real_bytes", g},
                        {"difference_bytes", diff},
                        {"difference_pct", pct},
                        {"tolerance_pct", o.tolerance_pct},
                        {"within", within}};
  r.lines.push_back(
      fmt::format("peak in use: simulated {} B, real {} B, difference {:+.0f} B ({:+.2f}%, tolerance {}%) -> {}", s, g,
                  diff, pct, o.tolerance_pct, within ? "ok" : "OUTSIDE"));
  // 3. Address granularity and 4. latency fit, from the per-call file: a regular file (read_lines
  // refuses a device such as /dev/zero), read line by line within a line limit; a file the summary
  // names but that cannot be read is an error, never a PASS without it.
  std::string calls = calls_path(real, o.real);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> addrs;  // (addr, bytes) in call order
  std::vector<std::pair<double, double>> alloc_pts, free_pts;
  if (!calls.empty()) {
    read_lines(calls, kMaxCallLine, [&](std::string_view line, std::uint64_t n) {
      const nlohmann::json j = parse_json(line, calls, n);
      JsonField f(j, fmt::format("{}:{}", calls, n));
      std::string op = f.at("op").string();
      if (op != "alloc" && op != "free") return;
      Bytes bytes = f.at("bytes").u64();
      double mib = static_cast<double>(bytes) / 1048576.0, ns = f.at("ns").number();
      if (op == "alloc" && f.has("ok") && f.at("ok").boolean()) {
        addrs.emplace_back(f.at("addr").u64(), bytes);
        alloc_pts.emplace_back(mib, ns);
      } else if (op == "free") {
        free_pts.emplace_back(mib, ns);
      }
    });
  }
  std::uint64_t align_bits = 0;
  for (const auto& [a, b] : addrs) align_bits |= a;
  std::uint64_t alignment = addrs.empty() ? 0 : (align_bits ? (align_bits & (~align_bits + 1)) : 0);
  std::map<std::uint64_t, std::uint64_t> gaps;  // gap after a block to the next allocation's address
  for (size_t i = 1; i < addrs.size(); ++i) {
    auto [a0, b0] = addrs[i - 1];
    auto a1 = addrs[i].first;
    if (a1 >= a0 + b0 && a1 - (a0 + b0) < (1ULL << 30)) ++gaps[a1 - (a0 + b0)];
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> top(gaps.begin(), gaps.end());
  std::sort(top.begin(), top.end(), [](auto& x, auto& y) { return x.second > y.second; });
  if (top.size() > 5) top.resize(5);
  nlohmann::json gj = nlohmann::json::array();
  for (auto [gap, count] : top) gj.push_back({{"gap_bytes", gap}, {"count", count}});
  out["addresses"] = {{"allocations", addrs.size()}, {"common_alignment_bytes", alignment}, {"most_common_gaps", gj}};
  r.lines.push_back(
      fmt::format("addresses: {} allocations, all aligned to {} B; most common gaps to the next block: {}",
                  addrs.size(), alignment, dump_json(gj)));
  auto [ab, am] = fit(alloc_pts);
  auto [fb, fm] = fit(free_pts);
  out["latency_fit"] = {{"alloc_base_ns", ab},
                        {"alloc_ns_per_mib", am},
                        {"free_base_ns", fb},
                        {"free_ns_per_mib", fm},
                        {"alloc_samples", alloc_pts.size()},
                        {"free_samples", free_pts.size()}};
  r.lines.push_back(
      fmt::format("latency fit: alloc {:.0f} ns + {:.1f} ns/MiB ({} calls), free {:.0f} ns + {:.1f} ns/MiB ({} calls)",
                  ab, am, alloc_pts.size(), fb, fm, free_pts.size()));
  if (!o.fit_out.empty()) {
    std::string hw_name = sim["hardware"].value("name", std::string("h100-80g"));
    nlohmann::json preset;
    for (const auto& [n, text] : builtin_presets())
      if (n == hw_name) preset = nlohmann::json::parse(text);
    if (preset.is_null()) throw InputError("--fit-cost-model: the report's hardware '" + hw_name + "' is not a preset");
    preset["name"] = hw_name + "-fitted";
    // A latency cannot fall with size or below zero: negative fitted terms are clamped to 0.
    preset["cost_model"] = {
        {"alloc_base_ns", std::max(0.0, ab)},
        {"alloc_ns_per_mib", std::max(0.0, am)},
        {"free_base_ns", std::max(0.0, fb)},
        {"free_ns_per_mib", std::max(0.0, fm)},
        {"note", fmt::format("fitted by fragsim validate from {} ({} alloc, {} free calls{})", o.real, alloc_pts.size(),
                             free_pts.size(), real.value("dry_run", false) ? ", DRY RUN: not a real device" : "")}};
    (void)parse_hardware(preset, o.fit_out);  // what we write must load with --hw
    write_file_atomic(o.fit_out, dump_json(preset, 2) + "\n");
    r.lines.push_back(fmt::format("wrote {0} (use it with --hw {0})", escape_terminal(o.fit_out)));
  }
  out["pass"] = r.pass;
  return r;
}

}  // namespace fragsim

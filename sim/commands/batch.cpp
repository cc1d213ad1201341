#include "sim/commands/batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "sim/base/units.h"
#include "sim/report/report_schema.h"

namespace fragsim {

namespace {

std::string hex_digest(const std::string& bytes) {  // FNV-1a, 64 bits
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace

Manifest read_manifest(const std::string& path) {
  Manifest m;
  m.path = path;
  std::string text = read_input(path, std::uint64_t(64) << 20);
  m.digest = hex_digest(text);
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::istringstream in(text);
  std::string line;
  std::uint64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream words(line);
    std::vector<std::string> args;
    for (std::string w; words >> w;) args.push_back(w);
    if (args.empty() || args[0][0] == '#') continue;
    if (args[0][0] == '-')
      throw InputError(path, n, fmt::format("trace: a run line starts with its trace, found option '{}'", args[0]));
    if (std::filesystem::path(args[0]).is_relative() && !dir.empty()) args[0] = (dir / args[0]).string();
    BatchEntry e;
    e.run = m.entries.size();
    e.line = n;
    e.args = std::move(args);
    e.text = line.substr(line.find_first_not_of(" \t"));
    m.entries.push_back(std::move(e));
  }
  if (m.entries.empty()) throw InputError(path, 0, "manifest: no runs (one `TRACE [options]` per line)");
  return m;
}

Shard parse_shard(const std::string& s) {
  Shard sh;
  auto slash = s.find('/');
  auto num = [&](const std::string& t) -> unsigned {
    if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos)
      throw InputError(fmt::format("--shard: expected i/N (1 <= i <= N), got '{}'", s));
    return static_cast<unsigned>(std::stoul(t));
  };
  if (slash == std::string::npos) throw InputError(fmt::format("--shard: expected i/N (1 <= i <= N), got '{}'", s));
  sh.index = num(s.substr(0, slash));
  sh.count = num(s.substr(slash + 1));
  if (sh.count == 0 || sh.count > 100000 || sh.index == 0 || sh.index > sh.count)
    throw InputError(fmt::format("--shard: expected i/N (1 <= i <= N <= 100000), got '{}'", s));
  return sh;
}

nlohmann::json batch_json(const Manifest& m, const Shard& s, nlohmann::json runs) {
  return {{"fragsim_batch", 1},
          {"manifest", m.path},
          {"manifest_digest", m.digest},
          {"runs_total", m.entries.size()},
          {"shard", {{"index", s.index}, {"count", s.count}}},
          {"runs", std::move(runs)}};
}

std::vector<std::string> batch_inputs(const Manifest& m) {
  std::vector<std::string> in{m.path};
  for (const auto& e : m.entries) {
    in.push_back(e.args[0]);
    for (size_t i = 1; i < e.args.size(); ++i) {
      if (e.args[i] == "--hw" && i + 1 < e.args.size()) in.push_back(e.args[i + 1]);
      if (e.args[i].rfind("--hw=", 0) == 0) in.push_back(e.args[i].substr(5));
    }
  }
  return in;
}

std::vector<std::string> merge_inputs(const std::vector<std::pair<std::string, nlohmann::json>>& shards) {
  std::vector<std::string> in;
  for (const auto& [file, j] : shards) {
    in.push_back(file);
    if (!j.is_object() || !j.contains("manifest") || !j["manifest"].is_string()) continue;
    // The manifest as the batch named it: from merge's folder, or (merge run from elsewhere, the
    // shards beside the manifest) from the shard's own folder.
    namespace fs = std::filesystem;
    std::string manifest = j["manifest"].get<std::string>();
    std::error_code ec;
    if (const fs::path beside = fs::path(file).parent_path() / manifest;
        fs::path(manifest).is_relative() && !fs::is_regular_file(manifest, ec) && fs::is_regular_file(beside, ec))
      manifest = beside.string();
    in.push_back(manifest);
    // The traces and --hw files it names, where the manifest is still here to say (a manifest gone
    // or changed protects what it no longer names).
    if (!fs::is_regular_file(manifest, ec)) continue;
    try {
      for (auto& f : batch_inputs(read_manifest(manifest))) in.push_back(std::move(f));
    } catch (const InputError&) {  // a manifest that no longer reads names nothing left to protect
    }
  }
  return in;
}

nlohmann::json merge_batches(const std::vector<std::pair<std::string, nlohmann::json>>& shards) {
  if (shards.empty()) throw InputError("merge: no shard results given");
  Manifest m;
  std::map<std::uint64_t, std::string> seen;                             // shard index → file
  std::map<std::uint64_t, std::pair<std::string, nlohmann::json>> runs;  // run → (file, run)
  std::uint64_t count = 0, total = 0;
  for (const auto& [file, j] : shards) {
    // Every key merge or the table reads, typed (report_schema.h): a malformed shard is an input error.
    JsonField top(j, file);
    if (!j.is_object() || !top.has("fragsim_batch"))
      throw InputError(file + ": not a batch result (fragsim batch --json)");
    if (top.at("fragsim_batch").u64() != 1)
      top.at("fragsim_batch").bad("1 (the batch result version this build reads)");
    std::string path = top.at("manifest").string(), digest = top.at("manifest_digest").string();
    std::uint64_t runs_total = top.at("runs_total").u64();
    std::uint64_t idx = top.at("shard").at("index").u64(), cnt = top.at("shard").at("count").u64();
    const nlohmann::json& list = top.at("runs").array();
    if (m.digest.empty()) {
      m.path = path;
      m.digest = digest;
      count = cnt;
      total = runs_total;
    }
    auto bad = [&](const std::string& what) { return InputError(file + ": " + what); };
    if (digest != m.digest)
      throw bad(fmt::format("manifest_digest: {} is a shard of another manifest than {}", file, shards[0].first));
    if (cnt != count || runs_total != total)
      throw bad(fmt::format("shard: count {} differs from {}'s {}", cnt, shards[0].first, count));
    if (cnt == 0 || cnt > 100000 || idx == 0 || idx > cnt)
      throw bad(fmt::format("shard: index {} of {} is not a shard (1 <= i <= N <= 100000)", idx, cnt));
    if (total > (std::uint64_t{1} << 32)) throw bad(fmt::format("runs_total: {} runs is not a manifest's", total));
    if (auto it = seen.find(idx); it != seen.end())
      throw bad(fmt::format("shard: {}/{} given twice (also {})", idx, cnt, it->second));
    seen[idx] = file;
    Shard sh{static_cast<unsigned>(idx), static_cast<unsigned>(cnt)};
    for (size_t i = 0; i < list.size(); ++i) {
      JsonField r(list[i], file, fmt::format("runs[{}]", i));
      std::uint64_t k = r.at("run").u64();
      r.at("line").u64();
      r.at("label").string();
      check_report_schema(r.at("report").object(), fmt::format("{}: runs[{}].report", file, i));
      if (k >= total || !sh.has(k)) throw bad(fmt::format("runs: run {} does not belong to shard {}/{}", k, idx, cnt));
      if (auto it = runs.find(k); it != runs.end())
        throw bad(fmt::format("runs: run {} is given twice (also in {})", k, it->second.first));
      runs.emplace(k, std::make_pair(file, list[i]));
    }
  }
  for (std::uint64_t i = 1; i <= count; ++i)
    if (!seen.count(i)) throw InputError(fmt::format("merge: shard {}/{} is missing", i, count));
  if (runs.size() != total) throw InputError(fmt::format("merge: {} of {} runs are in the shards", runs.size(), total));
  // A run's line follows the previous run's (runs are numbered in file order); with the manifest
  // at hand (merge run where the shards were), each run is the one its line of the manifest names.
  std::optional<Manifest> manifest;
  try {
    if (Manifest read = read_manifest(m.path); read.digest == m.digest && read.entries.size() == total)
      manifest = std::move(read);
  } catch (const std::exception&) {  // not here: the shards' own consistency is what can be checked
  }
  std::uint64_t last_line = 0;
  for (const auto& [k, fr] : runs) {
    const auto& [file, r] = fr;
    std::uint64_t line = r["line"].get<std::uint64_t>();
    if (line <= last_line)
      throw InputError(
          fmt::format("{}: run {}: line {} does not follow the previous run's line {}", file, k, line, last_line));
    last_line = line;
    if (!manifest) continue;
    const BatchEntry& e = manifest->entries[k];
    std::string trace = JsonField(r["report"], file).at("trace").has("path")
                            ? JsonField(r["report"], file).at("trace").at("path").string()
                            : std::string();
    // The trace's name as a shard holds it: as JSON writes it (U+FFFD for bytes that are not UTF-8).
    if (line != e.line || dump_json(trace) != dump_json(e.args[0]))
      throw InputError(
          fmt::format("{}: run {}: not the run of {} line {} (its line or trace differ)", file, k, m.path, e.line));
  }
  nlohmann::json all = nlohmann::json::array();
  for (auto& [k, fr] : runs) all.push_back(std::move(fr.second));
  m.entries.resize(total);
  return batch_json(m, Shard{1, 1}, std::move(all));
}

std::string batch_table(const nlohmann::json& batch) {
  std::string out =
      fmt::format("batch {}: {} runs\n", escape_terminal(batch.value("manifest", "")), batch["runs"].size());
  size_t w = 5;
  // Labels in full: cut ones could read alike while the runs differ.
  auto label = [&](const nlohmann::json& r) { return escape_terminal(r.value("label", std::string())); };
  for (const auto& r : batch["runs"]) w = std::max(w, label(r).size());
  out += fmt::format("{:>4}  {:<{}}  {:>6} {:>5} {:>11} {:>11} {:>11} {:>11}\n", "run", "label", w, "result", "OOMs",
                     "peak req", "peak alloc", "peak resvd", "extfrag max");
  for (const auto& r : batch["runs"]) {
    const auto& rep = r["report"];
    bool ok = rep.value("completed", false);
    double frag = rep.contains("fragmentation") ? rep["fragmentation"].value("max", 0.0) : 0.0;
    out += fmt::format("{:>4}  {:<{}}  {:>6} {:>5} {:>11} {:>11} {:>11} {:>10.1f}%\n", r.value("run", 0), label(r), w,
                       ok                                                        ? "ok"
                       : rep.value("oom_count", 0) == 0 && rep.contains("fatal") ? "abort"
                                                                                 : "OOM",
                       rep.value("oom_count", 0), human_bytes(rep.value("peak_requested_bytes", Bytes(0))),
                       human_bytes(rep.value("peak_allocated_bytes", Bytes(0))),
                       human_bytes(rep.value("peak_reserved_bytes", Bytes(0))), frag * 100);
  }
  return out;
}

}  // namespace fragsim

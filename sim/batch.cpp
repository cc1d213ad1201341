#include "sim/batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/units.h"

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

nlohmann::json merge_batches(const std::vector<std::pair<std::string, nlohmann::json>>& shards) {
  if (shards.empty()) throw InputError("merge: no shard results given");
  Manifest m;
  std::map<unsigned, std::string> seen;  // shard index → file
  std::map<size_t, nlohmann::json> runs;
  unsigned count = 0;
  size_t total = 0;
  for (const auto& [file, j] : shards) {
    auto bad = [&](const std::string& what) { return InputError(file + ": " + what); };
    if (!j.is_object() || j.value("fragsim_batch", 0) != 1 || !j.contains("runs") || !j["runs"].is_array() ||
        !j.contains("shard") || !j["shard"].is_object())
      throw bad("fragsim_batch: not a batch result (fragsim batch --json)");
    unsigned idx = j["shard"].value("index", 0u), cnt = j["shard"].value("count", 0u);
    if (m.digest.empty()) {
      m.path = j.value("manifest", "");
      m.digest = j.value("manifest_digest", "");
      count = cnt;
      total = j.value("runs_total", size_t(0));
    }
    if (j.value("manifest_digest", "") != m.digest)
      throw bad(fmt::format("manifest_digest: {} is a shard of another manifest than {}", file, shards[0].first));
    if (cnt != count || j.value("runs_total", size_t(0)) != total)
      throw bad(fmt::format("shard: count {} differs from {}'s {}", cnt, shards[0].first, count));
    if (idx == 0 || idx > cnt) throw bad(fmt::format("shard: index {} is not in 1..{}", idx, cnt));
    if (auto it = seen.find(idx); it != seen.end())
      throw bad(fmt::format("shard: {}/{} given twice (also {})", idx, cnt, it->second));
    seen[idx] = file;
    Shard sh{idx, cnt};
    for (const auto& r : j["runs"]) {
      size_t k = r.value("run", SIZE_MAX);
      if (k >= total || !sh.has(k)) throw bad(fmt::format("runs: run {} does not belong to shard {}/{}", k, idx, cnt));
      runs[k] = r;
    }
  }
  for (unsigned i = 1; i <= count; ++i)
    if (!seen.count(i)) throw InputError(fmt::format("merge: shard {}/{} is missing", i, count));
  if (runs.size() != total) throw InputError(fmt::format("merge: {} of {} runs are in the shards", runs.size(), total));
  nlohmann::json all = nlohmann::json::array();
  for (auto& [k, r] : runs) all.push_back(std::move(r));
  m.entries.resize(total);
  return batch_json(m, Shard{1, 1}, std::move(all));
}

std::string batch_table(const nlohmann::json& batch) {
  std::string out = fmt::format("batch {}: {} runs\n", batch.value("manifest", ""), batch["runs"].size());
  size_t w = 5;
  // Labels in full: cut ones could read alike while the runs differ.
  auto label = [&](const nlohmann::json& r) { return r.value("label", std::string()); };
  for (const auto& r : batch["runs"]) w = std::max(w, label(r).size());
  out += fmt::format("{:>4}  {:<{}}  {:>6} {:>5} {:>11} {:>11} {:>11} {:>11}\n", "run", "label", w, "result", "OOMs",
                     "peak req", "peak alloc", "peak resvd", "extfrag max");
  for (const auto& r : batch["runs"]) {
    const auto& rep = r["report"];
    bool ok = rep.value("completed", false);
    double frag = rep.contains("fragmentation") ? rep["fragmentation"].value("max", 0.0) : 0.0;
    out += fmt::format("{:>4}  {:<{}}  {:>6} {:>5} {:>11} {:>11} {:>11} {:>10.1f}%\n", r.value("run", 0), label(r), w,
                       ok ? "ok" : "OOM", rep.value("oom_count", 0),
                       human_bytes(rep.value("peak_requested_bytes", Bytes(0))),
                       human_bytes(rep.value("peak_allocated_bytes", Bytes(0))),
                       human_bytes(rep.value("peak_reserved_bytes", Bytes(0))), frag * 100);
  }
  return out;
}

}  // namespace fragsim

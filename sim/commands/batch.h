// Batch runs: a manifest of runs (traces × policies × settings), split into shards that
// independent processes run (a Slurm job array, a Kubernetes Indexed Job, a shell loop), and a
// merge that combines the shards' results into exactly what one process gives (docs/batch.md).
//
// Manifest: UTF-8 text, one run per line: `TRACE [run options]` — the options of `fragsim run`
// that choose what to simulate (--policy, --hw, --capacity, --reserve, --set, --env,
// --keep-going, --lenient, --shard, --shard-dim) plus `--label NAME`. Words are separated by
// spaces or tabs (no quoting); blank lines and lines starting with '#' are skipped. A relative
// TRACE is relative to the manifest's folder. Runs are numbered from 0 in file order; shard i/N
// (1 ≤ i ≤ N) runs those with number % N == i − 1.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace fragsim {

struct BatchEntry {
  size_t run = 0;                 // number among the manifest's runs
  std::uint64_t line = 0;         // 1-based line in the manifest
  std::vector<std::string> args;  // TRACE first (resolved against the manifest's folder), then options
  std::string text;               // the line as written (the default label)
};

struct Manifest {
  std::string path, digest;  // digest: of the manifest's bytes (hex), shards must agree on it
  std::vector<BatchEntry> entries;
};

struct Shard {
  unsigned index = 1, count = 1;
  bool has(size_t run) const { return run % count == index - 1; }
};

// Throws InputError naming FILE:LINE for a malformed manifest (an empty one is an error too).
[[nodiscard]] Manifest read_manifest(const std::string& path);
// "i/N" with 1 ≤ i ≤ N ≤ 100000; InputError naming --shard otherwise.
[[nodiscard]] Shard parse_shard(const std::string& s);

// The batch result: {"fragsim_batch":1, manifest, manifest_digest, runs_total, shard:{index,count},
// runs:[{run, line, label, report}]} with runs in run order.
[[nodiscard]] nlohmann::json batch_json(const Manifest& m, const Shard& s, nlohmann::json runs);
// Every file a batch of this manifest reads: the manifest, each line's trace and --hw file (an
// output may be none of them, whichever shard runs).
[[nodiscard]] std::vector<std::string> batch_inputs(const Manifest& m);
// Combines shard results (path, JSON) into the unsharded result; InputError naming the file and
// key when a shard is malformed (every key merge reads is checked, each report against the
// report schema), when they are not shards of one manifest, overlap, give a run twice or leave
// runs out, when runs' lines are out of order, and — with the manifest readable where merge runs
// and its digest the shards' — when a run's line or trace is not its manifest line's.
[[nodiscard]] nlohmann::json merge_batches(const std::vector<std::pair<std::string, nlohmann::json>>& shards);
// Every file a merge of these shards reads: the shards, and the manifest each names (merge reads
// it to check the runs against their lines).
[[nodiscard]] std::vector<std::string> merge_inputs(const std::vector<std::pair<std::string, nlohmann::json>>& shards);
// One row per run, from the result alone (so a merge prints what one process prints).
[[nodiscard]] std::string batch_table(const nlohmann::json& batch);

}  // namespace fragsim

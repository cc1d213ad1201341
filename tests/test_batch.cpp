// fragsim batch / merge: a manifest of runs split into shards that merge into exactly what one
// process gives, and the same through a real single-node Slurm cluster (scripts/cluster/). The
// library calls run in process (run_batch, merge_batches, batch_table: what `fragsim batch` and
// `fragsim merge` call and print); the Slurm job runs the binary, as a cluster does.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "sim/commands/batch.h"
#include "sim_helpers.h"

namespace {

using namespace fragsim;
using fragsim::test::cli;
using fragsim::test::input_error;
using fragsim::test::read_text;
using fragsim::test::run_cmd;
using fragsim::test::test_registry;
using fragsim::test::tmp_path;

// A manifest over the bundled sample traces, in a folder of its own (relative trace paths).
std::string make_manifest(const std::string& folder) {
  std::string dir = tmp_path(folder);
  std::filesystem::create_directories(dir);
  for (const char* t : {"jax_train_small.jsonl", "torch_eager_small.jsonl", "llm_serving_small.jsonl"})
    std::filesystem::copy_file(std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/" + t, dir + "/" + t,
                               std::filesystem::copy_options::overwrite_existing);
  std::string m = dir + "/manifest.txt";
  std::ofstream(m) << "# traces x policies x settings\n"
                      "jax_train_small.jsonl --policy xla-bfc --capacity 4GiB\n"
                      "jax_train_small.jsonl --policy xla-bfc[preallocate=false] --capacity 4GiB --label grow\n"
                      "\n"
                      "jax_train_small.jsonl --policy best-fit --capacity 1GiB\n"
                      "torch_eager_small.jsonl --policy torch-caching --capacity 2GiB\n"
                      "torch_eager_small.jsonl --policy torch-caching --capacity 2GiB "
                      "--env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
                      "llm_serving_small.jsonl --policy static-heap --capacity 8GiB\n"
                      "llm_serving_small.jsonl --capacity 1GiB\n";
  return m;
}

// What each run line of make_manifest's manifest asks `fragsim run` for, in order (its traces in
// the manifest's folder).
std::vector<RunRequest> manifest_requests(const std::string& manifest) {
  std::string dir = std::filesystem::path(manifest).parent_path().string() + "/";
  std::string jax = dir + "jax_train_small.jsonl", torch = dir + "torch_eager_small.jsonl",
              llm = dir + "llm_serving_small.jsonl";
  return {{.trace = jax, .capacity = "4GiB", .policy = "xla-bfc"},
          {.trace = jax, .capacity = "4GiB", .policy = "xla-bfc[preallocate=false]"},
          {.trace = jax, .capacity = "1GiB", .policy = "best-fit"},
          {.trace = torch, .capacity = "2GiB", .policy = "torch-caching"},
          {.trace = torch,
           .capacity = "2GiB",
           .policy = "torch-caching",
           .envs = {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"}},
          {.trace = llm, .capacity = "8GiB", .policy = "static-heap"},
          {.trace = llm, .capacity = "1GiB"}};
}

// `fragsim batch MANIFEST --shard SHARD [--jobs THREADS] --json`.
nlohmann::json batch(const std::string& manifest, const std::string& shard = "1/1", unsigned threads = 0) {
  return run_batch(manifest, shard, test_registry(), threads);
}

// `fragsim merge FILE...`: each shard as the file its batch wrote, read back.
nlohmann::json merge(const std::vector<std::pair<std::string, nlohmann::json>>& shards) {
  std::vector<std::pair<std::string, nlohmann::json>> read;
  for (const auto& [name, j] : shards) read.emplace_back(name, nlohmann::json::parse(j.dump(2)));
  return merge_batches(read);
}

}  // namespace

TEST_CASE("batch: shards merged in any order give exactly the result and table of one process") {
  std::string m = make_manifest("batch1");
  auto j = batch(m);
  REQUIRE(j["runs"].size() == 7);
  CHECK(j["runs"][1]["label"] == "grow");
  CHECK(j["runs"][2]["line"] == 5);                 // the blank line and the comment count as lines, not runs
  CHECK(j["runs"][2]["report"]["oom_count"] == 1);  // 1 GiB is less than the trace's 1.39 GiB peak
  CHECK(j["runs"][4]["report"]["policy"]["config"]["expandable_segments"] == true);
  std::vector<std::pair<std::string, nlohmann::json>> shards;
  for (int i : {3, 1, 2}) {
    auto sj = batch(m, fmt::format("{}/3", i));
    for (const auto& r : sj["runs"]) CHECK(r["run"].get<int>() % 3 == i - 1);
    shards.emplace_back(fmt::format("shard{}.json", i), sj);
  }
  auto merged = merge(shards);
  CHECK(merged.dump(2) == j.dump(2));  // what --json writes, byte for byte
  std::string table = batch_table(merged);
  CHECK(table == batch_table(j));
  CHECK(table.find("grow") != std::string::npos);
}

TEST_CASE("batch: runs of a trace share its decode, traces in parallel, and every report is the run's own") {
  std::string m = make_manifest("batch_jobs");
  auto all = batch(m);
  for (unsigned jobs : {1, 2, 3, 8}) {  // 1: one thread; 2, 3: threads shared among the traces
    INFO("--jobs " << jobs);
    CHECK(batch(m, "1/1", jobs).dump(2) == all.dump(2));
  }
  // Each run's report is what `fragsim run` gives for its manifest line alone.
  const auto& runs = all["runs"];
  auto requests = manifest_requests(m);
  REQUIRE(requests.size() == runs.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO(runs[i]["label"]);
    CHECK(run_cmd(requests[i]).json == runs[i]["report"]);
  }
}

TEST_CASE("batch and merge refuse what is not one manifest's complete set of shards") {
  // Each refusal is an input error (exit 2) on one line.
  std::string m = make_manifest("batch2");
  std::pair<std::string, nlohmann::json> s1{"b2s1.json", batch(m, "1/2")}, s2{"b2s2.json", batch(m, "2/2")};
  CHECK(input_error([&] { (void)merge({s1}); }).find("shard 2/2 is missing") != std::string::npos);
  CHECK(input_error([&] { (void)merge({s1, s1, s2}); }).find("given twice") != std::string::npos);
  std::string other = make_manifest("batch3");
  std::ofstream(other, std::ios::app) << "jax_train_small.jsonl --policy ideal\n";
  std::pair<std::string, nlohmann::json> o2{"b3s2.json", batch(other, "2/2")};
  CHECK(input_error([&] { (void)merge({s1, o2}); }).find("another manifest") != std::string::npos);
  for (const char* bad : {"0/2", "3/2", "1/0", "x/2", "12"}) {
    INFO(bad);
    CHECK(input_error([&] { (void)batch(m, bad); }).find("--shard") != std::string::npos);
  }
  // A bad line is named by the manifest's file and line.
  std::string bad = fragsim::test::write_text("bad_manifest.txt", "# runs\nnope.jsonl --policy best-fit\n");
  CHECK(input_error([&] { (void)batch(bad); }).find("bad_manifest.txt:2: ") != std::string::npos);
  std::string bad2 = fragsim::test::write_text("bad_manifest2.txt", "--policy best-fit x.jsonl\n");
  CHECK(input_error([&] { (void)batch(bad2); }).find("bad_manifest2.txt:1: trace") != std::string::npos);
  // A misspelt policy option on a line whose trace is fine: named by the line too (it came from
  // a replay thread, after every run had started, with no file or line).
  std::string bad4 = make_manifest("batch4");
  std::ofstream(bad4, std::ios::app) << "jax_train_small.jsonl --policy xla-bfc[mem_fractoin=0.5]\n";
  CHECK(input_error([&] { (void)batch(bad4); }).find("manifest.txt:10: policy xla-bfc: unknown key 'mem_fractoin'") !=
        std::string::npos);
  std::string bad3 = fragsim::test::write_text("bad_manifest3.txt", "# nothing\n\n");
  CHECK(input_error([&] { (void)batch(bad3); }).find("no runs") != std::string::npos);
}

TEST_CASE("batch on a real single-node Slurm: the job array and its merge equal one process", "[slurm]") {
  // scripts/cluster/local-slurm starts munged, slurmctld and slurmd (Debian's munge and slurm-wlm,
  // which scripts/test installs) with their state in a scratch folder; slurm-batch submits the
  // array (one task per shard) and the merge job that waits for it.
  std::string m = make_manifest("slurm"), dir = tmp_path("slurm-cluster"), out = tmp_path("slurm-out");
  std::string all = tmp_path("slurm-all.json");
  // One process, from the manifest's folder as the jobs run: the result to equal.
  std::string local_cmd = "cd " + tmp_path("slurm") + " && " + FRAGSIM_BINARY + " batch manifest.txt --json " + all;
  REQUIRE(WEXITSTATUS(std::system(local_cmd.c_str())) == 0);
  std::string scripts = std::string(FRAGSIM_SOURCE_DIR) + "/scripts/cluster/";
  std::string start = scripts + "local-slurm start " + dir + " > " + tmp_path("slurm-env") + " 2>&1";
  int rc = std::system(start.c_str());
  INFO(read_text(tmp_path("slurm-env")));
  REQUIRE(WEXITSTATUS(rc) == 0);
  std::string submit = "cd " + tmp_path("slurm") + " && SLURM_CONF=" + dir + "/slurm.conf FRAGSIM=" + FRAGSIM_BINARY +
                       " timeout 300 " + scripts + "slurm-batch --wait manifest.txt 3 " + out + " > " +
                       tmp_path("slurm-submit") + " 2>&1";
  rc = std::system(submit.c_str());
  std::system((scripts + "local-slurm stop " + dir + " >/dev/null 2>&1").c_str());
  INFO(read_text(tmp_path("slurm-submit")));
  REQUIRE(WEXITSTATUS(rc) == 0);
  for (int i = 1; i <= 3; ++i) CHECK(std::filesystem::exists(out + fmt::format("/shard-{}.json", i)));
  CHECK(read_text(out + "/merged.json") == read_text(all));
  CHECK(nlohmann::json::parse(read_text(all))["runs"].size() == 7);
}

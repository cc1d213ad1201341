// fragsim batch / merge: a manifest of runs split into shards that merge into exactly what one
// process gives, and the same through a real single-node Slurm cluster (scripts/cluster/).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace {

using fragsim::test::cli;
using fragsim::test::read_text;
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

}  // namespace

TEST_CASE("batch: shards merged in any order give exactly the result and table of one process") {
  std::string m = make_manifest("batch1"), all = tmp_path("all.json");
  auto one = cli("batch " + m + " --json " + all);
  REQUIRE(one.code == 0);
  auto j = nlohmann::json::parse(read_text(all));
  REQUIRE(j["runs"].size() == 7);
  CHECK(j["runs"][1]["label"] == "grow");
  CHECK(j["runs"][2]["line"] == 5);                 // the blank line and the comment count as lines, not runs
  CHECK(j["runs"][2]["report"]["oom_count"] == 1);  // 1 GiB is less than the trace's 1.39 GiB peak
  CHECK(j["runs"][4]["report"]["policy"]["config"]["expandable_segments"] == true);
  std::string shards;
  for (int i : {3, 1, 2}) {
    std::string s = tmp_path(fmt::format("shard{}.json", i));
    REQUIRE(cli(fmt::format("batch {} --shard {}/3 --json {}", m, i, s)).code == 0);
    auto sj = nlohmann::json::parse(read_text(s));
    for (const auto& r : sj["runs"]) CHECK(r["run"].get<int>() % 3 == i - 1);
    shards += " " + s;
  }
  std::string merged = tmp_path("merged.json");
  REQUIRE(cli("merge" + shards + " --json " + merged).code == 0);
  CHECK(read_text(merged) == read_text(all));
  auto table = cli("merge" + shards);
  CHECK(table.out == cli("batch " + m).out);
  CHECK(table.out.find("grow") != std::string::npos);
}

TEST_CASE("batch: runs of a trace share its decode, traces in parallel, and every report is the run's own") {
  std::string m = make_manifest("batch_jobs"), all = tmp_path("jobs0.json");
  REQUIRE(cli("batch " + m + " --json " + all).code == 0);
  for (const char* jobs : {"1", "2", "3", "8"}) {  // 1: one thread; 2, 3: threads shared among the traces
    std::string j = tmp_path(fmt::format("jobs{}.json", jobs));
    REQUIRE(cli(fmt::format("batch {} --jobs {} --json {}", m, jobs, j)).code == 0);
    INFO("--jobs " << jobs);
    CHECK(read_text(j) == read_text(all));
  }
  // Each run's report is what `fragsim run` gives for its manifest line alone.
  auto runs = nlohmann::json::parse(read_text(all))["runs"];
  std::string dir = std::filesystem::path(m).parent_path().string();
  std::ifstream in(m);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  REQUIRE(lines.size() == runs.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string args = lines[i].substr(0, lines[i].find(" --label"));
    std::string one = tmp_path("batch_one.json");
    REQUIRE(cli("run " + dir + "/" + args + " --json " + one).code == 0);
    INFO(lines[i]);
    CHECK(nlohmann::json::parse(read_text(one)) == runs[i]["report"]);
  }
}

TEST_CASE("batch and merge refuse what is not one manifest's complete set of shards") {
  std::string m = make_manifest("batch2");
  std::string s1 = tmp_path("b2s1.json"), s2 = tmp_path("b2s2.json");
  REQUIRE(cli("batch " + m + " --shard 1/2 --json " + s1).code == 0);
  REQUIRE(cli("batch " + m + " --shard 2/2 --json " + s2).code == 0);
  auto missing = cli("merge " + s1);
  CHECK(missing.code == 2);
  CHECK(missing.err.find("shard 2/2 is missing") != std::string::npos);
  auto twice = cli("merge " + s1 + " " + s1 + " " + s2);
  CHECK(twice.code == 2);
  CHECK(twice.err.find("given twice") != std::string::npos);
  std::string other = make_manifest("batch3"), o2 = tmp_path("b3s2.json");
  std::ofstream(other, std::ios::app) << "jax_train_small.jsonl --policy ideal\n";
  REQUIRE(cli("batch " + other + " --shard 2/2 --json " + o2).code == 0);
  auto mixed = cli("merge " + s1 + " " + o2);
  CHECK(mixed.code == 2);
  CHECK(mixed.err.find("another manifest") != std::string::npos);
  for (const char* bad : {"0/2", "3/2", "1/0", "x/2", "12"}) {
    auto r = cli("batch " + m + " --shard " + bad);
    INFO(bad);
    CHECK(r.code == 2);
    CHECK(r.err.find("--shard") != std::string::npos);
  }
  // A bad line is named by the manifest's file and line.
  std::string bad = fragsim::test::write_text("bad_manifest.txt", "# runs\nnope.jsonl --policy best-fit\n");
  auto r = cli("batch " + bad);
  CHECK(r.code == 2);
  CHECK(r.err.find("bad_manifest.txt:2: ") != std::string::npos);
  std::string bad2 = fragsim::test::write_text("bad_manifest2.txt", "--policy best-fit x.jsonl\n");
  CHECK(cli("batch " + bad2).err.find("bad_manifest2.txt:1: trace") != std::string::npos);
  std::string bad3 = fragsim::test::write_text("bad_manifest3.txt", "# nothing\n\n");
  CHECK(cli("batch " + bad3).err.find("no runs") != std::string::npos);
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

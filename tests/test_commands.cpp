// What the commands compute, called in process as the command line calls them (sim_helpers.h):
// compare's shared decode gives each policy the report of its own run, on any number of threads,
// and the error of the first failing policy; the peak's snapshot; gen, convert and info agree.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "sim/commands/trace_info.h"
#include "sim_helpers.h"
#include "traces/generators.h"

using namespace fragsim;
using namespace fragsim::test;

TEST_CASE("gen, convert and info agree") {
  std::string j = tmp_path("g.jsonl"), f = tmp_path("g.fstrace"), back = tmp_path("g_back.jsonl");
  (void)generate_workload("llm-serving", 3, {{"requests", 5}}, j);  // gen llm-serving --seed 3 --set requests=5
  (void)convert_trace(j, f, "", false);
  (void)convert_trace(f, back, "", false);
  CHECK(read_text(j) == read_text(back));
  auto a = trace_info(j, false), b = trace_info(f, false);
  CHECK(a["peak_requested_bytes"] == b["peak_requested_bytes"]);
  CHECK(a["events"] == b["events"]);
  CHECK(a["events"].get<int>() > 10);
}

TEST_CASE("compare decodes the trace once yet gives every policy the report its own run gives") {
  const std::string t = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/torch_eager_small.jsonl";
  const std::vector<std::string> pols = {"ideal",         "best-fit",   "xla-bfc[preallocate=false]",
                                         "torch-caching", "cuda-async", "static-heap"};
  std::string list;
  for (const auto& p : pols) list += (list.empty() ? "" : ",") + p;
  for (unsigned jobs : {1, 2, 4}) {
    auto arr = compare_cmd({.base = {.trace = t, .capacity = "2GiB"}, .policies = list}, false, jobs).json;
    REQUIRE(arr.size() == pols.size());
    for (size_t i = 0; i < pols.size(); ++i) {
      // run with the same threads (1: decoded and replayed on one thread)
      auto alone = run_cmd({.trace = t, .capacity = "2GiB", .policy = pols[i]}, {}, jobs).json;
      INFO(pols[i] << " --jobs " << jobs);
      CHECK(arr[i]["label"] == pols[i]);  // compare labels its rows; otherwise the reports are the same
      arr[i].erase("label");
      CHECK(arr[i] == alone);
    }
  }
}

TEST_CASE("a shared decode hands over every event at the edges of its short first batches, and errors there") {
  // The reader's first batches hold 16, 64, 256 and 1,024 events, then 4,096 (parallel_runs.cpp,
  // BatchStream::batch_size): their edges fall after 16, 80, 336, 1,360 and 5,456 events. Until the
  // reader's thread runs, a consumer may read batches itself. Traces that end, or fail, on either
  // side of each edge: every policy of a compare sees all the events, or the failing line.
  for (int edge : {16, 80, 336, 1360, 5456}) {
    for (int n : {edge - 1, edge, edge + 1}) {
      std::string t = alloc_free_trace("edge.jsonl", n);
      std::string bad = alloc_free_trace("edge_bad.jsonl", n + 1, n);  // its last event frees an unknown id
      for (unsigned jobs : {1, 2, 4}) {
        INFO(n << " events, --jobs " << jobs);
        auto arr = compare_cmd({.base = {.trace = t}, .policies = "best-fit,xla-bfc"}, false, jobs).json;
        REQUIRE(arr.size() == 2);
        for (auto& row : arr) {
          CHECK(row["trace"]["events"] == n);
          CHECK(row["trace"]["allocs"] == (n + 1) / 2);
        }
        std::string err = input_error(
            [&] { (void)compare_cmd({.base = {.trace = bad}, .policies = "best-fit,xla-bfc"}, false, jobs); });
        CHECK(err.find(fmt::format("edge_bad.jsonl:{}: id: free of id 999999999", n + 1)) != std::string::npos);
      }
    }
  }
}

TEST_CASE("compare reports the error the first failing policy would give alone") {
  // hbm only on this device: a vmem buffer has nowhere to go. Every policy fails at line 2 while
  // the reader still has 100,000 lines to go: it must stop reading, not wait for them.
  std::string text =
      "{\"op\":\"alloc\",\"id\":1,\"size\":1024}\n{\"op\":\"alloc\",\"id\":2,\"size\":64,\"space\":\"vmem\"}\n";
  for (int i = 0; i < 100000; ++i) text += "{\"op\":\"mark\"}\n";
  std::string t = write_text("bad_space.jsonl", text);
  for (unsigned jobs : {1, 2}) {
    INFO("--jobs " << jobs);
    std::string err = input_error(
        [&] { (void)compare_cmd({.base = {.trace = t}, .policies = "best-fit,xla-bfc,torch-caching"}, false, jobs); });
    CHECK(err.find("bad_space.jsonl:2: space") != std::string::npos);
  }
}

TEST_CASE("a shared decode replays the events before a bad line, so a policy's error there comes first") {
  // Line 2 needs a space the device lacks (the engine's error); line 3 frees an id never
  // allocated (the reader's). A run that reads the trace itself stops at line 2; so must every
  // run of a shared decode, whose reader meets line 3 while lines 1-2 are still in its batch.
  std::string t = write_text("engine_then_reader.jsonl",
                             "{\"op\":\"alloc\",\"id\":1,\"size\":1024}\n"
                             "{\"op\":\"alloc\",\"id\":2,\"size\":64,\"space\":\"vmem\"}\n"
                             "{\"op\":\"free\",\"id\":999}\n");
  for (unsigned jobs : {1, 2, 4}) {
    INFO("--jobs " << jobs);
    std::string alone = input_error([&] { (void)run_cmd({.trace = t, .policy = "best-fit"}, {}, jobs); });
    std::string shared =
        input_error([&] { (void)compare_cmd({.base = {.trace = t}, .policies = "best-fit,xla-bfc"}, false, jobs); });
    CHECK(alone.find("engine_then_reader.jsonl:2: space") != std::string::npos);
    CHECK(shared == alone);
  }
}

TEST_CASE("the peak's snapshot is the state at the peak on a trace that climbs in small steps") {
  // alloc A_i, alloc B_i, free A_i: a new peak every three events, left at once. Snapshots at
  // every step would cost O(n * live); the engine pays them from a credit and replays the trace
  // again up to the final peak when it could not afford that one (engine.cpp).
  const int n = 3000;
  std::string s;
  for (int i = 0; i < n; ++i)
    s += fmt::format(
        "{{\"op\":\"alloc\",\"id\":{},\"size\":4096}}\n{{\"op\":\"alloc\",\"id\":{},\"size\":4096}}\n"
        "{{\"op\":\"free\",\"id\":{}}}\n",
        2 * i, 2 * i + 1, 2 * i);
  for (int i = 0; i < n; ++i) s += fmt::format("{{\"op\":\"free\",\"id\":{}}}\n", 2 * i + 1);
  std::string t = write_text("climb.jsonl", s);
  for (const char* pol : {"best-fit", "xla-bfc", "torch-caching"}) {
    INFO(pol);
    auto peak = run_cmd({.trace = t, .policy = pol}).json["at_peak_allocated"];
    CHECK(peak["event_index"] == 3 * (n - 1) + 1);  // the last B alloc
    CHECK(peak["live_buffers"] == n + 1);           // every B and the last A
    CHECK(peak["top_buffers"].size() == 20);        // kTopBuffers of the live set
  }
}

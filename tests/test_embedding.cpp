// What a front end that embeds the library relies on (the Python module, sim/python/): traces held
// in memory read exactly as their files, runs of them through the commands' own calls, a run
// stopped from another thread, and a library that leaves the host program's signals alone.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/commands/commands.h"
#include "sim/commands/trace_info.h"
#include "sim/report/report.h"
#include "sim_helpers.h"
#include "traces/generators.h"
#include "traces/jsonl.h"
#include "traces/pickle.h"
#include "traces/torch_snapshot.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

// Every event of a reader, as the JSONL writer prints it (every key of the trace contract), with
// the line each came from.
std::vector<std::string> events_of(TraceReader& r) {
  std::vector<std::string> out;
  std::string tmp = tmp_path("events_of.jsonl");
  auto w = make_jsonl_writer(tmp, nullptr);
  Event ev;
  while (r.next(ev)) {
    w->write(ev);
    out.push_back(std::to_string(ev.line));
  }
  w->finish();
  std::string text = read_text(tmp);
  size_t i = 0;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    out[i++] += " " + text.substr(at, nl - at);
  return out;
}

// The lines of `text` (a JSONL file's content) added one by one.
ReaderFactory lines_of(const std::string& name, const std::string& text, bool lenient = false) {
  JsonlLines lines(name);
  for (size_t at = 0, nl; at < text.size(); at = nl + 1) {
    nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    lines.add(std::string_view(text).substr(at, nl - at));
  }
  return std::move(lines).reader(ReaderOptions{lenient});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("JsonlLines: lines handed over one by one read as the file holding them") {
  const std::string sample = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";
  const std::string text = read_text(sample);
  auto from_file = open_trace(sample);
  auto from_lines = lines_of(sample, text)();
  std::vector<std::string> a = events_of(*from_file), b = events_of(*from_lines);
  CHECK(a.size() > 100);
  CHECK(a == b);  // every key of every event, and the line it came from
  CHECK(from_file->header() == from_lines->header());
  CHECK(from_file->digest() == from_lines->digest());

  // The same run from either, through the commands' own call: the same report.
  RunRequest q;
  q.trace = sample;
  q.policy = "best-fit";
  q.capacity = "1GiB";
  nlohmann::json file_report = report_json(run_request(q, test_registry()));
  q.source = lines_of(sample, text);
  CHECK(report_json(run_request(q, test_registry())) == file_report);
}

TEST_CASE("JsonlLines: every error is the one the file gives at the same line and key") {
  // Errors of one line (simdjson's decoding) and of the stream (TraceReader::next: time, ids).
  const std::vector<std::string> bad = {
      "{\"fragsim_trace\":1}\n{\"op\":\"alloc\",\"id\":1,\"size\":-5}",
      "{\"op\":\"alloc\",\"id\":1,\"size\":1.5}",
      "{\"op\":\"alloc\",\"id\":1}",
      "\n\n{\"op\":\"alloc\",\"id\":1,\"size\":4,\"dtype\":\"f33\"}",
      "{\"op\":\"alloc\",\"id\":1,\"size\":4,\"t\":5}\n{\"op\":\"alloc\",\"id\":2,\"size\":4,\"t\":4}",
      "{\"op\":\"alloc\",\"id\":1,\"size\":4}\n{\"op\":\"free\",\"id\":2}",
      "{\"fragsim_trace\":2}",
      "{\"fragsim_trace\":1,\"recorded_devices\":[{\"device\":0}]}\n{\"op\":\"mark\"}",
      "{\"op\":\"alloc\",\"id\":1,\"size\":4} trailing",
      "[1,2]",
  };
  for (const auto& text : bad) {
    INFO(text);
    const std::string file = write_text("bad_lines.jsonl", text + "\n");
    auto drain = [](std::unique_ptr<TraceReader> r) {
      Event ev;
      while (r->next(ev)) {
      }
    };
    std::string want = error_of([&] { drain(open_trace(file)); });
    CHECK(want != "(no error)");
    CHECK(error_of([&] { drain(lines_of(file, text)()); }) == want);
  }
  // --lenient skips a free of an unknown id in both.
  auto r = lines_of("x", "{\"op\":\"alloc\",\"id\":1,\"size\":4}\n{\"op\":\"free\",\"id\":2}", true)();
  Event ev;
  while (r->next(ev)) {
  }
  CHECK(r->skipped_frees() == 1);
}

TEST_CASE("a snapshot handed over parsed reads as its file") {
  for (const char* name :
       {"small_mlp_97ev.pickle.zst", "expandable_3dev_oom.pickle.zst", "oom_retry_release.pickle.zst"}) {
    INFO(name);
    const std::string path = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/torch/" + name;
    auto doc = parse_pickle(read_input(path, kMaxPickleBytes), path);
    auto from_file = open_trace(path);
    auto from_doc = make_torch_snapshot_reader_from(path, *doc, {});
    doc.reset();  // the reader needs the document only while it is made
    CHECK(events_of(*from_doc) == events_of(*from_file));
    CHECK(from_doc->header() == from_file->header());
    CHECK(from_doc->digest() == from_file->digest());
    // Decoded once, read as often as needed: the same events, header and digest again.
    auto again = decode_once([&] {
      return make_torch_snapshot_reader_from(path, *parse_pickle(read_input(path, kMaxPickleBytes), path), {});
    });
    auto r1 = again(), r2 = again();
    CHECK(events_of(*r1) == events_of(*r2));
    CHECK(r1->digest() == from_file->digest());
    CHECK(r1->recording().what() == from_file->recording().what());
  }
}

TEST_CASE("commands read a source held in memory as its file: run and compare and sweep and info") {
  const std::string path = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/torch/oom_retry_release.pickle.zst";
  auto source = decode_once([&] {
    return make_torch_snapshot_reader_from(path, *parse_pickle(read_input(path, kMaxPickleBytes), path), {});
  });
  RunRequest file;
  file.trace = path;
  RunRequest memory = file;
  memory.source = source;
  // run: the policy, hardware and settings chosen from the recording, the advice replayed.
  CHECK(report_json(run_request(memory, test_registry())) == report_json(run_request(file, test_registry())));
  // compare: the default entries follow the recording too.
  CompareRequest c;
  c.base = file;
  c.traces = {path};
  std::vector<RunResult> a = run_compare(c, test_registry(), {}, 2);
  c.sources = {source};
  std::vector<RunResult> b = run_compare(c, test_registry(), {}, 2);
  REQUIRE(a.size() == b.size());
  CHECK(a.size() >= 2);
  for (size_t i = 0; i < a.size(); ++i) CHECK(report_json(a[i]) == report_json(b[i]));
  // sweep and info.
  CHECK(sweep_json(sweep_request(memory, "min-capacity", false, test_registry(), 2)) ==
        sweep_json(sweep_request(file, "min-capacity", false, test_registry(), 2)));
  CHECK(trace_info(path, false, source) == trace_info(path, false));
}

TEST_CASE("a cancelled run stops within a batch of events and commits no output") {
  const std::string trace = tmp_path("cancel.fstrace");
  generate_workload("random", 1, {{"events", 200000}}, trace);
  for (unsigned threads : {1u, 2u, 0u}) {
    INFO("threads " << threads);
    // A source whose reader sets the flag once it has handed out 10000 events.
    std::atomic<bool> cancel{false};
    std::atomic<std::uint64_t> handed{0};
    class Counting : public TraceReader {
     public:
      Counting(std::unique_ptr<TraceReader> in, std::atomic<bool>& cancel, std::atomic<std::uint64_t>& n)
          : TraceReader(in->path(), {}), in_(std::move(in)), cancel_(cancel), n_(n) {}

     protected:
      bool read_raw(Event& ev) override {
        if (++n_ == 10000) cancel_ = true;
        return in_->next(ev);
      }

     private:
      std::unique_ptr<TraceReader> in_;
      std::atomic<bool>& cancel_;
      std::atomic<std::uint64_t>& n_;
    };
    RunOptions o;
    o.trace = trace;
    o.source = [&] { return std::make_unique<Counting>(open_trace(trace), cancel, handed); };
    o.policy.name = "best-fit";
    o.hw = load_hardware("h100-80g");
    o.placements = tmp_path("cancel_placements.jsonl");
    o.cancel = &cancel;
    CHECK_THROWS_AS(run_simulations({o, o}, test_registry(), threads), Cancelled);
    // Each engine checks every kCancelEvents events; a shared decode runs at most a few batches ahead.
    CHECK(handed.load() < 10000 + 16 * kCancelEvents);
    CHECK_FALSE(std::filesystem::exists(o.placements));
    for (const auto& e : std::filesystem::directory_iterator(tmp_dir()))
      CHECK(e.path().filename().string().find("cancel_placements") == std::string::npos);
  }
  // Engines sharing one decode of a file stop at their first batch; an offline policy stops while
  // it collects lifetimes; a flag never set changes nothing.
  std::atomic<bool> set{true}, unset{false};
  RunOptions o;
  o.trace = trace;
  o.policy.name = "best-fit";
  o.hw = load_hardware("h100-80g");
  o.placements = tmp_path("cancel_shared.jsonl");
  o.cancel = &set;
  RunOptions other = o;
  other.placements = tmp_path("cancel_shared2.jsonl");
  CHECK_THROWS_AS(run_simulations({o, other}, test_registry(), 2), Cancelled);
  CHECK_FALSE(std::filesystem::exists(o.placements));
  CHECK_FALSE(std::filesystem::exists(other.placements));
  o.placements.clear();
  o.policy.name = "static-heap";
  CHECK_THROWS_AS(run_simulation(o, test_registry()), Cancelled);
  o.policy.name = "best-fit";
  o.cancel = &unset;
  RunResult with = run_simulation(o, test_registry());
  o.cancel = nullptr;
  CHECK(report_json(with) == report_json(run_simulation(o, test_registry())));
}

// Before: the first output file installed handlers for SIGINT, SIGTERM, ... that ended the
// process: in Python, Ctrl-C after writing a report killed the interpreter instead of raising
// KeyboardInterrupt. Only remove_temporaries_on_signals installs them now (programs, and the Python
// module for the signals Python leaves at their default).
TEST_CASE("writing an output leaves the signal handlers of the host program alone") {
  struct sigaction before[2]{}, after[2]{};
  const int sigs[2] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; ++i) sigaction(sigs[i], nullptr, &before[i]);
  {
    AtomicFile f(tmp_path("signals.txt"));
    f.write("x");
    f.commit();
  }
  write_file_atomic(tmp_path("signals2.txt"), "y");
  for (int i = 0; i < 2; ++i) {
    sigaction(sigs[i], nullptr, &after[i]);
    CHECK(after[i].sa_handler == before[i].sa_handler);
  }
  CHECK(read_text(tmp_path("signals.txt")) == "x");
}

// Parallel runs: one decode of a trace shared by the engines that replay it (a reader thread
// cuts it into batches), traces side by side, the threads shared out among them.
#include <atomic>
#include <map>
#include <thread>
#if defined(__linux__)
#include <sched.h>
#endif

#include "sim/engine/batch_stream.h"
#include "sim/engine/engine_impl.h"
#include "traces/trace_reader.h"

namespace fragsim {

namespace {
RunResult run_alone(const RunOptions& opt, const Registry& registry) {
  Engine e(opt, registry);
  return e.run();
}
}  // namespace

// With a second core the trace is decoded on one thread while the engine replays on another:
// the run takes as long as the slower of the two, not their sum.
RunResult run_simulation(const RunOptions& opt, const Registry& registry) {
  return std::move(run_simulations({opt}, registry, 0).front());
}

namespace {

// The cores this process may run on: its affinity mask where the system has one (taskset,
// cpusets), else what the library reports (0 when unknown).
unsigned usable_cores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
#endif
  return std::thread::hardware_concurrency();
}

// Runs f(i) for i in [0, n) on up to `threads` threads.
template <class F>
void on_threads(size_t n, unsigned threads, F f) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) f(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, n); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

// Replays runs[shared...] (online policies, one trace) from one decode of the trace, on at most
// `threads` threads (every_core: a replay thread per core beside the reader). Fills out[i] or
// errors[i] for each of them.
void replay_shared(const std::vector<RunOptions>& runs, const std::vector<size_t>& shared, const Registry& registry,
                   unsigned threads, bool every_core, bool may_spin, std::vector<RunResult>& out,
                   std::vector<std::exception_ptr>& errors) {
  // Consumer c replays the engines of runs shared[c], shared[c + C], ... batch by batch. A cap
  // of `threads` counts the reader; with a cap of one, the consumer reads each batch itself.
  const bool inline_reader = !every_core && threads < 2;
  size_t consumers = inline_reader ? 1 : std::min<size_t>(every_core ? threads : threads - 1, shared.size());
  ReaderOptions ro;
  ro.lenient = runs[shared[0]].lenient;
  // Threads the replays leave free parse JSONL lines for the reader (at most 8: beyond that the
  // reader's own thread, which splits lines and validates events, is the bound).
  const size_t busy = consumers + (inline_reader ? 0 : 1);
  ro.decode_threads = threads > busy ? static_cast<unsigned>(std::min<size_t>(threads - busy, 8)) : 0;
  std::unique_ptr<TraceReader> reader;
  try {
    reader = open_trace(runs[shared[0]].trace, ro);
  } catch (...) {
    for (size_t i : shared) errors[i] = std::current_exception();
    return;
  }
  const nlohmann::json header = reader->header();
  const Recording recording = reader->recording();
  // Spinning consumers only when this decode's threads (the reader, the consumers, the line
  // parsers) fit in its share of the threads, and every thread of the call has a core.
  BatchStream stream(consumers, may_spin && !inline_reader && busy + ro.decode_threads <= threads);
  std::thread producer;
  if (!inline_reader) producer = std::thread([&] { stream.produce(*reader); });
  on_threads(consumers, static_cast<unsigned>(consumers), [&](size_t c) {
    std::vector<std::pair<size_t, std::unique_ptr<Engine>>> engines;
    for (size_t k = c; k < shared.size(); k += consumers) {
      size_t i = shared[k];
      try {
        engines.emplace_back(i, std::make_unique<Engine>(runs[i], registry));
        engines.back().second->begin(header, recording);
      } catch (...) {
        errors[i] = std::current_exception();
        engines.pop_back();
      }
    }
    Event scratch;  // packed events are unpacked here
    for (size_t b = 0; !engines.empty(); ++b) {
      if (inline_reader)
        stream.produce_one(*reader);
      else
        stream.help(*reader, b);
      auto batch = stream.get(c, b);
      for (auto it = engines.begin(); it != engines.end();) {
        bool done = false;
        try {
          if (batch) {
            check_cancel(runs[it->first]);  // once per batch (kBatch events)
            for (size_t k = 0, n = batch->size; k < n; ++k) it->second->feed(batch->get(k, scratch));
          } else {
            if (stream.end().error) std::rethrow_exception(stream.end().error);
            it->second->set_trace_facts(stream.end().digest, stream.end().timed);
            out[it->first] = it->second->end(stream.end().skipped_frees);
            done = true;
          }
        } catch (...) {
          errors[it->first] = std::current_exception();
          done = true;
        }
        it = done ? engines.erase(it) : it + 1;
      }
    }
    stream.leave(c);
  });
  if (producer.joinable()) producer.join();
}

}  // namespace

std::vector<RunResult> run_simulations(const std::vector<RunOptions>& runs, const Registry& registry,
                                       unsigned threads) {
  const bool every_core = threads == 0;  // then one replay thread per core, beside the reader
  if (every_core) threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<RunResult> out(runs.size());
  std::vector<std::exception_ptr> errors(runs.size());
  // Online runs of the same trace (read the same way) share one decode; offline ones, and runs
  // given their events by a source, read on their own.
  std::map<std::pair<std::string, bool>, std::vector<size_t>> by_trace;
  std::vector<size_t> alone;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].source || registry.find(runs[i].policy.name).needs_lifetimes)
      alone.push_back(i);
    else
      by_trace[{runs[i].trace, runs[i].lenient}].push_back(i);
  }
  std::vector<std::vector<size_t>> groups;
  for (auto& [key, members] : by_trace) {
    // One run alone, with no second thread for a reader (or beside other traces that keep the
    // threads busy): nothing to share.
    if (members.size() == 1 && (threads < 2 || by_trace.size() > 1))
      alone.push_back(members[0]);
    else
      groups.push_back(std::move(members));
  }
  std::sort(alone.begin(), alone.end());
  // Runs that read the trace themselves, in parallel.
  on_threads(alone.size(), threads, [&](size_t k) {
    try {
      out[alone[k]] = run_alone(runs[alone[k]], registry);
    } catch (...) {
      errors[alone[k]] = std::current_exception();
    }
  });
  // Then the shared decodes: one trace uses every thread; several share them out.
  // Consumers spin for their batches only when every thread of the call has a core it may run on
  // (the reader, the consumers and the line parsers of every trace decoded side by side).
  const bool may_spin = threads <= usable_cores();
  if (groups.size() == 1) {
    replay_shared(runs, groups[0], registry, threads, every_core, may_spin, out, errors);
  } else if (!groups.empty()) {
    const unsigned at_once = static_cast<unsigned>(std::min<size_t>(groups.size(), threads));
    on_threads(groups.size(), at_once, [&](size_t g) {
      replay_shared(runs, groups[g], registry, std::max(1u, threads / at_once), false, may_spin, out, errors);
    });
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace fragsim

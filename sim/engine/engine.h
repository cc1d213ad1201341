// Running simulations: what a run is given (RunOptions) and the calls that run one or several
// (the engine itself: sim/engine/engine_impl.h; results: sim/engine/run_result.h).
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hardware_models/hardware_model.h"
#include "policies/policy.h"
#include "sim/engine/replay_sink.h"
#include "sim/engine/run_result.h"
#include "sim/engine/window.h"
#include "traces/trace_reader.h"

namespace fragsim {

struct HistorySpec;  // sim/engine/history.h

struct PolicySpec {
  std::string name;
  nlohmann::json config = nlohmann::json::object();
};

// Opens the trace as a validated event stream (a file by default; tests may feed events).
using TraceSource = std::function<std::unique_ptr<TraceReader>()>;

struct RunOptions {
  std::string trace;
  TraceSource source;  // empty: open `trace` by its extension
  // A trace held in memory (a front end's): its size, what the input limits scale with; `trace`
  // then only names it (no file of that name is measured). Unset: the size of the file `trace`.
  std::optional<std::uint64_t> held_bytes;
  PolicySpec policy;
  HardwareModel hw;
  bool keep_going = false;
  bool lenient = false;
  bool check = false;  // validate() after every event
  // Place every allocation the recording placed where it was, predict the others (sim/engine/recording_fidelity.h).
  bool follow_recording = false;
  // Use the usable device memory an importer inferred from the recording (the trace header's
  // recorded_devices) for those devices; false when the user chose the hardware (--hw/--capacity).
  bool recorded_devices = true;
  // The state before a mid-run recording: as recorded or re-held (sim/engine/prior_state.h).
  PriorOptions prior;
  std::string placements;  // JSONL output path, empty = none
  ReplaySinkFactory sink;  // an output that follows the replay (Perfetto: sim/report/perfetto.h), empty = none
  // Keep every live buffer (up to kMaxMapBlocks) at the moments reports show, so that an address
  // map can name the buffer behind each block (the HTML report); off for plain runs and sweeps.
  bool keep_live_buffers = false;
  Window window;                               // --from/--to: the events the timelines show (sim/engine/window.h)
  std::shared_ptr<const HistorySpec> history;  // record the run's history (sim/engine/history.h); null = none
  // The regions an earlier replay of this run moved (RunResult::region_moves): obtained where they
  // went from the start.
  std::vector<RegionMove> region_moves;
  std::vector<std::string> notes;  // lines for the text report (e.g. how --env was interpreted)
  std::string label;               // how reports name the run when several are shown (compare, batch)
  std::string setting;  // a what-if's setting in the recording framework's words, shown beside the label ("": none)
  // An output lists every device number up to the largest (--export-snapshot): a device number past
  // the devices limit is an input error as soon as the trace names it (check_device_lists), before
  // the run's placements or Perfetto file is written.
  bool device_lists = false;
  std::uint64_t shard = 1;  // --shard N: the policy stores 1/N of each array per device (requested stays whole)
  // Whose words advice and sweeps use: the recording's framework, the platform of the device the run
  // models (sim/commands/run_setup.h, vocabulary_of).
  Vocabulary vocab;
  // The policy, as configured, is the model of the allocator that made the recording (the policy the
  // recording gets by default): its fidelity measures the model. Another's (ideal, best-fit, a
  // what-if allocator) is kept in the JSON but not printed.
  bool models_recording = false;
  // Set from another thread to stop the run (a front end's Ctrl-C): checked every kCancelEvents
  // events replayed (every batch when engines share a decode); the run then throws Cancelled and
  // commits no output. nullptr: never.
  const std::atomic<bool>* cancel = nullptr;
};

// What a cancelled run throws (RunOptions::cancel); never a result.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};
inline constexpr std::uint64_t kCancelEvents = 4096;
// Throws Cancelled when the run's cancel flag is set.
inline void check_cancel(const RunOptions& o) {
  if (o.cancel && o.cancel->load(std::memory_order_relaxed)) throw Cancelled();
}

// Runs one simulation. Throws InputError (bad trace/config), EnvError (I/O), std::logic_error
// (a policy invariant broken under --check).
[[nodiscard]] RunResult run_simulation(const RunOptions& opt, const Registry& registry);

// Runs several simulations on at most `threads` threads (0 = one replay thread per core, plus the
// reader; 1 = everything on the calling thread). The online runs of a trace share one decode of
// it: a reader thread cuts it into batches of events that each of their engines replays, and
// threads the replays leave free parse JSONL lines for the reader; several traces go in
// parallel, the threads shared out among them. Runs whose policy plans offline (static-heap)
// read their trace on their own. Results are in `runs` order and equal to run_simulation's one
// by one; when runs fail, the error thrown is the one the first failing run (in order) would
// have thrown alone.
[[nodiscard]] std::vector<RunResult> run_simulations(const std::vector<RunOptions>& runs, const Registry& registry,
                                                     unsigned threads = 0);

}  // namespace fragsim

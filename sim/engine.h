// Engine: the discrete-event replay (architecture.md).
//
// Pops the earliest event — trace events in file order (time is non-decreasing) interleaved with
// deferred internal events (policy-scheduled, ordered by (time, sequence)) — routes it to the
// policy of its (device, space), and records metrics. One policy instance per (device, space),
// created on first use. Requested-byte accounting depends on the trace alone, so after the first
// OOM (without --keep-going) the rest of the trace is still read and validated, but not replayed.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hardware_models/hardware_model.h"
#include "policies/policy.h"
#include "traces/trace_reader.h"

namespace fragsim {

struct PolicySpec {
  std::string name;
  nlohmann::json config = nlohmann::json::object();
};

// Opens the trace as a validated event stream (a file by default; tests may feed events).
using TraceSource = std::function<std::unique_ptr<TraceReader>()>;

struct RunOptions {
  std::string trace;
  TraceSource source;  // empty: open `trace` by its extension
  PolicySpec policy;
  HardwareModel hw;
  bool keep_going = false;
  bool lenient = false;
  bool check = false;  // validate() after every event
  // Place every allocation the recording placed where it was, predict the others (sim/recording_fidelity.h).
  bool follow_recording = false;
  // Use the usable device memory an importer inferred from the recording (the trace header's
  // recorded_devices) for those devices; false when the user chose the hardware (--hw/--capacity).
  bool recorded_devices = true;
  std::string placements;  // JSONL output path, empty = none
  std::string perfetto;    // Chrome trace-event JSON output path (sim/perfetto.h), empty = none
  // Keep every live buffer (up to kMaxMapBlocks) at the moments reports show, so that an address
  // map can name the buffer behind each block (the HTML report); off for plain runs and sweeps.
  bool keep_live_buffers = false;
  std::vector<std::string> notes;  // lines for the text report (e.g. how --env was interpreted)
};

// A buffer as reports show it.
struct BufferView {
  AllocId id;
  std::uint64_t event_index = 0;  // of its alloc
  Tick t;
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Bytes requested = 0;  // what the program asked for
  Bytes block = 0;      // what the policy placed: rounded, padded (TPU tiles), unsplit remainders
  bool has_addr = false;
  Addr addr;
  std::string name;
  Dtype dtype = Dtype::kNone;
  std::vector<std::uint64_t> shape;
  bool has_shape = false;
  std::uint64_t stack = 0;       // stack id (frames in RunResult::stacks), 0 = none
  std::uint64_t age_events = 0;  // events from its alloc to the moment shown
};

// One (device, space) at one moment: the fragmentation figures of docs/metrics.md.
struct SpaceMoment {
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Bytes allocated = 0, reserved = 0, largest_free = 0;
  Bytes unused() const { return reserved > allocated ? reserved - allocated : 0; }  // reserved, not allocated
  double unused_share() const { return reserved ? static_cast<double>(unused()) / static_cast<double>(reserved) : 0; }
  double external() const;  // 1 − largest free / free (free = unused), 0 when nothing is free
  MemoryMap map;            // regions and blocks (capped: truncated says so)
  bool truncated = false;
};

// What reports show about one moment (the peak of allocated memory, an OOM).
struct Moment {
  std::uint64_t event_index = 0;
  Tick t;
  Bytes allocated = 0, reserved = 0;
  std::uint64_t live_buffers = 0;
  std::vector<BufferView> top_buffers;  // the largest live buffers, by block size
  std::vector<BufferView> live;         // every live buffer placed at an address (keep_live_buffers)
  bool live_truncated = false;          // more than kMaxMapBlocks were live
  std::vector<SpaceMoment> spaces;
};

struct OomRecord {
  std::uint64_t event_index = 0;
  Tick t;
  AllocId id;
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Bytes requested = 0, rounded = 0, allocated = 0, reserved = 0, free = 0, largest_free = 0;
  bool fragmentation = false;    // cause
  std::string explanation;       // the policy's own OOM dump (text output)
  std::string kind;              // non-empty for special OOMs (e.g. "scoped_vmem_limit")
  BufferView request;            // the failing request: name, shape, dtype, stack; block = rounded/padded
  std::optional<Moment> moment;  // what was live and free then (the first few OOMs)
};

struct MarkView {
  std::string name;
  std::uint64_t event_index = 0;
  Tick t;
};

struct SpaceResult {
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Bytes peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  double frag_at_peak = 0, frag_max = 0;
  SpaceMoment at_peak_allocated;  // this space's figures when its allocated memory peaked
  double external_max = 0;        // the largest external fragmentation seen
  std::uint64_t device_allocs = 0, device_frees = 0, device_failed = 0;
  double device_time_ns = 0;
  Bytes final_allocated = 0, final_reserved = 0;
  std::vector<OomRecord> ooms;
  nlohmann::json stats = nlohmann::json::object();
  nlohmann::json extra = nlohmann::json::object();
};

// Memory over time, decimated to at most kMaxPoints by merging neighbours (keeping maxima), so
// peaks survive whatever the trace length. One point per `stride` events.
struct TimelinePoint {
  std::uint64_t event_index = 0;
  Bytes requested = 0, allocated = 0, reserved = 0;
  double fragmentation = 0;
};

struct RunResult {
  std::string trace_path;
  std::uint64_t events = 0, allocs = 0, frees = 0, skipped_frees = 0;
  std::string trace_digest;  // TraceReader::digest(): the same trace in any encoding
  nlohmann::json header;
  std::string policy_name;
  std::string label;  // how compare names this run (policy name and its per-entry options)
  nlohmann::json policy_config;
  nlohmann::json hardware;
  bool completed = true;
  Bytes peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  double frag_at_peak = 0, frag_max = 0;
  std::vector<OomRecord> ooms;
  std::vector<SpaceResult> spaces;
  std::vector<TimelinePoint> timeline;  // all devices and spaces together
  std::vector<std::string> notes;
  bool stopped_early = false;     // stopped replaying at the first OOM
  nlohmann::json fidelity;        // recorded vs simulated addresses/segments; null when the trace has none
  std::string nothing_to_replay;  // why the recording holds nothing to replay (sim/recording_fidelity.h), or empty
  std::uint64_t empty_cache_calls = 0;
  std::string empty_cache_effect;  // what the policy did on the last one, in its words
  std::string fatal;               // the allocator aborted the process (message); replay stopped
  std::uint64_t fatal_event = 0;
  std::optional<Moment> peak;   // the moment allocated memory (all devices and spaces) peaked
  std::vector<MarkView> marks;  // the trace's marks (steps, phases), the first kMaxMarks
  std::map<std::uint64_t, std::vector<std::string>> stacks;  // frames of the stacks reported buffers name
  std::string time_unit = "ns";
};

inline constexpr size_t kTopBuffers = 20;       // largest live buffers listed at a moment
inline constexpr size_t kDetailedOoms = 10;     // OOMs that keep a Moment and the allocator's own explanation
inline constexpr size_t kMaxMapBlocks = 50000;  // blocks kept in a memory map
inline constexpr size_t kMaxMarks = 2000;

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

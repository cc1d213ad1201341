// Engine: the discrete-event replay (architecture.md).
//
// Pops the earliest event — trace events in file order (time is non-decreasing) interleaved with
// deferred internal events (policy-scheduled, ordered by (time, sequence)) — routes it to the
// policy of its (device, space), and records metrics. One policy instance per (device, space),
// created on first use. Requested-byte accounting depends on the trace alone, so after the first
// OOM (without --keep-going) the rest of the trace is still read and validated, but not replayed.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
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
  bool check = false;              // validate() after every event
  // Use the usable device memory an importer inferred from the recording (the trace header's
  // recorded_devices) for those devices; false when the user chose the hardware (--hw/--capacity).
  bool recorded_devices = true;
  std::string placements;          // JSONL output path, empty = none
  std::vector<std::string> notes;  // lines for the text report (e.g. how --env was interpreted)
};

struct OomRecord {
  std::uint64_t event_index = 0;
  Tick t;
  AllocId id;
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Bytes requested = 0, rounded = 0, allocated = 0, reserved = 0, free = 0, largest_free = 0;
  bool fragmentation = false;  // cause
  std::string explanation;     // the policy's own OOM dump (text output)
  std::string kind;            // non-empty for special OOMs (e.g. "scoped_vmem_limit")
};

struct SpaceResult {
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Bytes peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  double frag_at_peak = 0, frag_max = 0;
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
  bool stopped_early = false;  // stopped replaying at the first OOM
  nlohmann::json fidelity;     // recorded vs simulated addresses/segments; null when the trace has none
  std::uint64_t empty_cache_calls = 0;
  std::string empty_cache_effect;  // what the policy did on the last one, in its words
  std::string fatal;           // the allocator aborted the process (message); replay stopped
  std::uint64_t fatal_event = 0;
};

// Runs one simulation. Throws InputError (bad trace/config), EnvError (I/O), std::logic_error
// (a policy invariant broken under --check).
[[nodiscard]] RunResult run_simulation(const RunOptions& opt, const Registry& registry);

}  // namespace fragsim

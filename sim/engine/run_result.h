// The result of a run: the one model every output renders (architecture.md, "Report").
//
// Every figure is computed once, in the engine and its metrics, per (device, memory space): a
// SpaceResult holds that space's peaks, fragmentation, timeline, the moment its allocated memory
// peaked and its OOMs. The run's own figures are either one space's — the binding space: the one
// that failed first, else the one that used the largest share of what it can give — or sums over
// every space at one moment, which reports label as sums and never divide. Text, JSON, HTML,
// Perfetto, check and merge print these fields; none computes a figure of its own.
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "policies/policy.h"
#include "sim/engine/prior_state.h"
#include "traces/xla_modules.h"

namespace fragsim {

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
  Bytes allocated = 0, reserved = 0;
  Bytes largest_free = 0;  // the largest free block inside reserved memory
  Bytes unused() const { return reserved > allocated ? reserved - allocated : 0; }  // reserved, not allocated
  double unused_share() const { return reserved ? static_cast<double>(unused()) / static_cast<double>(reserved) : 0; }
  double external() const { return external_fragmentation(reserved, allocated, largest_free); }
  MemoryMap map;  // regions and blocks (capped: truncated says so)
  bool truncated = false;
};

using StackFrames = std::map<std::uint64_t, std::vector<std::string>>;  // stack id → frames, innermost first

// Live bytes of one call site at a moment: the buffers of one (stack, name) (sim/engine/site_grouper.h
// groups them; sim/report/by_stack.h renders them).
struct SiteBytes {
  std::uint64_t stack = 0;  // stack id (frames in RunResult::stacks), 0 = none
  std::string name;         // the buffers' name ("" = none)
  Bytes bytes = 0;          // Σ block bytes
  Bytes requested = 0;      // Σ requested bytes
  std::uint64_t buffers = 0;
};

// What reports show about one moment (a space's peak of allocated memory, an OOM) of the spaces
// it concerns: one space at its peak; the failing device's spaces at an OOM.
struct Moment {
  std::uint64_t event_index = 0;
  Tick t;
  Bytes allocated = 0, reserved = 0;    // of the spaces below
  std::uint64_t live_buffers = 0;       // in those spaces
  std::vector<BufferView> top_buffers;  // the largest live buffers, by block size
  std::vector<BufferView> live;         // every live buffer placed at an address (keep_live_buffers)
  bool live_truncated = false;          // more than kMaxMapBlocks were live
  std::vector<SpaceMoment> spaces;
  // Every live buffer grouped by (stack, name), the most bytes first: at most kMaxSites, the rest
  // summed in other_sites.
  std::vector<SiteBytes> sites;
  SiteBytes other_sites;
};

struct OomRecord {
  std::uint64_t event_index = 0;
  Tick t;
  AllocId id;
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Bytes requested = 0, rounded = 0, allocated = 0, reserved = 0;
  Bytes free = 0;          // everything the policy could still give: free reserved memory and what the device has left
  Bytes largest_free = 0;  // the largest block it could still give: a free block, or fresh device memory
  Bytes needed = 0;        // what the allocator needed of its free memory (AllocatorPolicy::oom_need)
  bool fragmentation = false;    // cause: free >= needed
  std::string explanation;       // the policy's own OOM dump (text output)
  std::string kind;              // non-empty for special OOMs (e.g. "scoped_vmem_limit")
  BufferView request;            // the failing request: name, shape, dtype, stack; block = rounded/padded
  std::optional<Moment> moment;  // what was live and free on its device then (the first few OOMs)
  // A block live when recording began that the run could not re-hold (sim/engine/prior_state.h):
  // the state before the trace does not fit, whatever the trace does next.
  bool before_trace = false;
  Bytes prior_live = 0;  // then: the bytes live when recording began on its space
};

// Why an OOM happened, as every output names it (contracts §2): "fragmentation" when what the
// policy could still give covers the request after its rounding (no block fitted), else
// "capacity". A policy's special kind (OomRecord::kind) is shown beside it.
std::string oom_cause(const OomRecord& o);

struct MarkView {
  std::string name;
  std::uint64_t event_index = 0;
  Tick t;
};

// Memory over time, decimated to at most kMaxPoints by merging neighbours (keeping maxima), so
// peaks survive whatever the trace length.
struct TimelinePoint {
  std::uint64_t event_index = 0;
  Bytes requested = 0, allocated = 0, reserved = 0;
  double fragmentation = 0;
};

// The best static plan of one space's buffers (sim/commands/waste.h): the memory a perfect
// placement of the same buffers needs, beside what the allocator reserved. Filled by the commands
// that report it; `planned` false (and `skipped` saying why, when it was asked for) otherwise.
struct PlanFigures {
  bool planned = false;
  Bytes height = 0;                         // the plan's height
  Bytes live = 0;                           // the most bytes live at once (no placement needs less)
  bool optimal = false, cut_short = false;  // proven optimal; the time budget ended the search
  double seconds = 0, budget = 0;           // time taken, time allowed
  std::string skipped;                      // why no plan was made ("" = planned, or not asked for)
};

struct SpaceResult {
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Bytes capacity = 0;            // the space's total as the device reports it (a recording's where it says)
  Bytes usable = 0;              // what allocators can obtain: capacity − reserve
  bool usable_inferred = false;  // usable is what the recording implies (RunOptions::recorded_devices), not a preset's
  bool unbounded = false;        // no limit applies (capacity and usable 0): Recording::host_unbounded
  Bytes limit = 0;               // the policy's own cap below that (AllocatorPolicy::limit), 0 = none
  Bytes reserve_limit = 0;       // the most all its pools may reserve (AllocatorPolicy::reserve_limit), 0 = none
  Bytes preallocated = 0;        // what it reserves by its configuration (AllocatorPolicy::preallocated)
  Bytes peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  double frag_at_peak = 0;  // external fragmentation when reserved memory first reached its peak
  double frag_max = 0;      // the largest external fragmentation seen
  // The peak reserved memory was all obtained by the space's first event that reserved any (a pool
  // preallocated, a runtime's whole arena, or the state a mid-run recording began with) and never
  // grew: no placement of the buffers after it changes how much is reserved.
  bool reserved_up_front = false;
  // Its peak reserved memory was all held by the state before a mid-run recording began: the
  // recording's own events never reserved more (a profiler trace's window of a loop in its steady
  // state). That memory was sized by demand before the recording, which it does not show.
  bool reserved_before_recording = false;
  SpaceMoment at_peak_allocated;  // this space's figures when its allocated memory first peaked
  std::optional<Moment> peak;     // what was live then (buffers, memory map)
  std::uint64_t device_allocs = 0, device_frees = 0, device_failed = 0;
  double device_time_ns = 0;
  Bytes final_allocated = 0, final_reserved = 0;
  std::vector<OomRecord> ooms;
  // Allocations of this space after the run stopped (its first OOM or an abort, maybe another
  // device's), never replayed: its figures end at the stop.
  std::uint64_t allocs_not_replayed = 0;
  // The event where its process's replay stopped (without --keep-going: that process's first OOM,
  // or an abort); unset when it replayed to the end. A set of recordings' other ranks go on.
  std::optional<std::uint64_t> stopped_at;
  std::vector<TimelinePoint> timeline;
  nlohmann::json stats = nlohmann::json::object();
  std::optional<AllocatorPolicy::CompileTimePlan> compile_time_plan;  // an offline planner's (static-heap)
  nlohmann::json extra = nlohmann::json::object();
  nlohmann::json snapshot_settings;   // AllocatorPolicy::snapshot_allocator_settings(), null = none
  std::optional<PriorOutcome> prior;  // the state before a mid-run recording, and how it was held
  PlanFigures plan;                   // the waste split's plan (sim/commands/waste.h)
  // It reserved all of its peak up front, and either held no state from before a recording or was
  // configured to reserve that much whatever the buffers ask (a preallocated pool, with the
  // recording's state placed in it): its reserved memory beyond the waste split's plan is that
  // pool's size, not fragmentation — no placement lowers it (a placement decides only whether the
  // buffers fit in it). The report and the advice say so instead of "a better placement recovers"
  // (docs/metrics.md). Memory a mid-run recording's state held without such a configuration (a
  // caching allocator's segments) was sized by earlier placements: that stays in the split.
  bool pool_held_up_front() const {
    return reserved_up_front && (!prior || (preallocated && peak_reserved <= preallocated));
  }
  // Its reserved memory beyond the plan cannot be told from demand the recording does not show: all
  // of it was reserved before the recording began, and not as a pool configured up front. The
  // waste split says so instead of calling it fragmentation a better placement recovers.
  bool reserved_unexplained() const { return reserved_before_recording && !pool_held_up_front(); }
  // The share of what this space can give that it reserved at its peak (0 when it gives nothing).
  double peak_share() const { return usable ? static_cast<double>(peak_reserved) / static_cast<double>(usable) : 0.0; }
};

struct RunHistory;  // sim/engine/history.h

// A region a policy placed at an address it made up and moved, at event `event`, to where the
// recording's driver had put it (DeviceMemory::move: XLA's BFC, once the recording shows a buffer in
// it). Another replay of the run is given them (RunOptions::region_moves) and obtains each such region
// there from the start, so that what it records before the move names the recorded addresses.
struct RegionMove {
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  Addr from;
  Bytes bytes = 0;
  Addr to;
  std::uint64_t event = 0;
};

struct RunResult {
  std::string trace_path;
  std::uint64_t events = 0, allocs = 0, frees = 0, skipped_frees = 0;
  std::string trace_digest;  // TraceReader::digest(): the same trace in any encoding
  nlohmann::json header;
  std::string policy_name;
  std::string label;              // how several runs shown together are told apart (compare, batch)
  std::string setting;            // RunOptions::setting: the framework's words for a what-if ("": none)
  bool models_recording = false;  // RunOptions::models_recording: the text shows its fidelity
  nlohmann::json policy_config;
  nlohmann::json hardware;
  bool completed = true;
  // Sums over every space at one moment: the peak over time of the total. For a single space
  // they are that space's figures; for several, reports label them sums.
  Bytes peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  std::vector<OomRecord> ooms;      // every space's, in event order
  std::vector<SpaceResult> spaces;  // by (device, space)
  // The space that binds (index into spaces): the first OOM's, else the largest peak_share().
  size_t binding = 0;
  std::string binding_reason;  // "the first OOM", "the largest share of its memory"
  std::vector<std::string> notes;
  std::vector<std::string> advice;  // proven by replay (sim/commands/advice.h); filled by the caller that asks for it
  bool stopped_early = false;       // stopped replaying at the first OOM
  std::uint32_t processes_stopped = 0;  // how many processes stopped (a set of recordings: one per member)
  std::uint32_t processes = 1;          // how many it replays (Recording::processes)
  std::vector<RegionMove> region_moves;
  bool several_streams = false;  // allocations on more than one stream (--export-snapshot writes one)
  nlohmann::json fidelity;       // recorded vs simulated addresses/segments; null when the trace has none
  // Why the recording holds nothing to replay (sim/engine/recording_fidelity.h), or empty.
  std::string nothing_to_replay;
  std::map<std::uint32_t, std::string> device_names;  // what the recording calls its devices ("rank 3", "host1:0")
  std::uint64_t empty_cache_calls = 0;
  std::uint64_t empty_cache_maybe_retries = 0;  // of those, releases the recording leaves open (kReleaseMaybeRetry)
  std::string empty_cache_effect;               // what the policy did on the last one, in its words
  std::string fatal;                            // the allocator aborted the process (message); replay stopped
  std::uint64_t fatal_event = 0;
  std::uint64_t shard = 1;         // RunOptions::shard: allocated and reserved are one device's share of each array
  std::uint32_t fatal_device = 0;  // the (device, space) whose allocator aborted
  Space fatal_space = Space::kHbm;
  // The space did not complete: an OOM on it, or its allocator aborted the process.
  bool space_failed(const SpaceResult& s) const {
    return !s.ooms.empty() || (!fatal.empty() && s.device == fatal_device && s.space == fatal_space);
  }
  std::vector<MarkView> marks;  // the trace's marks (steps, phases), the first kMaxMarks
  // What the recorded program did besides allocating, where it did it: its empty_cache calls and
  // the OOMs the recording saw (named "empty_cache", "recorded OOM"), the first kMaxMarks.
  std::vector<MarkView> actions;
  StackFrames stacks;  // frames of the stacks reported buffers name
  std::string time_unit = "ns";
  Tick first_t;        // the time of the first event (reports show times from it)
  bool timed = false;  // some event carried a time; else every t is the event's index and no time is shown
  // --from/--to: the events of the window (timelines show these); the whole run without one.
  std::uint64_t window_first = 0, window_last = 0;
  std::string window;                                // how reports name it ("" = the whole run)
  std::shared_ptr<const RunHistory> history;         // buffers, allocator states (sim/engine/history.h), when asked
  std::shared_ptr<const RunHistory> export_history;  // every change of the run, for --export-snapshot
  // The compiled modules of the recording (an XProf capture, an HloProto) with fragsim's plan of
  // each, for the page (sim/commands/module_plans.h); null when not asked or there are none.
  std::shared_ptr<const std::vector<ModuleView>> modules;

  bool several_spaces() const { return spaces.size() > 1; }
  const SpaceResult* binding_space() const { return spaces.empty() ? nullptr : &spaces[binding]; }
  const SpaceResult* space(std::uint32_t device, Space sp) const {
    for (const auto& s : spaces)
      if (s.device == device && s.space == sp) return &s;
    return nullptr;
  }
  // The moment reports show as the run's peak: the binding space's.
  const Moment* peak() const {
    const SpaceResult* s = binding_space();
    return s && s->peak ? &*s->peak : nullptr;
  }
};

inline constexpr size_t kTopBuffers = 20;       // largest live buffers listed at a moment
inline constexpr size_t kDetailedOoms = 10;     // OOMs that keep a Moment and the allocator's own explanation
inline constexpr size_t kMaxMapBlocks = 50000;  // blocks kept in a memory map
inline constexpr size_t kMaxMarks = 2000;
inline constexpr size_t kMaxTimelinePoints = 2048;
inline constexpr size_t kMaxSites = 2000;  // call sites kept per moment (Moment::sites)

}  // namespace fragsim

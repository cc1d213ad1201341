// AllocatorPolicy: the interface between the engine and an allocator model (architecture.md).
//
// One instance serves one (device, memory space). A policy never reads the trace: it sees typed
// AllocRequests and releases by Handle, obtains memory only through its DeviceMemory (grants
// that give the memory back when the policy goes), and may schedule deferred work (stream-ordered
// frees, pool trims) through the Scheduler, keeping the returned task: a task whose owner has
// gone never runs. Failure to place is a value (Placement::ok == false), never an exception.
//
// Building a policy takes two steps (as Ramulator 2 builds modules): the registry's `configure`
// reads and checks the config against the hardware (no device memory is touched, so configs are
// validated without building anything) and returns a builder; the builder makes instances.
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hardware_models/device_memory.h"
#include "hardware_models/hardware_model.h"
#include "sim/base/config.h"
#include "sim/base/event.h"
#include "sim/base/option_names.h"
#include "sim/base/recording.h"

namespace fragsim {

// What a policy knows of one allocation: typed fields, never the trace record.
struct AllocRequest {
  Handle handle = kNoHandle;  // dense id of the allocation among this policy's own (per device and space)
  AllocId id;
  Bytes size = 0;  // requested bytes
  std::int64_t stream = 0;
  Space space = Space::kHbm;
  Tick t;
  std::uint64_t event_index = 0;         // the alloc's event_index (offline planners key on it)
  Dtype dtype = Dtype::kNone;            // kNone: the trace gave no dtype
  std::span<const std::uint64_t> shape;  // logical shape, major to minor (valid for the call only)
  bool has_shape = false;                // shape given (an empty shape is then a scalar)
  std::optional<Addr> seeded_at;         // allocated before the trace began, at this recorded address
  Bytes seeded_block = 0;                // …in a block of this many bytes, when the recording says (0: unknown)
  // Allocated before the trace began, at addresses the recording never states but its other
  // addresses imply (sim/engine/recording_anchor.h): the request's bytes lie in these extents (their
  // sizes sum to at least size). Valid for the call only; empty when not inferred.
  std::span<const Extent> seeded_extents;
  // Where the recording placed this allocation (traces with addresses). A policy must decide as
  // the real allocator does; it may use this only where the real allocator took the address from
  // the driver (a new region's base), never to choose among its own blocks.
  std::optional<Addr> recorded_addr;
  // The bytes of several allocations made before the trace began that the recording does not list
  // one by one (their sizes unknown): held as they are, never rounded as one request of that size.
  bool aggregate = false;
  // Bytes live before the trace at addresses the recording never states, re-held under other
  // settings (not seeded): the pieces the recording's other addresses put some of them in
  // (sim/engine/recording_anchor.h; their addresses are the recording's, not this run's), the rest
  // elsewhere. Pieces apart held different allocations, so an allocator that obtains memory per
  // request holds each piece, and the rest, as a request of its own rather than one request of their
  // sum. Valid for the call only; empty when not inferred (one request of `size`).
  std::span<const Extent> held_pieces;
};

// A request whose shape outlives the call (policies that re-place buffers keep these).
struct OwnedRequest {
  AllocRequest req;
  std::vector<std::uint64_t> shape;
  explicit OwnedRequest(const AllocRequest& r = {}) : req(r), shape(r.shape.begin(), r.shape.end()) {
    req.seeded_extents = {};  // valid for the call only
    req.held_pieces = {};
  }
  AllocRequest get() const {
    AllocRequest r = req;
    r.shape = shape;
    return r;
  }
};

// What the recording allocator or driver did (trace observations), for policies that seed or
// check themselves against it.
struct Observation {
  Op op = Op::kMark;
  Addr addr;
  bool has_addr = false;
  Bytes size = 0;
  std::int64_t stream = 0;
  bool pre_trace = false;  // state that existed before the trace began (seed it)
  // A segment_alloc that is an XProf capture's BFC region, as its addresses imply
  // (sim/engine/recording_anchor.h), not a segment the trace records: an allocator of another kind
  // (PyTorch's) never held it.
  bool bfc_region = false;
};

// ---- State held before a mid-run recording began (sim/engine/prior_state.h) ----
//
// A recording that starts mid-run (a PyTorch snapshot's ring buffer, a capture's window) shows what
// its allocator held when recording began: the blocks live then, and the segments or mapped ranges
// that held them and the cache around them. A policy that makes the recording allocator's decisions
// with the recorded settings takes that state as recorded (seeded_at, pre_trace observations). Any
// other run re-holds it: the engine replays a history the recording implies, made of
//   1. the requests that made the recording's allocator obtain its regions (prior_requests: which
//      requests, in which order, and how long each is held), then
//   2. the blocks live when recording began, allocated in address order,
// through allocate() as any request, so that the what-if's rules, limits and rounding apply from
// the first byte (docs/report.md, "Before the recording").

// A block live when recording began, inside a PriorRegion.
struct PriorBlock {
  Addr addr;
  Bytes size = 0;          // requested bytes
  size_t id = 0;           // the engine's handle for it (PriorRequest::live)
  bool aggregate = false;  // the bytes of several unlisted allocations (AllocRequest::aggregate)
  // The trace frees it before it obtains any memory of its own (a segment, a mapped page): nothing
  // the recording shows has it in use at a moment the allocator needed more memory (a steady
  // state's loop buffers), so a segment's history does not hold it (for_each_region_piece).
  bool freed_unproven = false;
};

// A region the recording's allocator held when recording began: a segment (cudaMalloc) or a
// mapped range of a reservation (expandable segments).
struct PriorRegion {
  Addr addr;
  Bytes size = 0;
  std::int64_t stream = 0;
  bool mapped_range = false;  // a segment_map range of a reservation, not a segment of its own
  bool aggregate = false;     // reserved memory of several segments the recording does not list
  // The blocks live in it when recording began, by address (PriorBlock).
  std::vector<PriorBlock> live;
};

// A region's memory piece by piece, in address order: gap(bytes) before each live block and after
// the last (bytes may be 0), block(b) for each live block, which reaches extent(b.size) past its
// address (an allocator's rounding). A block that starts inside the one before it is skipped: the
// recording contradicts itself. One reading for a segment's history and a mapped range's; in a
// segment's (unproven_in_gaps), a block freed_unproven is no piece of its own but part of the gap
// around it. A segment was obtained whole, for one request, and a block in it may have been
// allocated at any time after: the history holds a live block while other regions are obtained
// only when the recording proves it was in use at such a moment (it stays live through the trace,
// or the trace obtains memory while it is live); else it was the program's work of the moment,
// allocated in memory the history had left free, and the engine places it after the history. A
// mapped range grew page by page for the blocks carved in it: its blocks stay pieces at their turn.
template <class Gap, class Block, class Extent>
void for_each_region_piece(const PriorRegion& r, bool unproven_in_gaps, Gap gap, Block block, Extent extent) {
  Addr at = r.addr;
  for (const PriorBlock& b : r.live) {
    if (b.addr < at || (unproven_in_gaps && b.freed_unproven)) continue;
    gap(b.addr - at);
    block(b);
    at = std::min(r.addr + r.size, b.addr + extent(b.size));
  }
  gap(r.addr + r.size - at);
}

// How much of the recording's reserved memory the history treats as demand the program once had.
enum class PriorHistory : std::uint8_t {
  kLikely,  // the policy's reading of the regions (prior_requests' contract)
  kLeast,   // none: only the blocks live when recording began (the least memory the state needs)
  kMost,    // every region's request, all held together (the recording's reserved memory as demand)
};

// One request of that history. It is released just before request `released_before` of the list
// is made (list size or more: after the last one), and always before the live blocks are placed.
// A request may instead be a live block itself (live = its PriorBlock::id): the engine places that
// block there, in the history's order, and never releases it; the blocks no request names follow
// the history.
struct PriorRequest {
  Bytes size = 0;
  std::int64_t stream = 0;
  size_t released_before = SIZE_MAX;
  size_t live = SIZE_MAX;
  // The region it stands for holds an aggregate (PriorBlock::aggregate): its size is the region's, not
  // one request's, and is held as an aggregate is (AllocRequest::aggregate).
  bool aggregate = false;
};

// Whether a region holds an aggregate block (its size then is no request's).
inline bool holds_aggregate(const PriorRegion& r) {
  return r.aggregate || std::any_of(r.live.begin(), r.live.end(), [](const PriorBlock& b) { return b.aggregate; });
}

// The history most policies read in the regions: region i was obtained for a request of
// size_of(region i). Held together (kMost, or kLikely with held_together), in address order, every
// request stays until the last one is made: each region was in use while the next was obtained, so
// the allocator could not reuse it. Otherwise (kLikely) a request is held only as long as the
// recording proves: until the last later request of its pool (pool_of, null: one pool; and its
// stream) that would have been served from it (of at least least_served(region), null: any that
// fits; a recording's allocator may refuse to split a large block for a small request), since that
// one would otherwise have reused its memory, and released at once when none would. A region of size_of's size that
// holds live blocks is read as its history, as a mapped range is: the gaps between them requests released together at
// its turn, each live block a PriorRequest::live at its place (gaps of at most 1 MiB left out; a block freed_unproven
// is part of the gap around it, for_each_region_piece). Of the two address orders (the order regions were obtained in
// is unknown), the one that holds fewer bytes at once: the least demand the recording proves. kLeast: none.
std::vector<PriorRequest> prior_requests_of_regions(
    std::span<const PriorRegion> regions, PriorHistory history, bool held_together,
    const std::function<Bytes(const PriorRegion&)>& size_of,
    const std::function<std::uint64_t(const PriorRegion&)>& pool_of,
    const std::function<Bytes(const PriorRegion&)>& least_served = nullptr);

struct Placement {
  bool ok = false;
  bool has_addr = false;  // false for policies that place nothing (ideal)
  Addr addr;
  Bytes block = 0;  // bytes of the block handed out (after rounding, unsplit remainders)
  int region = -1;  // index of the device region/segment in obtain order, -1 = none
  Bytes region_offset = 0;
  // A block that lies in several pieces (a state inferred before the recording: xla-bfc's seeded
  // extents), in address order; addr, region and region_offset are then the largest piece's, block
  // the sum. Empty: one piece, [addr, addr + block).
  std::vector<Extent> pieces;

  static Placement failed() { return {}; }
  // Succeeded without an address (ideal; zero-byte requests the framework never passes on).
  static Placement unplaced(Bytes block = 0) {
    Placement p;
    p.ok = true;
    p.block = block;
    return p;
  }
  static Placement at(Addr addr, Bytes block, int region = -1, Addr region_base = Addr()) {
    Placement p;
    p.ok = p.has_addr = true;
    p.addr = addr;
    p.block = block;
    p.region = region;
    if (region >= 0) p.region_offset = addr - region_base;
    return p;
  }
};

// A picture of the memory a policy holds: its regions (segments, BFC regions, reservations) and
// the blocks that tile them, in address order — what PyTorch's memory_viz shows as its segment view.
// Reports draw it at the peak and at OOMs; the engine links in-use blocks to buffers by address.
struct MemoryMap {
  struct Region {
    Addr base;
    Bytes size = 0;
    int id = -1;  // obtain order (placements' "region")
  };
  struct Block {
    Addr addr;
    Bytes size = 0;
    bool in_use = false;
    bool mapped = true;  // false: reserved address space with nothing behind it (expandable segments)
  };
  std::vector<Region> regions;
  std::vector<Block> blocks;
};

// What the engine's metrics read after every event. Must be O(1) or O(log n).
struct Usage {
  Bytes allocated = 0;          // Σ live block sizes as placed
  Bytes reserved = 0;           // bytes held from the device
  Bytes largest_free = 0;       // largest free block inside reserved memory
  Bytes available = 0;          // everything still obtainable: free inside reserved + what the device can still give
  Bytes largest_available = 0;  // largest single block obtainable now (free block or fresh device memory)
  bool operator==(const Usage&) const = default;
};

// The part of Usage the engine accounts after every event (sim/engine/metrics.h) and moments show: what
// is allocated, what is reserved and the largest free block in it.
struct Footprint {
  Bytes allocated = 0, reserved = 0, largest_free = 0;
  bool operator==(const Footprint&) const = default;
};
inline Footprint footprint_of(const Usage& u) { return {u.allocated, u.reserved, u.largest_free}; }

// External fragmentation of the free reserved memory (external_fragmentation, sim/base/units.h).
inline double fragmentation(const Footprint& u) {
  return external_fragmentation(u.reserved, u.allocated, u.largest_free);
}

class Scheduler {
 public:
  // A scheduled piece of work. Move-only; destroying or cancelling it before the clock reaches
  // its time means it never runs, so work scheduled by a policy dies with the policy.
  class Task {
   public:
    Task() = default;
    explicit Task(std::shared_ptr<std::function<void()>> fn) : fn_(std::move(fn)) {}
    Task(Task&&) noexcept = default;
    Task& operator=(Task&& o) noexcept {
      cancel();
      fn_ = std::move(o.fn_);
      return *this;
    }
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;
    ~Task() { cancel(); }
    void cancel() {
      if (fn_) *fn_ = nullptr;
      fn_.reset();
    }
    bool pending() const { return fn_ && *fn_; }

   private:
    std::shared_ptr<std::function<void()>> fn_;
  };

  virtual ~Scheduler() = default;
  virtual Tick now() const = 0;
  // Runs fn when the simulated clock reaches t (≥ now), before trace events later than t.
  [[nodiscard]] virtual Task schedule(Tick t, std::function<void()> fn) = 0;
};

// One allocation's lifetime, for policies that plan offline (static-heap). Times count the
// alloc and free events of the (device, space) from 0; `end` of a never-freed buffer is one past
// the last event.
struct Lifetime {
  std::uint64_t start = 0, end = 0;
  OwnedRequest buffer;  // the alloc (size, shape, dtype, event_index)
};

class Registry;
// What configuring a policy may depend on (no device memory, no clock).
struct ConfigContext {
  const Registry* registry = nullptr;  // for policies that wrap another (tpu-padded's inner)
  const HardwareModel* hw = nullptr;
  const SpaceSpec* space = nullptr;
  std::uint32_t device_index = 0;
  // What the trace says about the recording behind it (never null while configuring from an
  // engine): recorded settings, limits and modes a faithful policy adopts by default. Never the
  // events.
  const Recording* recording = nullptr;
};

// What a built policy works with.
struct PolicyContext : ConfigContext {
  DeviceMemory* device = nullptr;
  Scheduler* scheduler = nullptr;
};

class AllocatorPolicy {
 public:
  virtual ~AllocatorPolicy() = default;
  // Places the request. Pre: req.handle is not live here. Post: ok → handle live with the
  // returned block; !ok → no live block was added (device state may have changed, e.g. retries).
  [[nodiscard]] virtual Placement allocate(const AllocRequest& req) = 0;
  // Frees a live handle. Pre: handle live here (the engine never frees a failed allocation).
  virtual void release(Handle h) = 0;
  // A free whose event names a stream (a block used on another stream is freed there: PyTorch's
  // record_stream). Policies without stream semantics treat it as release(h).
  virtual void release_on_stream(Handle h, std::int64_t stream) {
    (void)stream;
    release(h);
  }
  // The program asked the allocator to return its cached memory (torch.cuda.empty_cache()).
  // Returns what happened, in words, for the report (e.g. "nothing cached: ...").
  virtual std::string empty_cache() { return "this allocator keeps no cache: nothing to release"; }
  // Current figures for metrics (cheap: O(1) or O(log n)).
  [[nodiscard]] virtual Usage usage() const = 0;
  // usage()'s allocated, reserved and largest free block: what the engine accounts after every
  // event. A policy whose usage() also works out what it could still obtain answers this without
  // that work (the engine's --check compares the two).
  [[nodiscard]] virtual Footprint footprint() const { return footprint_of(usage()); }
  // The most it will hold from this space: its own cap below the device's memory (a BFC's limit,
  // a memory fraction's share, the TPU runtime's limit); 0 when the device's memory is the only one.
  [[nodiscard]] virtual Bytes limit() const { return 0; }
  // The most all of its pools together may reserve, which --check holds it to: limit() unless a
  // pool beside the main one has a cap of its own (XLA's classic collective-memory BFC).
  [[nodiscard]] virtual Bytes reserve_limit() const { return limit(); }
  // The bytes it reserves up front because it is configured to, whatever the buffers ask (a
  // preallocated BFC pool, the TPU runtime's whole range); 0 when what it reserves follows demand.
  // A pool of that size is no fragmentation even when the run began with a recording's state in it
  // (SpaceResult::pool_held_up_front).
  [[nodiscard]] virtual Bytes preallocated() const { return 0; }
  // The size this policy would ask for the request after its own rounding (OOM cause).
  [[nodiscard]] virtual Bytes rounded_size(const AllocRequest& req) const { return req.size; }
  // What the allocator needed of its free memory when `req` failed: the rounded request, or more where
  // it obtains memory in larger units for it (PyTorch: a 20 MiB segment for a request of 1-10 MiB).
  // An OOM's cause compares what was free with it (docs/metrics.md, "OOM cause").
  [[nodiscard]] virtual Bytes oom_need(const AllocRequest& req) const { return rounded_size(req); }
  // An offline planner's own plan of the space, which reports set beside the best plan fragsim
  // finds (XLA's heap simulator: its heap, the order it chose); nothing for an online allocator.
  struct CompileTimePlan {
    Bytes heap = 0;
    std::string method;  // "spatial order"
  };
  [[nodiscard]] virtual std::optional<CompileTimePlan> compile_time_plan() const { return std::nullopt; }
  // Allocator statistics in the real allocator's names (report "policy_stats").
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
  // Extra figures for the report (e.g. simulated allocator time).
  virtual nlohmann::json extra_report() const { return nlohmann::json::object(); }
  // Its configuration as a PyTorch memory snapshot records it (the snapshot's allocator_settings),
  // so that an exported what-if replays as what it shows; null for an allocator that is not PyTorch's.
  virtual nlohmann::json snapshot_allocator_settings() const { return nullptr; }
  // Notes on what the policy did with this run's input that the reader must know (shown with
  // the run's notes, once each).
  virtual std::vector<std::string> run_notes() const { return {}; }
  // Checks every invariant of the state; throws InternalError naming the broken one.
  virtual void validate() const = 0;
  // Human explanation of an OOM as the real allocator would print it (may be empty).
  virtual std::string describe_oom(const AllocRequest& req) const {
    (void)req;
    return {};
  }
  // Non-empty when the real allocator would have aborted the process (e.g. a CHECK failure);
  // the engine then stops the replay and reports it. Not virtual: the engine asks after every
  // event; a policy that can abort writes fatal_.
  std::string_view fatal_error() const { return fatal_; }
  // A short name for the kind of OOM when it is not the ordinary one (e.g. "scoped_vmem_limit").
  virtual std::string oom_kind(const AllocRequest& req) const {
    (void)req;
    return {};
  }
  // Offline planning (policies registered with needs_lifetimes): every lifetime of this
  // policy's (device, space), called once before the first event.
  virtual void plan(const std::vector<Lifetime>& buffers) { (void)buffers; }
  // Observation events of the trace (segment_alloc, ...) for seeding and fidelity. Optional.
  virtual void observe(const Observation& ob) { (void)ob; }
  // Whether this policy, as configured, makes the recording allocator's decisions with the
  // recorded settings, so that state from before the recording may be taken where it was recorded
  // (AllocRequest::seeded_at, pre_trace observations). False (the default): the engine re-holds that
  // state through allocate() (PriorRegion's comment). Asked once, before the first event.
  [[nodiscard]] virtual bool seeds_recording() const { return false; }
  // Whether the state before the recording (`regions`: the recording's, by address, with their live
  // blocks) may be taken where it was recorded: true where seeds_recording(), and where this
  // policy's settings differ from the recorded ones only in decisions that state shows none of
  // (the allocator with these settings could have left the same state). Asked once, before the
  // first event.
  [[nodiscard]] virtual bool seeds_state(std::span<const PriorRegion> regions) const {
    (void)regions;
    return seeds_recording();
  }
  // The requests that made the recording's allocator obtain `regions` (address order), as this
  // policy reads them for `history`, in the order to replay them. kLeast must give none; kMost every
  // region's, all held together. The default: prior_requests_of_regions with kLikely read as
  // "held while a later request fits" (one request a region, of its size).
  [[nodiscard]] virtual std::vector<PriorRequest> prior_requests(std::span<const PriorRegion> regions,
                                                                 PriorHistory history) const;
  // Appends the memory it holds (regions and their blocks). Policies that place nothing leave it
  // empty. O(blocks): called for reports only.
  virtual void memory_map(MemoryMap* out) const { (void)out; }

 protected:
  std::string fatal_;  // see fatal_error()
};

using PolicyBuilder = std::function<std::unique_ptr<AllocatorPolicy>(const PolicyContext&)>;
// Reads and checks the config (InputError on a bad one) and returns the builder.
using PolicyConfigure = std::function<PolicyBuilder(ConfigReader& cfg, const ConfigContext& ctx)>;

// One documented option of a policy (`fragsim list POLICY`, docs/policies.md). tests check that
// the documented keys are exactly the keys the policy's configure step reads.
struct PolicyOption {
  std::string key;
  std::string default_text;  // as the user would write it, or how the default is chosen
  nlohmann::json example;    // a valid value (tests configure the policy with it)
  std::string meaning;
  std::optional<Range> range = {};  // a number's bounds: the Range the configure step checks it against
};

// ---- What the rest of the program asks of a policy (architecture.md: declared by the policy) ----

// Whose words a setting is given in (sim/base/framework.h): the framework that recorded the trace
// and the platform of the device the run models. Advice, sweeps and compare's what-ifs name only
// settings that framework reads, and only what it builds on that platform.
struct Vocabulary {
  Framework framework = Framework::kUnknown;  // kUnknown: the policy's own framework's words
  Platform platform = Platform::kUnknown;     // kUnknown: no platform rules a setting out
  bool rocm() const { return platform == Platform::kRocm; }
};

// A memory-fraction setting: the share of device memory the allocator may hold.
struct FractionKnob {
  // How one framework's users set it: a variable ("XLA_PYTHON_CLIENT_MEM_FRACTION"), or a call or
  // option whose text holds {} for the value ("torch.cuda.set_per_process_memory_fraction({})").
  struct Spelling {
    Framework framework = Framework::kUnknown;
    std::string name;  // the variable, or what users look the setting up by ("per_process_gpu_memory_fraction")
    bool env = false;  // name is a variable: set as NAME=VALUE, replayed with --env
    std::string call;  // else the call, {} for the value; replayed with --set key=VALUE
  };
  std::string key;                  // the config key ("mem_fraction")
  std::vector<Spelling> spellings;  // the first is the policy's own framework's
  // What the fraction sets where it does not cap the allocator ("" : it caps it). cuda-async's is its
  // pool's release threshold: the pool grows past it as the program needs, so every fraction fits.
  std::string not_a_cap;
  // Framework f's spelling, the first when f has none (kUnknown: the policy's own).
  const Spelling& spelling(Framework f = Framework::kUnknown) const;
  // "XLA_PYTHON_CLIENT_MEM_FRACTION=.83" / "torch.cuda.set_per_process_memory_fraction(0.83)".
  std::string setting(double fraction, Framework f = Framework::kUnknown) const;
  // What replays it: an --env or a --set argument ("XLA_PYTHON_CLIENT_MEM_FRACTION=.83", "mem_fraction=0.83").
  bool by_env(Framework f = Framework::kUnknown) const { return spelling(f).env; }
  std::string argument(double fraction, Framework f = Framework::kUnknown) const;
};

// The policy a recording or a hardware kind gets when the user names none.
struct DefaultFor {
  std::optional<RecordingSource> source;  // recordings of this kind (unset: any)
  std::string hardware_kind;              // on this kind of hardware ("": any)
  std::string ref;                        // the policy as chosen, "tpu-padded[inner=tpu-runtime]"
  std::string why;                        // "the trace is an XProf capture of the TPU runtime's allocator"
};

// What a first OOM tells the policy's advice (sim/commands/advice.h replays each suggestion before printing it).
struct AdviceInput {
  const nlohmann::json& config;  // the resolved config (ConfigReader::resolved)
  bool fragmentation = false;    // enough memory was free, no block fitted
  std::string kind;              // the policy's special OOM kind, "" for an ordinary one
  Bytes reserved = 0, rounded = 0;
  Vocabulary vocab = {};  // whose settings to suggest
};

// A setting that may avoid the OOM, as the user would set it and as fragsim replays it.
struct AdviceCandidate {
  std::string problem = {};                 // "fragmentation", "memory"
  std::string setting = {};                 // as the user types it: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
  std::string why = {};                     // what it changes, in a few words
  std::vector<std::string> envs = {};       // --env VAR=VALUE that replay it (a variable given before is replaced)
  std::vector<std::string> sets = {};       // --set KEY=VALUE that replay it
  bool find_fraction = false;               // instead: search the smallest memory fraction that fits
  std::vector<std::string> drop_envs = {};  // variables the replay leaves out (besides those in envs)
  std::string policy = {};                  // the policy the replay runs, when the setting changes it
  // The setting costs speed on every call (an allocator with no cache: a device call per allocation
  // and free). Advice after an OOM names it, with its cost in `why`; the waste line, which credits
  // a setting with the memory it saves and says nothing of its cost, leaves it out.
  bool slow = false;
};

// A setting a run's resolved config holds that its framework does not do unset (a capture's growth on
// demand), as the framework's users set it and as fragsim replays it: what a printed memory fraction
// needs beside it for the program to run as the answer's replay did (issue 47: the fraction alone,
// pasted, preallocates).
struct StatedSetting {
  std::string setting;  // as the user types it: "XLA_PYTHON_CLIENT_PREALLOCATE=false"
  std::string env;      // the --env VAR=VALUE that replays it ("": none)
  std::string key;      // the config key it sets: a --set of that key given states it already
};

// A variant compare pits against a run of the policy, and how the framework's users select it.
struct WhatIf {
  std::string ref;      // as compare runs it: "xla-bfc[preallocate=false]"
  std::string setting;  // the framework's setting that selects it ("TF_FORCE_GPU_ALLOW_GROWTH=true"; "": none)
};

struct PolicyInfo {
  std::string name;
  std::string summary;
  PolicyConfigure configure;
  bool needs_lifetimes = false;  // reads the whole trace first (memory O(allocations))
  std::vector<PolicyOption> options = {};
  // The frameworks whose allocator it models, its own first (empty: none, a baseline). Their
  // variables (FrameworkInfo) may configure it.
  std::vector<Framework> frameworks = {};
  // The hardware kind it can run on ("": any; "tpu": TPU tiled layouts).
  std::string hardware_kind = {};
  // The hardware kind the real allocator runs on ("": any). On another kind a run is a what-if of
  // that allocator over the device's memory, and says so (PyTorch's CUDA caching allocator on a TPU,
  // where torch_xla hands memory to XLA's TPU runtime instead).
  std::string real_hardware_kind = {};
  std::optional<FractionKnob> fraction = {};  // a memory-fraction setting, if the allocator has one
  bool models_sharding = false;               // takes the --shard what-if (set_sharding)
  bool lower_bound = false;                   // places nothing: the bound every allocator is compared with
  std::vector<DefaultFor> defaults = {};      // where it is the default
  // Variants worth comparing with a run of this policy ("torch-caching[expandable_segments=true]",
  // "platform"), given the run's resolved config: compare's defaults; only allocators the
  // vocabulary's framework builds on its platform, each named in that framework's words where it has them.
  std::function<std::vector<WhatIf>(const nlohmann::json& config, const Vocabulary& vocab)> what_ifs = {};
  // Settings that may avoid a first OOM of this policy; sim replays each before printing it.
  std::function<std::vector<AdviceCandidate>(const AdviceInput&)> advise = {};
  // The settings of a resolved config, beside its memory fraction, that differ from what the
  // framework does unset, in the policy's own words (the vocabulary's framework's where the policy
  // models it): sweep and advice print them with a fraction.
  std::function<std::vector<StatedSetting>(const nlohmann::json& config, const Vocabulary& vocab)> stated = {};
};

// A framework whose environment variables fragsim reads with the framework's own semantics.
struct FrameworkSettings {
  std::string policy;  // the policy the variables select ("": they select none)
  nlohmann::json config = nlohmann::json::object();
};
// What reading a framework's variables depends on besides them.
struct SettingsContext {
  std::string policy;                         // the policy the user named ("": none)
  Platform platform = Platform::kUnknown;     // the run's device's (what the framework builds there)
  OptionNames names{};                        // how the front end names its options (--env, --hw; Python's keywords)
  std::vector<std::string>* notes = nullptr;  // one line per interpretation
};
struct FrameworkInfo {
  std::string name;                    // "JAX", "PyTorch"
  Framework id = Framework::kUnknown;  // the framework a Recording names (Recording::may_be_from)
  std::vector<std::string>
      variables;  // the variables it reads (a variable two frameworks read goes to the recording's)
  // Reads the given variables (all of them this framework's) as the framework does. InputError on a
  // value the framework refuses (or with which it would not start, on that platform).
  std::function<FrameworkSettings(const std::map<std::string, std::string>& env, const SettingsContext& ctx)> interpret;
};

// Resolved config keys that start with this are figures the policy derived (from the hardware, the
// recording), not settings: two runs of the same settings may differ in them.
inline constexpr const char* kResolvedPrefix = "resolved_";
// The config key under which a policy echoes the settings it took from the recording.
inline constexpr const char* kRecordedSettingsKey = "recorded_settings_applied";
// The resolved config key under which a policy configured by one whole variable, as its framework
// reads it, records the variable's text in force ("key:value" parts, comma-separated), and the
// variable's name: `diff` and `check` show a change there in the framework's words.
inline constexpr const char* kResolvedAllocConfKey = "resolved_alloc_conf";
inline constexpr const char* kAllocConfVariable = "PYTORCH_CUDA_ALLOC_CONF";

// The sharding what-if (--shard N --shard-dim DIM) in the config of a policy that models it.
void set_sharding(nlohmann::json& config, std::int64_t shard, const std::string& dim);

// The options every JAX GPU allocator policy shares (xla-bfc, cuda-async, platform).
PolicyOption jaxlib_option();
// The TPU layout options of tpu-padded and static-heap (PaddingRule::from_config).
std::vector<PolicyOption> padding_options();

// Explicit registry (style rule 4): register_builtin_policies() fills it; no static init.
class Registry {
 public:
  void add(PolicyInfo info) { infos_.push_back(std::move(info)); }
  void add_framework(FrameworkInfo f) { frameworks_.push_back(std::move(f)); }
  // Throws InputError naming `what` (the option or key that named it) and the valid names.
  [[nodiscard]] const PolicyInfo& find(const std::string& name, std::string_view what = "--policy") const;
  const std::vector<PolicyInfo>& all() const { return infos_; }
  const std::vector<FrameworkInfo>& frameworks() const { return frameworks_; }
  // The framework that reads `variable`, or null; of two that read it, the one that may have
  // made the recording (Recording::may_be_from), else the first registered.
  const FrameworkInfo* framework_of_variable(const std::string& variable, const Recording& recording = {}) const;
  const FrameworkInfo* framework(const std::string& name) const;
  // The default for a recording on a hardware kind: the most specific DefaultFor that matches
  // (source and hardware, then source, then hardware, then neither), in registration order.
  [[nodiscard]] const DefaultFor& default_for(const Recording& recording, const std::string& hardware_kind) const;
  // The policy that places nothing (PolicyInfo::lower_bound).
  [[nodiscard]] const PolicyInfo& lower_bound() const;

 private:
  std::vector<PolicyInfo> infos_;
  std::vector<FrameworkInfo> frameworks_;
};

void register_builtin_policies(Registry& r);
void register_jax_settings(Registry& r);         // policies/jax_settings.cpp
void register_tensorflow_settings(Registry& r);  // policies/jax_settings.cpp
void register_torch_settings(Registry& r);       // policies/torch_alloc_config.cpp

// An allocator that caches nothing (malloc and free per buffer: what it holds is what is live),
// as `ideal` models it; `recording_allocator`: it is the recording's own (a PyTorch profiler
// trace's CPU memory), so the state before the recording is its as recorded (policies/ideal.cpp).
[[nodiscard]] PolicyBuilder uncached_allocator(const ConfigContext& ctx, bool recording_allocator);

// Per-policy registration functions, one per policy file.
void register_ideal(Registry& r);
void register_best_fit(Registry& r);
void register_first_fit(Registry& r);
void register_xla_bfc(Registry& r);
void register_platform(Registry& r);
void register_cuda_async(Registry& r);
void register_torch_caching(Registry& r);
void register_tpu_padded(Registry& r);
void register_static_heap(Registry& r);
void register_tpu_runtime(Registry& r);

}  // namespace fragsim

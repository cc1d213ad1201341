// AllocatorPolicy: the interface between the engine and an allocator model (architecture.md).
//
// One instance serves one (device, memory space). A policy never reads the trace: it sees
// AllocRequests and releases by Handle, obtains memory only through its DeviceMemory, and may
// schedule deferred work (stream-ordered frees, pool trims) through the Scheduler.
// Failure to place is a value (Placement::ok == false), never an exception.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware_models/device_memory.h"
#include "hardware_models/hardware_model.h"
#include "sim/config.h"
#include "sim/event.h"

namespace fragsim {

struct AllocRequest {
  Handle handle = kNoHandle;  // dense id of the allocation (engine- and policy-wide per device)
  AllocId id = 0;
  Bytes size = 0;             // requested bytes
  std::int64_t stream = 0;
  Space space = Space::kHbm;
  Tick t = 0;
  const Event* event = nullptr;  // shape/dtype/name when the trace has them
};

struct Placement {
  bool ok = false;
  bool has_addr = false;  // false for policies that place nothing (ideal)
  Addr addr = 0;
  Bytes block = 0;        // bytes of the block handed out (after rounding, unsplit remainders)
  int region = -1;        // index of the device region/segment in obtain order, -1 = none
  Bytes region_offset = 0;
};

// What the engine's metrics read after every event. Must be O(1) or O(log n).
struct Usage {
  Bytes allocated = 0;          // Σ live block sizes as placed
  Bytes reserved = 0;           // bytes held from the device
  Bytes largest_free = 0;       // largest free block inside reserved memory
  Bytes available = 0;          // everything still obtainable: free inside reserved + what the device can still give
  Bytes largest_available = 0;  // largest single block obtainable now (free block or fresh device memory)
};

inline double fragmentation(const Usage& u) {
  Bytes free = u.reserved > u.allocated ? u.reserved - u.allocated : 0;
  if (free == 0) return 0.0;
  Bytes lf = u.largest_free < free ? u.largest_free : free;
  return static_cast<double>(free - lf) / static_cast<double>(free);
}

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual Tick now() const = 0;
  // Runs fn when the simulated clock reaches t (before trace events at t' > t... and ≥ t).
  virtual void schedule(Tick t, std::function<void()> fn) = 0;
};

// One allocation's lifetime, for policies that plan offline (static-heap). Times count the
// alloc and free events of the (device, space) from 0; `end` of a never-freed buffer is one past
// the last event.
struct Lifetime {
  std::uint64_t alloc_index = 0;  // event_index of the alloc
  Bytes size = 0;
  std::uint64_t start = 0, end = 0;
  Event event;  // the alloc event (shape, dtype, ...)
};

class Registry;
struct PolicyContext {
  const Registry* registry = nullptr;  // for policies that wrap another (tpu-padded's inner)
  const HardwareModel* hw = nullptr;
  const SpaceSpec* space = nullptr;
  DeviceMemory* device = nullptr;
  Scheduler* scheduler = nullptr;
  std::uint32_t device_index = 0;
  // The trace's header (null when none): recorded allocator settings a faithful policy adopts
  // by default (torch-caching reads a snapshot's allocator_settings). Never the events.
  const nlohmann::json* trace_header = nullptr;
};

class AllocatorPolicy {
 public:
  virtual ~AllocatorPolicy() = default;
  // Places the request. Pre: req.handle is not live here. Post: ok → handle live with the
  // returned block; !ok → no live block was added (device state may have changed, e.g. retries).
  virtual Placement allocate(const AllocRequest& req) = 0;
  // Frees a live handle. Pre: handle live here (the engine never frees a failed allocation).
  virtual void release(Handle h) = 0;
  // A free whose event names a stream (a block used on another stream is freed there: PyTorch's
  // record_stream). Policies without stream semantics treat it as release(h).
  virtual void release_on_stream(Handle h, std::int64_t stream) {
    (void)stream;
    release(h);
  }
  // Current figures for metrics (cheap).
  virtual Usage usage() const = 0;
  // The size this policy would ask for the request after its own rounding (OOM cause).
  virtual Bytes rounded_size(const AllocRequest& req) const { return req.size; }
  // Allocator statistics in the real allocator's names (report "policy_stats").
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
  // Extra figures for the report (e.g. simulated allocator time).
  virtual nlohmann::json extra_report() const { return nlohmann::json::object(); }
  // Checks every invariant of the state; throws std::logic_error naming the broken one.
  virtual void validate() const = 0;
  // Human explanation of an OOM as the real allocator would print it (may be empty).
  virtual std::string describe_oom(const AllocRequest& req) const {
    (void)req;
    return {};
  }
  // Non-empty when the real allocator would have aborted the process (e.g. a CHECK failure);
  // the engine then stops the replay and reports it.
  virtual std::string_view fatal_error() const { return {}; }
  // A short name for the kind of OOM when it is not the ordinary one (e.g. "scoped_vmem_limit").
  virtual std::string oom_kind(const AllocRequest& req) const {
    (void)req;
    return {};
  }
  // Offline planning (policies registered with needs_lifetimes): every lifetime of this
  // policy's (device, space), called once before the first event.
  virtual void plan(const std::vector<Lifetime>& buffers) { (void)buffers; }
  // Observation events of the trace (segment_alloc, ...) for fidelity bookkeeping. Optional.
  virtual void observe(const Event& ev) { (void)ev; }
};

using PolicyFactory = std::function<std::unique_ptr<AllocatorPolicy>(ConfigReader& cfg, const PolicyContext& ctx)>;

struct PolicyInfo {
  std::string name;
  std::string summary;
  PolicyFactory make;
  bool needs_lifetimes = false;  // reads the whole trace first (memory O(allocations))
};

// Explicit registry (style rule 4): register_builtin_policies() fills it; no static init.
class Registry {
 public:
  void add(PolicyInfo info) { infos_.push_back(std::move(info)); }
  // Throws InputError listing the valid names when unknown.
  const PolicyInfo& find(const std::string& name) const;
  const std::vector<PolicyInfo>& all() const { return infos_; }

 private:
  std::vector<PolicyInfo> infos_;
};

void register_builtin_policies(Registry& r);

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

}  // namespace fragsim

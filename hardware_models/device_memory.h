// DeviceMemory: the driver's view of one memory space of one device (architecture.md).
//
// Physical accounting: every device allocation is padded to the space's granularity and
//   used() = Σ padded sizes of live device allocations ≤ limit() = usable capacity.
// Addresses: virtual, handed out by a bump pointer aligned to max(alignment, granularity) from
// kBase, never reused (VMM maps physical pages anywhere, so address contiguity costs nothing).
// When the trace recorded driver addresses (segment_alloc observations), expect_address() queues
// them and the next allocations take them in order, so a policy that decides as the recording
// allocator did lands on the recorded addresses.
// Latency: each call adds the cost model's simulated time.
#pragma once
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "hardware_models/hardware_model.h"

namespace fragsim {

class DeviceMemory {
 public:
  static constexpr Addr kBase = 0x200000000000ULL;  // below the 0x7f.. range drivers hand out
  DeviceMemory(const SpaceSpec& spec, const CostModel& cost);

  struct Grant {
    Addr addr;
    Bytes bytes;  // padded size actually granted (bytes_received)
  };
  // One device allocation, padded to `unit` (0 = the space's granularity). nullopt when the
  // padded size does not fit (counted as a failed call).
  std::optional<Grant> allocate(Bytes bytes, Bytes unit = 0);
  // Releases a live device allocation made by allocate().
  void release(Addr addr);
  void expect_address(Addr a) { recorded_.push_back(a); }
  // Sizes asked for by successful allocations, in order, while logging is on (fidelity checks).
  void set_logging(bool on) { logging_ = on; }
  std::vector<Bytes>& grant_log() { return log_; }

  Bytes padded(Bytes bytes) const { return round_up(bytes, spec_.granularity); }
  Bytes limit() const { return limit_; }
  Bytes used() const { return used_; }
  Bytes available() const { return limit_ - used_; }
  void set_limit(Bytes b) { limit_ = b; }

  std::uint64_t alloc_calls() const { return alloc_calls_; }
  std::uint64_t free_calls() const { return free_calls_; }
  std::uint64_t failed_calls() const { return failed_calls_; }
  double time_ns() const { return time_ns_; }
  const SpaceSpec& spec() const { return spec_; }

 private:
  SpaceSpec spec_;
  CostModel cost_;
  Bytes limit_;
  Bytes used_ = 0;
  Addr next_;
  std::deque<Addr> recorded_;
  bool logging_ = false;
  std::vector<Bytes> log_;
  std::unordered_map<Addr, Bytes> live_;
  std::uint64_t alloc_calls_ = 0, free_calls_ = 0, failed_calls_ = 0;
  double time_ns_ = 0;
};

}  // namespace fragsim

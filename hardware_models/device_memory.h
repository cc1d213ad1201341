// DeviceMemory: the driver's view of one memory space of one device (architecture.md).
//
// Physical accounting: every device allocation is padded to the space's granularity and
//   used() = Σ padded sizes of live grants ≤ limit() = usable capacity.
// Addresses: virtual, handed out by a bump pointer aligned to max(alignment, granularity) from
// kBase, not reused until the pointer reaches kTop (VMM maps physical pages anywhere, so address
// contiguity costs nothing); then the lowest gap that fits. Every grant ends at or below kTop, so
// a policy's arithmetic on a block's end never wraps.
// When the trace recorded driver addresses (segment_alloc observations), expect_address() queues
// them and the next allocations take them in order, so a policy that decides as the recording
// allocator did lands on the recorded addresses.
// Ownership: allocate() returns a move-only Grant that gives its memory back when it is released
// or destroyed, so a policy that goes away (tpu-padded rebuilding its inner policy, a sweep
// point) can never keep device memory. Grants must not outlive their DeviceMemory.
// Latency: each call adds the cost model's simulated time.
#pragma once
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "hardware_models/hardware_model.h"

namespace fragsim {

class DeviceMemory {
 public:
  static constexpr Addr kBase = Addr(0x200000000000ULL);  // below the 0x7f.. range drivers hand out
  static constexpr std::uint64_t kTop = std::uint64_t{1} << 63;
  DeviceMemory(const SpaceSpec& spec, const CostModel& cost);
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();

 private:
  using LiveMap = std::map<Addr, Bytes>;  // live grants by address

 public:
  // One live device allocation; empty (false) when the allocation failed or was released.
  class Grant {
   public:
    Grant() = default;
    Grant(Grant&& o) noexcept { *this = std::move(o); }
    Grant& operator=(Grant&& o) noexcept;
    Grant(const Grant&) = delete;
    Grant& operator=(const Grant&) = delete;
    ~Grant() { release(); }
    explicit operator bool() const { return mem_ != nullptr; }
    Addr addr() const { return addr_; }
    Bytes bytes() const { return bytes_; }  // padded size actually granted (bytes_received)
    void release();                         // gives the memory back now (no-op when empty)

   private:
    friend class DeviceMemory;
    DeviceMemory* mem_ = nullptr;
    LiveMap::iterator it_;  // this grant's entry in mem_->live_: released without a search
    Addr addr_;
    Bytes bytes_ = 0;
  };

  // One device allocation, padded to `unit` (0 = the space's granularity). An empty grant when
  // the padded size does not fit (counted as a failed call).
  [[nodiscard]] Grant allocate(Bytes bytes, Bytes unit = 0);
  // Gives back all of live grant g but its first `keep` bytes (a multiple of the granularity,
  // less than g's size): one free call for the rest, g stays at its address.
  void shrink(Grant& g, Bytes keep);
  void expect_address(Addr a) { recorded_.push_back(a); }
  // The next allocation gets exactly this address (the recording's), if takes_recorded() allows it.
  void next_address(Addr a) {
    recorded_.clear();
    recorded_.push_back(a);
  }
  // A live grant moves to another address (a model that placed a region before knowing where
  // the recording's driver put it). False (nothing moves) when `to` is a live grant's address.
  // Pre: g is live here.
  [[nodiscard]] bool move(Grant& g, Addr to);
  // Every move, in order: the grant's range before it and where it went.
  struct Move {
    Addr from;
    Bytes bytes = 0;
    Addr to;
  };
  const std::vector<Move>& moves() const { return moves_; }
  // A grant this memory would place at `made_up` (no recorded address: the bump pointer's) goes to
  // `to` instead, where no live grant lies: a replay that already knows where the recording's driver
  // put that region (an earlier replay of the same run moved it there) obtains it there from the
  // start, so that nothing placed in it before the move names the made-up address. The pointer
  // moves on as if the grant were at `made_up`, so later grants get the addresses they had.
  void remap(Addr made_up, Addr to) { remap_[made_up] = to; }
  // Sizes asked for by successful allocations, in order, while logging is on (fidelity checks).
  void set_logging(bool on) { logging_ = on; }
  bool logging() const { return logging_; }
  const std::vector<Bytes>& grant_log() const { return log_; }
  // Addresses released while logging is on, in order.
  const std::vector<Addr>& release_log() const { return release_log_; }

  // Padded size of a request (kTooLarge when padding would overflow).
  Bytes padded(Bytes bytes) const;
  Bytes limit() const { return limit_; }
  Bytes used() const { return used_; }
  Bytes available() const { return limit_ - used_; }
  size_t live_grants() const { return live_.size(); }

  std::uint64_t alloc_calls() const { return alloc_calls_; }
  std::uint64_t free_calls() const { return free_calls_; }
  std::uint64_t failed_calls() const { return failed_calls_; }
  double time_ns() const { return time_ns_; }
  const SpaceSpec& spec() const { return spec_; }

 private:
  void release(LiveMap::iterator it);
  bool takes_recorded(Addr a, Bytes p) const;  // aligned, and a grant of p bytes there ends below the top
  bool overlaps_live(Addr a, Bytes p) const;   // a live grant lies in [a, a + p)
  // Every live grant ends at or below a (the last one in address order does; kTop bounds the sum).
  bool above_live(Addr a) const {
    return live_.empty() || live_.rbegin()->first.value() + live_.rbegin()->second <= a.value();
  }
  std::optional<Addr> bump(Bytes p, Bytes align);  // the next address for a grant of p bytes

  SpaceSpec spec_;
  CostModel cost_;
  Bytes limit_;
  Bytes used_ = 0;
  Addr next_;
  std::deque<Addr> recorded_;
  std::vector<Move> moves_;
  std::map<Addr, Addr> remap_;
  bool logging_ = false;
  std::vector<Bytes> log_;
  std::vector<Addr> release_log_;
  LiveMap live_;
  std::uint64_t alloc_calls_ = 0, free_calls_ = 0, failed_calls_ = 0;
  double time_ns_ = 0;
};

}  // namespace fragsim

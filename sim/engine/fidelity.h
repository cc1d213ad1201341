// Fidelity: the replay checked against what the recording allocator and driver did — every
// allocation's recorded address, every traced segment's size, each segment release, each
// recorded OOM (report key `fidelity`, docs/report.md).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "hardware_models/device_memory.h"
#include "policies/policy.h"
#include "sim/base/event.h"

namespace fragsim {

class Fidelity {
 public:
  Fidelity() = default;
  Fidelity(const Fidelity&) = delete;  // last_ points into this object's map
  Fidelity& operator=(const Fidelity&) = delete;
  // An alloc that carries its recorded address, and where the policy placed it.
  void address(const Event& ev, const Placement& p);
  // What became of a traced allocation on its device (a later recorded OOM asks whether it failed):
  // placed, failed, or not replayed (the replay had stopped at an earlier OOM).
  enum class Outcome : std::uint8_t { kPlaced, kFailed, kNotReplayed };
  void outcome(std::uint32_t device, bool failed) { set_outcome(device, failed ? Outcome::kFailed : Outcome::kPlaced); }
  void not_replayed(std::uint32_t device) { set_outcome(device, Outcome::kNotReplayed); }
  // A recorded allocation address the replay never compared: the run had stopped at an OOM.
  void address_not_reached() { ++not_compared_; }
  // A recorded OOM: did the simulation fail the same request?
  void recorded_oom(const Event& ev);
  // The recording allocator's reserved memory after an event (a profiler trace's Total Reserved),
  // against the replay's reserved memory of that device's main space at the same point;
  // `simulated` is empty once the replay has stopped (an OOM): such an event counts as compared only.
  void reserved(const Event& ev, std::optional<Bytes> simulated);
  // A traced segment_alloc (size) and segment_free (address) of a device's main memory.
  void segment_alloc(std::uint32_t device, Bytes size) { segments_.emplace_back(device, size); }
  void segment_free(std::uint32_t device, Addr addr) { frees_.emplace_back(device, addr); }

  // Whether the recording gave nothing to compare.
  bool empty() const {
    return compared_ == 0 && segments_.empty() && frees_.empty() && ooms_recorded_ == 0 && reserved_compared_ == 0;
  }
  // The report's object. `memory_of(device)`:
  // the device's main memory as simulated (its grant and release logs), or null.
  [[nodiscard]] nlohmann::json json(const std::function<const DeviceMemory*(std::uint32_t)>& memory_of) const;

 private:
  std::uint64_t compared_ = 0, matched_ = 0;
  std::uint64_t not_compared_ = 0;  // recorded addresses of allocations the replay never reached (it stopped)
  std::uint64_t ooms_recorded_ = 0, ooms_reproduced_ = 0;
  std::uint64_t reserved_compared_ = 0, reserved_matched_ = 0;
  Bytes recorded_peak_reserved_ = 0;  // the most the recording allocator held on one device
  nlohmann::json first_mismatch_;
  std::vector<std::pair<std::uint32_t, Bytes>> segments_;  // traced segment_alloc (device, size)
  std::vector<std::pair<std::uint32_t, Addr>> frees_;      // traced segment_free (device, addr)
  void set_outcome(std::uint32_t device, Outcome o) {
    if (!last_ || last_device_ != device) {  // one map lookup per change of device, not per alloc
      last_ = &last_outcome_[device];
      last_device_ = device;
    }
    *last_ = o;
  }
  std::map<std::uint32_t, Outcome> last_outcome_;  // device → its last alloc's outcome
  std::uint32_t last_device_ = 0;                  // the device of the last outcome…
  Outcome* last_ = nullptr;                        // …and its entry (map nodes stay put)
};

}  // namespace fragsim

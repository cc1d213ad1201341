#include "hardware_models/device_memory.h"

#include <algorithm>
#include <cassert>

namespace fragsim {

DeviceMemory::DeviceMemory(const SpaceSpec& spec, const CostModel& cost)
    : spec_(spec), cost_(cost), limit_(spec.usable()), next_(kBase) {}

std::optional<DeviceMemory::Grant> DeviceMemory::allocate(Bytes bytes, Bytes unit) {
  Bytes p = unit ? round_up(bytes, unit) : padded(bytes);
  time_ns_ += cost_.alloc_ns(p);
  if (p == 0 || p > available()) {
    ++failed_calls_;
    return std::nullopt;
  }
  Addr a;
  if (!recorded_.empty() && !live_.count(recorded_.front())) {
    a = recorded_.front();
    recorded_.pop_front();
  } else {
    Bytes align = std::max(spec_.alignment, unit ? unit : spec_.granularity);
    a = round_up(next_, align);
    next_ = a + p;
  }
  ++alloc_calls_;
  used_ += p;
  live_[a] = p;
  if (logging_) log_.push_back(bytes);
  return Grant{a, p};
}

void DeviceMemory::release(Addr addr) {
  auto it = live_.find(addr);
  assert(it != live_.end());
  time_ns_ += cost_.free_ns(it->second);
  used_ -= it->second;
  live_.erase(it);
  ++free_calls_;
}

}  // namespace fragsim

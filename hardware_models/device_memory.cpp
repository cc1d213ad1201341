#include "hardware_models/device_memory.h"

#include <algorithm>

#include "sim/base/error.h"

namespace fragsim {

DeviceMemory::DeviceMemory(const SpaceSpec& spec, const CostModel& cost)
    : spec_(spec), cost_(cost), limit_(spec.usable()), next_(kBase) {}

DeviceMemory::~DeviceMemory() = default;

DeviceMemory::Grant& DeviceMemory::Grant::operator=(Grant&& o) noexcept {
  if (this != &o) {
    release();
    mem_ = o.mem_;
    addr_ = o.addr_;
    bytes_ = o.bytes_;
    o.mem_ = nullptr;
  }
  return *this;
}

void DeviceMemory::Grant::release() {
  if (!mem_) return;
  mem_->release(addr_);
  mem_ = nullptr;
}

Bytes DeviceMemory::padded(Bytes bytes) const { return round_up_sat(bytes, spec_.granularity); }

DeviceMemory::Grant DeviceMemory::allocate(Bytes bytes, Bytes unit) {
  Bytes u = unit ? unit : spec_.granularity;
  Bytes p = round_up_sat(bytes, u);
  time_ns_ += cost_.alloc_ns(p);
  Grant g;
  if (p == 0 || p > available()) {
    ++failed_calls_;
    return g;
  }
  Addr a;
  if (!recorded_.empty() && !live_.count(recorded_.front())) {
    a = recorded_.front();
    recorded_.pop_front();
  } else {
    Bytes align = std::max(spec_.alignment, u);
    a = round_up(next_, align);
    next_ = a + p;
  }
  ++alloc_calls_;
  used_ += p;
  live_[a] = p;
  if (logging_) log_.push_back(bytes);
  g.mem_ = this;
  g.addr_ = a;
  g.bytes_ = p;
  return g;
}

bool DeviceMemory::move(Grant& g, Addr to) {
  FRAGSIM_CHECK(g.mem_ == this && live_.count(g.addr_), "device move of a grant that is not here");
  if (live_.count(to)) return false;
  Bytes b = live_[g.addr_];
  live_.erase(g.addr_);
  live_[to] = b;
  g.addr_ = to;
  return true;
}

void DeviceMemory::release(Addr addr) {
  auto it = live_.find(addr);
  FRAGSIM_CHECK(it != live_.end(), "device release of an address that is not allocated");
  time_ns_ += cost_.free_ns(it->second);
  used_ -= it->second;
  live_.erase(it);
  if (logging_) release_log_.push_back(addr);
  ++free_calls_;
}

}  // namespace fragsim

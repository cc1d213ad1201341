#include "hardware_models/device_memory.h"

#include <algorithm>

#include "sim/base/error.h"

namespace fragsim {

DeviceMemory::DeviceMemory(const SpaceSpec& spec, const CostModel& cost)
    : spec_(spec), cost_(cost), limit_(spec.usable()), next_(kBase) {
  // Whatever set the numbers (a preset, --capacity, a recording's header), they are checked here,
  // where every run's memory is created.
  check_space(spec_, "hardware");
}

bool DeviceMemory::takes_recorded(Addr a, Bytes p) const {
  return a.value() % spec_.alignment == 0 && a.value() <= kTop - p;
}

bool DeviceMemory::overlaps_live(Addr a, Bytes p) const {
  auto it = live_.upper_bound(a);
  if (it != live_.end() && it->first.value() < a.value() + p) return true;
  return it != live_.begin() && std::prev(it)->first.value() + std::prev(it)->second > a.value();
}

std::optional<Addr> DeviceMemory::bump(Bytes p, Bytes align) {
  Addr a = round_up(next_, align);
  if (a.value() <= kTop - p && above_live(a)) return a;  // the common case: nothing at or above the pointer
  if (a.value() <= kTop - p) {
    // Grants at recorded addresses may lie above the pointer: the next address past those in the
    // way (two grants at one address would corrupt the accounting).
    std::uint64_t cur = a.value();
    auto it = live_.upper_bound(a);
    if (it != live_.begin()) {
      auto before = std::prev(it);
      if (before->first.value() + before->second > cur) cur = round_up(before->first.value() + before->second, align);
    }
    for (; it != live_.end() && cur <= kTop - p && it->first.value() < cur + p; ++it)
      cur = std::max(cur, round_up(it->first.value() + it->second, align));
    if (cur <= kTop - p) return Addr(cur);
  }
  // The address space is used up to its top: the lowest gap from kBase that fits (first fit over
  // the live grants, in address order; rare: a space of at most 2^48 bytes wraps after 2^15 of
  // its largest grants).
  std::uint64_t cur = round_up(kBase.value(), align);
  for (const auto& [ga, gs] : live_) {
    if (ga.value() >= cur && ga.value() - cur >= p) break;
    cur = std::max(cur, round_up(ga.value() + gs, align));
  }
  if (cur > kTop - p) return std::nullopt;
  return Addr(cur);
}

DeviceMemory::~DeviceMemory() = default;

DeviceMemory::Grant& DeviceMemory::Grant::operator=(Grant&& o) noexcept {
  if (this != &o) {
    release();
    mem_ = o.mem_;
    it_ = o.it_;
    addr_ = o.addr_;
    bytes_ = o.bytes_;
    o.mem_ = nullptr;
  }
  return *this;
}

void DeviceMemory::Grant::release() {
  if (!mem_) return;
  mem_->release(it_);
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
  // A recorded address is taken when it is aligned, the grant ends below the top and no live grant
  // lies in its range. A model that diverged from the recording (an earlier grant larger than the
  // recording's, under a what-if setting) can meet a live grant there: two grants over one range
  // broke every policy's map of addresses (torch-caching's free index held two blocks at one
  // address and merged the wrong one). The address, this grant's, is then dropped (kept, it would
  // be every later grant's first try, and the ones after it never taken), and the grant goes where
  // the device has room.
  bool recorded = false;
  if (!recorded_.empty() && overlaps_live(recorded_.front(), p))
    recorded_.pop_front();
  else if (!recorded_.empty() && takes_recorded(recorded_.front(), p))
    recorded = true;
  if (recorded) {
    a = recorded_.front();
    recorded_.pop_front();
  } else {
    std::optional<Addr> b = bump(p, std::max(spec_.alignment, u));
    if (!b) {  // no room in the address space: a failed call, as a real driver's
      ++failed_calls_;
      return g;
    }
    a = *b;
    next_ = a + p;
    if (auto it = remap_.find(a); it != remap_.end() && it->second.value() <= kTop - p && !overlaps_live(it->second, p))
      a = it->second;
  }
  ++alloc_calls_;
  used_ += p;
  // A grant above every live one (the bump pointer's, nearly always) goes in at the map's end
  // without a search.
  g.it_ = above_live(a) ? live_.emplace_hint(live_.end(), a, p) : live_.emplace(a, p).first;
  if (logging_) log_.push_back(bytes);
  g.mem_ = this;
  g.addr_ = a;
  g.bytes_ = p;
  return g;
}

bool DeviceMemory::move(Grant& g, Addr to) {
  FRAGSIM_CHECK(g.mem_ == this && live_.count(g.addr_), "device move of a grant that is not here");
  if (live_.count(to)) return false;
  Bytes b = g.it_->second;
  moves_.push_back({g.addr_, b, to});
  live_.erase(g.it_);
  g.it_ = live_.emplace(to, b).first;
  g.addr_ = to;
  return true;
}

void DeviceMemory::shrink(Grant& g, Bytes keep) {
  FRAGSIM_CHECK(g.mem_ == this && keep > 0 && keep < g.bytes_ && keep % spec_.granularity == 0, "bad device shrink");
  auto it = g.it_;
  Bytes gone = it->second - keep;
  time_ns_ += cost_.free_ns(gone);
  used_ -= gone;
  it->second = keep;
  g.bytes_ = keep;
  ++free_calls_;
}

void DeviceMemory::release(LiveMap::iterator it) {
  const Addr addr = it->first;
  time_ns_ += cost_.free_ns(it->second);
  used_ -= it->second;
  live_.erase(it);
  if (logging_) release_log_.push_back(addr);
  ++free_calls_;
}

}  // namespace fragsim

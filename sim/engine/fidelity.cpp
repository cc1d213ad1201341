#include "sim/engine/fidelity.h"

#include <algorithm>

namespace fragsim {

void Fidelity::address(const Event& ev, const Placement& p) {
  ++compared_;
  if (p.ok && p.has_addr && p.addr == ev.addr) {
    ++matched_;
  } else if (first_mismatch_.is_null()) {
    first_mismatch_ = {{"kind", "address"},
                       {"event_index", ev.index},
                       {"id", ev.id},
                       {"recorded", ev.addr},
                       {"simulated", p.ok && p.has_addr ? nlohmann::json(p.addr) : nlohmann::json()}};
  }
}

void Fidelity::reserved(const Event& ev, std::optional<Bytes> simulated) {
  ++reserved_compared_;
  recorded_peak_reserved_ = std::max(recorded_peak_reserved_, ev.size);
  if (simulated == ev.size) {
    ++reserved_matched_;
  } else if (first_mismatch_.is_null()) {
    first_mismatch_ = {{"kind", "reserved"},
                       {"event_index", ev.index},
                       {"device", ev.device},
                       {"recorded_bytes", ev.size},
                       {"simulated_bytes", simulated ? nlohmann::json(*simulated) : nlohmann::json()}};
  }
}

void Fidelity::recorded_oom(const Event& ev) {
  ++ooms_recorded_;
  auto it = last_outcome_.find(ev.device);
  Outcome o = it != last_outcome_.end() ? it->second : Outcome::kPlaced;
  if (o == Outcome::kFailed)
    ++ooms_reproduced_;
  else if (first_mismatch_.is_null())
    first_mismatch_ = {{"kind", "oom"},
                       {"event_index", ev.index},
                       {"device", ev.device},
                       {"recorded_request_bytes", ev.size},
                       {"simulated", o == Outcome::kPlaced ? "the request succeeded"
                                                           : "not replayed: the replay stopped at an earlier OOM"}};
}

nlohmann::json Fidelity::json(const std::function<const DeviceMemory*(std::uint32_t)>& memory_of) const {
  std::uint64_t seg_matched = 0;
  nlohmann::json first_seg;
  std::map<std::uint32_t, size_t> cursor;
  for (auto [dev, size] : segments_) {
    size_t k = cursor[dev]++;
    const DeviceMemory* mem = memory_of(dev);
    const std::vector<Bytes>* log = mem ? &mem->grant_log() : nullptr;
    bool ok = log && k < log->size() && (*log)[k] == size;
    if (ok)
      ++seg_matched;
    else if (first_seg.is_null())
      first_seg = {{"kind", "segment"},
                   {"device", dev},
                   {"segment", k},
                   {"recorded_bytes", size},
                   {"simulated_bytes", log && k < log->size() ? nlohmann::json((*log)[k]) : nlohmann::json()}};
  }
  nlohmann::json f = {{"allocs_compared", compared_},
                      {"allocs_matched", matched_},
                      {"segments_compared", segments_.size()},
                      {"segments_matched", seg_matched}};
  if (not_compared_) f["allocs_not_compared"] = not_compared_;
  f["first_mismatch"] = !first_mismatch_.is_null() ? first_mismatch_ : first_seg;
  if (!frees_.empty()) {  // the same segments released, in the same order
    std::uint64_t matched = 0;
    std::map<std::uint32_t, size_t> next;
    for (auto [dev, addr] : frees_) {
      const DeviceMemory* mem = memory_of(dev);
      size_t k = next[dev]++;
      if (mem && k < mem->release_log().size() && mem->release_log()[k] == addr)
        ++matched;
      else if (f["first_mismatch"].is_null())
        f["first_mismatch"] = {{"kind", "segment_free"}, {"device", dev}, {"release", k}, {"recorded_addr", addr}};
    }
    f["segment_frees_compared"] = frees_.size();
    f["segment_frees_matched"] = matched;
  }
  if (reserved_compared_) {  // a profiler trace's Total Reserved after every event
    f["reserved_compared"] = reserved_compared_;
    f["reserved_matched"] = reserved_matched_;
    f["recorded_peak_reserved_bytes"] = recorded_peak_reserved_;
  }
  if (ooms_recorded_) {
    f["ooms_recorded"] = ooms_recorded_;
    f["ooms_reproduced"] = ooms_reproduced_;
  }
  return f;
}

}  // namespace fragsim

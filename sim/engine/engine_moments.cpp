// Engine, its moments (sim/engine/engine_impl.h): a space's peak snapshot (taken, or owed and paid by a
// re-run when unaffordable) and the record of an OOM with the device's state at it.
#include <fmt/format.h>

#include <algorithm>

#include "sim/base/error.h"
#include "sim/engine/engine_impl.h"
#include "traces/trace_reader.h"

namespace fragsim {

void Engine::take_peak_now(std::uint32_t si) {
  Slot& s = slots_[si];
  s.peak = live_.moment(
      s.peak_event, s.peak_t, slot_views(), [si](std::uint32_t i) { return i == si; }, opt_.keep_live_buffers);
  s.peak_dirty = false;
  s.peak_missed = false;
}

// A free is about to leave a space's new peak. A snapshot costs O(live buffers + map blocks); a
// trace that climbs in small steps (alloc, alloc, free, ...) would pay it at every step,
// O(n · live). So snapshots are paid from a credit that grows by kSnapshotCredit per event:
// affordable ones are taken, the others only remember where they would have been taken, and if a
// space's final peak is such a one, end() replays the trace once more up to those events
// (peaks_by_rerun). The cost stays linear and each reported peak is exactly the one a snapshot at
// every step gives.
void Engine::take_peak_when_leaving(std::uint32_t si) {
  Slot& s = slots_[si];
  if (!rerun_take_at_.empty()) {  // the re-run: only the snapshots it is for
    if (si < rerun_take_at_.size() && current_event_ == rerun_take_at_[si]) {
      take_peak_now(si);
      rerun_take_at_[si] = kNoRerun;
      --rerun_left_;
    }
    s.peak_dirty = false;
    return;
  }
  // An offline policy defers its snapshots too: its re-run reads the lifetimes again, and its plan
  // is the one this run made (policies plan the same buffers once per process: static-heap's plan
  // cache), so a heap that climbs buffer by buffer (20,000 live) costs no snapshot per step.
  std::uint64_t cost = 2 * live_.handle_limit() + 64;
  if (cost <= snapshot_credit_) {
    snapshot_credit_ -= std::min(cost, snapshot_credit_);
    take_peak_now(si);
    return;
  }
  s.peak_dirty = false;
  s.peak_missed = true;
  s.missed_event = current_event_;
}

// The peaks' snapshots the run could not afford: the same replay again, without outputs, up to
// the events at which they would have been taken. Policies are deterministic, so these are the
// very states the first pass passed through (slots are created in the same order).
std::vector<std::optional<Moment>> Engine::peaks_by_rerun() const {
  RunOptions o = opt_;
  o.placements.clear();
  o.sink = nullptr;
  o.check = false;
  o.history.reset();
  Engine e(o, reg_);
  e.rerun_take_at_.assign(slots_.size(), kNoRerun);
  for (std::uint32_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].peak_missed) e.rerun_take_at_[i] = slots_[i].missed_event, ++e.rerun_left_;
  if (e.info_.needs_lifetimes) e.collect_lifetimes();
  auto reader = e.open();
  e.begin(reader->header(), reader->recording());
  Event ev;
  while (e.rerun_left_ > 0 && reader->next(ev)) e.feed(ev);
  if (e.rerun_left_ > 0) throw InternalError("peak re-run did not reach its events");
  std::vector<std::optional<Moment>> peaks(slots_.size());
  for (std::uint32_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].peak_missed) peaks[i] = std::move(e.slots_[i].peak);
  return peaks;
}

void Engine::record_oom(std::uint32_t si, const Event& ev, const AllocRequest& rq) {
  Slot& s = slots_[si];
  Usage u = s.policy->usage();
  OomRecord o;
  o.event_index = ev.index;
  o.t = ev.t;
  o.id = ev.id;
  o.device = ev.device;
  o.space = s.space;
  o.requested = ev.size;
  o.rounded = s.policy->rounded_size(rq);
  o.allocated = u.allocated;
  o.reserved = u.reserved;
  o.free = u.available;
  o.largest_free = u.largest_available;
  o.needed = std::max(o.rounded, s.policy->oom_need(rq));
  o.fragmentation = o.free >= o.needed;
  o.kind = s.policy->oom_kind(rq);
  o.request = LiveSet::request_view(ev);
  o.request.block = o.rounded;
  if (ev.has(key::kPreTrace)) {  // the state before the recording does not fit
    o.before_trace = true;
    if (s.prior) {
      o.prior_live = s.prior->live;
      ++s.prior->blocks_failed;
    }
  }
  if (out_.ooms.size() < kDetailedOoms) {
    o.explanation = s.policy->describe_oom(rq);
    const std::uint32_t device = s.device;
    // The state as the allocator holds it now: a block held before the recording that fails while its
    // history runs has not been accounted (the history's steps are not the run's), and the moment
    // said 0 B allocated of 0 B reserved beside an OOM line with 35 GiB of both (trial 15).
    std::vector<SlotView> views = slot_views();
    views[si].footprint = s.policy->footprint();
    o.moment = live_.moment(
        ev.index, ev.t, views, [&](std::uint32_t i) { return slots_[i].device == device; }, opt_.keep_live_buffers);
  }
  if (sink_)
    sink_->oom(ev.t, o.device, o.space, o.id, o.request.name, o.requested, o.free, o.largest_free, oom_cause(o),
               o.kind);
  out_.ooms.push_back(std::move(o));
  out_.completed = false;
}

}  // namespace fragsim

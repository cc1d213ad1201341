// Engine, the state before a mid-run recording (sim/engine/prior_state.h): once the trace's own
// events begin, each space decides how it holds what the recording shows from before it began,
// then holds it — as recorded (the events in their order, seeded where the recording placed
// them) or re-held (the history the recording implies, through allocate() as any request).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "sim/base/error.h"
#include "sim/engine/engine_impl.h"

namespace fragsim {

void Engine::settle_prior() {
  prior_.close();
  const std::vector<Event>& evs = prior_.events();
  // Placement lines of the state wait here until it is held: a re-held one is placed in the
  // history's order, and the file lists allocations in event order.
  const size_t placements_from = pbuf_.size();
  settling_ = true;
  // The slots the state lies in, in the order its events name them (observations concern the
  // device's main memory, as observe() routes them).
  std::vector<std::uint32_t> touched;
  for (const Event& ev : evs) {
    if (!PriorState::belongs(ev)) continue;
    const Space sp = ev.op == Op::kAlloc ? route(ev.space, ev) : Space::kHbm;
    const std::uint32_t si = slot(key(ev.device, sp), ev);
    if (std::find(touched.begin(), touched.end(), si) == touched.end()) touched.push_back(si);
  }
  for (std::uint32_t si : touched) decide_prior(si);
  if (opt_.prior.history == PriorHistory::kLikely &&
      std::any_of(touched.begin(), touched.end(), [&](std::uint32_t si) { return slots_[si].prior_rebuilt(); }))
    learn_prior_frees();
  // As recorded: every event in its order (an observation skips the spaces that re-hold it; stacks
  // and marks go as they came).
  for (const Event& ev : evs) {
    current_event_ = ev.index;
    if (ev.op != Op::kAlloc || !slots_[slot(key(ev.device, route(ev.space, ev)), ev)].prior_rebuilt()) feed_other(ev);
  }
  // A re-held state is held at one moment, the last event before the trace's own: every record by
  // event (the metrics' timeline, the page's logs, the deltas) needs events that never go back,
  // and the history places the blocks in its own order, not the trace's.
  const std::uint64_t held_at = evs.empty() ? current_event_ : evs.back().index;
  bool held = false;
  defer_history_ = true;
  for (std::uint32_t si : touched) {
    if (!slots_[si].prior_rebuilt()) continue;
    if (!replays(slot_key_[si])) {  // another space of its device did not fit its state: never held
      const Slot& s = slots_[si];
      for (const Event& ev : prior_.events())
        if (ev.op == Op::kAlloc && ev.device == s.device && route(ev.space, ev) == s.space)
          ++req_[slot_key_[si]].not_replayed;
      continue;
    }
    rebuild_prior(si, held_at);
    held = true;
  }
  defer_history_ = false;
  // The page's records (samples, keyframes, deltas, regions) take the re-held state once, whole.
  if (held && history_) {
    Event at = *std::find_if(evs.rbegin(), evs.rend(), PriorState::belongs);
    at.index = held_at;
    history_->after(at, slot_views());
  }
  for (std::uint32_t si : touched) slots_[si].metrics.recording_begins(slots_[si].policy->footprint().reserved);
  prior_.release();
  settling_ = false;
  // Each process whose state did not fit on some device stops now, every device's state held.
  for (const auto& [device, event] : stops_after_settle_) stop_process(device, event);
  stops_after_settle_.clear();
  sort_placements(placements_from);
}

// Which blocks live before the recording the trace frees before it obtains memory of its own
// (PriorBlock::freed_unproven): a read of the trace of its own, as RecordingAnchor's, from the
// first event after that state until the answer is known for every block (most recordings obtain a
// segment or free those blocks early) or the trace ends.
void Engine::learn_prior_frees() {
  auto reader = open();
  Event ev;
  bool before = true;
  for (std::uint64_t n = 1; reader->next(ev); ++n) {
    if (n % kCancelEvents == 0) check_cancel(opt_);
    if (before && PriorState::collected(ev)) continue;
    before = false;
    if (!prior_.learn_free(ev)) break;
  }
}

void Engine::decide_prior(std::uint32_t si) {
  Slot& s = slots_[si];
  PriorOutcome o;
  for (const Event& ev : prior_.events())
    if (ev.op == Op::kAlloc && ev.device == s.device && route(ev.space, ev) == s.space) ++o.blocks, o.live += ev.size;
  if (s.space == Space::kHbm)
    for (const PriorRegion& r : prior_.regions(s.device)) {
      ++o.regions;
      o.mapped_ranges += r.mapped_range ? 1 : 0;
      o.region_bytes += r.size;
    }
  // What the recording held here against what this run lets the policy hold: its own limit (a
  // memory fraction) within the device's usable memory.
  const Bytes held = o.region_bytes ? o.region_bytes : o.live;
  const Bytes room = s.policy->limit() ? std::min(s.policy->limit(), s.spec->usable()) : s.spec->usable();
  using Mode = PriorOptions::Mode;
  if (info_.needs_lifetimes) {
    o.reason = "planned with the rest of the trace (an offline plan places what the recording fixed where it was)";
  } else if (opt_.follow_recording) {
    o.reason = "--follow-recording keeps every placement the recording shows";
  } else if (held > room) {  // in every mode: a limit binds from the first byte
    o.rebuilt = true;
    o.reason = fmt::format(
        "re-held: the {} the recording's allocator held when recording began exceed the {} this run allows (its "
        "limit binds from the first byte: cached memory that does not fit is released, as the allocator does){}",
        human_bytes(held), human_bytes(room),
        opt_.prior.mode == Mode::kRecorded ? "; --pre-trace recorded cannot keep a placement that does not fit" : "");
  } else if (opt_.prior.mode == Mode::kRecorded) {
    o.reason = "--pre-trace recorded: kept where the recording placed it, whatever this run's settings";
  } else if (opt_.prior.mode == Mode::kRebuilt) {
    o.rebuilt = true;
    o.reason = "--pre-trace rebuilt: re-held under this run's settings";
  } else if (!s.policy->seeds_recording() &&
             !s.policy->seeds_state(s.space == Space::kHbm ? prior_.regions(s.device) : std::vector<PriorRegion>{})) {
    o.rebuilt = true;
    // The recording's allocator with its settings on another device's memory: a limit derived from
    // that memory (a BFC's share of it) changes its decisions (trial 12: "this run's allocator or
    // settings are not the recording's" where only --capacity differed).
    Bytes recorded_capacity = 0;  // 0: the recording does not say
    if (s.space == Space::kHbm && recording_.hardware)
      if (const std::optional<SpaceSpec> rec = recorded_hbm(*recording_.hardware, s.device))
        recorded_capacity = rec->capacity;
    const bool recorded_settings = config_.is_object() && config_.contains(kRecordedSettingsKey);
    if (recorded_settings && recorded_capacity && recorded_capacity != s.spec->capacity)
      o.reason = fmt::format(
          "re-held: the recording's allocator and settings, but on {} of device memory where the recording had {}: "
          "the allocator's limit follows the device's memory, and its decisions the limit, so the memory held "
          "before the recording began is held as they would hold it there",
          human_bytes(s.spec->capacity), human_bytes(recorded_capacity));
    else
      o.reason =
          "re-held: this run's allocator or settings are not the recording's, so the memory held before the "
          "recording began is held as they would hold it";
  } else if (!s.policy->seeds_recording()) {
    o.reason =
        "as recorded: this run's settings differ from the recording's only in decisions the state before it "
        "shows none of, so they could have left that state";
  } else {
    o.reason = "as recorded: the recording's allocator with its settings, on memory that holds that state";
  }
  s.prior = std::move(o);
}

void Engine::rebuild_prior(std::uint32_t si, std::uint64_t held_at) {
  const Event& first = *std::find_if(prior_.events().begin(), prior_.events().end(), PriorState::belongs);
  current_event_ = held_at;
  std::vector<bool> placed(prior_.events().size(), false);  // live blocks the history placed
  {
    Slot& s = slots_[si];
    PriorOutcome& o = *s.prior;
    std::vector<PriorRequest> reqs;
    if (s.space == Space::kHbm) reqs = s.policy->prior_requests(prior_.regions(s.device), opt_.prior.history);
    // Requests of a history the recording implies, not decisions it recorded: the device memory
    // does not check them against recorded addresses, and metrics see only what they leave behind.
    const bool logging = s.mem->logging();
    s.mem->set_logging(false);
    std::vector<std::vector<size_t>> release_before(reqs.size() + 1);
    for (size_t k = 0; k < reqs.size(); ++k)
      release_before[std::min(reqs[k].released_before, reqs.size())].push_back(k);
    std::vector<Handle> held(reqs.size(), kNoHandle);
    auto release = [&](size_t k) {
      if (held[k] == kNoHandle) return;
      s.policy->release(held[k]);
      s.free_local.push_back(held[k]);
      held[k] = kNoHandle;
    };
    const std::uint32_t device = s.device;
    const Space space = s.space;
    for (size_t k = 0; k <= reqs.size(); ++k) {
      for (size_t j : release_before[k]) release(j);
      if (k == reqs.size() || !replays(slot_key_[si])) break;
      if (reqs[k].live != SIZE_MAX) {  // a live block, placed at its turn in the history
        const Event& ev = prior_.events().at(reqs[k].live);
        if (placed[reqs[k].live] || ev.device != device || route(ev.space, ev) != space) continue;
        placed[reqs[k].live] = true;
        ++o.placed_in_history;
        s.mem->set_logging(logging);
        in_prior_history_ = true;
        place_held(ev, held_at);
        in_prior_history_ = false;
        s.mem->set_logging(false);
        continue;
      }
      AllocRequest rq;
      rq.handle = s.take_local();
      rq.id = first.id;
      rq.size = reqs[k].size;
      rq.stream = reqs[k].stream;
      rq.aggregate = reqs[k].aggregate;
      rq.space = s.space;
      rq.t = now_;
      rq.event_index = held_at;
      if (s.policy->allocate(rq).ok) {
        held[k] = rq.handle;
        ++o.requests;
        o.request_bytes += reqs[k].size;
      } else {  // the what-if would not have kept this cache (a limit): left out
        s.free_local.push_back(rq.handle);
        ++o.requests_dropped;
      }
    }
    for (size_t k = 0; k < reqs.size(); ++k) release(k);
    s.mem->set_logging(logging);
    if (!reqs.empty()) account(si);  // what the history left behind, the live blocks it placed included
  }
  // The live blocks, in address order (or its reverse, a variant of the range), as any request.
  // After an OOM stopped the replay each still goes to alloc(), which counts what the program asked
  // for without placing it: the peak requested is the trace's, whatever stopped the run.
  const std::uint32_t device = slots_[si].device;
  const Space space = slots_[si].space;
  auto mine = [&](const Event& ev) { return ev.device == device && route(ev.space, ev) == space; };
  for (const Event* ev : prior_.allocs(mine, opt_.prior.descending)) {
    if (placed[static_cast<size_t>(ev - prior_.events().data())]) continue;
    place_held(*ev, held_at);
  }
}

// A block live before the recording, re-held at event `held_at` (its placement line keeps its own).
void Engine::place_held(const Event& ev, std::uint64_t held_at) {
  Event at = ev;
  at.index = held_at;
  held_index_ = ev.index;
  feed_other(at);
  held_index_.reset();
}

// Puts the placement lines from byte `from` of pbuf_ in event order ("i"), ties as written.
void Engine::sort_placements(size_t from) {
  if (!placements_ || from >= pbuf_.size()) return;
  std::vector<std::pair<std::uint64_t, std::string_view>> lines;
  const std::string_view all(pbuf_);
  for (size_t at = from; at < all.size();) {
    const size_t end = all.find('\n', at) + 1;
    const std::string_view line = all.substr(at, end - at);
    std::uint64_t i = 0;
    const std::string_view key = "{\"i\":";
    std::from_chars(line.data() + key.size(), line.data() + line.size(), i);
    lines.emplace_back(i, line);
    at = end;
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string sorted;
  sorted.reserve(all.size() - from);
  for (const auto& [i, line] : lines) sorted += line;
  pbuf_.replace(from, std::string::npos, sorted);
}

}  // namespace fragsim

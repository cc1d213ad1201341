// Engine, the per-event path (sim/engine/engine_impl.h): dispatch, routing, the slots of (device,
// space) and their accounting. A run's start and end: sim/engine/engine_run.cpp; peaks and OOMs:
// sim/engine/engine_moments.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "sim/base/error.h"
#include "sim/engine/engine_impl.h"
#include "traces/trace_reader.h"

namespace fragsim {

namespace {

// Every field named (designated), so that no block of the request is cleared first.
[[gnu::always_inline]] inline AllocRequest request_of(const Event& ev) {
  const bool pre = ev.has(key::kPreTrace), addr = ev.has(key::kAddr);
  return AllocRequest{.handle = ev.handle,
                      .id = ev.id,
                      .size = ev.size,
                      .stream = ev.stream,
                      .space = ev.space,
                      .t = ev.t,
                      .event_index = ev.index,
                      .dtype = ev.dtype,
                      .shape = ev.shape,
                      .has_shape = ev.has(key::kShape),
                      .seeded_at = pre && addr ? std::optional<Addr>(ev.addr) : std::nullopt,
                      .seeded_block = pre && ev.has(key::kBlockSize) ? ev.block_size : 0,
                      .seeded_extents = {},
                      .recorded_addr = !pre && addr ? std::optional<Addr>(ev.addr) : std::nullopt,
                      .aggregate = pre && ev.has(key::kAggregate),
                      .held_pieces = {}};
}

Observation observation_of(const Event& ev) {
  Observation o;
  o.op = ev.op;
  o.addr = ev.addr;
  o.has_addr = ev.has(key::kAddr);
  o.size = ev.size;
  o.stream = ev.stream;
  o.pre_trace = ev.has(key::kPreTrace);
  return o;
}

// What the run's input limits scale with: a trace held in memory's size, else its file's.
std::uint64_t limit_basis(const RunOptions& o) { return o.held_bytes ? *o.held_bytes : input_bytes(o.trace); }

}  // namespace

std::string oom_cause(const OomRecord& o) { return o.fragmentation ? "fragmentation" : "capacity"; }

Engine::Engine(const RunOptions& opt, const Registry& reg)
    : opt_(opt),
      reg_(reg),
      info_(reg.find(opt.policy.name)),
      live_(LimitCounter(Limit::kNames, opt.trace, limit_basis(opt))),
      devices_kept_(Limit::kDevices, opt.trace, limit_basis(opt)),
      marks_kept_(Limit::kMarks, opt.trace, limit_basis(opt)) {
  if (opt_.follow_recording) live_.index_addresses();  // follow() asks what lies under a recorded range
  for (int i = 0; i < static_cast<int>(Space::kCount); ++i) {
    auto sp = static_cast<Space>(i);
    route_[i] = opt_.hw.space(sp)                                          ? sp
                : (sp == Space::kCollective && opt_.hw.space(Space::kHbm)) ? Space::kHbm
                                                                           : Space::kCount;
  }
}

Scheduler::Task Engine::schedule(Tick t, std::function<void()> fn) {
  auto f = std::make_shared<std::function<void()>>(std::move(fn));
  deferred_.push({std::max(t, now_), seq_++, f});
  return Task(std::move(f));
}

// Offline policies: one pass over the trace collects every lifetime per (device, space).
void Engine::collect_lifetimes() {
  auto reader = open();
  std::vector<std::pair<LifetimeKey, size_t>> where;  // per handle: (key, index in lifetimes_[key])
  std::map<LifetimeKey, std::uint64_t> clock;
  Event ev;
  for (std::uint64_t n = 1; reader->next(ev); ++n) {
    if (n % kCancelEvents == 0) check_cancel(opt_);
    if (ev.op != Op::kAlloc && ev.op != Op::kFree) continue;
    Space sp = route(ev.op == Op::kAlloc ? ev.space : ev.live_space, ev);
    LifetimeKey k{ev.device, sp};
    std::uint64_t t = clock[k]++;
    if (ev.op == Op::kAlloc) {
      if (ev.handle >= where.size()) where.resize(ev.handle + 1);
      auto& v = lifetimes_[k];
      where[ev.handle] = {k, v.size()};
      v.push_back({t, UINT64_MAX, OwnedRequest(request_of(ev))});
    } else {
      auto [key, i] = where[ev.handle];
      lifetimes_[key][i].end = t;
    }
  }
  for (auto& [k, v] : lifetimes_)
    for (auto& l : v)
      if (l.end == UINT64_MAX) l.end = clock[k];
}

void Engine::feed(const Event& ev) {
  if (out_.events++ == 0) {
    out_.first_t = ev.t;
    if (history_) history_->set_origin(ev.t);
  }
  snapshot_credit_ += kSnapshotCredit;
  current_event_ = ev.index;
  if (prior_.collecting()) [[unlikely]] {
    if (PriorState::collected(ev)) {
      prior_.add(ev);
      return;
    }
    settle_prior();
  }
  // Most events: an alloc or a free, replayed, in a run with no window, history or check and
  // nothing deferred. Everything else takes feed_other, so that this path stays short.
  if (common_ && replaying_ && deferred_.empty() && (ev.op == Op::kAlloc || ev.op == Op::kFree)) {
    now_ = ev.t;
    if (ev.op == Op::kAlloc)
      alloc(ev);
    else
      free(ev);
    return;
  }
  feed_other(ev);
}

void Engine::feed_other(const Event& ev) {
  if (!opt_.window.whole()) {
    const double since = static_cast<double>(ev.t.value() - std::min(ev.t.value(), out_.first_t.value())) *
                         seconds_per_tick(out_.time_unit);
    in_window_ = opt_.window.contains(ev.index, since);
    if (in_window_ && !window_seen_) {
      out_.window_first = ev.index, window_seen_ = true;
      // Every space that holds memory as the window opens is drawn from its first event, not from
      // the space's own first event in it (trial 14: a TPU pool reserved before --from 10 began at 16).
      for (std::uint32_t i = 0; i < slots_.size(); ++i)
        if (replays(slot_key_[i])) account(i);
    }
    if (in_window_) out_.window_last = ev.index;
  }
  if (!all_stopped_) {
    while (!deferred_.empty() && deferred_.top().t <= ev.t) run_deferred();
    now_ = ev.t;
  }
  switch (ev.op) {
    case Op::kAlloc:
      alloc(ev);
      break;
    case Op::kFree:
      free(ev);
      break;
    case Op::kMark:
      if (out_.marks.size() < kMaxMarks) {
        marks_kept_.spend(ev.name.size());
        out_.marks.push_back({ev.name, ev.index, ev.t});
      }
      if (sink_ && !all_stopped_) sink_->mark(ev.t, ev.name);
      break;
    case Op::kStack:
      live_.define_stack(ev.id.value(), ev.frames);
      break;
    case Op::kReserved: {  // the recording allocator's reserved memory: does the replay hold the same?
      std::optional<Bytes> simulated;
      if (const std::uint32_t k = key(ev.device, Space::kHbm); replays(k)) {
        simulated = slot_index_[k] != kNoSlot ? slots_[slot_index_[k]].policy->footprint().reserved : 0;
      }
      fidelity_.reserved(ev, simulated);
      break;
    }
    case Op::kEmptyCache: {
      ++out_.empty_cache_calls;
      const bool maybe_retry = ev.has(key::kName) && ev.name == kReleaseMaybeRetry;
      if (maybe_retry) ++out_.empty_cache_maybe_retries;
      if (out_.actions.size() < kMaxMarks)
        out_.actions.push_back({maybe_retry ? std::string(kReleaseMaybeRetry) : "empty_cache", ev.index, ev.t});
      for (std::uint32_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].device != ev.device || !replays(slot_key_[i])) continue;
        out_.empty_cache_effect = slots_[i].policy->empty_cache();
        account(i);
      }
      break;
    }
    default:
      if (is_observation(ev.op)) observe(ev);
      break;
  }
  if (history_ && !defer_history_) history_->after(ev, slot_views());
  if (opt_.check && !all_stopped_ && ++since_check_ * kCheckBatch >= live_placed_ + slots_.size()) {
    since_check_ = 0;
    for (auto& s : slots_) {
      try {
        s.policy->validate();
        FRAGSIM_CHECK(s.policy->footprint() == footprint_of(s.policy->usage()),
                      "footprint() differs from usage()'s allocated, reserved and largest free block");
        // Its own cap binds from the first byte, the state before a recording included.
        FRAGSIM_CHECK(!s.policy->reserve_limit() || s.policy->footprint().reserved <= s.policy->reserve_limit(),
                      fmt::format("reserved {} B above its own limit {} B", s.policy->footprint().reserved,
                                  s.policy->reserve_limit()));
      } catch (const InternalError& e) {
        throw InternalError(
            fmt::format("{}:{}: after event {}: policy invariant broken: {}", opt_.trace, ev.line, ev.index, e.what()));
      }
    }
  }
}

void Engine::alloc(const Event& ev) {
  ++out_.allocs;
  if (!first_stream_)
    first_stream_ = ev.stream;
  else if (ev.stream != *first_stream_)
    out_.several_streams = true;
  ++(ev.has(key::kPreTrace) ? pre_trace_allocs_ : replayable_);
  std::uint32_t k = key(ev.device, route(ev.space, ev));
  count_member(k, ev.has(key::kPreTrace));
  Requested& rq = req_[k];
  rq.live += ev.size;
  rq.peak = std::max(rq.peak, rq.live);
  totals_.add_requested(ev.size);
  live_.begin(ev.handle);
  if (!replays(k)) {
    ++rq.not_replayed;
    fidelity_.not_replayed(ev.device);
    if (ev.has(key::kAddr) && !ev.has(key::kPreTrace) && !opt_.follow_recording) fidelity_.address_not_reached();
    return;
  }
  const std::uint32_t si = slot(k, ev);
  Slot& s = slots_[si];
  if (ev.size == 0) {  // occupies nothing: no framework passes it to its allocator
    live_.set(ev.handle, LiveSet::State::kEmpty);
    if (placements_) write_placement(ev, Placement::unplaced());
    return;
  }
  AllocRequest request = request_of(ev);
  request.handle = s.take_local();
  live_.set_local(ev.handle, request.handle);
  // Regions the recording's allocator held before it began (recording_anchor.h): obtained first,
  // where the policy takes that state as recorded.
  const std::uint32_t space_bit = 1u << static_cast<int>(ev.space);
  if (!(s.anchor_spaces_taken & space_bit) && !s.prior_rebuilt() &&
      (ev.has(key::kPreTrace) || s.policy->seeds_recording())) {
    s.anchor_spaces_taken |= space_bit;  // once a space: not a lookup at every allocation
    for (const Observation& ob : anchor_.take_regions(ev.device, ev.space)) s.policy->observe(ob);
  }
  if (ev.has(key::kPreTrace)) {
    if (s.prior_rebuilt()) {  // re-held as any request (prior_state.h)
      request.seeded_at.reset();
      request.seeded_block = 0;
      request.held_pieces = anchor_.extents(ev);
    } else {  // where the recording implies the state before it was
      request.seeded_extents = anchor_.extents(ev);
      if (!request.seeded_block) request.seeded_block = anchor_.block(ev);
    }
  }
  Placement p = s.policy->allocate(request);
  if (s.mem->moves().size() > s.moves_seen) [[unlikely]]
    take_moves(s, ev);
  if (opt_.follow_recording && !ev.has(key::kPreTrace)) p = follow(si, ev, request, p);
  fidelity_.outcome(ev.device, !p.ok);
  if (placements_) write_placement(ev, p);
  if (ev.has(key::kAddr) && !ev.has(key::kPreTrace) && !opt_.follow_recording) fidelity_.address(ev, p);
  if (p.ok) {
    live_.set(ev.handle, LiveSet::State::kPlaced);
    ++live_placed_;
    live_.remember(ev, p, si);
    if (history_) history_->placed(ev, p, si, slot_views());
    if (sink_)
      sink_->begin_buffer(ev.t, s.device, s.space, ev.id, ev.has(key::kName) ? ev.name : std::string_view(), ev.size,
                          p.block, p.has_addr, p.addr);
  } else {
    live_.set(ev.handle, LiveSet::State::kFailed);
    s.free_local.push_back(request.handle);  // never released: free for the next
    // The OOM's figures and its moment are one state: after what the allocator did before giving
    // up (PyTorch frees its cache and retries; its message describes the state after that).
    account(si);
    record_oom(si, ev, request);
    if (!opt_.keep_going) stop_process(ev.device, ev.index);
    check_fatal(s, ev);
    return;
  }
  account(si);
  check_fatal(s, ev);
}

void Engine::free(const Event& ev) {
  ++out_.frees;
  ++replayable_;
  std::uint32_t k = key(ev.device, route(ev.live_space, ev));
  count_member(k, false);
  // The state before memory goes down is the space's peak.
  const bool replayed = replays(k);
  if (replayed && slot_index_[k] != kNoSlot && slots_[slot_index_[k]].peak_dirty)
    take_peak_when_leaving(slot_index_[k]);
  req_[k].live -= ev.live_size;
  totals_.remove_requested(ev.live_size);
  if (!replayed) return;
  if (live_.state(ev.handle) == LiveSet::State::kPlaced) {
    const std::uint32_t si = live_.slot_of(ev.handle);
    Slot& s = slots_[si];
    if (sink_) end_slice(ev.handle, ev.t);
    if (history_) history_->freeing(ev, slot_views());
    const Handle local = live_.local_of(ev.handle);
    if (ev.has(key::kStream))
      s.policy->release_on_stream(local, ev.stream);
    else
      s.policy->release(local);
    s.free_local.push_back(local);
    --live_placed_;
    account(si);
    check_fatal(s, ev);
  }
  live_.set(ev.handle, LiveSet::State::kNotLive);
}

void Engine::observe(const Event& ev) {
  if (ev.op == Op::kOom) {  // a recorded OOM: did the simulation fail the same request?
    fidelity_.recorded_oom(ev);
    if (out_.actions.size() < kMaxMarks) out_.actions.push_back({"recorded OOM", ev.index, ev.t});
    return;
  }
  if (!replays(key(ev.device, Space::kHbm))) return;
  bool pre = ev.has(key::kPreTrace);
  // What the recording allocator did concerns the device's main memory: its policy exists from
  // the first observation on (it may seed state or take recorded addresses from it).
  Slot& main = slots_[slot(key(ev.device, Space::kHbm), ev)];
  if (pre && main.prior_rebuilt()) return;  // the state before the recording is re-held, not seeded
  DeviceMemory& mem = *main.mem;
  if (ev.op == Op::kSegmentAlloc && ev.has(key::kAddr)) {
    mem.expect_address(ev.addr);
    // A recording of segments: from its first on, the device's grants and releases are logged to
    // be compared — a cut recording's first release may come from an empty_cache before any
    // segment event of its own (the release precedes the segment_free events that record it).
    // Seeding the state before the recording is not logged (below).
    mem.set_logging(true);
    if (!pre) fidelity_.segment_alloc(ev.device, ev.size);
  }
  if (ev.op == Op::kSegmentFree && ev.has(key::kAddr)) {  // the recording allocator's cudaFree
    mem.set_logging(true);
    fidelity_.segment_free(ev.device, ev.addr);
  }
  Observation ob = observation_of(ev);
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.device != ev.device || (pre && s.prior_rebuilt())) continue;
    const bool logging = s.mem->logging();
    if (pre) s.mem->set_logging(false);  // seeding is not a decision to check
    s.policy->observe(ob);
    s.mem->set_logging(logging);
    account(i);
  }
}

void Engine::run_deferred() {
  Deferred d = deferred_.top();
  deferred_.pop();
  if (!*d.fn) return;  // cancelled: its owner went away or no longer wants it
  now_ = std::max(now_, d.t);
  auto fn = std::move(*d.fn);
  *d.fn = nullptr;  // the Task now reports it as done
  fn();
  // A task (cuda-async's trim) changes its own pool only: the slots whose footprint it left as it was
  // get no timeline point (every slot's, for every task, cost O(devices^2) memory on a trace of
  // thousands of devices).
  for (std::uint32_t i = 0; i < slots_.size(); ++i)
    if (replays(slot_key_[i]) && !(slots_[i].policy->footprint() == slots_[i].metrics.last())) account(i);
}

// Spaces the hardware lacks fall back as GPU programs see them: collective buffers live in HBM.
void Engine::no_route(Space sp, const Event& ev) const {
  std::vector<std::string> has;
  for (const auto& s : opt_.hw.spaces) has.push_back(std::string(space_name(s.space)));
  throw InputError(
      opt_.trace, ev.line,
      fmt::format("space: this event's memory is in '{}', which hardware '{}' (a {}) does not have (its "
                  "spaces: {}): --hw names hardware that has it",
                  space_name(sp), opt_.hw.name, opt_.hw.kind == "tpu" ? "TPU" : "GPU", fmt::join(has, ", ")));
}

// key() found another device than the event before's: a map lookup. A (device, space)'s key is a
// dense index: devices are numbered in order of appearance, so memory is O(devices used)
// whatever ordinals the trace uses.
void Engine::new_device(std::uint32_t device) {
  auto [it, fresh] = dense_.try_emplace(device, static_cast<std::uint32_t>(devices_.size()));
  if (fresh) {
    devices_kept_.spend(1);
    if (opt_.device_lists) check_device_lists(device, opt_.trace, limit_basis(opt_));
    devices_.push_back(device);
    if (!member_replayable_.empty()) member_of_dense_.push_back(recording_.process_of(device));
    auto stop = stopped_processes_.find(recording_.process_of(device));  // a stopped process's later device
    stopped_dense_.push_back(stop == stopped_processes_.end() ? kNotStopped : stop->second);
    req_.resize(devices_.size() * kSpaces);
    slot_index_.resize(devices_.size() * kSpaces, kNoSlot);
  }
  last_dense_ = it->second;
}

// The first event of a (device, space): its slot and policy.
std::uint32_t Engine::new_slot(std::uint32_t k, const Event& ev) {
  std::uint32_t device = devices_[k / kSpaces];
  Space sp = static_cast<Space>(k % kSpaces);
  Slot s;
  s.spec = std::make_unique<SpaceSpec>(*opt_.hw.space(route(sp, ev)));
  const SpaceSpec* spec = s.spec.get();
  if (const RecordedDeviceMemory* rd = opt_.recorded_devices ? recording_.device(device) : nullptr;
      rd && spec->space == Space::kHbm) {
    // The device's total stays the hardware's where it explains the usable memory (the rest is the
    // CUDA context and other processes': the runtime's reserve), as a fraction multiplies the total;
    // else the usable memory is all that is known of the device.
    if (total_explains_usable(spec->capacity, rd->usable)) {
      s.spec->reserve = spec->capacity - rd->usable;
    } else {
      s.spec->capacity = rd->usable;
      s.spec->reserve = 0;
    }
    s.usable_inferred = true;
    out_.notes.push_back(
        fmt::format("device {}: usable memory {} ({} B) inferred from the recording: {} "
                    "(--hw or --capacity overrides it)",
                    device, human_bytes(rd->usable), rd->usable, rd->basis));
  }
  // A set of recordings that mixes GPUs: each device has the memory its own recording reports, where
  // the run takes the recording's hardware (no --hw, --capacity or --reserve).
  if (opt_.recorded_devices && !s.usable_inferred && spec->space == Space::kHbm && recording_.hardware)
    if (auto it = recording_.hardware->devices.find(device);
        it != recording_.hardware->devices.end() && it->second.capacity != spec->capacity) {
      s.spec->set_capacity(it->second.capacity);
      out_.notes.push_back(fmt::format(
          "device {}: its memory is its own recording's, {} ({} B): {}; allocation granularity, reserve and "
          "device-call costs are the {} preset's, as for the whole run",
          device, human_bytes(it->second.capacity), it->second.capacity, it->second.basis, opt_.hw.name));
    }
  if (spec->space == Space::kHost && recording_.host_unbounded()) {
    // Whatever --hw and --capacity say: neither names the host's RAM (--capacity is the device's memory).
    s.spec->capacity = kMaxSpaceBytes;
    s.spec->reserve = s.spec->runtime_limit = 0;
    s.host_unbounded = true;
    out_.notes.push_back(fmt::format(
        "device {} host: no limit: PyTorch's CPU allocator has no cap of its own, and the host's RAM, which bounds "
        "it, is not in the recording (a CPU allocation the recording shows never runs out; the {} preset's {} host "
        "space is a framework's pinned pool, not this memory)",
        device, opt_.hw.name, human_bytes(opt_.hw.space(route(sp, ev))->capacity)));
  }
  s.device = device;
  s.space = spec->space;
  s.mem = std::make_unique<DeviceMemory>(*spec, opt_.hw.cost);
  for (const RegionMove& m : opt_.region_moves)
    if (m.device == device && m.space == spec->space) s.mem->remap(m.from, m.to);
  PolicyContext ctx;
  ctx.registry = &reg_;
  ctx.hw = &opt_.hw;
  ctx.space = spec;
  ctx.device_index = device;
  ctx.recording = &recording_;
  ctx.device = s.mem.get();
  ctx.scheduler = this;
  ConfigReader cfg(opt_.policy.config, "policy " + opt_.policy.name);
  PolicyBuilder build = info_.configure(cfg, ctx);
  cfg.finish();
  for (const auto& n : cfg.notes())
    if (std::find(out_.notes.begin(), out_.notes.end(), n) == out_.notes.end()) out_.notes.push_back(n);
  s.policy = build(ctx);
  if (info_.needs_lifetimes) {
    try {
      s.policy->plan(lifetimes_[{device, sp}]);
    } catch (const InputError& e) {  // a limit of the plan: named with the trace it plans
      throw InputError(opt_.trace + ": " + e.what());
    }
  }
  if (config_.is_null()) config_ = cfg.resolved();
  if (slots_.size() == 1) totals_.start_from(slots_.front().metrics);  // account() sums from now on
  slots_.push_back(std::move(s));
  slot_index_[k] = static_cast<std::uint32_t>(slots_.size() - 1);
  slot_key_.push_back(k);
  return slot_index_[k];
}

void Engine::account(std::uint32_t si) {
  if (in_prior_history_) [[unlikely]]
    return;
  Slot& s = slots_[si];
  const Footprint u = s.policy->footprint(), was = s.metrics.last();
  if (s.metrics.account(u, current_event_, saturate(req_[slot_key_[si]].live), in_window_)) {
    s.peak_dirty = true;
    s.peak_event = current_event_;
    s.peak_t = now_;
  }
  if (slots_.size() > 1) totals_.update(was, u);  // one slot: its own figures are the totals (finish)
  if (sink_) sink_counter(s, u);
}

void Engine::sink_counter(const Slot& s, const Footprint& u) {
  sink_->counter(now_, s.device, s.space, u.allocated, u.reserved, fragmentation(u));
}

void Engine::stop_fatal(const Slot& s, const Event& ev) {
  if (out_.fatal.empty()) {  // the run's first abort (another process of a set may abort later)
    out_.fatal = s.policy->fatal_error();
    out_.fatal_event = ev.index;
    out_.fatal_device = s.device;
    out_.fatal_space = s.space;
  }
  out_.completed = false;
  stop_process(s.device, ev.index);
}

void Engine::stop_process(std::uint32_t device, std::uint64_t event) {
  const std::uint32_t p = recording_.process_of(device);
  if (settling_) {
    // The state before the recording: every device of the process holds its own first (the
    // recording shows it held on each; which device's ran out first under the what-if, it cannot
    // tell), this device no more after its OOM; settle_prior then stops the process.
    const std::uint32_t d = dense_.at(device);
    if (stopped_dense_[d] == kNotStopped) stopped_dense_[d] = event;
    replaying_ = false;
    stops_after_settle_.emplace_back(device, event);
    return;
  }
  if (!stopped_processes_.emplace(p, event).second) return;
  out_.stopped_early = true;
  replaying_ = false;
  for (std::uint32_t d = 0; d < devices_.size(); ++d)
    if (recording_.process_of(devices_[d]) == p) stopped_dense_[d] = event;
  // Its peaks' snapshots now, while the live set still holds its buffers (later allocations may
  // reuse the handles of buffers whose frees are no longer replayed).
  for (std::uint32_t i = 0; i < slots_.size(); ++i)
    if (recording_.process_of(slots_[i].device) == p) {
      if (slots_[i].peak_dirty) take_peak_now(i);
      if (history_) history_->stopped_slot(i, event);
    }
  // Its buffers still live end here in the timeline trace (the other processes' go on).
  if (sink_)
    for (Handle h = 0; h < live_.handle_limit(); ++h)
      if (live_.state(h) == LiveSet::State::kPlaced && recording_.process_of(slots_[live_.slot_of(h)].device) == p)
        end_slice(h, now_);
  all_stopped_ = stopped_processes_.size() >= recording_.processes;
  if (all_stopped_ && history_) history_->stopped(event);
  out_.processes_stopped = static_cast<std::uint32_t>(stopped_processes_.size());
}

std::vector<SlotView> Engine::slot_views() const {
  std::vector<SlotView> v;
  for (const auto& s : slots_)
    v.push_back({s.device, s.space, s.policy.get(), s.metrics.last(), s.mem->alloc_calls() + s.mem->free_calls()});
  return v;
}

Placement Engine::follow(std::uint32_t si, const Event& ev, const AllocRequest& rq, const Placement& predicted) {
  Slot& s = slots_[si];
  auto overlapping = [&](const Extent& e) { return live_.overlapping(si, e, ev.handle); };
  auto displace = [&](Handle h) {
    const Handle local = live_.local_of(h);
    s.policy->release(local);
    s.free_local.push_back(local);
    --live_placed_;
    live_.set(h, LiveSet::State::kDisplaced);
  };
  return follow_.place(*s.policy, ev, rq, predicted, overlapping, displace);
}

}  // namespace fragsim

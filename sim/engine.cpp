#include "sim/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <set>
#include <thread>
#include <unordered_map>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/perfetto.h"
#include "traces/trace_reader.h"

namespace fragsim {

namespace {

struct Slot {
  std::uint32_t device;
  Space space;
  std::unique_ptr<SpaceSpec> spec;  // the space as this device has it (a recorded size may replace the preset's)
  std::unique_ptr<DeviceMemory> mem;
  std::unique_ptr<AllocatorPolicy> policy;
  Usage last;
  SpaceResult res;
  // The policy's own handles: dense per slot, so that its per-handle state is O(its live
  // allocations), not O(live allocations of every device).
  Handle next_local = 0;
  std::vector<Handle> free_local;
  Handle take_local() {
    if (free_local.empty()) return next_local++;
    Handle h = free_local.back();
    free_local.pop_back();
    return h;
  }
};

struct Deferred {
  Tick t;
  std::uint64_t seq;
  std::shared_ptr<std::function<void()>> fn;  // emptied when its Task is cancelled
  bool operator>(const Deferred& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Per handle: what happened to the allocation.
enum class HandleState : std::uint8_t { kNotLive, kPlaced, kFailed, kEmpty };

AllocRequest request_of(const Event& ev) {
  AllocRequest r;
  r.handle = ev.handle;
  r.id = ev.id;
  r.size = ev.size;
  r.stream = ev.stream;
  r.space = ev.space;
  r.t = ev.t;
  r.event_index = ev.index;
  r.dtype = ev.dtype;
  r.shape = ev.shape;
  r.has_shape = ev.has(key::kShape);
  if (ev.has(key::kPreTrace) && ev.has(key::kAddr)) r.seeded_at = ev.addr;
  if (ev.has(key::kPreTrace) && ev.has(key::kBlockSize)) r.seeded_block = ev.block_size;
  if (!ev.has(key::kPreTrace) && ev.has(key::kAddr)) r.recorded_addr = ev.addr;
  return r;
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

class Engine : public Scheduler {
 public:
  Engine(const RunOptions& opt, const Registry& reg) : opt_(opt), reg_(reg), info_(reg.find(opt.policy.name)) {
    for (int i = 0; i < static_cast<int>(Space::kCount); ++i) {
      auto sp = static_cast<Space>(i);
      route_[i] = opt_.hw.space(sp)                                          ? sp
                  : (sp == Space::kCollective && opt_.hw.space(Space::kHbm)) ? Space::kHbm
                                                                             : Space::kCount;
    }
  }

  Tick now() const override { return now_; }
  Task schedule(Tick t, std::function<void()> fn) override {
    auto f = std::make_shared<std::function<void()>>(std::move(fn));
    deferred_.push({std::max(t, now_), seq_++, f});
    return Task(std::move(f));
  }

  std::unique_ptr<TraceReader> open() const {
    if (opt_.source) return opt_.source();
    ReaderOptions ro;
    ro.lenient = opt_.lenient;
    return open_trace(opt_.trace, ro);
  }

  // Offline policies: one pass over the trace collects every lifetime per (device, space).
  void collect_lifetimes() {
    auto reader = open();
    std::vector<std::pair<LifetimeKey, size_t>> where;  // per handle: (key, index in lifetimes_[key])
    std::map<LifetimeKey, std::uint64_t> clock;
    Event ev;
    while (reader->next(ev)) {
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

  RunResult run() {
    if (info_.needs_lifetimes) collect_lifetimes();
    auto reader = open();
    begin(reader->header());
    Event ev;
    while (reader->next(ev)) feed(ev);
    out_.trace_digest = reader->digest();
    return end(reader->skipped_frees());
  }

  // The peak's snapshot when the run could not afford it (take_peak_when_leaving): the same
  // replay again, without outputs, up to the event at which it would have been taken. Policies
  // are deterministic, so this is the very state the first pass passed through.
  std::optional<Moment> peak_by_rerun() const {
    RunOptions o = opt_;
    o.placements.clear();
    o.perfetto.clear();
    o.check = false;
    Engine e(o, reg_);
    e.rerun_take_at_ = missed_take_event_;
    if (e.info_.needs_lifetimes) e.collect_lifetimes();
    auto reader = e.open();
    e.begin(reader->header());
    Event ev;
    while (!e.rerun_done_ && reader->next(ev)) e.feed(ev);
    if (!e.rerun_done_) throw InternalError("peak re-run did not reach its event");
    return std::move(e.out_.peak);
  }

  // The three steps of a run, so that one decoded stream can feed several engines.
  void begin(const nlohmann::json& header) {
    header_ = header;
    if (opt_.recorded_devices && header.is_object() && header.contains("recorded_devices") &&
        header["recorded_devices"].is_array())
      for (const auto& d : header["recorded_devices"]) {
        if (!d.is_object() || !d.contains("device") || !d["device"].is_number_unsigned() ||
            !d.contains("usable_bytes") || !d["usable_bytes"].is_number_unsigned())
          throw InputError(opt_.trace, 0, "recorded_devices: each entry needs device and usable_bytes");
        recorded_[d["device"].get<std::uint32_t>()] = {d["usable_bytes"].get<Bytes>(),
                                                       d.value("basis", std::string("from the trace header"))};
      }
    if (!opt_.placements.empty()) placements_ = std::make_unique<AtomicFile>(opt_.placements);
    out_.trace_path = opt_.trace;
    out_.header = header;
    out_.policy_name = opt_.policy.name;
    out_.hardware = opt_.hw.to_json();
    out_.notes = opt_.notes;
    if (header.is_object() && header.contains("time_unit") && header["time_unit"].is_string())
      out_.time_unit = header["time_unit"].get<std::string>();
    if (!opt_.perfetto.empty()) perfetto_ = std::make_unique<PerfettoWriter>(opt_.perfetto, out_.time_unit);
  }

  void feed(const Event& ev) {
    ++out_.events;
    snapshot_credit_ += kSnapshotCredit;
    current_event_ = ev.index;
    if (replaying_) {
      while (!deferred_.empty() && deferred_.top().t <= ev.t) run_deferred();
      now_ = ev.t;
    }
    switch (ev.op) {
      case Op::kAlloc: {
        ++out_.allocs;
        Space sp = route(ev.space, ev);
        std::uint32_t k = key(ev.device, sp);
        Requested& rq = req_[k];
        rq.live += ev.size;
        rq.peak = std::max(rq.peak, rq.live);
        total_req_ += ev.size;
        peak_req_ = std::max(peak_req_, total_req_);
        if (ev.handle >= state_.size()) {
          state_.resize(ev.handle + 1, HandleState::kNotLive);
          slot_of_.resize(ev.handle + 1, 0);
        }
        state_[ev.handle] = HandleState::kNotLive;
        if (!replaying_) break;
        std::uint32_t si = slot(k, ev);
        Slot& s = slots_[si];
        if (ev.size == 0) {  // occupies nothing: no framework passes it to its allocator
          state_[ev.handle] = HandleState::kEmpty;
          if (placements_) write_placement(ev, Placement::unplaced());
          break;
        }
        AllocRequest rq2 = request_of(ev);
        rq2.handle = s.take_local();
        if (ev.handle >= local_.size()) local_.resize(ev.handle + 1);
        local_[ev.handle] = rq2.handle;
        Placement p = s.policy->allocate(rq2);
        last_alloc_failed_[ev.device] = !p.ok;
        if (placements_) write_placement(ev, p);
        if (ev.has(key::kAddr) && !ev.has(key::kPreTrace)) check_address(ev, p);
        if (p.ok) {
          state_[ev.handle] = HandleState::kPlaced;
          ++live_placed_;
          slot_of_[ev.handle] = si;
          remember(ev, p, si);
          if (perfetto_)
            perfetto_->begin_buffer(ev.t, s.device, s.space, ev.id, ev.has(key::kName) ? ev.name : std::string_view(),
                                    ev.size, p.block, p.has_addr, p.addr);
        } else {
          state_[ev.handle] = HandleState::kFailed;
          s.free_local.push_back(rq2.handle);  // never released: free for the next
          record_oom(s, ev, rq2);
          if (!opt_.keep_going) {
            // Replay stops here: take the peak's snapshot now, while the live set is still this run's
            // (later allocs reuse handles of buffers whose frees are no longer replayed).
            if (peak_dirty_) take_peak_now();
            replaying_ = false;
            out_.stopped_early = true;
          }
        }
        account(s);
        check_fatal(s, ev);
        break;
      }
      case Op::kFree: {
        ++out_.frees;
        if (peak_dirty_ && replaying_) take_peak_when_leaving();  // the state before memory goes down is the peak
        Space sp = route(ev.live_space, ev);
        req_[key(ev.device, sp)].live -= ev.live_size;
        total_req_ -= ev.live_size;
        if (!replaying_) break;
        if (state_[ev.handle] == HandleState::kPlaced) {
          Slot& s = slots_[slot_of_[ev.handle]];
          if (perfetto_) end_slice(ev.handle, ev.t);
          Handle lh = local_[ev.handle];
          if (ev.has(key::kStream))
            s.policy->release_on_stream(lh, ev.stream);
          else
            s.policy->release(lh);
          s.free_local.push_back(lh);
          --live_placed_;
          account(s);
          check_fatal(s, ev);
        }
        state_[ev.handle] = HandleState::kNotLive;
        break;
      }
      case Op::kMark:
        if (out_.marks.size() < kMaxMarks) {
          marks_kept_.spend(ev.name.size());
          out_.marks.push_back({ev.name, ev.index, ev.t});
        }
        if (perfetto_ && replaying_) perfetto_->mark(ev.t, ev.name);
        break;
      case Op::kStack:
        for (const auto& f : ev.frames) names_kept_.spend(f.size());
        stack_frames_[ev.id.value()] = ev.frames;
        break;
      case Op::kEmptyCache:
        ++out_.empty_cache_calls;
        if (!replaying_) break;
        for (auto& s : slots_) {
          if (s.device != ev.device) continue;
          out_.empty_cache_effect = s.policy->empty_cache();
          account(s);
        }
        break;
      default:
        if (is_observation(ev.op)) observe(ev);
        break;
    }
    if (replaying_) record_timeline(ev.index);
    // --check: after every event while the state is small; with more live buffers and spaces
    // than kCheckBatch, after every k-th event, k = (live + spaces) / kCheckBatch: validate()
    // walks a policy's whole state, so checking stays a constant factor of the replay, not
    // O(events x live) (60,000 live buffers took minutes).
    if (opt_.check && replaying_ && ++since_check_ * kCheckBatch >= live_placed_ + slots_.size()) {
      since_check_ = 0;
      for (auto& s : slots_) {
        try {
          s.policy->validate();
        } catch (const InternalError& e) {
          throw InternalError(fmt::format("{}:{}: after event {}: policy invariant broken: {}", opt_.trace, ev.line,
                                          ev.index, e.what()));
        }
      }
    }
  }

  void set_digest(std::string d) { out_.trace_digest = std::move(d); }

  RunResult end(std::uint64_t skipped_frees) {
    if (replaying_)
      while (!deferred_.empty()) run_deferred();
    if (peak_dirty_) take_peak_now();
    if (peak_missed_) out_.peak = peak_by_rerun();
    out_.skipped_frees = skipped_frees;
    if (perfetto_) {  // buffers still live end with the trace
      for (Handle h = 0; h < state_.size() && h < live_.size(); ++h)
        if (state_[h] == HandleState::kPlaced) end_slice(h, now_);
      perfetto_->commit();
    }
    if (placements_) {
      placements_->write(pbuf_);
      placements_->commit();
    }
    collect_stacks();
    finish(out_);
    return std::move(out_);
  }

 private:
  void run_deferred() {
    Deferred d = deferred_.top();
    deferred_.pop();
    if (!*d.fn) return;  // cancelled: its owner went away or no longer wants it
    now_ = std::max(now_, d.t);
    auto fn = std::move(*d.fn);
    *d.fn = nullptr;  // the Task now reports it as done
    fn();
    for (auto& s : slots_) account(s);
  }

  // Spaces the hardware lacks fall back as GPU programs see them: collective buffers live in HBM.
  Space route(Space sp, const Event& ev) const {
    Space r = route_[static_cast<int>(sp)];
    if (r == Space::kCount)
      throw InputError(opt_.trace, ev.line,
                       fmt::format("space: hardware '{}' has no '{}' memory space", opt_.hw.name, space_name(sp)));
    return r;
  }

  // Dense index of a (device, space): devices are numbered in order of appearance, so memory is
  // O(devices used) whatever ordinals the trace uses.
  std::uint32_t key(std::uint32_t device, Space sp) {
    auto [it, fresh] = dense_.try_emplace(device, static_cast<std::uint32_t>(devices_.size()));
    if (fresh) {
      devices_kept_.spend(1);
      devices_.push_back(device);
      req_.resize(devices_.size() * kSpaces);
      slot_index_.resize(devices_.size() * kSpaces, kNoSlot);
    }
    return it->second * kSpaces + static_cast<std::uint32_t>(sp);
  }

  std::uint32_t slot(std::uint32_t k, const Event& ev) {
    if (slot_index_[k] != kNoSlot) return slot_index_[k];
    std::uint32_t device = devices_[k / kSpaces];
    Space sp = static_cast<Space>(k % kSpaces);
    Slot s;
    s.spec = std::make_unique<SpaceSpec>(*opt_.hw.space(route(sp, ev)));
    const SpaceSpec* spec = s.spec.get();
    if (auto it = recorded_.find(device); it != recorded_.end() && spec->space == Space::kHbm) {
      s.spec->capacity = it->second.first;
      s.spec->reserve = 0;
      out_.notes.push_back(
          fmt::format("device {}: usable memory {} ({} B) inferred from the recording: {} "
                      "(--hw or --capacity overrides it)",
                      device, human_bytes(it->second.first), it->second.first, it->second.second));
    }
    s.device = device;
    s.space = spec->space;
    s.mem = std::make_unique<DeviceMemory>(*spec, opt_.hw.cost);
    PolicyContext ctx;
    ctx.registry = &reg_;
    ctx.hw = &opt_.hw;
    ctx.space = spec;
    ctx.device_index = device;
    ctx.trace_header = header_.is_null() ? nullptr : &header_;
    ctx.device = s.mem.get();
    ctx.scheduler = this;
    ConfigReader cfg(opt_.policy.config, "policy " + opt_.policy.name);
    PolicyBuilder build = info_.configure(cfg, ctx);
    cfg.finish();
    s.policy = build(ctx);
    if (info_.needs_lifetimes) {
      try {
        s.policy->plan(lifetimes_[{device, sp}]);
      } catch (const InputError& e) {  // a limit of the plan: named with the trace it plans
        throw InputError(opt_.trace + ": " + e.what());
      }
    }
    if (config_.is_null()) config_ = cfg.resolved();
    s.res.device = device;
    s.res.space = s.space;
    slots_.push_back(std::move(s));
    for (size_t i = slots_.size() == 2 ? 0 : slots_.size() - 1; slots_.size() > 1 && i < slots_.size(); ++i)
      largest_frees_.insert(slots_[i].last.largest_free);
    slot_index_[k] = static_cast<std::uint32_t>(slots_.size() - 1);
    return slot_index_[k];
  }

  void observe(const Event& ev) {
    if (ev.op == Op::kOom) {  // a recorded OOM: did the simulation fail the same request?
      ++ooms_recorded_;
      auto it = last_alloc_failed_.find(ev.device);
      if (it != last_alloc_failed_.end() && it->second)
        ++ooms_reproduced_;
      else if (first_mismatch_.is_null())
        first_mismatch_ = {{"kind", "oom"},
                           {"event_index", ev.index},
                           {"device", ev.device},
                           {"recorded_request_bytes", ev.size},
                           {"simulated", "the request succeeded"}};
      return;
    }
    if (!replaying_) return;
    bool pre = ev.has(key::kPreTrace);
    // What the recording allocator did concerns the device's main memory: its policy exists from
    // the first observation on (it may seed state or take recorded addresses from it).
    std::uint32_t hbm = slot(key(ev.device, Space::kHbm), ev);
    if (ev.op == Op::kSegmentAlloc && ev.has(key::kAddr)) {
      Slot& s = slots_[hbm];
      s.mem->expect_address(ev.addr);
      if (!pre) {
        s.mem->set_logging(true);
        recorded_segments_.emplace_back(ev.device, ev.size);
      }
    }
    if (ev.op == Op::kSegmentFree && ev.has(key::kAddr)) {  // the recording allocator's cudaFree
      slots_[hbm].mem->set_logging(true);
      recorded_frees_.emplace_back(ev.device, ev.addr);
    }
    Observation ob = observation_of(ev);
    for (auto& s : slots_) {
      if (s.device != ev.device) continue;
      size_t before = s.mem->grant_log().size();
      s.policy->observe(ob);
      if (pre) s.mem->grant_log().resize(before);  // seeding is not a decision to check
      account(s);
    }
  }

  void account(Slot& s) {
    Usage u = s.policy->usage();
    SpaceResult& r = s.res;
    if (u.allocated > r.peak_allocated) {
      r.peak_allocated = u.allocated;
      r.at_peak_allocated.allocated = u.allocated;
      r.at_peak_allocated.reserved = u.reserved;
      r.at_peak_allocated.largest_free = u.largest_free;
    }
    double f = fragmentation(u);
    if (u.reserved > r.peak_reserved) {
      r.peak_reserved = u.reserved;
      r.frag_at_peak = f;
    }
    if (f > r.frag_max) r.frag_max = f;
    total_alloc_ += u.allocated - s.last.allocated;
    total_reserved_ += u.reserved - s.last.reserved;
    if (slots_.size() > 1) {  // kept in order once there are several spaces (O(log) per event, not O(spaces))
      largest_frees_.erase(largest_frees_.find(s.last.largest_free));
      largest_frees_.insert(u.largest_free);
    }
    s.last = u;
    if (perfetto_) perfetto_->counter(now_, s.device, s.space, u.allocated, u.reserved, f);
    if (total_alloc_ > peak_alloc_) {
      peak_alloc_ = total_alloc_;
      peak_dirty_ = true;
      peak_event_ = current_event_;
      peak_t_ = now_;
    }
    double gf = f;
    if (slots_.size() > 1) {
      Usage g{total_alloc_, total_reserved_, *largest_frees_.rbegin(), 0, 0};
      gf = fragmentation(g);
    }
    if (total_reserved_ > peak_reserved_) {
      peak_reserved_ = total_reserved_;
      frag_at_peak_ = gf;
    }
    frag_max_ = std::max(frag_max_, gf);
    last_frag_ = gf;
  }

  static constexpr size_t kMaxPoints = 2048;
  void record_timeline(std::uint64_t index) {
    if (!timeline_.empty() && index < next_point_) {  // fold into the current point, keeping maxima
      auto& p = timeline_.back();
      p.requested = std::max(p.requested, saturate(total_req_));
      p.allocated = std::max(p.allocated, total_alloc_);
      p.reserved = std::max(p.reserved, total_reserved_);
      p.fragmentation = std::max(p.fragmentation, last_frag_);
      return;
    }
    timeline_.push_back({index, saturate(total_req_), total_alloc_, total_reserved_, last_frag_});
    next_point_ = index + stride_;
    if (timeline_.size() == kMaxPoints) {
      for (size_t i = 0; i < kMaxPoints / 2; ++i) {
        auto a = timeline_[2 * i], b = timeline_[2 * i + 1];
        timeline_[i] = {a.event_index, std::max(a.requested, b.requested), std::max(a.allocated, b.allocated),
                        std::max(a.reserved, b.reserved), std::max(a.fragmentation, b.fragmentation)};
      }
      timeline_.resize(kMaxPoints / 2);
      stride_ *= 2;
      next_point_ = timeline_.back().event_index + stride_;
    }
  }

  void check_fatal(Slot& s, const Event& ev) {
    if (!out_.fatal.empty()) return;
    std::string_view f = s.policy->fatal_error();
    if (f.empty()) return;
    out_.fatal = f;
    out_.fatal_event = ev.index;
    out_.completed = false;
    out_.stopped_early = true;
    replaying_ = false;
  }

  void check_address(const Event& ev, const Placement& p) {
    ++addr_compared_;
    if (p.ok && p.has_addr && p.addr == ev.addr) {
      ++addr_matched_;
    } else if (first_mismatch_.is_null()) {
      first_mismatch_ = {{"kind", "address"},
                         {"event_index", ev.index},
                         {"id", ev.id},
                         {"recorded", ev.addr},
                         {"simulated", p.ok && p.has_addr ? nlohmann::json(p.addr) : nlohmann::json()}};
    }
  }

  nlohmann::json fidelity() const {
    if (addr_compared_ == 0 && recorded_segments_.empty() && recorded_frees_.empty() && ooms_recorded_ == 0)
      return nullptr;
    std::uint64_t seg_matched = 0;
    nlohmann::json first_seg;
    std::map<std::uint32_t, size_t> cursor;
    for (size_t i = 0; i < recorded_segments_.size(); ++i) {
      auto [dev, size] = recorded_segments_[i];
      size_t k = cursor[dev]++;
      const std::vector<Bytes>* log = nullptr;
      for (const auto& s : slots_)
        if (s.device == dev && s.space == Space::kHbm) log = &s.mem->grant_log();
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
    nlohmann::json f = {{"allocs_compared", addr_compared_},
                        {"allocs_matched", addr_matched_},
                        {"segments_compared", recorded_segments_.size()},
                        {"segments_matched", seg_matched}};
    f["first_mismatch"] = !first_mismatch_.is_null() ? first_mismatch_ : first_seg;
    if (!recorded_frees_.empty()) {  // the same segments released, in the same order
      std::uint64_t matched = 0;
      std::map<std::uint32_t, size_t> next;
      for (auto [dev, addr] : recorded_frees_) {
        const DeviceMemory* mem = nullptr;
        for (const auto& s : slots_)
          if (s.device == dev && s.space == Space::kHbm) mem = s.mem.get();
        size_t k = next[dev]++;
        if (mem && k < mem->release_log().size() && mem->release_log()[k] == addr)
          ++matched;
        else if (f["first_mismatch"].is_null())
          f["first_mismatch"] = {{"kind", "segment_free"}, {"device", dev}, {"release", k}, {"recorded_addr", addr}};
      }
      f["segment_frees_compared"] = recorded_frees_.size();
      f["segment_frees_matched"] = matched;
    }
    if (ooms_recorded_) {
      f["ooms_recorded"] = ooms_recorded_;
      f["ooms_reproduced"] = ooms_reproduced_;
    }
    return f;
  }

  // ---- what reports show of buffers and moments ----
  struct LiveRec {
    AllocId id;
    Bytes requested = 0, block = 0;
    std::uint64_t event_index = 0;
    Tick t;
    Addr addr;
    bool has_addr = false, has_shape = false;
    std::uint32_t name = 0;  // index into names_ (0: none)
    std::uint64_t stack = 0;
    Dtype dtype = Dtype::kNone;
  };
  std::uint32_t intern(const std::string& name) {
    if (name.empty()) return 0;
    auto [it, fresh] = name_ids_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
    if (fresh) {
      names_kept_.spend(name.size());
      names_.push_back(name);
    }
    return it->second;
  }
  void remember(const Event& ev, const Placement& p, std::uint32_t si) {
    (void)si;
    if (ev.handle >= live_.size()) {
      live_.resize(ev.handle + 1);
      shapes_.resize(ev.handle + 1);
    }
    LiveRec& l = live_[ev.handle];
    l.id = ev.id;
    l.requested = ev.size;
    l.block = p.block;
    l.event_index = ev.index;
    l.t = ev.t;
    l.addr = p.addr;
    l.has_addr = p.has_addr;
    l.name = ev.has(key::kName) ? intern(ev.name) : 0;
    l.stack = ev.has(key::kStack) ? ev.stack : 0;
    l.dtype = ev.dtype;
    l.has_shape = ev.has(key::kShape);
    if (l.has_shape) shapes_[ev.handle] = ev.shape;
  }
  void end_slice(Handle h, Tick t) {
    const LiveRec& l = live_[h];
    const Slot& s = slots_[slot_of_[h]];
    perfetto_->end_buffer(t, s.device, s.space, l.id, names_[l.name]);
  }
  void note_stack(std::uint64_t id) {
    if (!id || out_.stacks.count(id)) return;
    if (auto it = stack_frames_.find(id); it != stack_frames_.end()) out_.stacks[id] = it->second;
  }
  // The frames of every stack a reported buffer names (and no other).
  void collect_stacks() {
    auto note_moment = [&](const Moment& m) {
      for (const auto& b : m.top_buffers) note_stack(b.stack);
      for (const auto& b : m.live) note_stack(b.stack);
    };
    if (out_.peak) note_moment(*out_.peak);
    for (const auto& o : out_.ooms) {
      note_stack(o.request.stack);
      if (o.moment) note_moment(*o.moment);
    }
  }
  BufferView request_view(const Event& ev) {
    BufferView b;
    b.id = ev.id;
    b.event_index = ev.index;
    b.t = ev.t;
    b.device = ev.device;
    b.space = ev.space;
    b.requested = ev.size;
    b.name = ev.has(key::kName) ? ev.name : std::string();
    b.dtype = ev.dtype;
    b.has_shape = ev.has(key::kShape);
    if (b.has_shape) b.shape = ev.shape;
    b.stack = ev.has(key::kStack) ? ev.stack : 0;
    return b;
  }
  BufferView view(Handle h, std::uint64_t now) {
    const LiveRec& l = live_[h];
    const Slot& s = slots_[slot_of_[h]];
    BufferView b;
    b.id = l.id;
    b.event_index = l.event_index;
    b.t = l.t;
    b.device = s.device;
    b.space = s.space;
    b.requested = l.requested;
    b.block = l.block;
    b.has_addr = l.has_addr;
    b.addr = l.addr;
    b.name = names_[l.name];
    b.dtype = l.dtype;
    b.has_shape = l.has_shape;
    if (l.has_shape) b.shape = shapes_[h];
    b.stack = l.stack;
    b.age_events = now - std::min(now, l.event_index);
    return b;
  }
  // The largest live buffers, the allocator's regions and blocks, the fragmentation figures.
  Moment moment(std::uint64_t event_index, Tick t) {
    Moment m;
    m.event_index = event_index;
    m.t = t;
    m.allocated = total_alloc_;
    m.reserved = total_reserved_;
    std::vector<std::pair<Bytes, Handle>> top;  // a min-heap of the kTopBuffers largest
    auto cmp = [](const auto& a, const auto& b) { return a.first > b.first; };
    for (Handle h = 0; h < state_.size() && h < live_.size(); ++h) {
      if (state_[h] != HandleState::kPlaced) continue;
      ++m.live_buffers;
      if (opt_.keep_live_buffers && live_[h].has_addr) {
        if (m.live.size() < kMaxMapBlocks)
          m.live.push_back(view(h, event_index));
        else
          m.live_truncated = true;
      }
      if (top.size() < kTopBuffers) {
        top.emplace_back(live_[h].block, h);
        std::push_heap(top.begin(), top.end(), cmp);
      } else if (live_[h].block > top.front().first) {
        std::pop_heap(top.begin(), top.end(), cmp);
        top.back() = {live_[h].block, h};
        std::push_heap(top.begin(), top.end(), cmp);
      }
    }
    std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (const auto& [size, h] : top) m.top_buffers.push_back(view(h, event_index));
    for (const auto& s : slots_) {
      SpaceMoment sm;
      sm.device = s.device;
      sm.space = s.space;
      sm.allocated = s.last.allocated;
      sm.reserved = s.last.reserved;
      sm.largest_free = s.last.largest_free;
      s.policy->memory_map(&sm.map);
      if (sm.map.blocks.size() > kMaxMapBlocks) {
        sm.map.blocks.resize(kMaxMapBlocks);
        sm.truncated = true;
      }
      m.spaces.push_back(std::move(sm));
    }
    return m;
  }
  void take_peak_now() {
    out_.peak = moment(peak_event_, peak_t_);
    peak_dirty_ = false;
    peak_missed_ = false;
  }
  // A free is about to leave a new peak. A snapshot costs O(live buffers + map blocks); a trace
  // that climbs in small steps (alloc, alloc, free, ...) would pay it at every step, O(n · live).
  // So snapshots are paid from a credit that grows by kSnapshotCredit per event: affordable ones
  // are taken, the others only remember where they would have been taken, and if the run's final
  // peak is such a one, end() replays the trace once more up to that event (peak_by_rerun). The
  // cost stays linear and the reported peak is exactly the one a snapshot at every step gives.
  void take_peak_when_leaving() {
    if (rerun_take_at_ != kNoRerun) {  // the re-run: only the one snapshot it is for
      if (current_event_ == rerun_take_at_) {
        take_peak_now();
        rerun_done_ = true;
      }
      peak_dirty_ = false;
      return;
    }
    // An offline policy's plan already costs O(buffers × buffers live at once), no less than a
    // snapshot at every step, and a re-run would plan again: its engines never defer one.
    std::uint64_t cost = 2 * state_.size() + 64;
    if (info_.needs_lifetimes || cost <= snapshot_credit_) {
      snapshot_credit_ -= std::min(cost, snapshot_credit_);
      take_peak_now();
      return;
    }
    peak_dirty_ = false;
    peak_missed_ = true;
    missed_take_event_ = current_event_;
  }

  void record_oom(Slot& s, const Event& ev, const AllocRequest& rq) {
    RunResult& out = out_;
    Usage u = s.policy->usage();
    OomRecord o;
    o.event_index = ev.index;
    o.t = ev.t;
    o.id = ev.id;
    o.device = ev.device;
    o.space = ev.space;
    o.requested = ev.size;
    o.rounded = s.policy->rounded_size(rq);
    o.allocated = u.allocated;
    o.reserved = u.reserved;
    o.free = u.available;
    o.largest_free = u.largest_available;
    o.fragmentation = o.free >= o.rounded;
    o.kind = s.policy->oom_kind(rq);
    o.space = s.space;
    o.request = request_view(ev);
    o.request.block = o.rounded;
    if (out.ooms.size() < kDetailedOoms) {
      o.explanation = s.policy->describe_oom(rq);
      o.moment = moment(ev.index, ev.t);
    }
    if (perfetto_)
      perfetto_->oom(ev.t, o.device, o.space, o.id, o.request.name, o.requested, o.free, o.largest_free,
                     o.fragmentation);
    out.ooms.push_back(std::move(o));
    out.completed = false;
  }

  void write_placement(const Event& ev, const Placement& p) {
    std::string& buf = pbuf_;
    if (!p.ok) {
      fmt::format_to(std::back_inserter(buf), "{{\"i\":{},\"id\":{},\"ok\":false}}\n", ev.index, ev.id);
    } else {
      fmt::format_to(std::back_inserter(buf), "{{\"i\":{},\"id\":{},\"ok\":true,\"addr\":", ev.index, ev.id);
      if (p.has_addr)
        fmt::format_to(std::back_inserter(buf), "{}", p.addr);
      else
        buf += "null";
      fmt::format_to(std::back_inserter(buf), ",\"block_bytes\":{}", p.block);
      if (p.region >= 0)
        fmt::format_to(std::back_inserter(buf), ",\"region\":{},\"region_offset\":{}", p.region, p.region_offset);
      buf += "}\n";
    }
    if (buf.size() > (1 << 20)) {
      placements_->write(buf);
      buf.clear();
    }
  }

  void finish(RunResult& out) {
    out.policy_config = config_.is_null() ? nlohmann::json::object() : config_;
    for (auto& s : slots_) {
      SpaceResult r = s.res;
      r.at_peak_allocated.device = s.device;
      r.at_peak_allocated.space = s.space;
      r.external_max = r.frag_max;
      r.peak_requested = saturate(req_[dense_.at(s.device) * kSpaces + static_cast<std::uint32_t>(s.space)].peak);
      for (const auto& o : out.ooms)
        if (o.device == s.device && o.space == s.space) r.ooms.push_back(o);
      r.device_allocs = s.mem->alloc_calls();
      r.device_frees = s.mem->free_calls();
      r.device_failed = s.mem->failed_calls();
      r.device_time_ns = s.mem->time_ns();
      r.final_allocated = s.last.allocated;
      r.final_reserved = s.last.reserved;
      r.stats = s.policy->stats();
      r.extra = s.policy->extra_report();
      out.spaces.push_back(std::move(r));
    }
    std::sort(out.spaces.begin(), out.spaces.end(), [](const SpaceResult& a, const SpaceResult& b) {
      return a.device != b.device ? a.device < b.device : a.space < b.space;
    });
    out.fidelity = fidelity();
    out.timeline = std::move(timeline_);
    out.peak_requested = saturate(peak_req_);
    out.peak_allocated = peak_alloc_;
    out.peak_reserved = peak_reserved_;
    out.frag_at_peak = frag_at_peak_;
    out.frag_max = frag_max_;
  }

  static constexpr std::uint32_t kNoSlot = 0xffffffffu;
  static constexpr std::uint32_t kSpaces = static_cast<std::uint32_t>(Space::kCount);

  // Requested bytes can sum past 64 bits (sizes up to the format's limit); reports saturate.
  using Sum = unsigned __int128;
  static Bytes saturate(Sum v) { return v > kTooLarge ? kTooLarge : static_cast<Bytes>(v); }
  struct Requested {
    Sum live = 0, peak = 0;
  };
  using LifetimeKey = std::pair<std::uint32_t, Space>;
  const RunOptions& opt_;
  const Registry& reg_;
  // Where events of each space go: the space itself, hbm for collective buffers on hardware
  // without a collective space, kCount when the hardware lacks it (an input error).
  Space route_[static_cast<int>(Space::kCount)];
  const PolicyInfo& info_;
  std::vector<Slot> slots_;
  std::unordered_map<std::uint32_t, std::uint32_t> dense_;  // device ordinal → dense index
  std::vector<std::uint32_t> devices_;                      // dense index → device ordinal
  std::vector<std::uint32_t> slot_index_;                   // per key: index in slots_
  std::vector<Requested> req_;                              // per key
  std::vector<HandleState> state_;                          // per handle
  std::vector<std::uint32_t> slot_of_;                      // per handle
  std::vector<Handle> local_;                               // per handle: its handle in its slot's policy
  std::multiset<Bytes> largest_frees_;                      // every slot's last largest free block
  std::priority_queue<Deferred, std::vector<Deferred>, std::greater<Deferred>> deferred_;
  std::uint64_t seq_ = 0;
  Tick now_;
  nlohmann::json config_;
  Sum total_req_ = 0, peak_req_ = 0;
  Bytes total_alloc_ = 0, total_reserved_ = 0, peak_alloc_ = 0, peak_reserved_ = 0;
  double frag_at_peak_ = 0, frag_max_ = 0;
  std::uint64_t addr_compared_ = 0, addr_matched_ = 0;
  std::vector<TimelinePoint> timeline_;
  nlohmann::json header_;
  std::uint64_t stride_ = 1, next_point_ = 0;
  double last_frag_ = 0;
  nlohmann::json first_mismatch_;
  std::vector<std::pair<std::uint32_t, Bytes>> recorded_segments_;   // traced segment_alloc (device, size)
  std::vector<std::pair<std::uint32_t, Addr>> recorded_frees_;       // traced segment_free (device, addr)
  std::map<LifetimeKey, std::vector<Lifetime>> lifetimes_;           // offline policies only
  std::map<std::uint32_t, std::pair<Bytes, std::string>> recorded_;  // device → (usable bytes, basis)
  std::map<std::uint32_t, bool> last_alloc_failed_;                  // device → its last alloc's outcome
  std::uint64_t ooms_recorded_ = 0, ooms_reproduced_ = 0;
  RunResult out_;
  bool replaying_ = true;
  std::vector<LiveRec> live_;                       // per handle, valid while placed
  std::vector<std::vector<std::uint64_t>> shapes_;  // per handle, when the alloc has a shape
  std::vector<std::string> names_{std::string()};   // interned buffer names (0: none)
  std::unordered_map<std::string, std::uint32_t> name_ids_;
  std::unordered_map<std::uint64_t, std::vector<std::string>> stack_frames_;  // the trace's stacks
  bool peak_dirty_ = false;   // allocated memory reached a new peak not yet captured
  bool peak_missed_ = false;  // the latest peak's snapshot was not affordable (take_peak_when_leaving)
  static constexpr std::uint64_t kSnapshotCredit = 4, kNoRerun = UINT64_MAX;
  std::uint64_t snapshot_credit_ = 0, missed_take_event_ = 0;
  std::uint64_t rerun_take_at_ = kNoRerun;  // set on the engine peak_by_rerun() runs
  bool rerun_done_ = false;
  std::uint64_t peak_event_ = 0, current_event_ = 0;
  Tick peak_t_;
  std::unique_ptr<AtomicFile> placements_;
  std::unique_ptr<PerfettoWriter> perfetto_;
  std::string pbuf_;
  // What a run keeps grows with its trace, within limits of the trace's size (sim/base/limits.h).
  std::uint64_t input_bytes_ = input_bytes(opt_.trace);
  LimitCounter devices_kept_{Limit::kDevices, opt_.trace, input_bytes_};
  LimitCounter names_kept_{Limit::kNames, opt_.trace, input_bytes_};
  LimitCounter marks_kept_{Limit::kMarks, opt_.trace, input_bytes_};
  static constexpr std::uint64_t kCheckBatch = 1024;
  std::uint64_t live_placed_ = 0, since_check_ = 0;  // --check's pace (feed)
};

}  // namespace

double SpaceMoment::external() const {
  Bytes free = unused();
  if (free == 0) return 0.0;
  return static_cast<double>(free - std::min(largest_free, free)) / static_cast<double>(free);
}

namespace {
RunResult run_alone(const RunOptions& opt, const Registry& registry) {
  Engine e(opt, registry);
  return e.run();
}
}  // namespace

// With a second core the trace is decoded on one thread while the engine replays on another:
// the run takes as long as the slower of the two, not their sum.
RunResult run_simulation(const RunOptions& opt, const Registry& registry) {
  return std::move(run_simulations({opt}, registry, 0).front());
}

namespace {

// The decoded trace as a growing list of batches, shared by the engines that replay it. The
// reader waits while the slowest consumer is more than kAhead batches behind, so memory stays
// bounded whatever the trace's length.
class BatchStream {
 public:
  static constexpr size_t kBatch = 4096, kAhead = 8;
  struct End {
    std::exception_ptr error;  // the reader's, at the end of the events it delivered
    std::string digest;
    std::uint64_t skipped_frees = 0;
  };

  explicit BatchStream(size_t consumers) : done_(consumers, 0) {}

  // Reader side: publishes the events of r, then the end; stops early when every consumer left.
  void produce(TraceReader& r) {
    while (produce_one(r)) {
    }
  }
  // Publishes the next batch of r, or the end (then false); false too when every consumer left.
  bool produce_one(TraceReader& r) {
    End end;
    try {
      auto b = spare();
      b->resize(kBatch);
      size_t n = 0;
      while (n < kBatch && r.next((*b)[n])) ++n;
      b->resize(n);
      if (n && !publish(std::move(b))) return false;  // nobody reads any more
      if (n == kBatch) return true;
      end.digest = r.digest();
      end.skipped_frees = r.skipped_frees();
    } catch (...) {
      end.error = std::current_exception();
    }
    std::lock_guard<std::mutex> l(m_);
    end_ = std::move(end);
    finished_ = true;
    cv_.notify_all();
    return false;
  }
  // Consumer side: batch i (from 0), or nullptr after the last one.
  std::shared_ptr<const std::vector<Event>> get(size_t consumer, size_t i) {
    std::unique_lock<std::mutex> l(m_);
    done_[consumer] = i;  // it no longer needs batches before i
    cv_.notify_all();
    cv_.wait(l, [&] { return i < first_ + batches_.size() || finished_; });
    if (i >= first_ + batches_.size()) return nullptr;
    return batches_[i - first_];
  }
  void leave(size_t consumer) {  // a consumer that stopped early
    std::lock_guard<std::mutex> l(m_);
    done_[consumer] = SIZE_MAX;
    cv_.notify_all();
  }
  const End& end() const { return end_; }  // after get() returned nullptr

 private:
  // False when every consumer has left. A consumer asks for batch i only after batch i - 1, so
  // first_ + size >= slowest() whenever one is still reading.
  bool publish(std::shared_ptr<std::vector<Event>> b) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return slowest() == SIZE_MAX || first_ + batches_.size() - slowest() < kAhead; });
    if (slowest() == SIZE_MAX) return false;
    batches_.push_back(std::move(b));
    while (!batches_.empty() && first_ < slowest()) {  // drop what every consumer has passed
      if (batches_.front().use_count() == 1)           // and reuse its events (their buffers keep their capacity)
        spare_.push_back(std::const_pointer_cast<std::vector<Event>>(std::move(batches_.front())));
      batches_.pop_front();
      ++first_;
    }
    cv_.notify_all();
    return true;
  }
  std::shared_ptr<std::vector<Event>> spare() {
    std::lock_guard<std::mutex> l(m_);
    if (spare_.empty()) return std::make_shared<std::vector<Event>>();
    auto b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  size_t slowest() const { return *std::min_element(done_.begin(), done_.end()); }

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<const std::vector<Event>>> batches_;
  std::vector<std::shared_ptr<std::vector<Event>>> spare_;
  size_t first_ = 0;  // index of batches_.front()
  std::vector<size_t> done_;
  bool finished_ = false;
  End end_;
};

// Runs f(i) for i in [0, n) on up to `threads` threads.
template <class F>
void on_threads(size_t n, unsigned threads, F f) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) f(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, n); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

// Replays runs[shared...] (online policies, one trace) from one decode of the trace, on at most
// `threads` threads (every_core: a replay thread per core beside the reader). Fills out[i] or
// errors[i] for each of them.
void replay_shared(const std::vector<RunOptions>& runs, const std::vector<size_t>& shared, const Registry& registry,
                   unsigned threads, bool every_core, std::vector<RunResult>& out,
                   std::vector<std::exception_ptr>& errors) {
  // Consumer c replays the engines of runs shared[c], shared[c + C], ... batch by batch. A cap
  // of `threads` counts the reader; with a cap of one, the consumer reads each batch itself.
  const bool inline_reader = !every_core && threads < 2;
  size_t consumers = inline_reader ? 1 : std::min<size_t>(every_core ? threads : threads - 1, shared.size());
  ReaderOptions ro;
  ro.lenient = runs[shared[0]].lenient;
  // Threads the replays leave free parse JSONL lines for the reader (at most 8: beyond that the
  // reader's own thread, which splits lines and validates events, is the bound).
  const size_t busy = consumers + (inline_reader ? 0 : 1);
  ro.decode_threads = threads > busy ? static_cast<unsigned>(std::min<size_t>(threads - busy, 8)) : 0;
  std::unique_ptr<TraceReader> reader;
  try {
    reader = open_trace(runs[shared[0]].trace, ro);
  } catch (...) {
    for (size_t i : shared) errors[i] = std::current_exception();
    return;
  }
  const nlohmann::json header = reader->header();
  BatchStream stream(consumers);
  std::thread producer;
  if (!inline_reader) producer = std::thread([&] { stream.produce(*reader); });
  on_threads(consumers, static_cast<unsigned>(consumers), [&](size_t c) {
    std::vector<std::pair<size_t, std::unique_ptr<Engine>>> engines;
    for (size_t k = c; k < shared.size(); k += consumers) {
      size_t i = shared[k];
      try {
        engines.emplace_back(i, std::make_unique<Engine>(runs[i], registry));
        engines.back().second->begin(header);
      } catch (...) {
        errors[i] = std::current_exception();
        engines.pop_back();
      }
    }
    bool more = true;  // inline_reader: the reader has not published its end
    for (size_t b = 0; !engines.empty(); ++b) {
      if (inline_reader && more) more = stream.produce_one(*reader);
      auto batch = stream.get(c, b);
      for (auto it = engines.begin(); it != engines.end();) {
        bool done = false;
        try {
          if (batch) {
            for (const Event& ev : *batch) it->second->feed(ev);
          } else {
            if (stream.end().error) std::rethrow_exception(stream.end().error);
            it->second->set_digest(stream.end().digest);
            out[it->first] = it->second->end(stream.end().skipped_frees);
            done = true;
          }
        } catch (...) {
          errors[it->first] = std::current_exception();
          done = true;
        }
        it = done ? engines.erase(it) : it + 1;
      }
    }
    stream.leave(c);
  });
  if (producer.joinable()) producer.join();
}

}  // namespace

std::vector<RunResult> run_simulations(const std::vector<RunOptions>& runs, const Registry& registry,
                                       unsigned threads) {
  const bool every_core = threads == 0;  // then one replay thread per core, beside the reader
  if (every_core) threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<RunResult> out(runs.size());
  std::vector<std::exception_ptr> errors(runs.size());
  // Online runs of the same trace (read the same way) share one decode; offline ones, and runs
  // given their events by a source, read on their own.
  std::map<std::pair<std::string, bool>, std::vector<size_t>> by_trace;
  std::vector<size_t> alone;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].source || registry.find(runs[i].policy.name).needs_lifetimes)
      alone.push_back(i);
    else
      by_trace[{runs[i].trace, runs[i].lenient}].push_back(i);
  }
  std::vector<std::vector<size_t>> groups;
  for (auto& [key, members] : by_trace) {
    // One run alone, with no second thread for a reader (or beside other traces that keep the
    // threads busy): nothing to share.
    if (members.size() == 1 && (threads < 2 || by_trace.size() > 1))
      alone.push_back(members[0]);
    else
      groups.push_back(std::move(members));
  }
  std::sort(alone.begin(), alone.end());
  // Runs that read the trace themselves, in parallel.
  on_threads(alone.size(), threads, [&](size_t k) {
    try {
      out[alone[k]] = run_alone(runs[alone[k]], registry);
    } catch (...) {
      errors[alone[k]] = std::current_exception();
    }
  });
  // Then the shared decodes: one trace uses every thread; several share them out.
  if (groups.size() == 1) {
    replay_shared(runs, groups[0], registry, threads, every_core, out, errors);
  } else if (!groups.empty()) {
    const unsigned at_once = static_cast<unsigned>(std::min<size_t>(groups.size(), threads));
    on_threads(groups.size(), at_once, [&](size_t g) {
      replay_shared(runs, groups[g], registry, std::max(1u, threads / at_once), false, out, errors);
    });
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace fragsim

// Engine, a run's start and end (sim/engine/engine_impl.h): opening the trace, begin() and end(), the outputs written
// while replaying (placements, the ReplaySink: Perfetto) and the result assembled from the slots.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "sim/base/error.h"
#include "sim/base/notes.h"
#include "sim/engine/engine_impl.h"
#include "traces/trace_reader.h"

namespace fragsim {

std::unique_ptr<TraceReader> Engine::open() const {
  if (opt_.source) return opt_.source();
  ReaderOptions ro;
  ro.lenient = opt_.lenient;
  return open_trace(opt_.trace, ro);
}

RunResult Engine::run() {
  if (info_.needs_lifetimes) collect_lifetimes();
  auto reader = open();
  begin(reader->header(), reader->recording());
  Event ev;
  for (std::uint64_t n = 1; reader->next(ev); ++n) {
    feed(ev);
    if (n % kCancelEvents == 0) check_cancel(opt_);
  }
  set_trace_facts(reader->digest(), reader->timed());
  return end(reader->skipped_frees());
}

void Engine::begin(const nlohmann::json& header, const Recording& recording) {
  recording_ = recording;
  if (!opt_.placements.empty()) placements_ = std::make_unique<AtomicFile>(opt_.placements);
  out_.trace_path = opt_.trace;
  out_.header = header;
  out_.policy_name = opt_.policy.name;
  out_.hardware = opt_.hw.to_json();
  out_.notes = opt_.notes;
  out_.shard = opt_.shard;
  out_.label = opt_.label;
  out_.setting = opt_.setting;
  out_.models_recording = opt_.models_recording;
  if (header.is_object() && header.contains("time_unit") && header["time_unit"].is_string())
    out_.time_unit = header["time_unit"].get<std::string>();
  if (opt_.sink) sink_ = opt_.sink(out_.time_unit);
  out_.device_names = recording.device_names;
  out_.processes = recording.processes;
  if (recording.processes > 1) {  // one more: devices no member names (process_of)
    member_replayable_.assign(recording.processes + 1, 0);
    member_pre_trace_.assign(recording.processes + 1, 0);
  }
  if (opt_.history) history_ = std::make_unique<HistoryRecorder>(*opt_.history, live_);
  if (!opt_.window.whole()) out_.window = opt_.window.text();
  common_ = opt_.window.whole() && !history_ && !opt_.check;
  if (RecordingAnchor::wanted(recording)) {  // where the state before the recording was (a second read)
    anchor_.learn(*open());
    for (auto& n : anchor_.notes()) out_.notes.push_back(std::move(n));
  }
}

RunResult Engine::end(std::uint64_t skipped_frees) {
  if (prior_.collecting()) settle_prior();  // a recording of state only: nothing happened after it
  if (!all_stopped_)
    while (!deferred_.empty()) run_deferred();
  bool missed = false;
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].peak_dirty) take_peak_now(i);
    missed = missed || slots_[i].peak_missed;
  }
  if (missed) {
    auto peaks = peaks_by_rerun();
    for (std::uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].peak_missed) slots_[i].peak = std::move(peaks[i]);
  }
  out_.skipped_frees = skipped_frees;
  if (sink_) {                                         // buffers still live end with the trace
    for (Handle h = 0; h < live_.handle_limit(); ++h)  // (a stopped process's ended at its stop)
      if (live_.state(h) == LiveSet::State::kPlaced && replays(slot_key_[live_.slot_of(h)])) end_slice(h, now_);
    sink_->commit();
  }
  if (placements_) {
    placements_->write(pbuf_);
    placements_->commit();
  }
  if (!out_.timed &&
      ((opt_.window.from.set && opt_.window.from.is_time) || (opt_.window.to.set && opt_.window.to.is_time)))
    throw InputError(
        fmt::format("{}: --from/--to: the trace records no times: bound the window by event index", opt_.trace));
  if (!opt_.window.whole() && !window_seen_)
    throw InputError(
        fmt::format("{}: --from/--to: no event of the trace lies in the window ({}; the trace has {} "
                    "events)",
                    opt_.trace, out_.window, out_.events));
  if (history_) out_.history = history_->finish(slot_views(), now_);
  finish();
  live_.collect_stacks(out_);
  out_.nothing_to_replay = nothing_to_replay(recording_, out_.events, replayable_, pre_trace_allocs_);
  // A member of a set with nothing of its own to replay (a state-only snapshot beside ranks with
  // traces): its figures are its state alone, said as a recording alone would be (--strict refuses it).
  for (std::uint32_t m = 0; out_.nothing_to_replay.empty() && m < recording_.processes && m < member_replayable_.size();
       ++m)
    if (member_replayable_[m] == 0) {
      std::vector<std::string> devs;
      for (std::uint32_t d = 0; d < devices_.size(); ++d)
        if (member_of_dense_[d] == m) {
          auto name = recording_.device_names.find(devices_[d]);
          devs.push_back(fmt::format("device {}{}", devices_[d],
                                     name == recording_.device_names.end() ? "" : " (" + name->second + ")"));
        }
      const std::string why = nothing_to_replay(recording_, member_pre_trace_[m], 0, member_pre_trace_[m]);
      out_.nothing_to_replay =
          fmt::format("the set's recording of {}: {}",
                      devs.empty() ? fmt::format("member {}", m + 1) : fmt::format("{}", fmt::join(devs, ", ")), why);
    }
  if (!out_.nothing_to_replay.empty()) out_.notes.push_back("nothing to replay: " + out_.nothing_to_replay);
  if (!out_.timed && out_.events)
    out_.notes.push_back(
        "the trace records no times (as a PyTorch 2.0 snapshot, or JSONL without \"t\"): its events are replayed in "
        "the order given, and the times of the JSON report, the page and Perfetto are event numbers, not time");
  out_.notes = once_per_device(out_.notes);
  return std::move(out_);
}

void Engine::finish() {
  RunResult& out = out_;
  out.policy_config = config_.is_null() ? nlohmann::json::object() : config_;
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    SpaceResult r;
    r.device = s.device;
    r.space = s.space;
    r.capacity = s.spec->capacity;
    r.usable = s.spec->usable();
    r.usable_inferred = s.usable_inferred;
    if (s.host_unbounded) r.capacity = r.usable = 0, r.unbounded = true;  // no figure: no limit
    r.limit = s.policy->limit();
    r.reserve_limit = s.policy->reserve_limit();
    r.preallocated = s.policy->preallocated();
    s.metrics.finish(r);
    r.peak = std::move(s.peak);
    r.peak_requested = saturate(req_[slot_key_[i]].peak);
    for (const auto& o : out.ooms)
      if (o.device == s.device && o.space == s.space) r.ooms.push_back(o);
    r.device_allocs = s.mem->alloc_calls();
    r.device_frees = s.mem->free_calls();
    r.device_failed = s.mem->failed_calls();
    r.device_time_ns = s.mem->time_ns();
    r.stats = s.policy->stats();
    r.compile_time_plan = s.policy->compile_time_plan();
    r.extra = s.policy->extra_report();
    r.snapshot_settings = s.policy->snapshot_allocator_settings();
    r.prior = s.prior;
    r.allocs_not_replayed = req_[slot_key_[i]].not_replayed;
    if (!replays(slot_key_[i])) r.stopped_at = stopped_dense_[slot_key_[i] / kSpaces];
    for (auto& n : s.policy->run_notes())
      if (std::find(out.notes.begin(), out.notes.end(), n) == out.notes.end()) out.notes.push_back(std::move(n));
    out.spaces.push_back(std::move(r));
  }
  std::sort(out.spaces.begin(), out.spaces.end(), [](const SpaceResult& a, const SpaceResult& b) {
    return a.device != b.device ? a.device < b.device : a.space < b.space;
  });
  // A device none of whose allocations came before the stop (a set's rank whose recording began
  // after another rank ran out) has no figures at all: said, not left out silently.
  for (std::uint32_t k = 0; k < req_.size(); ++k) {
    const std::uint64_t n = req_[k].not_replayed;
    if (!n || slot_index_[k] != kNoSlot) continue;  // a space with figures says it in its own entry
    const std::uint32_t device = devices_[k / kSpaces];
    auto name = out.device_names.find(device);
    out.notes.push_back(fmt::format(
        "device {}{} {}: its {} allocation{} came after the replay stopped and none was replayed; it has no figures "
        "(--keep-going replays on)",
        device, name == out.device_names.end() ? "" : " (" + name->second + ")",
        space_name(static_cast<Space>(k % kSpaces)), n, n == 1 ? "" : "s"));
  }
  // The binding space: the first OOM's, else the one that used the largest share of its memory.
  out.binding = 0;
  if (!out.ooms.empty()) {
    for (size_t i = 0; i < out.spaces.size(); ++i)
      if (out.spaces[i].device == out.ooms[0].device && out.spaces[i].space == out.ooms[0].space) out.binding = i;
    out.binding_reason = fmt::format("the first OOM (event {})", out.ooms[0].event_index);
  } else {
    for (size_t i = 1; i < out.spaces.size(); ++i)
      if (out.spaces[i].peak_share() > out.spaces[out.binding].peak_share()) out.binding = i;
    if (!out.spaces.empty())
      out.binding_reason = fmt::format("the largest share of its memory reserved at its peak ({:.1f}%)",
                                       100.0 * out.spaces[out.binding].peak_share());
  }
  nlohmann::json followed = follow_.tally();
  if (!fidelity_.empty() || !followed.is_null()) {
    out.fidelity = fidelity_.json([&](std::uint32_t device) -> const DeviceMemory* {
      for (const auto& s : slots_)
        if (s.device == device && s.space == Space::kHbm) return s.mem.get();
      return nullptr;
    });
    if (auto st = anchor_.summary(); !st.is_null()) out.fidelity["initial_state"] = std::move(st);
    if (!followed.is_null()) out.fidelity["follow_recording"] = std::move(followed);
    if (pre_trace_allocs_) out.fidelity["pre_trace_allocs"] = pre_trace_allocs_;
    // The recording's addresses came from its own device memory; a run given other memory
    // (--hw, --capacity, --reserve) diverges from them wherever a decision depends on the memory
    // (where it runs short; PyTorch sizes its expandable segments from the device's total).
    // Compared space by space: the usable memory inferred for a device, or the capacity of the
    // device the recording names (as its device plane states it, each device's own in a set, else its
    // preset's: a TPU's), against this run's (the same memory given by --hw or --capacity is no change).
    bool differs = false;
    const RecordedHardware* hw = recording_.hardware ? &*recording_.hardware : nullptr;
    const std::optional<SpaceSpec> named = hw ? recorded_hbm(*hw) : std::nullopt;  // the preset read once
    for (const auto& s : slots_) {
      if (s.space != Space::kHbm) continue;
      if (const RecordedDeviceMemory* rd = recording_.device(s.device)) {
        differs = differs || s.spec->usable() != rd->usable;
        continue;
      }
      std::optional<Bytes> c = hw ? hw->capacity_of(s.device) : std::nullopt;  // a device's own in a set
      if (!c && named) c = named->capacity;
      if (c) differs = differs || s.spec->capacity != *c;
    }
    if (differs) out.fidelity["memory_as_recorded"] = false;
  }
  if (slots_.size() == 1) totals_.start_from(slots_.front().metrics);  // the one slot's figures are the totals
  out.peak_requested = saturate(totals_.peak_requested);
  out.peak_allocated = totals_.peak_allocated;
  out.peak_reserved = totals_.peak_reserved;
}

void Engine::write_placement(const Event& ev, const Placement& p) {
  std::string& buf = pbuf_;
  const std::uint64_t i = held_index_ ? *held_index_ : ev.index;
  if (!p.ok) {
    fmt::format_to(std::back_inserter(buf), "{{\"i\":{},\"id\":{},\"ok\":false}}\n", i, ev.id);
  } else {
    fmt::format_to(std::back_inserter(buf), "{{\"i\":{},\"id\":{},\"ok\":true,\"addr\":", i, ev.id);
    if (p.has_addr)
      fmt::format_to(std::back_inserter(buf), "{}", p.addr);
    else
      buf += "null";
    fmt::format_to(std::back_inserter(buf), ",\"block_bytes\":{}", p.block);
    if (p.region >= 0)
      fmt::format_to(std::back_inserter(buf), ",\"region\":{},\"region_offset\":{}", p.region, p.region_offset);
    if (!p.pieces.empty()) {
      buf += ",\"pieces\":[";
      for (size_t k = 0; k < p.pieces.size(); ++k)
        fmt::format_to(std::back_inserter(buf), "{}[{},{}]", k ? "," : "", p.pieces[k].addr.value(), p.pieces[k].bytes);
      buf += "]";
    }
    buf += "}\n";
  }
  if (buf.size() > (1 << 20) && !settling_) {
    placements_->write(buf);
    buf.clear();
  }
}

void Engine::take_moves(Slot& s, const Event& ev) {
  const auto& moves = s.mem->moves();
  for (; s.moves_seen < moves.size(); ++s.moves_seen) {
    const DeviceMemory::Move& m = moves[s.moves_seen];
    out_.region_moves.push_back(
        {.device = s.device, .space = s.space, .from = m.from, .bytes = m.bytes, .to = m.to, .event = ev.index});
    if (!placements_) continue;
    // Lines {"i":N,"id":..,"ok":true,"addr":A,...,"pieces":[[A,B],...]}: those of earlier events (this
    // one's is not written yet), each address in the moved range (`addr`, and a piece's: a number
    // after '[', the only arrays). Lines flushed to the file before cannot change (docs/report.md).
    std::string out;
    out.reserve(pbuf_.size());
    const std::string_view all(pbuf_), key = "\"addr\":";
    for (size_t at = 0; at < all.size();) {
      const size_t end = all.find('\n', at) + 1;
      const std::string_view line = all.substr(at, end - at);
      at = end;
      std::uint64_t i = 0;
      std::from_chars(line.data() + 5, line.data() + line.size(), i);  // after {"i":
      if (i >= ev.index) {
        out += line;
        continue;
      }
      for (size_t c = 0; c < line.size();) {
        size_t digits = std::string_view::npos;
        if (line.compare(c, key.size(), key) == 0)
          digits = c + key.size();
        else if (line[c] == '[')
          digits = c + 1;
        if (digits == std::string_view::npos || digits >= line.size() || line[digits] < '0' || line[digits] > '9') {
          out += line[c++];
          continue;
        }
        std::uint64_t a = 0;
        const char* past = std::from_chars(line.data() + digits, line.data() + line.size(), a).ptr;
        out.append(line.data() + c, digits - c);
        out +=
            std::to_string(a >= m.from.value() && a - m.from.value() < m.bytes ? a - m.from.value() + m.to.value() : a);
        c = static_cast<size_t>(past - line.data());
      }
    }
    pbuf_ = std::move(out);
  }
}

void Engine::end_slice(Handle h, Tick t) {
  const Slot& s = slots_[live_.slot_of(h)];
  sink_->end_buffer(t, s.device, s.space, live_.id_of(h), live_.name_of(h));
}

}  // namespace fragsim

#include "sim/engine/recording_fidelity.h"

#include <fmt/format.h>

#include "traces/recording_header.h"

namespace fragsim {

std::string nothing_to_replay(const Recording& rec, std::uint64_t events, std::uint64_t replayable,
                              std::uint64_t pre_trace) {
  if (replayable) return {};
  const bool torch = rec.source == RecordingSource::kTorchSnapshot;
  if (rec.source == RecordingSource::kXprof && events == 0)
    return "the capture holds no allocator events (MemoryAllocation/MemoryDeallocation): " + no_allocator_events_hint();
  if (torch && events == 0) return "the snapshot holds no segments and no trace entries";
  if (events == 0) return "the trace holds no events";
  if (torch)
    return fmt::format(
        "a state-only snapshot (no trace entries: torch.cuda.memory_snapshot(), or _record_memory_history was not "
        "on): the {} buffers live at the dump are placed as state, and no allocation or free follows to replay",
        pre_trace);
  if (rec.source == RecordingSource::kJaxMemoryProfile)
    return fmt::format(
        "a JAX device memory profile: the {} buffers live when it was taken are placed as state, and nothing follows "
        "to replay",
        pre_trace);
  if (pre_trace)
    return fmt::format("only the state before the recording ({} buffers live then) and no allocation or free after it",
                       pre_trace);
  return "the trace holds no allocation or free";
}

Placement FollowRecording::place(AllocatorPolicy& policy, const Event& ev, const AllocRequest& req, Placement predicted,
                                 const Overlapping& overlapping, const Displace& displace) {
  if (!ev.has(key::kAddr)) {  // nothing recorded: the policy's choice stands
    ++predicted_only_;
    return predicted;
  }
  ++compared_;
  if (predicted.ok && predicted.has_addr && predicted.addr == ev.addr) {
    ++matched_;
    return predicted;
  }
  if (first_miss_.is_null())
    first_miss_ = {
        {"event_index", ev.index},
        {"id", ev.id},
        {"recorded", ev.addr},
        {"predicted", predicted.ok && predicted.has_addr ? nlohmann::json(predicted.addr) : nlohmann::json()}};
  if (predicted.ok) policy.release(req.handle);
  AllocRequest at = req;
  at.seeded_at = ev.addr;
  at.seeded_block = ev.has(key::kBlockSize) ? ev.block_size : 0;
  at.seeded_extents = {};
  Placement p = policy.allocate(at);
  if (p.ok && p.has_addr && p.addr == ev.addr) {
    ++corrected_;
    return p;
  }
  // The range is not free in the simulated state: whatever the policy holds there, the real
  // allocator did not. Displace it and try once more.
  if (p.ok) policy.release(req.handle);
  Bytes len = std::max(at.seeded_block, req.size);
  auto in_the_way = overlapping({ev.addr, std::max<Bytes>(len, 1)});
  for (Handle h : in_the_way) displace(h);
  displaced_ += in_the_way.size();
  p = policy.allocate(at);
  if (p.ok && p.has_addr && p.addr == ev.addr)
    ++corrected_;
  else
    ++uncorrected_;  // the policy cannot hold it there (e.g. outside any region it can obtain)
  return p.ok ? p : policy.allocate(req);
}

nlohmann::json FollowRecording::tally() const {
  if (!compared_ && !predicted_only_) return nullptr;
  return {{"allocs_compared", compared_}, {"allocs_matched", matched_},  {"corrected", corrected_},
          {"displaced", displaced_},      {"uncorrected", uncorrected_}, {"predicted_only", predicted_only_},
          {"first_miss", first_miss_}};
}

std::string follow_recording_text(const nlohmann::json& t) {
  auto n = [&](const char* k) { return t.value(k, std::uint64_t{0}); };
  std::string s = fmt::format("{}/{} of the policy's choices equal the recorded address (each then placed as recorded",
                              n("allocs_matched"), n("allocs_compared"));
  if (n("displaced")) s += fmt::format(", {} simulated buffers displaced", n("displaced"));
  if (n("uncorrected")) s += fmt::format(", {} could not be placed there", n("uncorrected"));
  s += ")";
  if (n("predicted_only"))
    s += fmt::format("; {} allocations without a recorded address predicted", n("predicted_only"));
  return s;
}

void add_both_figures(const std::vector<RunOptions>& runs, std::vector<RunResult>& results, const Registry& registry,
                      unsigned threads) {
  std::vector<RunOptions> other;
  std::vector<size_t> of;
  for (size_t i = 0; i < runs.size() && i < results.size(); ++i) {
    const nlohmann::json& f = results[i].fidelity;
    if (!f.is_object() || (!runs[i].follow_recording && !f.value("pre_trace_allocs", std::uint64_t{0}))) continue;
    bool compared = f.value("allocs_compared", std::uint64_t{0}) ||
                    (f.contains("follow_recording") && f["follow_recording"].value("allocs_compared", 0) > 0);
    if (!compared) continue;
    RunOptions o = runs[i];
    o.follow_recording = !o.follow_recording;
    o.placements.clear();
    o.sink = nullptr;
    o.keep_live_buffers = false;
    o.check = false;
    other.push_back(std::move(o));
    of.push_back(i);
  }
  if (other.empty()) return;
  std::vector<RunResult> more = run_simulations(other, registry, threads);
  for (size_t k = 0; k < of.size(); ++k) {
    RunResult& r = results[of[k]];
    const nlohmann::json& g = more[k].fidelity;
    if (!g.is_object()) continue;
    if (runs[of[k]].follow_recording) {  // free-running figures from the other run, this run's tally
      nlohmann::json f = g;
      f.erase("follow_recording");
      if (r.fidelity.contains("follow_recording")) f["follow_recording"] = r.fidelity["follow_recording"];
      r.fidelity = std::move(f);
    } else if (g.contains("follow_recording")) {
      r.fidelity["follow_recording"] = g["follow_recording"];
    }
  }
}

std::string device_name(const RunResult& r, std::uint32_t device) {
  auto it = r.device_names.find(device);
  return it == r.device_names.end() ? std::string() : it->second;
}

std::string device_label(const RunResult& r, std::uint32_t device) {
  std::string n = device_name(r, device);
  return n.empty() ? std::to_string(device) : fmt::format("{} ({})", device, n);
}

nlohmann::json first_oom(const RunResult& r) {
  if (r.ooms.empty()) return nullptr;
  const OomRecord& o = r.ooms.front();  // OOMs are recorded in event order, devices merged by time
  nlohmann::json j = {{"device", o.device},
                      {"space", space_name(o.space)},
                      {"event_index", o.event_index},
                      {"requested_bytes", o.requested},
                      {"cause", oom_cause(o)}};
  if (std::string n = device_name(r, o.device); !n.empty()) j["name"] = n;
  return j;
}

}  // namespace fragsim

#include "sim/report/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "sim/base/io.h"
#include "sim/base/text.h"
#include "sim/engine/recording_fidelity.h"
#include "sim/engine/window.h"
#include "sim/report/by_stack.h"

namespace fragsim {

namespace {

std::string pct(double f) { return fmt::format("{:.1f}%", 100.0 * f); }

// 12944 → "12,944".
std::string with_commas(std::uint64_t n) {
  std::string d = std::to_string(n), s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) s += ',';
    s += d[i];
  }
  return s;
}

// "reproduced 3025/3025 recorded allocation addresses, 22/22 segment sizes, 17/17 segment releases,
// 1/1 OOMs": what a recording let the run check itself against.
std::string fidelity_text(const nlohmann::json& f) {
  auto n = [&](const char* k) { return f.value(k, std::uint64_t{0}); };
  std::string s = fmt::format("reproduced {}/{} recorded allocation addresses{}, {}/{} segment sizes",
                              n("allocs_matched"), n("allocs_compared"),
                              n("allocs_not_compared") ? fmt::format(" ({} more after the replay stopped at its first "
                                                                     "OOM, not compared: --keep-going replays on)",
                                                                     with_commas(n("allocs_not_compared")))
                                                       : std::string(),
                              n("segments_matched"), n("segments_compared"));
  if (f.contains("segment_frees_compared"))
    s += fmt::format(", {}/{} segment releases", n("segment_frees_matched"), n("segment_frees_compared"));
  if (f.contains("ooms_recorded")) s += fmt::format(", {}/{} OOMs", n("ooms_reproduced"), n("ooms_recorded"));
  if (f.contains("reserved_compared"))
    s += fmt::format(", reserved as recorded after {} of {} events", with_commas(n("reserved_matched")),
                     with_commas(n("reserved_compared")));
  return s;
}

// When the --follow-recording tally is below the free-running figure, which of the two to read and
// why; "" otherwise. Following the recording corrects every allocation to where the recording put
// it, so each choice is made from the real state and one wrong choice never shifts the ones after:
// it is normally the higher. Below the free-running figure, the corrections themselves cost: the
// policy chooses from states it never reaches on its own (buffers displaced, blocks it could not
// place where recorded), so it measures how the model takes being corrected — the free-running
// figure is the measure of the replay whose peaks and OOMs this report shows.
std::string better_measure(const nlohmann::json& f) {
  const nlohmann::json& t = f["follow_recording"];
  auto n = [](const nlohmann::json& j, const char* k) { return j.value(k, std::uint64_t{0}); };
  const std::uint64_t fm = n(f, "allocs_matched"), fc = n(f, "allocs_compared");
  const std::uint64_t tm = n(t, "allocs_matched"), tc = n(t, "allocs_compared");
  if (!fc || !tc || tm * fc >= fm * tc) return {};  // tm/tc >= fm/fc
  std::string cost;
  if (n(t, "displaced")) cost += fmt::format("{} of its own buffers displaced", n(t, "displaced"));
  if (n(t, "uncorrected"))
    cost += fmt::format("{}{} allocations it could not place where recorded", cost.empty() ? "" : ", ",
                        n(t, "uncorrected"));
  return fmt::format(
      "the free-running figure ({}) is the better measure here: it is the replay whose peaks and OOMs this report "
      "shows, and following the recording ({}) scores each choice from a state the policy never reaches on its own "
      "(every allocation moved to where it was recorded{}), so its lower figure measures how the model takes the "
      "corrections, not how far its own replay drifts",
      pct(fc ? static_cast<double>(fm) / static_cast<double>(fc) : 0),
      pct(static_cast<double>(tm) / static_cast<double>(tc)), cost.empty() ? "" : ": " + cost);
}

nlohmann::json buffer_json(const RunResult& r, const BufferView& b) {
  nlohmann::json j = {{"id", b.id},
                      {"event_index", b.event_index},
                      {"t", b.t},
                      {"device", b.device},
                      {"space", space_name(b.space)},
                      {"requested_bytes", b.requested},
                      {"block_bytes", b.block},
                      {"padding_bytes", b.block > b.requested ? b.block - b.requested : 0},
                      {"addr", b.has_addr ? nlohmann::json(b.addr) : nlohmann::json()},
                      {"age_events", b.age_events}};
  if (!b.name.empty()) j["name"] = b.name;
  if (b.has_shape) j["shape"] = b.shape;
  if (b.dtype != Dtype::kNone) j["dtype"] = std::string(dtype_name(b.dtype));
  if (b.stack) {
    j["stack"] = b.stack;
    if (std::string f = frame_of(r, b); !f.empty()) j["frame"] = f;
  }
  return j;
}

nlohmann::json space_moment_json(const SpaceMoment& s, size_t max_blocks) {
  nlohmann::json free_blocks = nlohmann::json::array(), regions = nlohmann::json::array(),
                 blocks = nlohmann::json::array();
  std::vector<const MemoryMap::Block*> frees;
  for (const auto& b : s.map.blocks)
    if (!b.in_use && b.mapped) frees.push_back(&b);
  std::sort(frees.begin(), frees.end(), [](auto* a, auto* b) { return a->size > b->size; });
  for (size_t i = 0; i < frees.size() && i < 10; ++i)
    free_blocks.push_back({{"addr", frees[i]->addr}, {"size_bytes", frees[i]->size}});
  for (const auto& g : s.map.regions) regions.push_back({{"base", g.base}, {"size_bytes", g.size}, {"id", g.id}});
  for (size_t i = 0; i < s.map.blocks.size() && i < max_blocks; ++i) {
    const auto& b = s.map.blocks[i];
    blocks.push_back({{"addr", b.addr}, {"size_bytes", b.size}, {"in_use", b.in_use}, {"mapped", b.mapped}});
  }
  return {{"device", s.device},
          {"space", space_name(s.space)},
          {"allocated_bytes", s.allocated},
          {"reserved_bytes", s.reserved},
          {"reserved_unallocated_bytes", s.unused()},
          {"reserved_unallocated_share", s.unused_share()},
          {"largest_free_bytes", s.largest_free},
          {"external_fragmentation", s.external()},
          {"free_blocks", frees.size()},
          {"largest_free_blocks", free_blocks},
          {"memory_map",
           {{"regions", regions}, {"blocks", blocks}, {"truncated", s.truncated || s.map.blocks.size() > max_blocks}}}};
}

nlohmann::json moment_json(const RunResult& r, const Moment& m, size_t map_blocks) {
  nlohmann::json top = nlohmann::json::array(), spaces = nlohmann::json::array();
  for (const auto& b : m.top_buffers) top.push_back(buffer_json(r, b));
  for (const auto& s : m.spaces) spaces.push_back(space_moment_json(s, map_blocks));
  nlohmann::json j = {{"event_index", m.event_index},
                      {"t", m.t},
                      {"allocated_bytes", m.allocated},
                      {"reserved_bytes", m.reserved},
                      {"live_buffers", m.live_buffers},
                      {"top_buffers", top},
                      {"spaces", spaces}};
  if (!m.sites.empty()) j["by_stack"] = by_stack_json(by_stack(m, r.stacks));
  return j;
}

// The state before a mid-run recording and how the run held it (docs/report.md, "Before the recording").
nlohmann::json prior_json(const PriorOutcome& p) {
  nlohmann::json j = {{"held", p.rebuilt ? "rebuilt" : "recorded"},
                      {"reason", p.reason},
                      {"blocks", p.blocks},
                      {"live_bytes", p.live},
                      {"regions", p.regions},
                      {"mapped_ranges", p.mapped_ranges},
                      {"region_bytes", p.region_bytes}};
  if (p.rebuilt)
    j["history"] = {{"requests", p.requests},
                    {"request_bytes", p.request_bytes},
                    {"requests_left_out", p.requests_dropped},
                    {"blocks_in_history", p.placed_in_history},
                    {"blocks_not_held", p.blocks_failed}};
  if (p.range)
    j["range"] = {{"peak_reserved_bytes", {p.range->reserved_low, p.range->reserved_high}},
                  {"peak_allocated_bytes", {p.range->allocated_low, p.range->allocated_high}},
                  {"runs", p.range->variants},
                  {"runs_with_oom", p.range->oom_runs}};
  return j;
}

nlohmann::json oom_json(const RunResult& r, const OomRecord& o, size_t map_blocks) {
  nlohmann::json j = {{"event_index", o.event_index},
                      {"t", o.t},
                      {"id", o.id},
                      {"device", o.device},
                      {"space", space_name(o.space)},
                      {"requested_bytes", o.requested},
                      {"rounded_bytes", o.rounded},
                      {"allocated_bytes", o.allocated},
                      {"reserved_bytes", o.reserved},
                      {"free_bytes", o.free},
                      {"largest_free_bytes", o.largest_free},
                      {"cause", oom_cause(o)},
                      {"request", buffer_json(r, o.request)}};
  if (o.needed > o.rounded) j["needed_bytes"] = o.needed;
  if (!o.kind.empty()) j["kind"] = o.kind;
  if (o.before_trace) j["before_recording"] = {{"live_bytes", o.prior_live}};
  if (o.moment) j["at_oom"] = moment_json(r, *o.moment, map_blocks);
  return j;
}

nlohmann::json ooms_json(const RunResult& r, const std::vector<OomRecord>& v, size_t map_blocks) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& o : v) a.push_back(oom_json(r, o, map_blocks));
  return a;
}

// A space's fragmentation figures (docs/metrics.md).
nlohmann::json fragmentation_json(const SpaceResult& s) {
  const SpaceMoment& p = s.at_peak_allocated;
  return {{"at_peak_reserved", s.frag_at_peak},
          {"max", s.frag_max},
          {"at_peak_allocated",
           {{"reserved_unallocated_bytes", p.unused()},
            {"reserved_unallocated_share", p.unused_share()},
            {"external", p.external()}}}};
}

// The waste split (sim/commands/waste.h, docs/metrics.md): null when no plan was asked for.
nlohmann::json waste_json(const SpaceResult& s) {
  const PlanFigures& p = s.plan;
  if (!p.planned) return p.skipped.empty() ? nlohmann::json() : nlohmann::json{{"skipped", p.skipped}};
  return {{"plan_bytes", p.height},
          {"live_bytes", p.live},
          {"reserved_bytes", s.peak_reserved},
          {"fragmentation_bytes", s.peak_reserved - std::min(s.peak_reserved, p.height)},
          {"unavoidable_bytes", p.height - std::min(p.height, p.live)},
          {"plan_fits", !s.usable || p.height <= s.usable},
          {"plan_optimal", p.optimal},
          {"reserved_up_front", s.pool_held_up_front()},
          {"reserved_before_recording", s.reserved_unexplained()},
          {"plan_cut_short", p.cut_short},
          {"plan_budget_seconds", p.budget}};
}

// "best static plan 61.2 GiB: 8.3 GiB of the 69.5 GiB reserved is fragmentation this allocator
// added; 1.1 GiB above the 60.1 GiB live at once no placement avoids".
void waste_text(std::back_insert_iterator<std::string> out, const SpaceResult& s, const std::string& where) {
  const PlanFigures& p = s.plan;
  if (!p.planned) {
    if (!p.skipped.empty()) fmt::format_to(out, "  best static plan{}: not made ({})\n", where, p.skipped);
    return;
  }
  const std::string how = p.optimal     ? "optimal"
                          : p.cut_short ? "its budget ended the search: an upper bound"
                                        : "not proven optimal";
  if (s.peak_reserved > p.height && s.pool_held_up_front())
    fmt::format_to(out,
                   "  best static plan{} {:>9}  ({}): this allocator reserved its {} up front (a pool obtained whole, "
                   "never grown), so no placement lowers it; the buffers never need more than the plan; {} above the "
                   "{} live at once no placement avoids\n",
                   where, human_bytes(p.height), how, human_bytes(s.peak_reserved),
                   human_bytes(p.height - std::min(p.height, p.live)), human_bytes(p.live));
  else if (s.peak_reserved > p.height && s.reserved_unexplained())
    fmt::format_to(out,
                   "  best static plan{} {:>9}  ({}): all of the {} reserved was reserved before the recording began, "
                   "sized by demand it does not show (the recording's own events never reserved more): the {} above "
                   "the plan may be that demand or fragmentation, which the recording cannot tell apart; {} above the "
                   "{} live at once no placement avoids\n",
                   where, human_bytes(p.height), how, human_bytes(s.peak_reserved),
                   human_bytes(s.peak_reserved - p.height), human_bytes(p.height - std::min(p.height, p.live)),
                   human_bytes(p.live));
  else if (s.peak_reserved >= p.height)
    fmt::format_to(out,
                   "  best static plan{} {:>9}  ({}): of the {} reserved, {} is fragmentation this allocator added; "
                   "{} above the {} live at once no placement avoids\n",
                   where, human_bytes(p.height), how, human_bytes(s.peak_reserved),
                   human_bytes(s.peak_reserved - p.height), human_bytes(p.height - std::min(p.height, p.live)),
                   human_bytes(p.live));
  else
    fmt::format_to(out, "  best static plan{} {:>9}  ({}): this allocator reserved {}, less ({} live at once){}\n",
                   where, human_bytes(p.height), how, human_bytes(s.peak_reserved), human_bytes(p.live),
                   s.ooms.empty() ? "" : "; it stopped at an OOM");
  // static-heap (XLA's heap simulator, an XLA module's plan): its heap beside the best plan — what a
  // better compile-time plan of the module saves.
  if (s.compile_time_plan) {
    const Bytes heap = s.compile_time_plan->heap;
    fmt::format_to(
        out,
        "    XLA's heap simulator ({}) plans {} (sizes after its padding and alignment); the best plan of the "
        "requested sizes {}: {}\n",
        s.compile_time_plan->method, human_bytes(heap), human_bytes(p.height),
        heap > p.height ? "a better compile-time plan saves " + human_bytes(heap - p.height)
                        : std::string("no better plan was found"));
  }
  if (s.usable && p.height > s.usable)
    fmt::format_to(out, "    no placement of these buffers fits the {} usable: it needs {} more\n",
                   human_bytes(s.usable), human_bytes(p.height - s.usable));
}

// An OOM's cause in words (oom_cause decides it: docs/metrics.md "OOM cause"). Enough memory free
// with a piece large enough among it is no fragmentation a user can act on: the allocator's own
// rules passed it over (XLA's BFC backing off past the device's last free bytes; the OOM's kind).
std::string oom_cause_text(const OomRecord& o) {
  if (!o.fragmentation)
    return o.needed > o.rounded
               ? fmt::format("CAPACITY (not enough free memory for the {} the allocator needed for it)",
                             human_bytes(o.needed))
               : std::string("CAPACITY (not enough free memory)");
  if (o.largest_free >= std::max(o.rounded, o.needed))
    return "FRAGMENTATION by the free bytes, though a free piece is large enough: the allocator's rules did not take "
           "it";
  return "FRAGMENTATION (enough memory is free, no block fits)";
}

// "device 1 hbm", "device 1 (rank 1) hbm" when the recording names the device.
std::string where(const RunResult& r, std::uint32_t device, Space space) {
  return fmt::format("device {} {}", device_label(r, device), space_name(space));
}

// "event 7867, 2.73 s in": an event and its time from the trace's first event ("event 7867" for
// a trace that carries no times).
std::string when(const RunResult& r, std::uint64_t event_index, Tick t) {
  if (!r.timed) return fmt::format("event {}", event_index);
  const double scale = seconds_per_tick(r.time_unit);
  double sec = static_cast<double>(t.value() - std::min(t.value(), r.first_t.value())) * scale;
  std::string at = sec >= 1      ? fmt::format("{:.3f} s", sec)
                   : sec >= 1e-3 ? fmt::format("{:.3f} ms", sec * 1e3)
                   : sec >= 1e-6 ? fmt::format("{:.3f} us", sec * 1e6)
                                 : fmt::format("{:.0f} ns", sec * 1e9);
  return fmt::format("event {}, {} in", event_index, at);
}

// The second of two sizes shown together ("(128.00 MiB requested)" beside a block), worded by
// `say`; "" when the two are the same, and in bytes when they differ only below what human_bytes
// shows ("15.99 MiB (512 B more than requested)", never "15.99 MiB (15.99 MiB requested)").
std::string beside(Bytes shown, Bytes other, const char* say, const char* more_than) {
  if (shown == other) return {};
  if (human_bytes(shown) != human_bytes(other)) return fmt::format(" ({} {})", human_bytes(other), say);
  return fmt::format(" ({} {} {})", human_bytes(shown > other ? shown - other : other - shown),
                     shown > other ? "more than" : "less than", more_than);
}

// A buffer as a line names it: its name and shape ("x f32[1000,750]"), and "at FRAME", its innermost
// frame, unless the name says it already (a snapshot's name is its frame's last component; an XProf
// name quotes its source line) — a frame is never printed twice on one line.
struct BufferWords {
  std::string what, at;
};
BufferWords buffer_words(const RunResult& r, const BufferView& b) {
  const std::string name = escape_terminal(b.name);
  BufferWords w{name, {}};
  if (std::string sh = shape_text(b); !sh.empty()) w.what += (w.what.empty() ? "" : " ") + sh;
  const std::string f = escape_terminal(frame_of(r, b));
  const bool said = !f.empty() && !name.empty() && (f.ends_with(name) || name.find(f) != std::string::npos);
  if (!f.empty() && !said) w.at = "at " + f;
  return w;
}

std::string buffer_line(const RunResult& r, const BufferView& b) {
  const BufferWords w = buffer_words(r, b);
  return fmt::format("{:>12}{}  {}{}id {}, event {}, {} events old{}", human_bytes(b.block),
                     beside(b.block, b.requested, "requested", "requested"), w.what, w.what.empty() ? "" : "  ", b.id,
                     b.event_index, b.age_events, w.at.empty() ? "" : "  " + w.at);
}

void space_moment_text(std::back_insert_iterator<std::string> out, const RunResult& r, const SpaceMoment& s,
                       bool name_it) {
  fmt::format_to(out,
                 "    {}{} allocated of {} reserved; reserved but unallocated {} ({} of reserved); external "
                 "fragmentation {} (largest free block in reserved memory {})\n",
                 name_it ? where(r, s.device, s.space) + ": " : "", human_bytes(s.allocated), human_bytes(s.reserved),
                 human_bytes(s.unused()), pct(s.unused_share()), pct(s.external()), human_bytes(s.largest_free));
}

constexpr size_t kTextBuffers = 10;  // largest live buffers the text lists at a moment

void moment_text(std::back_insert_iterator<std::string> out, const RunResult& r, const Moment& m, bool name_spaces) {
  for (const auto& s : m.spaces) space_moment_text(out, r, s, name_spaces);
  if (!m.top_buffers.empty()) {
    size_t shown = std::min(kTextBuffers, m.top_buffers.size());
    fmt::format_to(out, "    largest live buffers ({} of {} live{}):\n", shown, m.live_buffers,
                   m.top_buffers.size() > shown ? fmt::format("; the JSON report lists {}", m.top_buffers.size()) : "");
    for (size_t i = 0; i < shown; ++i) fmt::format_to(out, "      {}\n", buffer_line(r, m.top_buffers[i]));
  }
}

// The allocator's free memory at an OOM, as memory_viz's segment view summarises it.
void free_space_text(std::back_insert_iterator<std::string> out, const RunResult& r, const Moment& m) {
  for (const auto& s : m.spaces) {
    if (s.map.regions.empty()) continue;
    std::vector<const MemoryMap::Block*> frees;
    for (const auto& b : s.map.blocks)
      if (!b.in_use && b.mapped) frees.push_back(&b);
    std::sort(frees.begin(), frees.end(), [](auto* a, auto* b) { return a->size > b->size; });
    std::string sizes;
    for (size_t i = 0; i < frees.size() && i < 5; ++i) sizes += (i ? ", " : "") + human_bytes(frees[i]->size);
    fmt::format_to(out, "    free memory then ({}): {} free block{} across the {} region{} held{}\n",
                   where(r, s.device, s.space), frees.size(), frees.size() == 1 ? "" : "s", s.map.regions.size(),
                   s.map.regions.size() == 1 ? "" : "s", frees.empty() ? "" : "; the largest: " + sizes);
  }
}

// "first mismatch: event 2 (id 0): recorded address 0x602000000, simulated none"
std::string mismatch_text(const nlohmann::json& m) {
  auto hex = [](const nlohmann::json& v) {
    return v.is_number_unsigned() ? fmt::format("0x{:x}", v.get<std::uint64_t>()) : std::string("none");
  };
  std::string kind = m.value("kind", std::string());
  if (kind == "address")
    return fmt::format("event {} (id {}): recorded address {}, simulated {}", m.value("event_index", 0),
                       m.value("id", 0), hex(m["recorded"]), hex(m.value("simulated", nlohmann::json())));
  if (kind == "segment")
    return fmt::format("device {} segment {}: recorded {}, simulated {}", m.value("device", 0), m.value("segment", 0),
                       human_bytes(m.value("recorded_bytes", Bytes{0})),
                       m["simulated_bytes"].is_number() ? human_bytes(m["simulated_bytes"].get<Bytes>()) : "none");
  if (kind == "segment_free")
    return fmt::format("device {} release {}: recorded address {} was not the one released", m.value("device", 0),
                       m.value("release", 0), hex(m["recorded_addr"]));
  if (kind == "oom")
    return fmt::format("event {} on device {}: the recording failed a request of {} that the simulation {}",
                       m.value("event_index", 0), m.value("device", 0),
                       human_bytes(m.value("recorded_request_bytes", Bytes{0})),
                       m.value("simulated", std::string()) == "the request succeeded"
                           ? "placed"
                           : "never reached (it stopped at an earlier OOM; --keep-going replays on)");
  if (kind == "reserved") {            // a profiler trace's Total Reserved after each event
    auto bytes = [&](const char* k) {  // null: the replay never reached the event (it stopped at an OOM)
      return m.contains(k) && m[k].is_number_unsigned() ? human_bytes(m[k].get<Bytes>()) : std::string();
    };
    const std::string simulated = bytes("simulated_bytes");
    return fmt::format("event {} on device {}: reserved {} as recorded{}", m.value("event_index", 0),
                       m.value("device", 0), bytes("recorded_bytes"),
                       simulated.empty() ? "; the replay stopped before it" : ", " + simulated + " simulated");
  }
  return dump_json(m);
}

// The program's empty_cache calls, as the text report and the JSON's empty_cache.text say them:
// a release the recording leaves open (a profiler trace's Total Reserved falling where the
// allocator may have retried a failed cudaMalloc) is said to be either.
std::string empty_cache_line(const RunResult& r) {
  const std::uint64_t n = r.empty_cache_calls, open = r.empty_cache_maybe_retries;
  const char* s = n == 1 ? "" : "s";
  if (!open)
    return fmt::format("empty_cache: the program called it {} time{}; the last one: {}", n, s, r.empty_cache_effect);
  return fmt::format(
      "empty_cache: the cache was released {} time{}, {} the program's empty_cache or the allocator's retry after "
      "a failed cudaMalloc (the recording cannot tell){}; the last one: {}",
      n, s, open == n ? (n == 1 ? "either" : "each") : fmt::format("{} of them", open),
      open == n ? ""
                : fmt::format(", the other{} the program's call{}", n - open == 1 ? "" : "s", n - open == 1 ? "" : "s"),
      r.empty_cache_effect);
}

}  // namespace

// "f32[1024,4096]" for a shaped buffer, "" otherwise.
std::string shape_text(const BufferView& b) {
  if (!b.has_shape || b.dtype == Dtype::kNone) return {};
  return fmt::format("{}[{}]", dtype_name(b.dtype), fmt::join(b.shape, ","));
}

// The innermost frame of a buffer's stack, "" without one.
std::string frame_of(const RunResult& r, const BufferView& b) {
  auto it = r.stacks.find(b.stack);
  return it == r.stacks.end() || it->second.empty() ? std::string() : it->second.front();
}

std::string label_of(const RunResult& r) { return r.label.empty() ? r.policy_name : r.label; }

std::string when_text(const RunResult& r, std::uint64_t event_index, Tick t) { return when(r, event_index, t); }

std::string by_stack_report(const RunResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  auto one = [&](const std::string& what, const Moment& m) {
    fmt::format_to(out, "  {} ({}):\n", what, when(r, m.event_index, m.t));
    s += by_stack_text(by_stack(m, r.stacks));
  };
  if (const Moment* m = r.peak())
    one(r.several_spaces() ? "at the peak of " + where(r, r.spaces[r.binding].device, r.spaces[r.binding].space)
                           : std::string("at the peak of allocated memory"),
        *m);
  if (!r.ooms.empty() && r.ooms[0].moment) one("at the first OOM", *r.ooms[0].moment);
  if (s.empty()) s = "  by call site: no moment to show (nothing was placed)\n";
  return s;
}

nlohmann::json report_json(const RunResult& r, size_t map_blocks) {
  nlohmann::json devices = nlohmann::json::array();
  std::uint64_t da = 0, df = 0, dfail = 0;
  double time_ns = 0;
  for (const auto& s : r.spaces) {
    nlohmann::json d = {
        {"device", s.device},
        {"space", space_name(s.space)},
        {"capacity_bytes", s.capacity},
        {"usable_bytes", s.usable},
        {"usable_inferred", s.usable_inferred},
        {"unbounded", s.unbounded},
        {"limit_bytes", s.limit},
        {"reserve_limit_bytes", s.reserve_limit},
        {"completed", !r.space_failed(s)},
        {"oom_count", s.ooms.size()},
        {"ooms", ooms_json(r, s.ooms, map_blocks)},
        {"peak_requested_bytes", s.peak_requested},
        {"peak_allocated_bytes", s.peak_allocated},
        {"peak_reserved_bytes", s.peak_reserved},
        {"peak_reserved_share", s.peak_share()},
        {"final_allocated_bytes", s.final_allocated},
        {"final_reserved_bytes", s.final_reserved},
        {"fragmentation", fragmentation_json(s)},
        {"device_calls", {{"alloc", s.device_allocs}, {"free", s.device_frees}, {"failed", s.device_failed}}},
        {"device_time_ns", s.device_time_ns},
        {"policy_stats", s.stats}};
    if (r.several_spaces() && s.peak) d["at_peak_allocated"] = moment_json(r, *s.peak, map_blocks);
    if (auto w = waste_json(s); !w.is_null()) d["waste"] = std::move(w);
    if (std::string n = device_name(r, s.device); !n.empty()) d["name"] = n;
    if (s.prior) d["before_recording"] = prior_json(*s.prior);
    if (s.allocs_not_replayed) d["allocs_not_replayed"] = s.allocs_not_replayed;
    if (s.stopped_at) d["stopped_at_event"] = *s.stopped_at;
    for (auto it = s.extra.begin(); it != s.extra.end(); ++it) d[it.key()] = it.value();
    da += s.device_allocs;
    df += s.device_frees;
    dfail += s.device_failed;
    time_ns += s.device_time_ns;
    devices.push_back(std::move(d));
  }
  nlohmann::json trace = {{"path", r.trace_path},
                          {"events", r.events},
                          {"allocs", r.allocs},
                          {"frees", r.frees},
                          {"header", r.header.is_null() ? nlohmann::json::object() : r.header}};
  if (r.skipped_frees) trace["skipped_frees"] = r.skipped_frees;
  if (!r.trace_digest.empty()) trace["digest"] = r.trace_digest;
  const SpaceResult* b = r.binding_space();
  nlohmann::json j = {{"fragsim_report", 1},
                      {"trace", trace},
                      {"policy", {{"name", r.policy_name}, {"config", r.policy_config}}},
                      {"hardware", r.hardware},
                      {"completed", r.completed},
                      {"oom_count", r.ooms.size()},
                      {"ooms", ooms_json(r, r.ooms, map_blocks)},
                      {"peak_requested_bytes", r.peak_requested},
                      {"peak_allocated_bytes", r.peak_allocated},
                      {"peak_reserved_bytes", r.peak_reserved},
                      {"fragmentation", b ? fragmentation_json(*b) : fragmentation_json(SpaceResult{})},
                      {"device_calls", {{"alloc", da}, {"free", df}, {"failed", dfail}}},
                      {"device_time_ns", time_ns},
                      {"devices", devices}};
  if (r.several_spaces()) {
    // The top level of a run over several spaces: peaks are sums over every space at one moment,
    // fragmentation (a ratio) is the binding space's.
    j["binding"] = {{"device", b->device}, {"space", space_name(b->space)}, {"reason", r.binding_reason}};
    j["top_level"] = fmt::format(
        "peak_*_bytes: sums over {} spaces at one moment (the peak over time of the total), never one device's "
        "memory; fragmentation and at_peak_allocated: the binding space's ({})",
        r.spaces.size(), where(r, b->device, b->space));
  }
  if (const Moment* m = r.peak()) j["at_peak_allocated"] = moment_json(r, *m, map_blocks);
  if (b)
    if (auto w = waste_json(*b); !w.is_null()) j["waste"] = std::move(w);
  if (!r.stacks.empty()) {
    nlohmann::json st = nlohmann::json::object();
    for (const auto& [id, frames] : r.stacks) st[std::to_string(id)] = frames;
    j["stacks"] = st;
  }
  auto marks = [](const std::vector<MarkView>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& m : v) a.push_back({{"name", m.name}, {"event_index", m.event_index}, {"t", m.t}});
    return a;
  };
  if (!r.marks.empty()) j["marks"] = marks(r.marks);
  if (r.spaces.size() == 1) {
    j["policy_stats"] = r.spaces[0].stats;
    for (auto it = r.spaces[0].extra.begin(); it != r.spaces[0].extra.end(); ++it) j[it.key()] = it.value();
  }
  if (!r.label.empty()) j["label"] = r.label;
  if (!r.setting.empty()) j["setting"] = r.setting;
  if (r.empty_cache_calls) {
    j["empty_cache"] = {
        {"calls", r.empty_cache_calls}, {"effect", r.empty_cache_effect}, {"text", empty_cache_line(r)}};
    if (r.empty_cache_maybe_retries) j["empty_cache"]["maybe_retries"] = r.empty_cache_maybe_retries;
  }
  if (!r.actions.empty()) j["actions"] = marks(r.actions);
  if (!r.fidelity.is_null()) j["fidelity"] = r.fidelity;
  if (r.stopped_early) j["stopped_early"] = true;
  if (!r.fatal.empty())
    j["fatal"] = {{"event_index", r.fatal_event},
                  {"device", r.fatal_device},
                  {"space", space_name(r.fatal_space)},
                  {"message", r.fatal}};
  if (!r.notes.empty()) j["notes"] = r.notes;
  if (!r.nothing_to_replay.empty()) j["nothing_to_replay"] = r.nothing_to_replay;
  if (auto f = first_oom(r); !f.is_null()) j["first_oom"] = f;
  if (!r.advice.empty()) j["advice"] = r.advice;
  return j;
}

namespace {

// Peak reserved over the allocator's own limit (SpaceResult::limit, not 0).
double limit_share(const SpaceResult& s) { return static_cast<double>(s.peak_reserved) / static_cast<double>(s.limit); }

// The settings a policy ran with: its resolved config without the note of where they came from.
nlohmann::json settings_of(const RunResult& r) {
  nlohmann::json c = r.policy_config;
  if (c.is_object()) c.erase(kRecordedSettingsKey);
  return c;
}

// The peak reserved over the orders and histories of the state before the recording that a run
// considered (PriorOutcome::range, set), as `run` and `compare` print it.
std::string prior_range_text(const SpaceResult& sp) {
  const PriorOutcome& p = *sp.prior;
  const std::string lo = human_bytes(p.range->reserved_low), hi = human_bytes(p.range->reserved_high);
  const std::string what = fmt::format("the {} orders and histories considered for {} held before recording began",
                                       p.range->variants, prior_variants_of(p.blocks, p.regions));
  // Where an order runs out of memory, the range spans what a run that stops there may hold
  // (prior_state.cpp, widen_for_oom).
  const std::string ooms =
      !p.range->oom_runs
          ? ""
          : fmt::format(
                "; {} out of memory, where the order decides how much is reserved: from the peak allocated to "
                "the most this space may reserve",
                p.range->oom_runs < p.range->variants ? fmt::format("{} of them run", p.range->oom_runs)
                                                      : std::string("they run"));
  if (lo == hi) return fmt::format("peak reserved {} over {}{}", lo, what, ooms);
  return fmt::format("peak reserved {}-{} over {} (this run: {}){}", lo, hi, what, human_bytes(sp.peak_reserved), ooms);
}

// What the recording shows from before it began on one space, and how this run held it.
void prior_text(std::back_insert_iterator<std::string> out, const RunResult& r, const SpaceResult& sp) {
  const PriorOutcome& p = *sp.prior;
  auto count = [](std::uint64_t n, const char* one, const char* many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
  };
  std::string held;
  if (p.regions == p.mapped_ranges && p.regions)
    held = fmt::format(" in {} of expandable reservations ({})", count(p.regions, "mapped range", "mapped ranges"),
                       human_bytes(p.region_bytes));
  else if (p.regions)
    held = fmt::format(" in {} ({})", count(p.regions, "segment", "segments"), human_bytes(p.region_bytes));
  fmt::format_to(out, "  before the recording{}: {} ({}) live{}; {}\n",
                 r.several_spaces() ? " (" + where(r, sp.device, sp.space) + ")" : "",
                 count(p.blocks, "block", "blocks"), human_bytes(p.live), held, p.reason);
  if (p.rebuilt && (p.requests || p.requests_dropped)) {
    // Where the history placed live blocks at their turn, say so: "then the live blocks" alone
    // would describe another history than the one replayed.
    const std::string blocks =
        p.placed_in_history == 0 ? "then the live blocks in address order"
        : p.placed_in_history >= p.blocks
            ? fmt::format("the {} placed among them at their turn", count(p.blocks, "live block", "live blocks"))
            : fmt::format("{} of the live blocks placed among them at their turn, then the other {} in address order",
                          p.placed_in_history, p.blocks - p.placed_in_history);
    fmt::format_to(
        out, "    re-held after {} ({} in all) that obtained the recording's memory{}, {}\n",
        count(p.requests, "request", "requests"), human_bytes(p.request_bytes),
        p.requests_dropped ? fmt::format(" ({} left out: this run's limit refused them)", p.requests_dropped) : "",
        blocks);
  }
  if (p.range) fmt::format_to(out, "    {}\n", prior_range_text(sp));
  // A what-if that fits the window says nothing of the program's demand before it (trial 15: a cut
  // fitted a memory fraction its complete recording runs out with, at a peak before the cut).
  if (p.rebuilt && sp.ooms.empty() && !r.stopped_early && sp.limit)
    fmt::format_to(out,
                   "    this fit covers the recorded window: the program's demand before recording began, which it "
                   "does not show, may have needed more\n");
}

// The per-space table of a run over several spaces: each at its own peak.
void spaces_table(std::back_insert_iterator<std::string> out, const RunResult& r) {
  fmt::format_to(out, "  per device and memory space (each at its own peak):\n");
  // "of dev": of what the device gives; "of limit": of the allocator's own cap below it (a BFC's
  // memory fraction), where it has one.
  fmt::format_to(out, "    {:<2} {:>6} {:<10} {:>11} {:>11} {:>11} {:>11} {:>6} {:>8} {:>11} {:>8} {:>8} {:>5}\n", "",
                 "device", "space", "usable", "peak req", "peak alloc", "peak resvd", "of dev", "of limit", "unused@pk",
                 "extfrag", "max", "OOMs");
  for (size_t i = 0; i < r.spaces.size(); ++i) {
    const SpaceResult& s = r.spaces[i];
    fmt::format_to(out, "    {:<2} {:>6} {:<10} {:>11} {:>11} {:>11} {:>11} {:>6} {:>8} {:>11} {:>8} {:>8} {:>5}\n",
                   i == r.binding ? "*" : "", device_label(r, s.device), space_name(s.space),
                   s.unbounded ? "no limit" : human_bytes(s.usable), human_bytes(s.peak_requested),
                   human_bytes(s.peak_allocated), human_bytes(s.peak_reserved), s.usable ? pct(s.peak_share()) : "-",
                   s.limit ? pct(limit_share(s)) : "-", human_bytes(s.at_peak_allocated.unused()),
                   pct(s.at_peak_allocated.external()), pct(s.frag_max), s.ooms.size());
  }
  const SpaceResult& b = r.spaces[r.binding];
  fmt::format_to(out, "  * binds: {} — {}\n", where(r, b.device, b.space), r.binding_reason);
  fmt::format_to(out,
                 "  sums over the {} spaces at one moment (not any device's memory): peak requested {}, allocated {}, "
                 "reserved {}\n",
                 r.spaces.size(), human_bytes(r.peak_requested), human_bytes(r.peak_allocated),
                 human_bytes(r.peak_reserved));
}

}  // namespace

// How a run without --keep-going stopped, after its OOM count: "" when it did not.
std::string stop_words(const RunResult& r) {
  if (!r.stopped_early) return "";
  if (r.processes_stopped > 1)
    return fmt::format(" ({} of the set's {} processes stopped, each at its first{}; --keep-going lists all)",
                       r.processes_stopped, r.processes,
                       r.processes_stopped < r.processes ? ", the others replayed to their end" : "");
  if (r.processes > 1)
    return " (its process stopped there; the set's other ranks replayed on to their end; --keep-going lists all)";
  if (r.ooms.size() > 1)  // one process, several devices whose state before the recording does not fit
    return fmt::format(
        " (stopped where the recording began: the state before it does not fit on {} spaces; "
        "--keep-going lists all)",
        r.ooms.size());
  return " (stopped at the first; --keep-going lists all)";
}

std::string report_text(const RunResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  std::set<std::uint32_t> devices;
  for (const auto& sp : r.spaces) devices.insert(sp.device);
  fmt::format_to(out, "fragsim: {} — policy {} on {}{}\n", escape_terminal(r.trace_path), escape_terminal(label_of(r)),
                 escape_terminal(r.hardware.value("name", std::string("?"))),
                 devices.size() > 1 ? fmt::format(" ({} devices)", devices.size()) : "");
  for (const auto& n : r.notes) fmt::format_to(out, "  note: {}\n", escape_terminal(n));
  fmt::format_to(out, "  events {}  allocs {}  frees {}{}\n", r.events, r.allocs, r.frees,
                 r.skipped_frees ? fmt::format("  (skipped {} frees of unknown ids)", r.skipped_frees) : "");
  std::string on = r.ooms.empty() || !r.several_spaces()
                       ? ""
                       : " (the first on " + where(r, r.ooms[0].device, r.ooms[0].space) + ")";
  fmt::format_to(out, "  result: {}\n",
                 r.completed ? "completed, no OOM"
                 : !r.fatal.empty()
                     ? fmt::format("aborted at event {}, {}", r.fatal_event,
                                   r.ooms.empty() ? "no OOM before it"
                                                  : fmt::format("after {} OOM{}{}", r.ooms.size(),
                                                                r.ooms.size() == 1 ? "" : "s", on))
                     : fmt::format("{} OOM{}{}{}", r.ooms.size(), r.ooms.size() == 1 ? "" : "s", on, stop_words(r)));
  if (!r.ooms.empty() && r.several_spaces()) {
    const OomRecord& f = r.ooms.front();
    fmt::format_to(out, "  first OOM: {} at event {}, {} ({} requested)\n", where(r, f.device, f.space), f.event_index,
                   oom_cause_text(f), human_bytes(f.requested));
  }
  // Where the stop left other spaces of the process short of their own end: their figures end there
  // too (a set's other ranks are separate processes, which replay on).
  std::vector<std::string> short_of_end;
  for (const auto& s : r.spaces)
    if (s.allocs_not_replayed && !r.space_failed(s))
      short_of_end.push_back(fmt::format("{} ({} allocation{})", where(r, s.device, s.space), s.allocs_not_replayed,
                                         s.allocs_not_replayed == 1 ? "" : "s"));
  if (!short_of_end.empty())
    fmt::format_to(
        out,
        "  not replayed after the stop: {}; their figures end there (--keep-going replays every device to its end)\n",
        fmt::join(short_of_end, ", "));
  if (r.empty_cache_calls) fmt::format_to(out, "  {}\n", empty_cache_line(r));
  if (!r.fatal.empty())
    fmt::format_to(out, "  ABORTED at event {}: {} (the real allocator stops the process here)\n", r.fatal_event,
                   r.fatal);
  if (r.several_spaces()) {
    spaces_table(out, r);
  } else {
    // A sharding what-if divides each array across devices in the policy: what the trace requested
    // stays the whole arrays.
    fmt::format_to(out, "  peak requested  {:>14}  ({} B){}\n", human_bytes(r.peak_requested), r.peak_requested,
                   r.shard > 1 ? "  whole arrays, before sharding" : "");
    fmt::format_to(out, "  peak allocated  {:>14}  ({} B)\n", human_bytes(r.peak_allocated), r.peak_allocated);
    // An allocator with its own cap (a BFC's memory fraction): how much of it, beside the device's share.
    const SpaceResult* s = r.spaces.size() == 1 ? &r.spaces[0] : nullptr;
    fmt::format_to(
        out, "  peak reserved   {:>14}  ({} B){}\n", human_bytes(r.peak_reserved), r.peak_reserved,
        s && s->limit && s->usable
            ? fmt::format("  {} of the device's usable {}, {} of the allocator's limit {}", pct(s->peak_share()),
                          human_bytes(s->usable), pct(limit_share(*s)), human_bytes(s->limit))
            : "");
  }
  for (const auto& sp : r.spaces) {
    if (sp.prior) prior_text(out, r, sp);
    waste_text(out, sp, r.several_spaces() ? " (" + where(r, sp.device, sp.space) + ")" : std::string());
  }
  if (const Moment* m = r.peak()) {
    if (r.several_spaces())
      fmt::format_to(out, "  at the peak of {} ({}):\n",
                     where(r, r.spaces[r.binding].device, r.spaces[r.binding].space), when(r, m->event_index, m->t));
    else
      fmt::format_to(out, "  at the peak of allocated memory ({}):\n", when(r, m->event_index, m->t));
    moment_text(out, r, *m, false);
  }
  for (const auto& sp : r.spaces)
    if (sp.device_allocs || sp.device_frees)
      fmt::format_to(out, "  device calls ({}): {} alloc, {} free, simulated {:.3f} ms\n",
                     where(r, sp.device, sp.space), sp.device_allocs, sp.device_frees, sp.device_time_ns / 1e6);
  if (!r.fidelity.is_null() && r.models_recording) {
    fmt::format_to(out, "  fidelity: {}{}\n", fidelity_text(r.fidelity),
                   r.fidelity.value("memory_as_recorded", true)
                       ? ""
                       : " — against a recording made with other device memory than this run's (--hw, --capacity "
                         "or --reserve): its addresses differ wherever the allocator's decisions depend on the memory "
                         "(where it runs short; expandable segments sized from it); without them the run checks "
                         "the model");
    if (!r.fidelity["first_mismatch"].is_null())
      fmt::format_to(out, "  first mismatch: {}\n", escape_terminal(mismatch_text(r.fidelity["first_mismatch"])));
    if (r.fidelity.contains("follow_recording")) {
      fmt::format_to(out, "  following the recording: {}\n", follow_recording_text(r.fidelity["follow_recording"]));
      if (std::string which = better_measure(r.fidelity); !which.empty()) fmt::format_to(out, "  {}\n", which);
    }
  }
  size_t shown = 0;
  for (const auto& o : r.ooms) {
    if (shown++ == kDetailedOoms) {
      fmt::format_to(out, "  ... {} more OOMs in the JSON report\n", r.ooms.size() - kDetailedOoms);
      break;
    }
    const BufferWords w = buffer_words(r, o.request);
    std::string what =
        o.request.name.empty() ? fmt::format("id {}", o.id) + (w.what.empty() ? "" : " " + w.what) : w.what;
    if (o.before_trace) {
      const SpaceResult* sp = r.space(o.device, o.space);  // its usable memory within this run's limit
      const Bytes room = sp ? (sp->limit ? std::min(sp->limit, sp->usable) : sp->usable) : 0;
      // The blocks as the allocator holds them take more than their live bytes (its rounding, the
      // blocks of a segment it cannot split): say what was held and what was left when one failed.
      fmt::format_to(out,
                     "  OOM on {} {} in the {} this run allows: with {} held as the allocator places them (its "
                     "rounding included), {} was left, and the next block ({}, {}) did not fit\n",
                     where(r, o.device, o.space), prior_oom_words(o.prior_live), human_bytes(room),
                     human_bytes(o.allocated), human_bytes(o.free), what, human_bytes(o.requested));
    }
    fmt::format_to(out, "  OOM at {} ({}): {}{}\n", when(r, o.event_index, o.t), where(r, o.device, o.space), what,
                   w.at.empty() ? "" : "  " + w.at);
    fmt::format_to(out,
                   "    requested {}{}; allocated {}, reserved {}; it could still give {} (free in reserved "
                   "memory and on the device), the largest piece {} -> {}\n",
                   human_bytes(o.requested), beside(o.requested, o.rounded, "after rounding", "the rounded size"),
                   human_bytes(o.allocated), human_bytes(o.reserved), human_bytes(o.free), human_bytes(o.largest_free),
                   oom_cause_text(o) + (o.kind.empty() ? std::string() : "; " + o.kind));
    // The first OOM in full; the next ones in two lines each (the JSON report has them all).
    if (shown > 1) continue;
    if (o.moment) {
      moment_text(out, r, *o.moment, o.moment->spaces.size() > 1 || r.several_spaces());
      free_space_text(out, r, *o.moment);
    }
    if (!o.explanation.empty()) {
      fmt::format_to(out, "    the allocator's own report:\n");
      s += o.explanation;
    }
  }
  for (const auto& line : r.advice) fmt::format_to(out, "  advice: {}\n", escape_terminal(line));
  return s;
}

std::string prior_oom_words(std::optional<Bytes> live) {
  return "before the recording's first event: " +
         (live ? fmt::format("the {} live when recording began do not fit", human_bytes(*live))
               : std::string("the memory live when recording began does not fit"));
}

std::string prior_oom_words_of(const nlohmann::json& oom) {
  if (!oom.is_object() || !oom.contains("before_recording") || !oom["before_recording"].is_object()) return "";
  const nlohmann::json& b = oom["before_recording"];
  return prior_oom_words(b.contains("live_bytes") && b["live_bytes"].is_number_unsigned()
                             ? std::optional<Bytes>(b["live_bytes"].get<Bytes>())
                             : std::nullopt);
}

std::string compare_table(const std::vector<RunResult>& runs) {
  std::string s;
  auto out = std::back_inserter(s);
  std::vector<const RunResult*> traces;  // one per distinct trace, in order
  for (const auto& r : runs)
    if (std::none_of(traces.begin(), traces.end(), [&](auto* t) { return t->trace_path == r.trace_path; }))
      traces.push_back(&r);
  for (const auto* t : traces)
    fmt::format_to(out, "trace {} on {}: {} events, peak requested {}{}\n", escape_terminal(t->trace_path),
                   escape_terminal(t->hardware.value("name", std::string("?"))), t->events,
                   human_bytes(t->peak_requested),
                   t->several_spaces() ? fmt::format(" (the sum over {} spaces)", t->spaces.size()) : "");
  const bool per_space = std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return r.several_spaces(); });
  // A what-if's row names the framework's setting beside the entry ("xla-bfc[preallocate=false]
  // (TF_FORCE_GPU_ALLOW_GROWTH=true)"): the entry is what --json's label and check match runs by.
  auto row_label = [](const RunResult& r) {
    return escape_terminal(r.setting.empty() ? label_of(r) : fmt::format("{} ({})", label_of(r), r.setting));
  };
  size_t w = 16;
  for (const auto& r : runs) w = std::max(w, row_label(r).size());
  // Fragmentation columns at the peak of allocated memory (docs/metrics.md): reserved but
  // unallocated, its share of reserved, and external fragmentation 1 − largest free / free —
  // each space's own figures; with several spaces, one row per space.
  // Peak reserved as a share of the device's usable memory, and of the allocator's own limit where it
  // has one (a BFC's memory fraction): a run can fill its limit with the device half empty.
  fmt::format_to(out, "{:<{}} {}{:>7} {:>5} {:>11} {:>11} {:>11} {:>6} {:>8} {:>11} {:>8} {:>9} {:>9} {:>8} {:>9}\n",
                 "policy", w, per_space ? fmt::format("{:<14} ", "device") : "", "result", "OOMs", "peak req",
                 "peak alloc", "peak resvd", "of dev", "of limit", "unused@pk", "unused%", "extfrag@pk", "extfrag max",
                 "dev calls", "call ms");
  const SpaceResult none;
  for (const auto& r : runs)
    for (size_t i = 0; i < std::max<size_t>(1, r.spaces.size()); ++i) {
      const SpaceResult& sp = r.spaces.empty() ? none : r.spaces[i];
      // A space the replay left before its own end (the run stopped at another's OOM) is no "ok".
      const std::string result = !r.space_failed(sp) && sp.allocs_not_replayed                ? "stopped"
                                 : !r.space_failed(sp) && (r.several_spaces() || r.completed) ? "ok"
                                 : sp.ooms.empty() && !r.fatal.empty()                        ? "abort"
                                                                                              : "OOM";
      const SpaceMoment& p = sp.at_peak_allocated;
      fmt::format_to(out,
                     "{:<{}} {}{:>7} {:>5} {:>11} {:>11} {:>11} {:>6} {:>8} {:>11} {:>8} {:>9} {:>9} {:>8} {:>9.2f}\n",
                     row_label(r), w,
                     per_space ? fmt::format("{:<14} ", fmt::format("{} {}{}", sp.device, space_name(sp.space),
                                                                    i == r.binding && r.several_spaces() ? " *" : ""))
                               : "",
                     result, sp.ooms.size(), human_bytes(sp.peak_requested), human_bytes(sp.peak_allocated),
                     human_bytes(sp.peak_reserved), sp.usable ? pct(sp.peak_share()) : "-",
                     sp.limit ? pct(limit_share(sp)) : "-", human_bytes(p.unused()), pct(p.unused_share()),
                     pct(p.external()), pct(sp.frag_max), sp.device_allocs + sp.device_frees, sp.device_time_ns / 1e6);
    }
  if (per_space) fmt::format_to(out, "(* the space that binds: the first OOM, else the largest share of its memory)\n");
  // Entries that resolved to the same settings (a recording's settings already in force) say so.
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t k = i + 1; k < runs.size(); ++k)
      if (runs[i].trace_path == runs[k].trace_path && runs[i].policy_name == runs[k].policy_name &&
          settings_of(runs[i]) == settings_of(runs[k]) && runs[i].hardware == runs[k].hardware)
        fmt::format_to(
            out, "note: {} and {} ran with the same settings{}\n", escape_terminal(label_of(runs[i])),
            escape_terminal(label_of(runs[k])),
            runs[i].policy_config.contains(kRecordedSettingsKey)
                ? fmt::format(" (the recording's: {})", dump_json(runs[i].policy_config[kRecordedSettingsKey]))
                : "");
  // The fidelity of the runs that model the recording's allocator (an ideal run reproduces no address).
  for (const auto& r : runs)
    if (!r.fidelity.is_null() && r.models_recording)
      fmt::format_to(out, "{}: {}\n", escape_terminal(label_of(r)), fidelity_text(r.fidelity));
  // A row whose answer depends on the order of the state before the recording: the table shows
  // one order's; the range over the others, as `run` prints it.
  for (const auto& r : runs)
    for (const auto& sp : r.spaces)
      if (sp.prior && sp.prior->range && sp.prior->range->reserved_low != sp.prior->range->reserved_high)
        fmt::format_to(out, "{}{}: {}\n", escape_terminal(label_of(r)),
                       r.several_spaces() ? " (" + where(r, sp.device, sp.space) + ")" : "", prior_range_text(sp));
  return s;
}

}  // namespace fragsim

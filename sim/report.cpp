#include "sim/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "sim/base/text.h"

namespace fragsim {

namespace {

std::string pct(double f) { return fmt::format("{:.1f}%", 100.0 * f); }

// "reproduced 3025/3025 recorded allocation addresses, 22/22 segment sizes, 17/17 segment releases,
// 1/1 OOMs": what a recording let the run check itself against.
std::string fidelity_text(const nlohmann::json& f) {
  auto n = [&](const char* k) { return f.value(k, std::uint64_t{0}); };
  std::string s = fmt::format("reproduced {}/{} recorded allocation addresses, {}/{} segment sizes",
                              n("allocs_matched"), n("allocs_compared"), n("segments_matched"), n("segments_compared"));
  if (f.contains("segment_frees_compared"))
    s += fmt::format(", {}/{} segment releases", n("segment_frees_matched"), n("segment_frees_compared"));
  if (f.contains("ooms_recorded")) s += fmt::format(", {}/{} OOMs", n("ooms_reproduced"), n("ooms_recorded"));
  return s;
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

constexpr size_t kJsonMapBlocks = 5000;  // blocks of a memory map a JSON report keeps

nlohmann::json moment_json(const RunResult& r, const Moment& m) {
  nlohmann::json top = nlohmann::json::array(), spaces = nlohmann::json::array();
  for (const auto& b : m.top_buffers) top.push_back(buffer_json(r, b));
  for (const auto& s : m.spaces) spaces.push_back(space_moment_json(s, kJsonMapBlocks));
  return {{"event_index", m.event_index},
          {"t", m.t},
          {"allocated_bytes", m.allocated},
          {"reserved_bytes", m.reserved},
          {"live_buffers", m.live_buffers},
          {"top_buffers", top},
          {"spaces", spaces}};
}

nlohmann::json oom_json(const RunResult& r, const OomRecord& o) {
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
                      {"cause", o.fragmentation ? "fragmentation" : "capacity"},
                      {"request", buffer_json(r, o.request)}};
  if (!o.kind.empty()) j["kind"] = o.kind;
  if (o.moment) j["at_oom"] = moment_json(r, *o.moment);
  return j;
}

nlohmann::json ooms_json(const RunResult& r, const std::vector<OomRecord>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& o : v) a.push_back(oom_json(r, o));
  return a;
}

// "1.00 GiB  params/new f32[1024,4096]  id 303, event 17, 900 events old  model.py:12 f"
std::string buffer_line(const RunResult& r, const BufferView& b) {
  std::string what = b.name.empty() ? fmt::format("id {}", b.id) : escape_terminal(b.name);
  if (std::string sh = shape_text(b); !sh.empty()) what += " " + sh;
  std::string pad = b.block > b.requested ? fmt::format(" ({} requested)", human_bytes(b.requested)) : std::string();
  std::string f = escape_terminal(frame_of(r, b));
  return fmt::format("{:>12}{}  {}  id {}, event {}, {} events old{}", human_bytes(b.block), pad, what, b.id,
                     b.event_index, b.age_events, f.empty() ? std::string() : "  at " + f);
}

void moment_text(std::back_insert_iterator<std::string> out, const RunResult& r, const Moment& m) {
  for (const auto& s : m.spaces) {
    std::string where = m.spaces.size() > 1 ? fmt::format("device {} {}: ", s.device, space_name(s.space)) : "";
    fmt::format_to(out,
                   "    {}{} allocated of {} reserved; reserved but unallocated {} ({} of reserved); external "
                   "fragmentation {} (largest free block {})\n",
                   where, human_bytes(s.allocated), human_bytes(s.reserved), human_bytes(s.unused()),
                   pct(s.unused_share()), pct(s.external()), human_bytes(s.largest_free));
  }
  if (!m.top_buffers.empty()) {
    fmt::format_to(out, "    largest live buffers ({} of {}):\n", m.top_buffers.size(), m.live_buffers);
    for (size_t i = 0; i < m.top_buffers.size() && i < 10; ++i)
      fmt::format_to(out, "      {}\n", buffer_line(r, m.top_buffers[i]));
  }
}

// The allocator's free memory at an OOM, as memory_viz's segment view summarises it.
void free_space_text(std::back_insert_iterator<std::string> out, const Moment& m) {
  for (const auto& s : m.spaces) {
    if (s.map.regions.empty()) continue;
    std::vector<const MemoryMap::Block*> frees;
    for (const auto& b : s.map.blocks)
      if (!b.in_use && b.mapped) frees.push_back(&b);
    std::sort(frees.begin(), frees.end(), [](auto* a, auto* b) { return a->size > b->size; });
    std::string sizes;
    for (size_t i = 0; i < frees.size() && i < 5; ++i) sizes += (i ? ", " : "") + human_bytes(frees[i]->size);
    fmt::format_to(out, "    free memory then (device {} {}): {} free block{} in {} region{}{}\n", s.device,
                   space_name(s.space), frees.size(), frees.size() == 1 ? "" : "s", s.map.regions.size(),
                   s.map.regions.size() == 1 ? "" : "s", frees.empty() ? "" : "; the largest: " + sizes);
  }
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

std::vector<std::string> advice(const RunResult& r) {
  std::vector<std::string> a;
  if (r.ooms.empty()) return a;
  const OomRecord& o = r.ooms.front();
  const nlohmann::json& c = r.policy_config;
  auto cfg_true = [&](const char* k) { return c.contains(k) && c[k].is_boolean() && c[k].get<bool>(); };
  auto need = [&]() {
    return fmt::format("`fragsim sweep {} --policy {} --find min-capacity` tells how much memory this trace needs",
                       r.trace_path, r.policy_name);
  };
  if (r.policy_name == "torch-caching") {
    // What is set is read back from the resolved config (recorded settings, --env, --set alike).
    const bool expandable = cfg_true("resolved_expandable_segments");
    const bool split_capped = c.value("resolved_max_split_size", std::int64_t{-1}) >= 0;
    const bool gc_on = c.value("resolved_garbage_collection_threshold", 0.0) > 0;
    const double fraction = c.value("memory_fraction", 1.0);
    if (o.fragmentation && !expandable)
      a.push_back(
          "fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow instead of "
          "leaving unusable holes (`--env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` replays it)");
    else if (o.fragmentation && !split_capped)
      a.push_back(
          "fragmentation with expandable segments on: cap block splitting with max_split_size_mb "
          "(`--set max_split_size_mb=256` replays it with your other settings)");
    else if (o.fragmentation && !gc_on)
      a.push_back(
          "fragmentation: garbage_collection_threshold (e.g. 0.8) frees cached blocks before the device runs out "
          "(`--set garbage_collection_threshold=0.8` replays it)");
    else if (o.fragmentation)
      a.push_back("fragmentation: long-lived buffers pin memory between short-lived ones; free them earlier");
    if (!o.fragmentation && fraction < 1.0)
      a.push_back(fmt::format(
          "memory: torch.cuda.set_per_process_memory_fraction is {}; `fragsim sweep {} --policy torch-caching --find "
          "min-mem-fraction` finds the smallest that works",
          fraction, r.trace_path));
    else if (!o.fragmentation)
      a.push_back(fmt::format("capacity: the live buffers need more than the device gives; {}", need()));
  } else if (r.policy_name == "xla-bfc") {
    const double f = c.value("mem_fraction", 0.75);
    const bool preallocate = cfg_true("preallocate");
    const bool fixed_limit = c.contains("memory_limit");
    // Did the pool stop at its limit (a larger fraction helps) or at what the device could give?
    const Bytes limit = c.value("resolved_memory_limit", Bytes{0});
    const bool at_limit = limit && o.reserved + o.rounded > limit;
    if (o.fragmentation && preallocate)
      a.push_back(
          "fragmentation: XLA_PYTHON_CLIENT_PREALLOCATE=false (grow on demand) or "
          "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async place buffers differently (`--env` replays either)");
    else if (o.fragmentation)
      a.push_back(
          "fragmentation: XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async leaves placement to the driver "
          "(`--env XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async` replays it)");
    if (!o.fragmentation && at_limit && !fixed_limit && f < 1.0)
      a.push_back(fmt::format(
          "memory: XLA_PYTHON_CLIENT_MEM_FRACTION is {}; `fragsim sweep {} --policy xla-bfc --find min-mem-fraction` "
          "finds the smallest that works",
          f, r.trace_path));
    else if (!o.fragmentation)
      a.push_back(fmt::format("capacity: {}", need()));
  } else if (r.policy_name == "tpu-padded") {
    if (!o.kind.empty())
      a.push_back(
          "scoped VMEM: raise --xla_tpu_scoped_vmem_limit_kib or the kernel's vmem_limit_bytes, or use smaller "
          "blocks");
    else
      a.push_back(
          "TPU: shapes whose minor dims are multiples of 128 (second-minor of 8, 16 for bf16) pad least; the "
          "largest live buffers above show block (padded) against requested bytes");
  } else if (r.policy_name == "cuda-async" || r.policy_name == "platform") {
    a.push_back(fmt::format("capacity: {}", need()));
  }
  return a;
}

nlohmann::json report_json(const RunResult& r) {
  nlohmann::json devices = nlohmann::json::array();
  std::uint64_t da = 0, df = 0;
  double time_ns = 0;
  for (const auto& s : r.spaces) {
    const SpaceMoment& p = s.at_peak_allocated;
    nlohmann::json d = {
        {"device", s.device},
        {"space", space_name(s.space)},
        {"completed", s.ooms.empty()},
        {"oom_count", s.ooms.size()},
        {"ooms", ooms_json(r, s.ooms)},
        {"peak_requested_bytes", s.peak_requested},
        {"peak_allocated_bytes", s.peak_allocated},
        {"peak_reserved_bytes", s.peak_reserved},
        {"final_allocated_bytes", s.final_allocated},
        {"final_reserved_bytes", s.final_reserved},
        {"fragmentation",
         {{"at_peak_reserved", s.frag_at_peak},
          {"max", s.frag_max},
          {"at_peak_allocated",
           {{"reserved_unallocated_bytes", p.unused()},
            {"reserved_unallocated_share", p.unused_share()},
            {"external", p.external()}}}}},
        {"device_calls", {{"alloc", s.device_allocs}, {"free", s.device_frees}, {"failed", s.device_failed}}},
        {"device_time_ns", s.device_time_ns},
        {"policy_stats", s.stats}};
    for (auto it = s.extra.begin(); it != s.extra.end(); ++it) d[it.key()] = it.value();
    da += s.device_allocs;
    df += s.device_frees;
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
  nlohmann::json frag = {{"at_peak_reserved", r.frag_at_peak}, {"max", r.frag_max}};
  if (r.peak) {  // the whole run at the peak of allocated memory (docs/metrics.md)
    Bytes alloc = r.peak->allocated, res = r.peak->reserved, unused = res > alloc ? res - alloc : 0, largest = 0;
    for (const auto& s : r.peak->spaces) largest = std::max(largest, s.largest_free);
    frag["at_peak_allocated"] = {
        {"reserved_unallocated_bytes", unused},
        {"reserved_unallocated_share", res ? static_cast<double>(unused) / static_cast<double>(res) : 0.0},
        {"external",
         unused ? static_cast<double>(unused - std::min(largest, unused)) / static_cast<double>(unused) : 0.0}};
  }
  nlohmann::json j = {{"fragsim_report", 1},
                      {"trace", trace},
                      {"policy", {{"name", r.policy_name}, {"config", r.policy_config}}},
                      {"hardware", r.hardware},
                      {"completed", r.completed},
                      {"oom_count", r.ooms.size()},
                      {"ooms", ooms_json(r, r.ooms)},
                      {"peak_requested_bytes", r.peak_requested},
                      {"peak_allocated_bytes", r.peak_allocated},
                      {"peak_reserved_bytes", r.peak_reserved},
                      {"fragmentation", frag},
                      {"device_calls", {{"alloc", da}, {"free", df}}},
                      {"device_time_ns", time_ns},
                      {"devices", devices}};
  if (r.peak) j["at_peak_allocated"] = moment_json(r, *r.peak);
  if (!r.stacks.empty()) {
    nlohmann::json st = nlohmann::json::object();
    for (const auto& [id, frames] : r.stacks) st[std::to_string(id)] = frames;
    j["stacks"] = st;
  }
  if (!r.marks.empty()) {
    nlohmann::json marks = nlohmann::json::array();
    for (const auto& m : r.marks) marks.push_back({{"name", m.name}, {"event_index", m.event_index}, {"t", m.t}});
    j["marks"] = marks;
  }
  if (r.spaces.size() == 1) {
    j["policy_stats"] = r.spaces[0].stats;
    for (auto it = r.spaces[0].extra.begin(); it != r.spaces[0].extra.end(); ++it) j[it.key()] = it.value();
  }
  if (!r.label.empty()) j["label"] = r.label;
  if (r.empty_cache_calls) j["empty_cache"] = {{"calls", r.empty_cache_calls}, {"effect", r.empty_cache_effect}};
  if (!r.fidelity.is_null()) j["fidelity"] = r.fidelity;
  if (r.stopped_early) j["stopped_early"] = true;
  if (!r.fatal.empty()) j["fatal"] = {{"event_index", r.fatal_event}, {"message", r.fatal}};
  if (!r.notes.empty()) j["notes"] = r.notes;
  if (auto a = advice(r); !a.empty()) j["advice"] = a;
  return j;
}

std::string report_text(const RunResult& r) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "fragsim: {} — policy {} on {}\n", escape_terminal(r.trace_path), escape_terminal(label_of(r)),
                 escape_terminal(r.hardware.value("name", std::string("?"))));
  for (const auto& n : r.notes) fmt::format_to(out, "  note: {}\n", escape_terminal(n));
  fmt::format_to(out, "  events {}  allocs {}  frees {}{}\n", r.events, r.allocs, r.frees,
                 r.skipped_frees ? fmt::format("  (skipped {} frees of unknown ids)", r.skipped_frees) : "");
  fmt::format_to(out, "  result: {}\n",
                 r.completed ? "completed, no OOM"
                             : fmt::format("{} OOM{}{}", r.ooms.size(), r.ooms.size() == 1 ? "" : "s",
                                           r.stopped_early ? " (stopped at the first; --keep-going lists all)" : ""));
  if (r.empty_cache_calls)
    fmt::format_to(out, "  empty_cache: the program called it {} time{}; the last one: {}\n", r.empty_cache_calls,
                   r.empty_cache_calls == 1 ? "" : "s", r.empty_cache_effect);
  if (!r.fatal.empty())
    fmt::format_to(out, "  ABORTED at event {}: {} (the real allocator stops the process here)\n", r.fatal_event,
                   r.fatal);
  fmt::format_to(out, "  peak requested  {:>14}  ({} B)\n", human_bytes(r.peak_requested), r.peak_requested);
  fmt::format_to(out, "  peak allocated  {:>14}  ({} B)\n", human_bytes(r.peak_allocated), r.peak_allocated);
  fmt::format_to(out, "  peak reserved   {:>14}  ({} B)\n", human_bytes(r.peak_reserved), r.peak_reserved);
  if (r.peak) {
    fmt::format_to(out, "  at the peak of allocated memory (event {}, t={}):\n", r.peak->event_index, r.peak->t);
    moment_text(out, r, *r.peak);
  }
  for (const auto& sp : r.spaces) {
    if (r.spaces.size() > 1)
      fmt::format_to(out, "  device {} {}: peak allocated {}, reserved {}, external fragmentation max {}, {} OOMs\n",
                     sp.device, space_name(sp.space), human_bytes(sp.peak_allocated), human_bytes(sp.peak_reserved),
                     pct(sp.external_max), sp.ooms.size());
    if (sp.device_allocs || sp.device_frees)
      fmt::format_to(out, "  device calls (device {} {}): {} alloc, {} free, simulated {:.3f} ms\n", sp.device,
                     space_name(sp.space), sp.device_allocs, sp.device_frees, sp.device_time_ns / 1e6);
  }
  if (!r.fidelity.is_null()) {
    fmt::format_to(out, "  fidelity: {}\n", fidelity_text(r.fidelity));
    if (!r.fidelity["first_mismatch"].is_null())
      fmt::format_to(out, "  first mismatch: {}\n", escape_terminal(r.fidelity["first_mismatch"].dump()));
  }
  size_t shown = 0;
  for (const auto& o : r.ooms) {
    if (shown++ == kDetailedOoms) {
      fmt::format_to(out, "  ... {} more OOMs in the JSON report\n", r.ooms.size() - kDetailedOoms);
      break;
    }
    std::string what = o.request.name.empty() ? fmt::format("id {}", o.id) : escape_terminal(o.request.name);
    if (std::string sh = shape_text(o.request); !sh.empty()) what += " " + sh;
    std::string f = escape_terminal(frame_of(r, o.request));
    fmt::format_to(out, "  OOM at event {} (t={}, device {} {}): {}{}\n", o.event_index, o.t, o.device,
                   space_name(o.space), what, f.empty() ? "" : "  at " + f);
    fmt::format_to(
        out, "    requested {} (rounded {}); allocated {}, reserved {}, free {}, largest free {} -> {}\n",
        human_bytes(o.requested), human_bytes(o.rounded), human_bytes(o.allocated), human_bytes(o.reserved),
        human_bytes(o.free), human_bytes(o.largest_free),
        o.fragmentation ? "FRAGMENTATION (enough memory is free, no hole fits)" : "CAPACITY (not enough free memory)");
    // The first OOM in full; the next ones in two lines each (the JSON report has them all).
    if (shown > 1) continue;
    if (o.moment) {
      moment_text(out, r, *o.moment);
      free_space_text(out, *o.moment);
    }
    if (!o.explanation.empty()) {
      fmt::format_to(out, "    the allocator's own report:\n");
      s += o.explanation;
    }
  }
  for (const auto& line : advice(r)) fmt::format_to(out, "  advice: {}\n", escape_terminal(line));
  return s;
}

std::string compare_table(const std::vector<RunResult>& runs) {
  std::string s;
  auto out = std::back_inserter(s);
  std::vector<const RunResult*> traces;  // one per distinct trace, in order
  for (const auto& r : runs)
    if (std::none_of(traces.begin(), traces.end(), [&](auto* t) { return t->trace_path == r.trace_path; }))
      traces.push_back(&r);
  for (const auto* t : traces)
    fmt::format_to(out, "trace {} on {}: {} events, peak requested {}\n", escape_terminal(t->trace_path),
                   escape_terminal(t->hardware.value("name", std::string("?"))), t->events,
                   human_bytes(t->peak_requested));
  size_t w = 16;
  for (const auto& r : runs) w = std::max(w, escape_terminal(label_of(r)).size());
  // Fragmentation columns at the peak of allocated memory (docs/metrics.md): reserved but
  // unallocated, its share of reserved, and external fragmentation 1 − largest free / free.
  fmt::format_to(out, "{:<{}} {:>6} {:>5} {:>11} {:>11} {:>11} {:>11} {:>8} {:>9} {:>9} {:>8} {:>9}\n", "policy", w,
                 "result", "OOMs", "peak req", "peak alloc", "peak resvd", "unused@pk", "unused%", "extfrag@pk",
                 "extfrag max", "dev calls", "call ms");
  for (const auto& r : runs) {
    std::uint64_t calls = 0;
    double ns = 0;
    for (const auto& sp : r.spaces) calls += sp.device_allocs + sp.device_frees, ns += sp.device_time_ns;
    Bytes unused = 0;
    double share = 0, ext = 0;
    if (r.peak) {
      unused = r.peak->reserved > r.peak->allocated ? r.peak->reserved - r.peak->allocated : 0;
      share = r.peak->reserved ? static_cast<double>(unused) / static_cast<double>(r.peak->reserved) : 0;
      Bytes largest = 0;
      for (const auto& sp : r.peak->spaces) largest = std::max(largest, sp.largest_free);
      ext = unused ? static_cast<double>(unused - std::min(largest, unused)) / static_cast<double>(unused) : 0;
    }
    fmt::format_to(out, "{:<{}} {:>6} {:>5} {:>11} {:>11} {:>11} {:>11} {:>8} {:>9} {:>9} {:>8} {:>9.2f}\n",
                   escape_terminal(label_of(r)), w, r.completed ? "ok" : "OOM", r.ooms.size(),
                   human_bytes(r.peak_requested), human_bytes(r.peak_allocated), human_bytes(r.peak_reserved),
                   human_bytes(unused), pct(share), pct(ext), pct(r.frag_max), calls, ns / 1e6);
  }
  for (const auto& r : runs)
    if (!r.fidelity.is_null()) fmt::format_to(out, "{}: {}\n", escape_terminal(label_of(r)), fidelity_text(r.fidelity));
  return s;
}

}  // namespace fragsim

// A run's history as the HTML viewer reads it (docs/viewer.md, "Data"): compact arrays, strings
// interned, times from the trace's first event, addresses as numbers (below 2^53).
#include "sim/report/history_json.h"

#include <fmt/format.h>
#include <zlib.h>

#include <stdexcept>

#include "sim/engine/window.h"
#include "sim/report/by_stack.h"
#include "sim/report/report.h"

namespace fragsim {

namespace {

class Strings {
 public:
  long id(const std::string& s) {
    if (s.empty()) return -1;
    auto [it, fresh] = ids_.try_emplace(s, static_cast<long>(list_.size()));
    if (fresh) list_.push_back(s);
    return it->second;
  }
  nlohmann::json json() const { return list_; }

 private:
  std::unordered_map<std::string, long> ids_;
  std::vector<std::string> list_;
};

double ratio4(double f) { return std::round(f * 1e4) / 1e4; }

std::string base64(const std::string& in) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(in[k])); };
  for (; i + 2 < in.size(); i += 3) {
    std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kDigits[(v >> s) & 63]);
  }
  if (i < in.size()) {
    std::uint32_t v = byte(i) << 16 | (i + 1 < in.size() ? byte(i + 1) << 8 : 0);
    out.push_back(kDigits[(v >> 18) & 63]);
    out.push_back(kDigits[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kDigits[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

nlohmann::json figures_json(const HistoryFigures& f) {
  return {f.slot, f.allocated, f.reserved, f.largest_free, ratio4(f.external)};
}

// [base, size, id, [gap, size, kind, buffer, ...]]: each block's gap from the previous block's end.
nlohmann::json region_json(const HistoryRegion& g) {
  nlohmann::json flat = nlohmann::json::array();
  Addr at = g.base;
  for (const auto& b : g.blocks) {
    flat.push_back(b.addr - at);
    flat.push_back(b.size);
    flat.push_back(static_cast<int>(b.kind));
    flat.push_back(b.buffer);
    at = b.addr + b.size;
  }
  return {g.base.value(), g.size, g.id, flat};
}

// zlib's deflate of `in` (RFC 1950), which the page inflates (sim/viewer/viewer_log.js).
std::string deflated(const std::string& in) {
  uLongf n = compressBound(static_cast<uLong>(in.size()));
  std::string out(n, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(in.data()),
                static_cast<uLong>(in.size()), 6) != Z_OK)
    throw std::runtime_error("zlib: compress2 failed");
  out.resize(n);
  return out;
}

// Whether the page reads a column of the allocation log when it opens (drawing: events, sizes,
// colours, frees) or the first time something asks (times, ids, addresses, ...).
constexpr int kAllocColumns = AllocationLog::kAllocColumns, kColumns = kAllocColumns + AllocationLog::kFreeColumns;
bool drawn_column(int c) {
  using L = AllocationLog;
  return c == L::kFlags || c == L::kEvent || c == L::kRequested || c == L::kPad || c == L::kStackId ||
         c == L::kNameId || c == kAllocColumns + static_cast<int>(L::kBack) ||
         c == kAllocColumns + static_cast<int>(L::kFreeEvent);
}

// The allocation log (sim/engine/allocation_log.h): per slot each column's length (alloc columns,
// then free columns) and the columns end to end in two blobs, deflated and in base64: `data`, the
// columns drawing reads, and `more`, the rest; names and shapes as text.
nlohmann::json allocations_json(const AllocationLog& log) {
  nlohmann::json slots = nlohmann::json::array(), shapes = nlohmann::json::array();
  for (std::uint32_t s = 0; s < log.slots(); ++s) {
    std::string drawn, more;
    nlohmann::json lengths = nlohmann::json::array();
    for (int c = 0; c < kColumns; ++c) {
      const auto& col = c < kAllocColumns
                            ? log.alloc_column(s, static_cast<AllocationLog::AllocColumn>(c))
                            : log.free_column(s, static_cast<AllocationLog::FreeColumn>(c - kAllocColumns));
      (drawn_column(c) ? drawn : more) += col;
      lengths.push_back(col.size());
    }
    slots.push_back({{"slot", s},
                     {"count", log.count(s)},
                     {"columns", lengths},
                     {"data", base64(deflated(drawn))},
                     {"more", base64(deflated(more))}});
  }
  for (const auto& sh : log.shapes()) {
    BufferView v;
    v.dtype = sh.dtype;
    v.shape = sh.dims;
    v.has_shape = true;
    shapes.push_back(shape_text(v));
  }
  return {
      {"slots", slots},
      {"names", log.names()},
      {"shapes", shapes},
      {"cut_at", log.truncated_at() == AllocationLog::kNone ? nlohmann::json(-1) : nlohmann::json(log.truncated_at())}};
}

// The log as the page holds it: whole, or when its columns deflated pass the page's budget, cut
// before the event where they fit (the page says so).
nlohmann::json page_allocations(const AllocationLog& log, std::uint64_t first, std::uint64_t last) {
  nlohmann::json j = allocations_json(log);
  auto size = [](const nlohmann::json& x) {
    size_t n = 0;
    for (const auto& s : x["slots"])
      n += s["data"].get_ref<const std::string&>().size() + s["more"].get_ref<const std::string&>().size();
    return n;
  };
  for (size_t n = size(j); n > kPageAllocationBytes && last > first;) {
    last = first + static_cast<std::uint64_t>(static_cast<double>(last - first) * 0.9 *
                                              static_cast<double>(kPageAllocationBytes) / static_cast<double>(n));
    j = allocations_json(log.cut_before(last));
    n = size(j);
  }
  return j;
}

}  // namespace

nlohmann::json history_json(const RunHistory& h, const RunResult& r) {
  Strings strings;
  const std::uint64_t t0 = r.first_t.value();
  auto rel = [&](Tick t) { return t.value() - std::min(t.value(), t0); };
  nlohmann::json slots = nlohmann::json::array(), buffers = nlohmann::json::array(),
                 timelines = nlohmann::json::array(), keyframes = nlohmann::json::array(),
                 deltas = nlohmann::json::array(), exact = nlohmann::json::array();
  for (const auto& [device, space] : h.slots) slots.push_back({device, space_name(space)});
  nlohmann::json slot_stopped = nlohmann::json::array();  // per slot: -1, or where its process stopped
  for (std::uint64_t at : h.slot_stopped_at)
    slot_stopped.push_back(at == kStillLive ? nlohmann::json(-1) : nlohmann::json(at));
  for (const auto& b : h.buffers) {
    const BufferView& v = b.view;
    buffers.push_back({v.id.value(), b.slot, v.event_index, rel(v.t),
                       b.free_event == kStillLive ? nlohmann::json(-1) : nlohmann::json(b.free_event),
                       b.free_event == kStillLive ? nlohmann::json(-1) : nlohmann::json(rel(b.free_t)), v.requested,
                       v.block, strings.id(v.name), v.stack, strings.id(shape_text(v)),
                       v.has_addr ? nlohmann::json(v.addr.value()) : nlohmann::json(),
                       // what the page shows of it, as fragsim counts it: padding, lifetime (events, ticks)
                       v.block - std::min(v.block, v.requested),
                       b.free_event == kStillLive ? nlohmann::json(-1) : nlohmann::json(b.free_event - v.event_index),
                       b.free_event == kStillLive
                           ? nlohmann::json(-1)
                           : nlohmann::json(b.free_t.value() - std::min(b.free_t.value(), v.t.value()))});
  }
  for (const auto& tl : h.timelines) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : tl.points) points.push_back({p.event, rel(p.t), p.live, p.other});
    timelines.push_back({{"slot", tl.slot}, {"points", points}, {"bands", tl.bands}});
  }
  for (const auto& k : h.keyframes) {
    nlohmann::json ss = nlohmann::json::array();
    for (const auto& s : k.slots) {
      nlohmann::json regions = nlohmann::json::array();
      for (const auto& g : s.regions) regions.push_back(region_json(g));
      ss.push_back({{"figures", figures_json(s.figures)}, {"regions", regions}, {"truncated", s.truncated}});
    }
    keyframes.push_back({{"event", k.event},
                         {"t", rel(k.t)},
                         {"slots", ss},
                         {"by_stack", by_stack_json(by_stack(k.sites, k.other_sites, h.stacks), 20)},
                         {"flame", flame_json(k.sites, k.other_sites, h.stacks, 150)}});
  }
  for (const auto& d : h.deltas) {
    nlohmann::json changes = nlohmann::json::array(), figs = nlohmann::json::array();
    for (const auto& c : d.changes) {
      switch (c.kind) {
        case Delta::kPlace:
        case Delta::kFree:
          changes.push_back({c.slot, static_cast<int>(c.kind), c.addr.value(), c.size, c.buffer});
          break;
        case Delta::kRegion:
          changes.push_back({c.slot, static_cast<int>(c.kind), region_json(c.region)});
          break;
        case Delta::kRegionGone:
          changes.push_back({c.slot, static_cast<int>(c.kind), c.addr.value()});
          break;
      }
    }
    for (const auto& f : d.figures) figs.push_back(figures_json(f));
    deltas.push_back({d.event, rel(d.t), changes, figs});
  }
  for (const auto& [a, b] : h.exact) exact.push_back({a, b});
  nlohmann::json regions = nlohmann::json::array();
  for (const auto& g : h.regions) {
    nlohmann::json usage = nlohmann::json::array();
    for (const auto& u : g.usage) {
      usage.push_back(u.event);
      usage.push_back(u.mapped);
      usage.push_back(u.in_use);
    }
    const bool held = g.released_event == RegionLife::kHeld;
    regions.push_back({g.slot, g.id, g.base.value(), g.size, g.obtained_event, rel(g.obtained_t),
                       held ? nlohmann::json(-1) : nlohmann::json(g.released_event),
                       held ? nlohmann::json(-1) : nlohmann::json(rel(g.released_t)),
                       held ? std::string() : std::string(op_name(g.released_by)), g.pre_trace ? 1 : 0, usage});
  }
  nlohmann::json marks = nlohmann::json::array(), ooms = nlohmann::json::array();  // with times from the start
  for (const auto& m : r.marks) marks.push_back({m.event_index, rel(m.t), m.name});
  for (const auto& o : r.ooms) ooms.push_back({o.event_index, rel(o.t), o.device, space_name(o.space)});
  return {
      {"first", h.first},
      {"last", h.last},
      {"window", r.window},
      {"seconds_per_tick", seconds_per_tick(r.time_unit)},
      {"timed", r.timed},
      {"slots", slots},
      {"strings", strings.json()},
      {"buffers", buffers},
      {"timelines", timelines},
      {"keyframes", keyframes},
      {"deltas", deltas},
      {"exact", exact},
      {"marks", marks},
      {"ooms", ooms},
      {"budget_exceeded", h.budget_exceeded},
      {"allocations", h.allocations ? page_allocations(*h.allocations, h.first, h.last + 1) : nlohmann::json()},
      {"regions", regions},
      {"regions_cut_at", h.regions_cut_at == RegionLife::kHeld ? nlohmann::json(-1) : nlohmann::json(h.regions_cut_at)},
      {"stopped_at", h.stopped_at == kStillLive ? nlohmann::json(-1) : nlohmann::json(h.stopped_at)},
      {"slot_stopped_at", slot_stopped}};
}

}  // namespace fragsim

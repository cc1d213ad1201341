// A run's history as the HTML viewer reads it (docs/viewer.md, "Data"): compact arrays, strings
// interned, times from the trace's first event, addresses as numbers (below 2^53).
#include "sim/report/history_json.h"

#include <fmt/format.h>

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

}  // namespace

nlohmann::json history_json(const RunHistory& h, const RunResult& r) {
  Strings strings;
  const std::uint64_t t0 = r.first_t.value();
  auto rel = [&](Tick t) { return t.value() - std::min(t.value(), t0); };
  nlohmann::json slots = nlohmann::json::array(), buffers = nlohmann::json::array(),
                 timelines = nlohmann::json::array(), keyframes = nlohmann::json::array(),
                 deltas = nlohmann::json::array(), exact = nlohmann::json::array();
  for (const auto& [device, space] : h.slots) slots.push_back({device, space_name(space)});
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
  nlohmann::json marks = nlohmann::json::array(), ooms = nlohmann::json::array();  // with times from the start
  for (const auto& m : r.marks) marks.push_back({m.event_index, rel(m.t), m.name});
  for (const auto& o : r.ooms) ooms.push_back({o.event_index, rel(o.t), o.device, space_name(o.space)});
  return {{"first", h.first},
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
          {"budget_exceeded", h.budget_exceeded}};
}

}  // namespace fragsim

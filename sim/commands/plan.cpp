#include "sim/commands/plan.h"

#include <fmt/format.h>

#include <charconv>
#include <map>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/engine/engine.h"
#include "traces/trace_reader.h"

namespace fragsim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    size_t comma = line.find(',', at);
    out.push_back(trim(line.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at)));
    if (comma == std::string_view::npos) return out;
    at = comma + 1;
  }
}

// MiniMalloc's CSV: a header naming id, lower, upper and size (start/end are taken for
// lower/upper; other columns, such as a solution's offset, are ignored), then one buffer a line.
PlanInput read_csv(const std::string& path) {
  const std::string text = read_file(path);
  PlanInput in;
  in.path = path;
  in.csv = true;
  in.spaces.emplace_back();
  PlanSpace& sp = in.spaces.back();
  std::map<std::string, size_t> col;
  std::uint64_t line_no = 0;
  size_t want = 0;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    std::string_view line(text.data() + at, (nl == std::string::npos ? text.size() : nl) - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    ++line_no;
    if (trim(line).empty()) continue;
    auto cells = split_commas(line);
    if (col.empty()) {
      for (size_t c = 0; c < cells.size(); ++c) {
        std::string name(cells[c]);
        if (name == "start") name = "lower";
        if (name == "end") name = "upper";
        col.emplace(name, c);
        want = std::max(want, c + 1);
      }
      for (const char* k : {"id", "lower", "upper", "size"})
        if (!col.count(k))
          throw InputError(path, line_no,
                           fmt::format("the header names no column '{}' (MiniMalloc's CSV: id,lower,upper,size)", k));
      continue;
    }
    if (cells.size() < col.size())
      throw InputError(path, line_no, fmt::format("{} columns, the header names {}", cells.size(), col.size()));
    auto num = [&](const char* key) {
      std::string_view v = cells[col.at(key)];
      std::uint64_t x = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec != std::errc() || end != v.data() + v.size() || v.empty())
        throw InputError(path, line_no, fmt::format("{}: '{}' is not a whole number of 0 or more", key, v));
      return x;
    };
    PlanBuffer b{num("lower"), num("upper"), num("size")};
    if (b.upper <= b.lower)
      throw InputError(
          path, line_no,
          fmt::format("upper: {} is not after lower {} (a buffer lives over [lower, upper))", b.upper, b.lower));
    if (cells[col.at("id")].empty()) throw InputError(path, line_no, "id: empty");
    sp.ids.emplace_back(cells[col.at("id")]);
    sp.buffers.push_back(b);
  }
  if (col.empty()) throw InputError(path, 0, "empty: MiniMalloc's CSV starts with the header id,lower,upper,size");
  return in;
}

}  // namespace

PlanInput read_plan_input(TraceReader& reader_, const std::string& path, const SpaceRoute& route,
                          const std::atomic<bool>* stop) {
  TraceReader* reader = &reader_;
  PlanInput in;
  in.path = path;
  using Key = std::pair<std::uint32_t, Space>;
  std::map<Key, size_t> index;  // (device, space) → in.spaces
  std::vector<std::uint64_t> clock;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> where;  // per handle: (space, buffer)
  Event ev;
  for (std::uint64_t n = 0; reader->next(ev); ++n) {
    if ((n & 4095) == 0 && stop && stop->load(std::memory_order_relaxed)) throw Cancelled();
    if (ev.op != Op::kAlloc && ev.op != Op::kFree) continue;
    if (ev.op == Op::kFree && (ev.handle == kNoHandle || ev.handle >= where.size())) continue;
    if (ev.op == Op::kAlloc) {
      Space s = route ? route(ev.space) : ev.space;
      auto [it, fresh] = index.emplace(Key{ev.device, s}, in.spaces.size());
      if (fresh) {
        in.spaces.push_back({ev.device, s, {}, {}});
        clock.push_back(0);
      }
      PlanSpace& sp = in.spaces[it->second];
      if (ev.handle >= where.size()) where.resize(ev.handle + 1);
      where[ev.handle] = {static_cast<std::uint32_t>(it->second), static_cast<std::uint32_t>(sp.buffers.size())};
      sp.buffers.push_back({clock[it->second]++, kTooLarge, ev.size});
      sp.ids.push_back(std::to_string(ev.id.value()));
    } else {
      auto [s, b] = where[ev.handle];
      in.spaces[s].buffers[b].upper = clock[s]++;
    }
  }
  for (size_t s = 0; s < in.spaces.size(); ++s)
    for (PlanBuffer& b : in.spaces[s].buffers)
      if (b.upper == kTooLarge) b.upper = clock[s];  // never freed: to one past the last event
  std::sort(in.spaces.begin(), in.spaces.end(), [](const PlanSpace& a, const PlanSpace& b) {
    return a.device != b.device ? a.device < b.device : a.space < b.space;
  });
  in.digest = reader->digest();
  return in;
}

PlanInput read_plan_input(const std::string& path, bool lenient, const SpaceRoute& route) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".csv") == 0) return read_csv(path);
  ReaderOptions ro;
  ro.lenient = lenient;
  return read_plan_input(*open_trace(path, ro), path, route);
}

PlanOutcome run_plan(const PlanRequest& req) {
  const auto start = PlanClock::now();
  PlanOutcome o;
  o.capacity = req.capacity;
  o.input = read_plan_input(req.input, req.lenient);
  size_t total = 0;
  for (const PlanSpace& s : o.input.spaces) total += s.buffers.size();
  // The limit bounds the whole command: the time spent reading the input is spent from it, and
  // kept for checking and writing the plans is as much again or 10 µs per buffer, whichever is
  // more (the check and the JSON of 62,000 buffers took 0.4 s on the loaded 2-core machine).
  const double read = std::chrono::duration<double>(PlanClock::now() - start).count();
  const double limit = (req.time_limit > 0 ? req.time_limit : default_plan_time(total)) - read -
                       std::max(read, 1e-5 * static_cast<double>(total));
  for (const PlanSpace& s : o.input.spaces) {
    PlanOptions po;
    po.capacity = req.capacity;
    po.seed = req.seed;
    po.stop = req.stop;
    // Each space's share of the time, by its buffers.
    po.time_limit =
        std::max(0.01, limit * static_cast<double>(s.buffers.size()) / static_cast<double>(std::max<size_t>(total, 1)));
    o.plans.push_back(plan_buffers(s.buffers, po));
  }
  o.seconds = std::chrono::duration<double>(PlanClock::now() - start).count();
  return o;
}

nlohmann::json plan_json(const PlanOutcome& o, bool offsets) {
  nlohmann::json spaces = nlohmann::json::array();
  for (size_t k = 0; k < o.plans.size(); ++k) {
    const PlanSpace& s = o.input.spaces[k];
    const PlanResult& p = o.plans[k];
    nlohmann::json j = {
        {"buffers", s.buffers.size()},
        {"height_bytes", p.height},
        {"lower_bound_bytes", p.lower_bound},
        {"height_over_bound", p.lower_bound ? static_cast<double>(p.height) / static_cast<double>(p.lower_bound) : 1.0},
        {"optimal", p.optimal},
        {"greedy_height_bytes", p.greedy_height},
        {"method", p.method},
        {"cut_short", p.cut_short},
        {"seconds", p.seconds},
        {"checked", true},
        {"leaves", p.leaves},
        {"largest_leaf", p.largest_leaf}};
    if (!o.input.csv) {
      j["device"] = s.device;
      j["space"] = std::string(space_name(s.space));
    }
    if (o.capacity) j["capacity_met"] = p.capacity_met;
    if (offsets) {
      nlohmann::json off = nlohmann::json::array();
      for (size_t i = 0; i < s.buffers.size(); ++i)
        off.push_back({{"id", o.input.csv ? nlohmann::json(s.ids[i]) : nlohmann::json(std::stoull(s.ids[i]))},
                       {"offset", p.offsets[i]}});
      j["offsets"] = std::move(off);
    }
    spaces.push_back(std::move(j));
  }
  nlohmann::json j = {{"fragsim_plan", 1},
                      {"input", o.input.path},
                      {"format", o.input.csv ? "minimalloc-csv" : "trace"},
                      {"seconds", o.seconds},
                      {"spaces", spaces}};
  if (!o.input.digest.empty()) j["digest"] = o.input.digest;
  if (o.capacity) j["capacity_bytes"] = o.capacity;
  return j;
}

std::string plan_csv(const PlanOutcome& o) {
  std::string s;
  auto out = std::back_inserter(s);
  const bool several = o.input.spaces.size() > 1;
  fmt::format_to(out, "{}id,lower,upper,size,offset\n", several ? "device,space," : "");
  for (size_t k = 0; k < o.plans.size(); ++k) {
    const PlanSpace& sp = o.input.spaces[k];
    for (size_t i = 0; i < sp.buffers.size(); ++i) {
      const PlanBuffer& b = sp.buffers[i];
      if (several) fmt::format_to(out, "{},{},", sp.device, space_name(sp.space));
      fmt::format_to(out, "{},{},{},{},{}\n", sp.ids[i], b.lower, b.upper, b.size, o.plans[k].offsets[i]);
    }
  }
  return s;
}

std::string plan_text(const PlanOutcome& o) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "fragsim plan: {} ({})\n", o.input.path, o.input.csv ? "MiniMalloc CSV" : "trace");
  if (o.plans.empty()) fmt::format_to(out, "  no allocation to plan\n");
  for (size_t k = 0; k < o.plans.size(); ++k) {
    const PlanSpace& sp = o.input.spaces[k];
    const PlanResult& p = o.plans[k];
    const double over =
        p.lower_bound ? 100.0 * (static_cast<double>(p.height) / static_cast<double>(p.lower_bound) - 1) : 0;
    fmt::format_to(out, "  {}{} buffers: height {} ({} B), lower bound {} ({} B): {}\n",
                   o.input.csv ? "" : fmt::format("device {} {}: ", sp.device, space_name(sp.space)), sp.buffers.size(),
                   human_bytes(p.height), p.height, human_bytes(p.lower_bound), p.lower_bound,
                   p.optimal
                       ? "optimal"
                       : fmt::format("+{:.2f}%{}", over, p.cut_short ? " (the time limit ended the search)" : ""));
    fmt::format_to(out,
                   "    found by {} in {:.2f} s (best greedy order: {} B); plan checked: no two buffers that live at "
                   "once overlap\n",
                   p.method, p.seconds, p.greedy_height);
  }
  return s;
}

}  // namespace fragsim

#include "sim/commands/waste.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "sim/base/io.h"
#include "sim/commands/plan.h"
#include "sim/commands/run_setup.h"
#include "traces/trace_reader.h"

namespace fragsim {

namespace {

// Plans made in this process, by the trace's digest (and how its spaces were routed).
std::mutex cache_mutex;
std::map<std::string, std::shared_ptr<const TracePlans>>& cache() {
  static std::map<std::string, std::shared_ptr<const TracePlans>> c;
  return c;
}

// What a cached plan depends on besides the trace: the report's planning rules (bump on a change).
constexpr const char* kPlanCacheVersion = "report-plan-3";

// The plan cache's file for a key ("" when caching is off): FRAGSIM_PLAN_CACHE, else
// $XDG_CACHE_HOME/fragsim/plans, else ~/.cache/fragsim/plans; the name is a hash of the key,
// which the file repeats (a collision reads as a miss).
std::string plan_cache_file(const std::string& key) {
  std::string dir;
  if (const char* c = std::getenv("FRAGSIM_PLAN_CACHE"); c && *c) {
    if (std::string_view(c) == "off") return {};
    dir = c;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/fragsim/plans";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/fragsim/plans";
  } else {
    return {};
  }
  std::uint64_t hash = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char ch : key) hash = (hash ^ ch) * 1099511628211ULL;
  return fmt::format("{}/{:016x}.json", dir, hash);
}

nlohmann::json plans_json(const std::string& key, const TracePlans& p) {
  nlohmann::json spaces = nlohmann::json::array();
  for (const auto& [where, f] : p.spaces)
    spaces.push_back({{"device", where.first},
                      {"space", space_name(where.second)},
                      {"height", f.height},
                      {"live", f.live},
                      {"optimal", f.optimal},
                      {"cut_short", f.cut_short},
                      {"seconds", f.seconds},
                      {"budget", f.budget}});
  return {{"key", key}, {"skipped_buffers", p.skipped_buffers}, {"spaces", spaces}};
}

// A plan from the cache, or none (no file, another key, or anything unreadable in it: the plan is
// then made again and the file replaced).
std::shared_ptr<const TracePlans> cached_plans(const std::string& file, const std::string& key) {
  if (file.empty() || !std::filesystem::exists(file)) return nullptr;
  try {
    const nlohmann::json j = read_json_file(file);
    if (j.at("key").get<std::string>() != key) return nullptr;
    auto p = std::make_shared<TracePlans>();
    p->skipped_buffers = j.at("skipped_buffers").get<size_t>();
    for (const auto& s : j.at("spaces")) {
      Space space;
      if (!parse_space(s.at("space").get<std::string>(), &space)) return nullptr;
      PlanFigures f;
      f.planned = true;
      f.height = s.at("height").get<Bytes>();
      f.live = s.at("live").get<Bytes>();
      f.optimal = s.at("optimal").get<bool>();
      f.cut_short = s.at("cut_short").get<bool>();
      f.seconds = s.at("seconds").get<double>();
      f.budget = s.at("budget").get<double>();
      p->spaces.push_back({{s.at("device").get<std::uint32_t>(), space}, f});
    }
    return p;
  } catch (const std::exception&) {
    return nullptr;
  }
}

std::shared_ptr<const TracePlans> plan_trace(const RunOptions& o) {
  // Where the run's hardware keeps each space (as the engine routes them).
  const bool collective_in_hbm = !o.hw.space(Space::kCollective) && o.hw.space(Space::kHbm);
  SpaceRoute route = [collective_in_hbm](Space s) {
    return s == Space::kCollective && collective_in_hbm ? Space::kHbm : s;
  };
  // A second reader of the run's input, beside the replay: it leaves progress to the replay's, and
  // stops when the run is cancelled.
  std::unique_ptr<TraceReader> reader = o.source ? o.source() : open_trace(o.trace, ReaderOptions{o.lenient});
  reader->count_progress(false);
  PlanInput in = read_plan_input(*reader, o.trace, route, o.cancel);
  const std::string key = in.digest + (collective_in_hbm ? "|collective-in-hbm" : "") + "|" + kPlanCacheVersion;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (auto it = cache().find(key); it != cache().end()) return it->second;
  }
  const std::string file = plan_cache_file(key);
  if (auto p = cached_plans(file, key)) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    return cache().emplace(key, std::move(p)).first->second;
  }
  auto plans = std::make_shared<TracePlans>();
  size_t total = 0;
  for (const PlanSpace& s : in.spaces) total += s.buffers.size();
  if (total > kReportPlanBuffers) {
    plans->skipped_buffers = total;
  } else {
    const double budget = report_plan_budget(total);
    for (const PlanSpace& s : in.spaces) {
      PlanOptions po;
      po.stop = o.cancel;
      po.work_limit = report_plan_work(s.buffers.size());
      po.local_search = false;  // its steps are whole greedy passes: bounded by time only
      po.time_limit = std::max(
          0.01, budget * static_cast<double>(s.buffers.size()) / static_cast<double>(std::max<size_t>(1, total)));
      PlanResult r = plan_buffers(s.buffers, po);
      PlanFigures f;
      f.planned = true;
      f.height = r.height;
      f.live = live_bytes_bound(s.buffers);
      f.optimal = r.optimal;
      f.cut_short = r.cut_short;
      f.seconds = r.seconds;
      f.budget = po.time_limit;
      plans->spaces.push_back({{s.device, s.space}, f});
    }
  }
  // Kept on disk for the next process; a plan the run's cancellation cut short is not.
  if (!file.empty() && !(o.cancel && o.cancel->load())) {
    try {
      std::filesystem::create_directories(std::filesystem::path(file).parent_path());
      write_file_atomic(file, dump_json(plans_json(key, *plans)) + "\n");
    } catch (const std::exception&) {  // a cache that cannot be written only costs the next run its plan
    }
  }
  std::lock_guard<std::mutex> lock(cache_mutex);
  return cache().emplace(key, std::move(plans)).first->second;
}

}  // namespace

std::uint64_t report_plan_work(size_t buffers) {
  const std::uint64_t n = std::max<std::uint64_t>(buffers, 1);
  return std::max(kReportPlanWork * n, kReportPlanVisits / n);
}

// A build with AddressSanitizer (scripts/test-sanitize: -O1, every access checked) searches 5-10
// times slower: its backstop is as much longer, so that there too the work bound ends the search
// and its reports equal the release build's (a Slurm array's merge equals one process).
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSlowBuild = 10;
#else
constexpr double kSlowBuild = 1;
#endif

double report_plan_budget(size_t buffers) {
  return kSlowBuild * std::min(30.0, 10.0 + static_cast<double>(buffers) / 2e4);
}

BestPlans::BestPlans(const std::vector<RunOptions>& runs) {
  std::map<std::string, std::shared_future<std::shared_ptr<const TracePlans>>> by_trace;
  for (const RunOptions& o : runs) {
    shard_.push_back(o.shard);
    traces_.push_back(o.trace);
    const bool collective_in_hbm = !o.hw.space(Space::kCollective) && o.hw.space(Space::kHbm);
    const std::string key = o.trace + (collective_in_hbm ? "|c" : "") + (o.source ? "|memory" : "");
    auto it = by_trace.find(key);
    if (it == by_trace.end())
      it = by_trace.emplace(key, std::async(std::launch::async, [o] { return plan_trace(o); }).share()).first;
    per_run_.push_back(it->second);
  }
}

void BestPlans::attach(std::vector<RunResult>& results) {
  for (size_t k = 0; k < results.size() && k < per_run_.size(); ++k) {
    std::shared_ptr<const TracePlans> p;
    std::string why;
    try {
      p = per_run_[k].get();
    } catch (const std::exception& e) {  // the replay reported what was wrong with the trace, or did not
      why = fmt::format("the trace could not be planned: {}", e.what());
    }
    // The trace is named here, not in the plans: the cache serves every file of the same content.
    if (p && p->skipped_buffers)
      why = fmt::format("{} buffers, more than a report plans ({}); fragsim plan {} takes them", p->skipped_buffers,
                        kReportPlanBuffers, shell_quote(traces_[k]));
    if (shard_[k] > 1) why = "a sharding what-if: its allocator holds a share of each array, a plan whole ones";
    for (SpaceResult& s : results[k].spaces) {
      s.plan = PlanFigures{};
      if (!why.empty()) {
        s.plan.skipped = why;
        continue;
      }
      for (const auto& [key, f] : p->spaces)
        if (key.first == s.device && key.second == s.space) s.plan = f;
    }
  }
}

const SpaceResult* wasteful_space(const RunResult& r) {
  const SpaceResult* s = r.binding_space();
  if (!s || !s->plan.planned || s->peak_reserved <= s->plan.height) return nullptr;
  const Bytes frag = s->peak_reserved - s->plan.height;
  return static_cast<double>(frag) < 0.05 * static_cast<double>(s->peak_reserved) ? nullptr : s;
}

std::string waste_advice(const RunResult& r, const WasteCredit& credit) {
  const SpaceResult* s = wasteful_space(r);
  if (!s) return {};
  const Bytes frag = s->peak_reserved - s->plan.height;
  // Only a setting that reserves less has anything to say where no placement is to blame: a pool
  // reserved up front, or memory all reserved before the recording began.
  if (s->pool_held_up_front() || s->reserved_unexplained()) {
    if (credit.setting.empty() || !credit.recovered) return {};
    const std::string needs = fmt::format("a perfect placement of these buffers needs {}{}",
                                          human_bytes(s->plan.height), s->plan.optimal ? "" : " or less");
    if (s->pool_held_up_front())
      return fmt::format(
          "this allocator reserves its {} up front, and no placement lowers that ({}); {} reserves {} instead, "
          "verified by replay",
          human_bytes(s->peak_reserved), needs, credit.setting, human_bytes(credit.reserved));
    return fmt::format(
        "all of the {} this allocator reserves was reserved before the recording began, for demand it does not show "
        "({}); with {}, and that state re-held under it, it reserves {}, verified by replay",
        human_bytes(s->peak_reserved), needs, credit.setting, human_bytes(credit.reserved));
  }
  std::string recovers;
  if (!credit.setting.empty() && credit.recovered)
    recovers = fmt::format(" ({} recovers {} of it, verified by replay: peak reserved {})", credit.setting,
                           human_bytes(std::min(frag, credit.recovered)), human_bytes(credit.reserved));
  return fmt::format(
      "a perfect placement of these buffers needs {}{}; this allocator reserves {}: {} is fragmentation a better "
      "placement recovers{} (the rest, {} above the {} live at once, no placement avoids)",
      human_bytes(s->plan.height), s->plan.optimal ? "" : " or less", human_bytes(s->peak_reserved), human_bytes(frag),
      recovers, human_bytes(s->plan.height - std::min(s->plan.height, s->plan.live)), human_bytes(s->plan.live));
}

}  // namespace fragsim

#include "sim/commands/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "sim/base/config.h"
#include "sim/base/error.h"
#include "sim/commands/settings.h"

namespace fragsim {

std::vector<WhatIf> default_compare_entries(const RunRequest& req, const Recording& recording, const Registry& reg) {
  RunRequest q = req;
  q.policy.clear();
  RunOptions chosen = prepare_run(q, reg, &recording);
  const PolicyInfo& info = reg.find(chosen.policy.name);
  // The chosen entry as a reference: the default's own options ("tpu-padded[inner=tpu-runtime]").
  std::string entry = chosen.policy.name;
  if (q.envs.empty() && q.sets.empty()) entry = reg.default_for(recording, chosen.hw.kind).ref;
  // A sharding what-if (--shard) takes only the policies that model it (the chosen one does, or
  // prepare_run refused it above): the lower bound and what-ifs that do not are left out.
  const bool sharded = req.shard != 1 || req.shard_dim != "major";
  // --set keys configure the entries whose policy has them (the bound has none): the others are
  // left out, as variables leave out the policies of other frameworks; the chosen policy must take
  // them (prepare_run refused it above otherwise).
  std::vector<std::string> set_keys;
  for (const auto& s : q.sets) set_keys.push_back(parse_setting(s, "--set").first);
  auto takes_sets = [&](const PolicyInfo& p) {
    return std::all_of(set_keys.begin(), set_keys.end(), [&](const std::string& k) {
      return std::any_of(p.options.begin(), p.options.end(), [&](const PolicyOption& o) { return o.key == k; });
    });
  };
  std::vector<WhatIf> v;
  if (q.envs.empty() && takes_sets(reg.lower_bound()) && (!sharded || reg.lower_bound().models_sharding))
    v.push_back({reg.lower_bound().name, ""});  // variables configure one framework's allocators only
  v.push_back({entry, ""});
  if (info.what_ifs)
    for (auto& w : info.what_ifs(resolved_config(chosen, recording, reg), chosen.vocab)) {
      const PolicyInfo& wi = reg.find(parse_policy_ref(w.ref, "what-if").name);
      if (!q.envs.empty() && wi.frameworks != info.frameworks) continue;
      if (sharded && !wi.models_sharding) continue;
      if (!takes_sets(wi)) continue;
      if (std::none_of(v.begin(), v.end(), [&](const WhatIf& x) { return x.ref == w.ref; })) v.push_back(std::move(w));
    }
  return v;
}

std::vector<std::string> compare_labels(const std::vector<std::string>& traces,
                                        const std::vector<std::vector<std::string>>& entries) {
  std::map<std::string, int> names;
  for (const auto& t : traces) ++names[std::filesystem::path(t).filename().string()];
  std::vector<std::string> labels;
  std::map<std::string, int> seen;
  for (size_t i = 0; i < traces.size() && i < entries.size(); ++i) {
    std::string name = std::filesystem::path(traces[i]).filename().string();
    for (const auto& e : entries[i]) {
      std::string l = traces.size() == 1 ? e : (names[name] > 1 ? traces[i] : name) + ": " + e;
      int n = ++seen[l];
      labels.push_back(n == 1 ? l : fmt::format("{} #{}", l, n));
    }
  }
  return labels;
}

ComparePlan prepare_compare(const CompareRequest& req, const Registry& reg) {
  ComparePlan plan;
  std::vector<std::string> given = split_policy_list(req.policies, req.base.names);
  check_policy_entries(given, reg, req.base.names);  // a bad one fails before any run
  std::vector<std::vector<std::string>> entries_of;
  for (size_t t = 0; t < req.traces.size(); ++t) {
    RunRequest q = req.base;
    q.trace = req.traces[t];
    q.source = t < req.sources.size() ? req.sources[t] : nullptr;
    q.source_bytes = t < req.source_bytes.size() ? req.source_bytes[t] : 0;
    const Recording recording = read_recording(q);
    std::vector<WhatIf> defaults;
    if (given.empty()) defaults = default_compare_entries(q, recording, reg);
    std::vector<std::string> entries = given;
    for (const WhatIf& w : defaults) entries.push_back(w.ref);
    if (t == 0) plan.entries = entries;
    for (size_t e = 0; e < entries.size(); ++e) {
      q.policy = entries[e];
      plan.runs.push_back(prepare_run(q, reg, &recording));
      if (e < defaults.size()) plan.runs.back().setting = defaults[e].setting;
      plan.requests.push_back(q);
    }
    entries_of.push_back(std::move(entries));
  }
  const std::vector<std::string> labels = compare_labels(req.traces, entries_of);
  for (size_t i = 0; i < plan.runs.size(); ++i) plan.runs[i].label = labels[i];
  return plan;
}

}  // namespace fragsim

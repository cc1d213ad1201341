#include "sim/compare.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "sim/base/error.h"
#include "sim/settings.h"

namespace fragsim {

std::vector<std::string> default_compare_entries(const RunRequest& req, const Recording& recording,
                                                 const Registry& reg) {
  RunRequest q = req;
  q.policy.clear();
  RunOptions chosen = prepare_run(q, reg, &recording);
  const PolicyInfo& info = reg.find(chosen.policy.name);
  // The chosen entry as a reference: the default's own options ("tpu-padded[inner=tpu-runtime]").
  std::string entry = chosen.policy.name;
  if (q.envs.empty() && q.sets.empty()) entry = reg.default_for(recording, chosen.hw.kind).ref;
  std::vector<std::string> v;
  if (q.envs.empty()) v.push_back(reg.lower_bound().name);  // variables configure one framework's allocators only
  v.push_back(entry);
  if (info.what_ifs)
    for (const auto& w : info.what_ifs(resolved_config(chosen, recording, reg))) {
      const PolicyInfo& wi = reg.find(parse_policy_ref(w, "what-if").name);
      if (!q.envs.empty() && wi.framework != info.framework) continue;
      if (std::find(v.begin(), v.end(), w) == v.end()) v.push_back(w);
    }
  return v;
}

std::vector<std::string> trace_labels(const std::vector<std::string>& traces) {
  std::map<std::string, int> seen;
  for (const auto& t : traces) ++seen[std::filesystem::path(t).filename().string()];
  std::vector<std::string> labels;
  for (const auto& t : traces) {
    std::string base = std::filesystem::path(t).filename().string();
    labels.push_back(seen[base] > 1 ? t : base);
  }
  return labels;
}

ComparePlan prepare_compare(const CompareRequest& req, const Registry& reg) {
  ComparePlan plan;
  std::vector<std::string> given = split_policy_list(req.policies);
  for (const auto& entry : given)  // NAME or NAME[key=value,...]; a bad one fails before any run
    (void)reg.find(parse_policy_ref(entry, "--policies").name, "--policies");
  const std::vector<std::string> labels = trace_labels(req.traces);
  for (size_t t = 0; t < req.traces.size(); ++t) {
    RunRequest q = req.base;
    q.trace = req.traces[t];
    q.source = t < req.sources.size() ? req.sources[t] : nullptr;
    const Recording recording = read_recording(q);
    std::vector<std::string> entries = given.empty() ? default_compare_entries(q, recording, reg) : given;
    if (t == 0) plan.entries = entries;
    for (const auto& entry : entries) {
      q.policy = entry;
      plan.runs.push_back(prepare_run(q, reg, &recording));
      plan.runs.back().label = req.traces.size() > 1 ? labels[t] + ": " + entry : entry;
    }
  }
  return plan;
}

}  // namespace fragsim

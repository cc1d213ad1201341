#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "policies/policy.h"
#include "sim/base/error.h"
#include "sim/base/text.h"

namespace fragsim {

const PolicyInfo& Registry::find(const std::string& name, std::string_view what) const {
  for (const auto& i : infos_)
    if (i.name == name) return i;
  std::vector<std::string_view> names;
  for (const auto& i : infos_) names.push_back(i.name);
  throw InputError(fmt::format("{}: unknown policy '{}'{} (valid: {})", what, name, did_you_mean(name, names),
                               fmt::join(names, ", ")));
}

const FrameworkInfo* Registry::framework_of_variable(const std::string& variable, const Recording& recording) const {
  const FrameworkInfo* first = nullptr;
  for (const auto& f : frameworks_)
    if (std::find(f.variables.begin(), f.variables.end(), variable) != f.variables.end()) {
      if (recording.framework_of() == f.id) return &f;
      if (!first) first = &f;
    }
  return first;
}

const FrameworkInfo* Registry::framework(const std::string& name) const {
  for (const auto& f : frameworks_)
    if (f.name == name) return &f;
  return nullptr;
}

const DefaultFor& Registry::default_for(const Recording& recording, const std::string& hardware_kind) const {
  const DefaultFor* best = nullptr;
  int best_rank = -1;
  for (const auto& i : infos_)
    for (const auto& d : i.defaults) {
      if (d.source && *d.source != recording.source) continue;
      if (!d.hardware_kind.empty() && d.hardware_kind != hardware_kind) continue;
      int rank = (d.source ? 2 : 0) + (d.hardware_kind.empty() ? 0 : 1);
      if (rank > best_rank) best = &d, best_rank = rank;
    }
  FRAGSIM_CHECK(best, "no policy declares itself the default for a plain trace");
  return *best;
}

const PolicyInfo& Registry::lower_bound() const {
  for (const auto& i : infos_)
    if (i.lower_bound) return i;
  FRAGSIM_CHECK(false, "no policy declares itself the lower bound");
  return infos_.front();
}

const FractionKnob::Spelling& FractionKnob::spelling(Framework f) const {
  FRAGSIM_CHECK(!spellings.empty(), "a memory fraction without a spelling");
  for (const auto& s : spellings)
    if (s.framework == f) return s;
  return spellings.front();
}

std::string FractionKnob::setting(double f, Framework fw) const {
  const Spelling& s = spelling(fw);
  if (s.env) return s.name + "=" + fraction_text(f);
  return fmt::format(fmt::runtime(s.call), fmt::format("{:.2f}", f));
}

std::string FractionKnob::argument(double f, Framework fw) const {
  return by_env(fw) ? spelling(fw).name + "=" + fraction_text(f) : fmt::format("{}={:.2f}", key, f);
}

void register_builtin_policies(Registry& r) {
  register_ideal(r);
  register_best_fit(r);
  register_first_fit(r);
  register_xla_bfc(r);
  register_platform(r);
  register_cuda_async(r);
  register_torch_caching(r);
  register_tpu_padded(r);
  register_static_heap(r);
  register_tpu_runtime(r);
  register_jax_settings(r);
  register_tensorflow_settings(r);
  register_torch_settings(r);
}

}  // namespace fragsim

namespace fragsim {

std::vector<PriorRequest> prior_requests_of_regions(std::span<const PriorRegion> regions, PriorHistory history,
                                                    bool held_together,
                                                    const std::function<Bytes(const PriorRegion&)>& size_of) {
  std::vector<PriorRequest> out;
  if (history == PriorHistory::kLeast) return out;
  for (const PriorRegion& r : regions)
    out.push_back({.size = size_of(r), .stream = r.stream, .released_before = SIZE_MAX, .live = SIZE_MAX});
  if (history == PriorHistory::kMost || held_together) return out;
  // Released just before the first later request it could not have served (a larger one); a
  // monotonic stack finds each one's in a single pass.
  std::vector<size_t> open;
  for (size_t k = 0; k < out.size(); ++k) {
    while (!open.empty() && out[open.back()].size < out[k].size) {
      out[open.back()].released_before = k;
      open.pop_back();
    }
    open.push_back(k);
  }
  return out;
}

std::vector<PriorRequest> AllocatorPolicy::prior_requests(std::span<const PriorRegion> regions,
                                                          PriorHistory history) const {
  return prior_requests_of_regions(regions, history, false, [](const PriorRegion& r) { return r.size; });
}

}  // namespace fragsim

#include <fmt/format.h>
#include <fmt/ranges.h>

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
}

}  // namespace fragsim

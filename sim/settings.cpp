#include "sim/settings.h"

#include <fmt/format.h>

#include "sim/config.h"
#include "sim/error.h"

namespace fragsim {

PolicySpec resolve_settings(const SettingsInput& in, std::vector<std::string>* notes) {
  PolicySpec spec;
  spec.name = in.policy.empty() ? "best-fit" : in.policy;
  for (const auto& e : in.envs) {
    auto [var, value] = parse_setting(e, "--env");
    (void)value;
    throw InputError(fmt::format("--env: unknown variable '{}'", var));
  }
  (void)notes;
  for (const auto& s : in.sets) {
    auto [k, v] = parse_setting(s, "--set");
    spec.config[k] = v;
  }
  return spec;
}

}  // namespace fragsim

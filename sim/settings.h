// Framework settings → policy and config (architecture.md: users think in their framework's
// settings). `--env VAR=VALUE` is interpreted with the semantics (and parsing quirks) of the
// framework that reads VAR; `--set KEY=VALUE` then overrides policy config keys directly.
#pragma once
#include <string>
#include <vector>

#include "sim/engine.h"

namespace fragsim {

struct SettingsInput {
  std::string policy;             // --policy ("" = chosen by --env or the default)
  std::vector<std::string> sets;  // --set KEY=VALUE
  std::vector<std::string> envs;  // --env VAR=VALUE
};

// Resolves the policy name and config; adds to notes one line per interpreted variable.
// Throws InputError on unknown variables/values (naming them).
PolicySpec resolve_settings(const SettingsInput& in, std::vector<std::string>* notes);

}  // namespace fragsim

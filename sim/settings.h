// Framework settings → policy and config (architecture.md: users think in their framework's
// settings). `--env VAR=VALUE` is interpreted with the semantics (and parsing quirks) of the
// framework that reads VAR; `--set KEY=VALUE` then overrides policy config keys directly.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/engine.h"

namespace fragsim {

struct SettingsInput {
  std::string policy;                       // --policy ("" = chosen by --env or the default)
  std::vector<std::string> sets;            // --set KEY=VALUE
  std::vector<std::string> envs;            // --env VAR=VALUE
  std::string default_policy = "best-fit";  // when neither names one (default_policy_for)
};

// "POLICY" or "POLICY[key=value,...]" (values as --set reads them; key=NAME[...] sets key to NAME
// and key_config to NAME's options, as tpu-padded's inner policy takes them). InputError naming
// `what` on a malformed reference. The name is not checked against the registry here.
[[nodiscard]] PolicySpec parse_policy_ref(const std::string& text, const std::string& what);

// Resolves the policy name and config; adds to notes one line per interpreted variable.
// Throws InputError on unknown variables/values (naming them).
PolicySpec resolve_settings(const SettingsInput& in, std::vector<std::string>* notes);

// The policy that models what recorded the trace (its header's source) or the hardware it runs
// on: torch-caching for a PyTorch snapshot, xla-bfc for a JAX/XLA capture, tpu-padded on a TPU,
// else best-fit. *why says so ("" for best-fit).
[[nodiscard]] std::string default_policy_for(const nlohmann::json& header, const std::string& hw_kind,
                                             std::string* why);

}  // namespace fragsim

// Framework settings → policy and config (architecture.md: users think in their framework's
// settings). `--env VAR=VALUE` is interpreted by the framework that reads VAR (policies declare
// frameworks and their variables: FrameworkInfo), with that framework's semantics and parsing
// quirks; `--set KEY=VALUE` then overrides policy config keys directly, and POLICY[k=v] wins over both.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/base/option_names.h"
#include "sim/engine/engine.h"

namespace fragsim {

struct SettingsInput {
  std::string policy;                      // --policy ("" = chosen by --env or the default)
  std::vector<std::string> sets;           // --set KEY=VALUE
  std::vector<std::string> envs;           // --env VAR=VALUE
  std::string default_policy = {};         // when neither names one; "" = the registry's default for a plain trace
  Recording recording = {};                // what the trace says of the run that made it (its framework)
  Platform platform = Platform::kUnknown;  // the run's device's: what the framework builds there
  OptionNames names = {};                  // how the caller names the options (messages)
};

// "POLICY" or "POLICY[key=value,...]" (values as --set reads them; key=NAME[...] sets key to NAME
// and key_config to NAME's options, as tpu-padded's inner policy takes them). A piece without '='
// continues the value before it, so that a value keeps its own commas
// (torch-caching[alloc_conf=expandable_segments:True,max_split_size_mb:256]). InputError naming
// `what` on a malformed reference. The name is not checked against the registry here.
[[nodiscard]] PolicySpec parse_policy_ref(const std::string& text, const std::string& what);
// POLICY[k=v,...] without option `key` (POLICY when none is left): an option in the brackets wins
// over --set and --env (resolve_settings), so a setting given that way must leave them first.
[[nodiscard]] std::string policy_ref_without(const std::string& text, const std::string& key);

// Resolves the policy name and config; adds to notes one line per interpreted variable.
// Throws InputError on unknown variables or values (naming them), on variables of two frameworks,
// and on a variable of another framework than the policy's or, with no --policy, the recording's.
// A variable two frameworks read (TF_GPU_ALLOCATOR) is the recording's framework's.
// *used_default (when given) tells whether the policy is in.default_policy because nothing named one.
PolicySpec resolve_settings(const SettingsInput& in, const Registry& reg, std::vector<std::string>* notes,
                            bool* used_default = nullptr);

// "a,b[k=v,k2=v2],c" → the entries, split on commas outside brackets; InputError naming --policies
// as `names` calls it on a malformed entry (parse_policy_ref).
[[nodiscard]] std::vector<std::string> split_policy_list(const std::string& s, const OptionNames& names);
// InputError naming --policies (as `names` calls it) unless every entry names a registered policy.
void check_policy_entries(const std::vector<std::string>& entries, const Registry& reg, const OptionNames& names);

}  // namespace fragsim

// Framework environment variables: each is handed to the framework that reads it
// (policies/jax_settings.cpp, policies/torch_alloc_config.cpp), which interprets it as the
// framework itself does.
#include "sim/commands/settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>

#include "sim/base/config.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

// Splits on commas outside brackets; `on_item` gets every piece (empty ones too).
template <class F>
void split_top_level(const std::string& s, const std::function<InputError(const std::string&)>& bad, F on_item) {
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) throw bad("unbalanced ']'");
    if (c == ',' && depth == 0) {
      on_item(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw bad("unbalanced '['");
  on_item(cur);
}

}  // namespace

std::vector<std::string> split_policy_list(const std::string& s) {
  std::vector<std::string> v;
  split_top_level(
      s, [&](const std::string& why) { return InputError(fmt::format("--policies: {} in '{}'", why, s)); },
      [&](const std::string& item) {
        if (!item.empty()) v.push_back(item);
      });
  return v;
}

PolicySpec parse_policy_ref(const std::string& text, const std::string& what) {
  PolicySpec ref;
  auto br = text.find('[');
  ref.name = text.substr(0, br);
  auto bad = [&](const std::string& why) {
    return InputError(fmt::format("{}: {} in '{}' (expected POLICY or POLICY[key=value,...])", what, why, text));
  };
  if (ref.name.empty()) throw bad("no policy name");
  if (ref.name.find_first_of("],=") != std::string::npos) throw bad("unexpected character in the name");
  if (br == std::string::npos) return ref;
  if (text.back() != ']')
    throw bad(text.find(']') == std::string::npos ? "no closing ']'" : "text after the closing ']'");
  // Split the inside on commas outside nested brackets.
  std::vector<std::string> items;
  split_top_level(text.substr(br + 1, text.size() - br - 2), bad,
                  [&](const std::string& item) { items.push_back(item); });
  for (const auto& item : items) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq != std::string::npos && item.find('[') != std::string::npos && item.find('[') > eq) {
      // key=NAME[...]: a policy-valued option and its options (tpu-padded[inner=xla-bfc[preallocate=false]]).
      std::string key = item.substr(0, eq);
      PolicySpec nested = parse_policy_ref(item.substr(eq + 1), what);
      ref.config[key] = nested.name;
      ref.config[key + "_config"] = nested.config;
      continue;
    }
    auto [k, v] = parse_setting(item, what);
    ref.config[k] = v;
  }
  return ref;
}

std::string policy_ref_without(const std::string& text, const std::string& key) {
  auto br = text.find('[');
  if (br == std::string::npos || text.back() != ']') return text;
  std::string kept;
  split_top_level(
      text.substr(br + 1, text.size() - br - 2), [&](const std::string& why) { return InputError(why); },
      [&](const std::string& item) {
        if (item.empty() || item.substr(0, item.find('=')) == key) return;
        kept += (kept.empty() ? "" : ",") + item;
      });
  return text.substr(0, br) + (kept.empty() ? "" : "[" + kept + "]");
}

PolicySpec resolve_settings(const SettingsInput& in, const Registry& reg, std::vector<std::string>* notes,
                            bool* used_default) {
  const PolicySpec named = in.policy.empty() ? PolicySpec{} : parse_policy_ref(in.policy, "--policy");
  // The variables, by the framework that reads them.
  std::map<std::string, std::map<std::string, std::string>> by_framework;
  std::vector<std::string> first_var;  // per framework in order of appearance: its first variable
  for (const auto& e : in.envs) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError(fmt::format("--env: expected VAR=VALUE, got '{}'", e));
    std::string var = e.substr(0, eq);
    const FrameworkInfo* f = reg.framework_of_variable(var);
    if (!f) {
      std::vector<std::string> known;
      for (const auto& fw : reg.frameworks()) known.insert(known.end(), fw.variables.begin(), fw.variables.end());
      throw InputError(fmt::format("--env: unknown variable '{}' (understood: {})", var, fmt::join(known, ", ")));
    }
    if (!by_framework.count(f->name)) first_var.push_back(var);
    by_framework[f->name][var] = e.substr(eq + 1);
  }
  if (by_framework.size() > 1)
    throw InputError(fmt::format("--env: {} is {}'s and {} is {}'s: one run models one framework", first_var[1],
                                 reg.framework_of_variable(first_var[1])->name, first_var[0],
                                 reg.framework_of_variable(first_var[0])->name));
  FrameworkSettings fs;
  if (!by_framework.empty()) {
    const FrameworkInfo& f = *reg.framework(by_framework.begin()->first);
    const std::string& var = first_var[0];
    if (!named.name.empty()) {
      const PolicyInfo& p = reg.find(named.name);
      if (p.framework != f.name)
        throw InputError(fmt::format(
            "--env {}: {}'s variable, but --policy {} {}", var, f.name, p.name,
            p.framework.empty() ? "models no framework's allocator" : "models " + p.framework + "'s allocator"));
    } else if (!in.recorded_framework.empty() && in.recorded_framework != f.recorded_as) {
      throw InputError(fmt::format(
          "--env {}: {}'s variable, but the trace is {}: name one of {}'s policies with --policy to replay it "
          "through {}'s allocator anyway",
          var, f.name, in.recorded_what, f.name, f.name));
    }
    fs = f.interpret(by_framework.begin()->second, named.name, notes);
  }
  if (!named.name.empty() && !fs.policy.empty() && named.name != fs.policy)
    throw InputError(fmt::format("--env selects policy {} but --policy says {}", fs.policy, named.name));
  PolicySpec spec;
  nlohmann::json cfg = nlohmann::json::object();
  if (!named.name.empty()) {
    spec.name = named.name;
  } else if (!fs.policy.empty()) {
    spec.name = fs.policy;
    // The variables chose the allocator (XLA_PYTHON_CLIENT_ALLOCATOR=platform, PYTORCH_CUDA_ALLOC_CONF=…): said once.
    if (notes)
      notes->push_back(
          fmt::format("policy {}: as {} configures it (--policy chooses another)", fs.policy, fmt::join(in.envs, " ")));
  } else {  // the default may carry options: "tpu-padded[inner=tpu-runtime]"
    if (used_default) *used_default = true;
    PolicySpec def = parse_policy_ref(
        in.default_policy.empty() ? reg.default_for(Recording{}, "gpu").ref : in.default_policy, "default policy");
    spec.name = def.name;
    cfg = def.config;
  }
  for (const auto& [k, v] : fs.config.items()) cfg[k] = v;
  for (const auto& s : in.sets) {
    auto [k, v] = parse_setting(s, "--set");
    cfg[k] = v;
  }
  for (const auto& [k, v] : named.config.items()) cfg[k] = v;  // POLICY[k=v]: the entry's own options win
  spec.config = cfg;
  return spec;
}

}  // namespace fragsim

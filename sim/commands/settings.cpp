// Framework environment variables: each is handed to the framework that reads it
// (policies/jax_settings.cpp, policies/torch_alloc_config.cpp), which interprets it as the
// framework itself does.
#include "sim/commands/settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
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

namespace {

// "JAX's and TensorFlow's"
std::string frameworks_text(const std::vector<Framework>& fs) {
  std::vector<std::string> names;
  for (Framework f : fs) names.push_back(std::string(framework_name(f)) + "'s");
  return fmt::format("{}", fmt::join(names, " and "));
}

}  // namespace

PolicySpec resolve_settings(const SettingsInput& in, const Registry& reg, std::vector<std::string>* notes,
                            bool* used_default) {
  const OptionNames& opt = in.names;
  const PolicySpec named = in.policy.empty() ? PolicySpec{} : parse_policy_ref(in.policy, opt("--policy"));
  // The variables, by the framework that reads them.
  std::map<std::string, std::map<std::string, std::string>> by_framework;
  std::vector<std::string> first_var;  // per framework in order of appearance: its first variable
  for (const auto& e : in.envs) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(fmt::format("{}: expected VAR=VALUE, got '{}'", opt("--env"), e));
    std::string var = e.substr(0, eq);
    const FrameworkInfo* f = reg.framework_of_variable(var, in.recording);
    if (!f) {
      std::vector<std::string> known;
      for (const auto& fw : reg.frameworks())
        for (const auto& v : fw.variables)
          if (std::find(known.begin(), known.end(), v) == known.end()) known.push_back(v);
      throw InputError(
          fmt::format("{}: unknown variable '{}' (understood: {})", opt("--env"), var, fmt::join(known, ", ")));
    }
    if (!by_framework.count(f->name)) first_var.push_back(var);
    by_framework[f->name][var] = e.substr(eq + 1);
  }
  if (by_framework.size() > 1)
    throw InputError(fmt::format("{}: {} is {}'s and {} is {}'s: one run models one framework", opt("--env"),
                                 first_var[1], reg.framework_of_variable(first_var[1], in.recording)->name,
                                 first_var[0], reg.framework_of_variable(first_var[0], in.recording)->name));
  FrameworkSettings fs;
  if (!by_framework.empty()) {
    const FrameworkInfo& f = *reg.framework(by_framework.begin()->first);
    const std::string& var = first_var[0];
    if (!named.name.empty()) {
      const PolicyInfo& p = reg.find(named.name, opt("--policy"));
      if (std::find(p.frameworks.begin(), p.frameworks.end(), f.id) == p.frameworks.end())
        throw InputError(fmt::format("{} {}: {}'s variable, but {} {}", opt("--env"), var, f.name,
                                     opt.with("--policy", p.name),
                                     p.frameworks.empty() ? "models no framework's allocator"
                                                          : "models " + frameworks_text(p.frameworks) + " allocator"));
    } else if (!in.recording.may_be_from(f.id)) {
      throw InputError(fmt::format(
          "{} {}: {}'s variable, but the trace is {}: name one of {}'s policies with {} to replay it through {}'s "
          "allocator anyway",
          opt("--env"), var, f.name, in.recording.what(), f.name, opt("--policy"), f.name));
    }
    fs = f.interpret(by_framework.begin()->second, {named.name, in.platform, opt("--env"), notes});
  }
  if (!named.name.empty() && !fs.policy.empty() && named.name != fs.policy)
    throw InputError(fmt::format("{} selects policy {} but {}", opt("--env"), fs.policy,
                                 opt.with("--policy", named.name) + " says otherwise"));
  PolicySpec spec;
  nlohmann::json cfg = nlohmann::json::object();
  if (!named.name.empty()) {
    spec.name = named.name;
  } else if (!fs.policy.empty()) {
    spec.name = fs.policy;
    // The variables chose the allocator (XLA_PYTHON_CLIENT_ALLOCATOR=platform, PYTORCH_CUDA_ALLOC_CONF=…): said once.
    if (notes)
      notes->push_back(fmt::format("policy {}: as {} configures it ({} chooses another)", fs.policy,
                                   fmt::join(in.envs, " "), opt("--policy")));
  } else {  // the default may carry options: "tpu-padded[inner=tpu-runtime]"
    if (used_default) *used_default = true;
    PolicySpec def = parse_policy_ref(
        in.default_policy.empty() ? reg.default_for(Recording{}, "gpu").ref : in.default_policy, "default policy");
    spec.name = def.name;
    cfg = def.config;
  }
  for (const auto& [k, v] : fs.config.items()) cfg[k] = v;
  for (const auto& s : in.sets) {
    auto [k, v] = parse_setting(s, opt("--set"));
    cfg[k] = v;
  }
  for (const auto& [k, v] : named.config.items()) cfg[k] = v;  // POLICY[k=v]: the entry's own options win
  spec.config = cfg;
  return spec;
}

}  // namespace fragsim

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

// The KEY=VALUE items inside POLICY[...], split on commas outside brackets; empty pieces are
// dropped. A piece without '=' continues the value before it: an item always has one, and a value
// may hold commas of its own (alloc_conf is PYTORCH_CUDA_ALLOC_CONF whole, which PyTorch splits on
// commas: alloc_conf=expandable_segments:True,max_split_size_mb:256 is one item).
std::vector<std::string> policy_ref_items(const std::string& inside,
                                          const std::function<InputError(const std::string&)>& bad) {
  std::vector<std::string> items;
  split_top_level(inside, bad, [&](const std::string& piece) {
    if (piece.empty()) return;
    if (piece.find('=') == std::string::npos && !items.empty())
      items.back() += "," + piece;
    else
      items.push_back(piece);
  });
  return items;
}

// Whether an item's value is NAME[...], a policy-valued option and its options
// (tpu-padded[inner=xla-bfc[preallocate=false]]), rather than text with brackets of its own
// (alloc_conf=roundup_power2_divisions:[256:1,512:2]: a policy name holds no ':').
bool names_policy(const std::string& value) {
  auto br = value.find('[');
  return br != 0 && br != std::string::npos &&
         value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == br;
}

}  // namespace

std::vector<std::string> split_policy_list(const std::string& s, const OptionNames& names) {
  const std::string what = names("--policies");
  std::vector<std::string> v;
  split_top_level(
      s, [&](const std::string& why) { return InputError(fmt::format("{}: {} in '{}'", what, why, s)); },
      [&](const std::string& item) {
        if (!item.empty()) v.push_back(item);
      });
  for (const auto& entry : v) (void)parse_policy_ref(entry, what);  // a bad one fails before any run
  return v;
}

void check_policy_entries(const std::vector<std::string>& entries, const Registry& reg, const OptionNames& names) {
  const std::string what = names("--policies");
  for (const auto& entry : entries) (void)reg.find(parse_policy_ref(entry, what).name, what);
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
  for (const auto& item : policy_ref_items(text.substr(br + 1, text.size() - br - 2), bad)) {
    auto eq = item.find('=');
    if (eq != std::string::npos && names_policy(item.substr(eq + 1))) {
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
  for (const auto& item : policy_ref_items(text.substr(br + 1, text.size() - br - 2),
                                           [&](const std::string& why) { return InputError(why); }))
    if (item.substr(0, item.find('=')) != key) kept += (kept.empty() ? "" : ",") + item;
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
    fs = f.interpret(by_framework.begin()->second, {named.name, in.platform, opt, notes});
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

#include "sim/base/option_names.h"

#include <fmt/format.h>

namespace fragsim {

std::string OptionNames::operator()(std::string_view flag) const {
  if (!python) return std::string(flag);
  if (flag == "--set") return "settings=";
  if (flag == "--failed-alloc") return "failed_allocs=";
  std::string k(flag.substr(flag.find_first_not_of('-')));
  for (char& c : k)
    if (c == '-') c = '_';
  return k + "=";
}

std::string OptionNames::with(std::string_view flag, std::string_view value) const {
  return python ? fmt::format("{}'{}'", (*this)(flag), value) : fmt::format("{} {}", flag, value);
}

std::string OptionNames::switch_on(std::string_view flag) const {
  return python ? (*this)(flag) + "True" : std::string(flag);
}

std::string OptionNames::size_fix(std::string_view flag, std::string_view digits) const {
  if (!python) return fmt::format("{} {}GiB", flag, digits);
  const std::string k = (*this)(flag);
  return fmt::format("{}'{}GiB' or {}{} * 2**30", k, digits, k, digits);
}

}  // namespace fragsim

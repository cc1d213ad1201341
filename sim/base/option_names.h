// How the front end that took a request names its options, so that a message names what the
// caller wrote: the command line's flags ("--capacity 16GiB") or the Python module's keywords
// (capacity="16GiB", docs/python.md). The library states every option it complains about as its
// command-line flag and asks this for the caller's word.
#pragma once
#include <string>
#include <string_view>

namespace fragsim {

struct OptionNames {
  bool python = false;  // the Python module's keywords, else the command line's flags

  // "--capacity" as the caller wrote it: itself, or "capacity=" (dashes become underscores; --set is
  // Python's settings=, --failed-alloc its failed_allocs=).
  [[nodiscard]] std::string operator()(std::string_view flag) const;
  // How the caller writes `flag` with `value` (a Python str value quoted): "--capacity 16GiB" or "capacity='16GiB'".
  [[nodiscard]] std::string with(std::string_view flag, std::string_view value) const;
  // How the caller turns a switch on: "--same-trace" or "same_trace=True".
  [[nodiscard]] std::string switch_on(std::string_view flag) const;
  // The fix for a size given as a bare number: "--capacity 16GiB" on the command line,
  // "capacity='16GiB' or capacity=16 * 2**30" in Python.
  [[nodiscard]] std::string size_fix(std::string_view flag, std::string_view digits) const;
};

}  // namespace fragsim

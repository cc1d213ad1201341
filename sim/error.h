// The three kinds of failure (style rule 9): bad input is an InputError (exit 2, one line naming
// file:line or the key); an unusable environment is an EnvError (exit 3); expected outcomes such
// as OOM are values, never exceptions; bugs are asserts.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace fragsim {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
  // "FILE:LINE: what"
  InputError(const std::string& file, std::uint64_t line, const std::string& what)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + what) {}
};

class EnvError : public std::runtime_error {
 public:
  explicit EnvError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace fragsim

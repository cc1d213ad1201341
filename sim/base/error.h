// The three kinds of failure (style rule 9):
//   bad input        → InputError, exit 2, one line naming FILE:LINE or the key;
//   environment      → EnvError, exit 3 (a file cannot be read or written, no device);
//   a broken invariant (a bug) → InternalError, exit 1, raised by FRAGSIM_CHECK, which stays on
//                      in Release builds.
// Expected outcomes such as an OOM are values, never exceptions.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace fragsim {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
  // "FILE:LINE: what"; line 0 is the file as a whole (a binary file has no lines): "FILE: what".
  InputError(const std::string& file, std::uint64_t line, const std::string& what)
      : std::runtime_error(file + (line ? ":" + std::to_string(line) : std::string()) + ": " + what) {}
};

class EnvError : public std::runtime_error {
 public:
  explicit EnvError(const std::string& what) : std::runtime_error(what) {}
};

// A bug: an invariant of the simulator itself does not hold.
class InternalError : public std::runtime_error {
 public:
  explicit InternalError(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] void internal_error(const char* file, int line, const std::string& what);

}  // namespace fragsim

// Checks an invariant in every build type; on failure throws InternalError naming the place.
#define FRAGSIM_CHECK(cond, what)                                                  \
  do {                                                                             \
    if (!(cond)) ::fragsim::internal_error(__FILE__, __LINE__, std::string(what)); \
  } while (0)

// How every fragsim executable turns failures into one stderr line and an exit code
// (specs/contracts.md §4, docs/cli.md): 2 bad input, 3 environment (including running out of
// memory), 1 a bug (an internal invariant, or a library exception that escaped: also a bug),
// 0 otherwise. Shared by fragsim and fragsim-cuda-replay; command-line parsers convert their own
// errors to InputError before they get here. A message may carry names from the input: it is
// printed with control characters escaped (sim/base/text.h), so it stays one line and inert.
// Standard output is flushed and checked before the exit code is returned: an answer that could
// not be written (`> /dev/full`, a closed pipe with SIGPIPE ignored) is an environment error, 3,
// never a silent 0.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>

#include "sim/base/error.h"
#include "sim/base/text.h"

namespace fragsim {

inline constexpr int kExitOk = 0, kExitCheckFailed = 1, kExitBug = 1, kExitInput = 2, kExitEnv = 3;

// 0 when everything written to standard output (std::cout shares its buffer) reached it, else
// prints why and returns kExitEnv.
inline int check_stdout(const char* prog) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int e = flushed ? EIO : errno;
  if (flushed && !std::ferror(stdout)) return kExitOk;
  std::fprintf(stderr, "%s: standard output: write error: %s\n", prog, std::strerror(e ? e : EIO));
  return kExitEnv;
}

template <class F>
int run_and_report(const char* prog, F&& body) {
  try {
    return body();
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: %s\n", prog, escape_terminal(e.what()).c_str());
    return kExitInput;
  } catch (const EnvError& e) {
    std::fprintf(stderr, "%s: %s\n", prog, escape_terminal(e.what()).c_str());
    return kExitEnv;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory (the machine could not provide what this input needs)\n", prog);
    return kExitEnv;
  } catch (const InternalError& e) {
    std::fprintf(stderr, "%s: %s\n", prog, escape_terminal(e.what()).c_str());
    return kExitBug;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error (please report): %s\n", prog, escape_terminal(e.what()).c_str());
    return kExitBug;
  }
}

template <class F>
int run_with_exit_codes(const char* prog, F&& body) {
  const int code = run_and_report(prog, std::forward<F>(body));
  if (code == kExitInput || code == kExitEnv) return code;  // its one line is said
  return check_stdout(prog) == kExitOk ? code : kExitEnv;
}

}  // namespace fragsim

// How every fragsim executable turns failures into one stderr line and an exit code
// (specs/contracts.md §4, docs/cli.md): 2 bad input, 3 environment (including running out of
// memory), 1 a bug (an internal invariant, or a library exception that escaped: also a bug),
// 0 otherwise. Shared by fragsim and fragsim-cuda-replay; command-line parsers convert their own
// errors to InputError before they get here. A message may carry names from the input: it is
// printed with control characters escaped (sim/base/text.h), so it stays one line and inert.
#pragma once
#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>

#include "sim/base/error.h"
#include "sim/base/text.h"

namespace fragsim {

inline constexpr int kExitOk = 0, kExitCheckFailed = 1, kExitBug = 1, kExitInput = 2, kExitEnv = 3;

template <class F>
int run_with_exit_codes(const char* prog, F&& body) {
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

}  // namespace fragsim

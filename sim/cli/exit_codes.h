// How every fragsim executable turns failures into one stderr line and an exit code
// (specs/contracts.md §4): 2 bad input, 3 environment, 1 a broken invariant (a bug caught by
// --check), 0 otherwise. Shared by fragsim and fragsim-cuda-replay.
#pragma once
#include <boost/program_options/errors.hpp>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "sim/error.h"

namespace fragsim {

template <class F>
int run_with_exit_codes(const char* prog, F&& body) {
  try {
    return body();
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 2;
  } catch (const boost::program_options::error& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 2;
  } catch (const EnvError& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 3;
  } catch (const std::logic_error& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 3;
  }
}

}  // namespace fragsim

// The test runner. Every test must run: ctest passes each test case's name as a filter, and a
// filter that matches nothing (a name split or mangled by test discovery) fails here instead of
// passing silently (Catch2's "-w NoTests").
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  // Reports' plans are not kept on disk between test processes (sim/commands/waste.h): each test
  // plans what it checks. The test of the cache names a folder of its own.
  setenv("FRAGSIM_PLAN_CACHE", "off", 0);
  std::vector<const char*> args(argv, argv + argc);
  args.push_back("--warn");
  args.push_back("NoTests");
  return Catch::Session().run(static_cast<int>(args.size()), const_cast<char**>(args.data()));
}

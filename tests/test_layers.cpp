// The architecture's layers (architecture.md, "Layout and layers"), enforced: every source file
// may include only its own layer and the layers below it. Also checks what ctest depends on:
// test case names survive test discovery.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <type_traits>

#include "sim/base/units.h"

namespace fs = std::filesystem;

namespace {

// Folder (relative to the repository root) → the folders its files may include from.
// More specific folders first: a file belongs to the longest matching prefix.
const std::vector<std::pair<std::string, std::set<std::string>>> kLayers = {
    {"sim/base", {"sim/base"}},
    {"sim/cli", {"sim/base", "hardware_models", "traces", "policies", "sim"}},
    {"hardware_models/cuda_replay", {"sim/base", "hardware_models", "hardware_models/cuda_replay", "traces"}},
    {"hardware_models", {"sim/base", "hardware_models"}},
    {"traces", {"sim/base", "traces"}},
    {"policies", {"sim/base", "hardware_models", "policies"}},
    {"sim", {"sim/base", "hardware_models", "traces", "policies", "sim"}},
};

// The layer folder an include path or a source path belongs to ("" = none of them).
std::string layer_of(const std::string& rel) {
  for (const auto& [dir, _] : kLayers)
    if (rel.rfind(dir + "/", 0) == 0) return dir;
  return "";
}

std::string root() { return FRAGSIM_SOURCE_DIR; }

}  // namespace

TEST_CASE("layers: no file includes a layer above its own") {
  std::regex inc(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> violations;
  size_t files = 0;
  for (const auto& top : {"sim", "policies", "traces", "hardware_models"}) {
    for (const auto& e : fs::recursive_directory_iterator(root() + "/" + top)) {
      auto ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cpp" && ext != ".cu") continue;
      std::string rel = fs::relative(e.path(), root()).generic_string();
      std::string layer = layer_of(rel);
      REQUIRE(!layer.empty());
      const auto& allowed =
          std::find_if(kLayers.begin(), kLayers.end(), [&](const auto& l) { return l.first == layer; })->second;
      ++files;
      std::ifstream in(e.path());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        std::smatch m;
        if (!std::regex_search(line, m, inc)) continue;
        std::string target = m[1];
        std::string tl = layer_of(target);
        if (tl.empty() && target.find('/') == std::string::npos) continue;  // same-folder or generated
        if (!allowed.count(tl)) violations.push_back(rel + ":" + std::to_string(n) + " includes " + target);
      }
    }
  }
  CHECK(files > 60);
  INFO("upward includes:\n" + [&] {
    std::string s;
    for (const auto& v : violations) s += "  " + v + "\n";
    return s;
  }());
  CHECK(violations.empty());
}

TEST_CASE("layers: the layer table itself says policies and traces never see each other") {
  for (const auto& [dir, allowed] : kLayers) {
    if (dir == "policies") CHECK(!allowed.count("traces"));
    if (dir == "traces") CHECK(!allowed.count("policies"));
    if (dir == "sim/base") CHECK(allowed.size() == 1);
  }
}

TEST_CASE("units: a size, an address, a time and an id do not convert into each other") {
  using namespace fragsim;
  STATIC_REQUIRE(!std::is_convertible_v<Bytes, Addr>);
  STATIC_REQUIRE(!std::is_convertible_v<Addr, Bytes>);
  STATIC_REQUIRE(!std::is_convertible_v<Bytes, Tick>);
  STATIC_REQUIRE(!std::is_convertible_v<Tick, Bytes>);
  STATIC_REQUIRE(!std::is_convertible_v<Bytes, AllocId>);
  STATIC_REQUIRE(!std::is_convertible_v<Addr, Tick>);
  STATIC_REQUIRE(!std::is_convertible_v<AllocId, Addr>);
  STATIC_REQUIRE(std::is_same_v<decltype(Addr(4096) - Addr(1024)), Bytes>);
  STATIC_REQUIRE(std::is_same_v<decltype(Addr(4096) + Bytes{1024}), Addr>);
  CHECK(Addr(4096) - Addr(1024) == 3072);
  CHECK(round_up(Addr(4097), 4096) == Addr(8192));
  CHECK(round_up_sat(~Bytes{0} - 10, 256) == kTooLarge);
}

TEST_CASE("test names survive ctest discovery: no semicolon (CMake splits on it), unique") {
  std::regex tc(R"re(TEST_CASE\("([^"]*)")re");
  std::set<std::string> names;
  size_t cases = 0;
  for (const auto& e : fs::directory_iterator(root() + "/tests")) {
    if (e.path().extension() != ".cpp") continue;
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), tc); it != std::sregex_iterator(); ++it) {
      std::string name = (*it)[1];
      ++cases;
      INFO(name);
      CHECK(name.find(';') == std::string::npos);
      CHECK(!name.empty());
      CHECK(name.front() != ' ');
      CHECK(name.front() != '-');
      CHECK(name.back() != ' ');
      CHECK(names.insert(name).second);  // unique
    }
  }
  CHECK(cases > 60);
}

// The architecture's layers (architecture.md, "Layout and layers"), enforced: every source file
// may include only its own layer and the layers below it, and each layer's library links and
// compiles only what the table allows. Also checks what ctest depends on: test case names survive
// test discovery.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

#include "policies/policy.h"
#include "sim/base/units.h"

namespace fs = std::filesystem;

namespace {

std::set<std::string> with(std::set<std::string> below, std::initializer_list<std::string> more) {
  below.insert(more);
  return below;
}

// The layers, lowest first:
//   sim/base < hardware_models < traces, policies (side by side: neither includes the other)
//   < sim/engine < sim/report (sim/viewer: JavaScript it compiles in) < sim/commands
//   < sim/cli, sim/python (front ends)
const std::set<std::string> kUnderEngine = {"sim/base", "hardware_models", "traces", "policies"};
const std::set<std::string> kEngine = with(kUnderEngine, {"sim/engine"});
const std::set<std::string> kReport = with(kEngine, {"sim/report"});
const std::set<std::string> kCommands = with(kReport, {"sim/commands"});

// Folder (relative to the repository root) → the folders its files may include from.
// More specific folders first: a file belongs to the longest matching prefix. Every file under
// sim/ belongs to one of its layer folders (none lies in sim/ itself).
const std::vector<std::pair<std::string, std::set<std::string>>> kLayers = {
    {"sim/base", {"sim/base"}},
    {"sim/engine", kEngine},
    {"sim/report", kReport},
    {"sim/viewer", {}},  // JavaScript: includes nothing
    {"sim/commands", kCommands},
    {"sim/cli", with(kCommands, {"sim/cli"})},
    {"sim/python", with(kCommands, {"sim/python"})},
    {"hardware_models/cuda_replay", {"sim/base", "hardware_models", "hardware_models/cuda_replay", "traces"}},
    {"hardware_models", {"sim/base", "hardware_models"}},
    {"traces", {"sim/base", "traces"}},
    {"policies", {"sim/base", "hardware_models", "policies"}},
};

// The layer folder an include path or a source path belongs to ("" = none of them).
std::string layer_of(const std::string& rel) {
  for (const auto& [dir, _] : kLayers)
    if (rel.rfind(dir + "/", 0) == 0) return dir;
  return "";
}

const std::set<std::string>& allowed_from(const std::string& layer) {
  return std::find_if(kLayers.begin(), kLayers.end(), [&](const auto& l) { return l.first == layer; })->second;
}

std::string root() { return FRAGSIM_SOURCE_DIR; }

std::string lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "  " + x + "\n";
  return s;
}

}  // namespace

TEST_CASE("layers: no file includes a layer above its own") {
  std::regex inc(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> violations;
  size_t files = 0;
  for (const auto& top : {"sim", "policies", "traces", "hardware_models"}) {
    for (const auto& e : fs::recursive_directory_iterator(root() + "/" + top)) {
      if (!e.is_regular_file()) continue;
      auto ext = e.path().extension().string();
      std::string rel = fs::relative(e.path(), root()).generic_string();
      std::string layer = layer_of(rel);
      // Inside sim/ every file has its layer's folder; the page's JavaScript is sim/viewer/'s.
      if (rel.rfind("sim/", 0) == 0 && (layer.empty() || (ext == ".js") != (layer == "sim/viewer"))) {
        if (ext != ".pyc") violations.push_back(rel + " lies in no layer's folder of sim/ (or the wrong one)");
        continue;
      }
      if (ext != ".h" && ext != ".cpp" && ext != ".cu") continue;
      REQUIRE(!layer.empty());
      const auto& allowed = allowed_from(layer);
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
        if (!allowed.count(tl))
          violations.push_back(rel + ":" + std::to_string(n) + " (" + layer + ") includes " + target + " (" +
                               (tl.empty() ? "no layer" : tl) + ")");
      }
    }
  }
  CHECK(files > 60);
  INFO("upward includes:\n" + lines(violations));
  CHECK(violations.empty());
}

TEST_CASE("layers: each library links only the layers below it and compiles only its own folder") {
  // The build's own declarations (CMakeLists.txt): a library that linked a layer the table does
  // not allow would let its files include it; one that compiled another folder's file would hide
  // that file's layer.
  std::ifstream in(root() + "/CMakeLists.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::map<std::string, std::string> lib_of = {
      {"fragsim_base", "sim/base"},         {"fragsim_hw", "hardware_models"}, {"fragsim_traces", "traces"},
      {"fragsim_policies", "policies"},     {"fragsim_engine", "sim/engine"},  {"fragsim_report", "sim/report"},
      {"fragsim_commands", "sim/commands"},
  };
  std::regex link(R"re(target_link_libraries\((fragsim_\w+)\s+PUBLIC\s+([^)]*)\))re");
  size_t checked = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
    std::string lib = (*it)[1];
    if (!lib_of.count(lib)) continue;
    const auto& allowed = allowed_from(lib_of.at(lib));
    std::istringstream deps((*it)[2].str());
    for (std::string dep; deps >> dep;) {
      if (!lib_of.count(dep)) continue;
      INFO(lib << " links " << dep);
      CHECK(allowed.count(lib_of.at(dep)) == 1);
      ++checked;
    }
  }
  CHECK(checked >= 6);
  // Explicit source lists: every source a layer's library names lies in its folder (generated
  // sources, ${...}, aside), and every layer has its library.
  std::regex library(R"re(add_library\((fragsim_\w+)\s+STATIC\s+([^)]*)\))re");
  std::set<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), library); it != std::sregex_iterator(); ++it) {
    std::string lib = (*it)[1];
    if (!lib_of.count(lib)) continue;
    found.insert(lib);
    std::istringstream srcs((*it)[2].str());
    for (std::string src; srcs >> src;) {
      if (src.rfind("${", 0) == 0) continue;
      INFO(lib << " compiles " << src);
      CHECK(layer_of(src) == lib_of.at(lib));
    }
  }
  CHECK(found.size() == lib_of.size());
  // The page's JavaScript, compiled into fragsim_report, is sim/viewer/'s.
  std::smatch js;
  REQUIRE(std::regex_search(text, js, std::regex(R"re(set\(VIEWER_JS\s+([^)]*)\))re")));
  std::istringstream files(js[1].str());
  size_t n = 0;
  for (std::string f; files >> f; ++n) CHECK(f.rfind("${CMAKE_SOURCE_DIR}/sim/viewer/", 0) == 0);
  CHECK(n >= 2);
}

TEST_CASE("layers: no file under sim/ names a policy or reads a policy's own keys (config, report figures)") {
  // Policies declare what the rest of the program needs (PolicyInfo, typed calls of
  // AllocatorPolicy): sim/ asks the registry and the policy, never a key of theirs.
  fragsim::Registry reg;
  fragsim::register_builtin_policies(reg);
  std::set<std::string> keys;
  for (const auto& p : reg.all())
    for (const auto& o : p.options) keys.insert(o.key);
  std::regex literal(R"re("((?:[^"\\\n]|\\.)*)")re");
  std::regex config_key(
      R"re((config|policy_config)\s*(\[|\.value\(|\.contains\(|\.erase\(|\.find\(|\.at\()\s*"([A-Za-z_]+)")re");
  // A policy's report figures (SpaceResult::extra and ::stats, as extra_report() and stats() gave
  // them) are the report's to print whole; a figure read back by name is a string convention.
  std::regex figure_key(
      R"re(\b(extra|stats|extra_report\(\)|stats\(\))\s*(\[|\.value\(|\.contains\(|\.find\(|\.at\()\s*"([^"]*)")re");
  std::vector<std::string> found;
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(root() + "/sim")) {
    auto ext = e.path().extension().string();
    if (ext != ".h" && ext != ".cpp") continue;
    ++files;
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Code only: comments describe, they do not decide.
    text = std::regex_replace(text, std::regex(R"(//[^\n]*)"), "");
    std::string rel = fs::relative(e.path(), root()).generic_string();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), literal); it != std::sregex_iterator(); ++it) {
      std::string lit = (*it)[1];
      for (const auto& p : reg.all()) {
        std::regex word("(^|[^a-z0-9_-])" + std::regex_replace(p.name, std::regex("-"), "\\-") + "($|[^a-z0-9_-])");
        if (std::regex_search(lit, word)) found.push_back(rel + ": names policy " + p.name + " in \"" + lit + "\"");
      }
      if (lit.rfind("resolved_", 0) == 0) found.push_back(rel + ": reads a policy's resolved key \"" + lit + "\"");
    }
    for (auto it = std::sregex_iterator(text.begin(), text.end(), config_key); it != std::sregex_iterator(); ++it)
      if (keys.count((*it)[3])) found.push_back(rel + ": reads the policy option \"" + (*it)[3].str() + "\"");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), figure_key); it != std::sregex_iterator(); ++it)
      found.push_back(rel + ": reads the policy's report figure \"" + (*it)[3].str() + "\"");
  }
  CHECK(files > 30);
  INFO([&] {
    std::string s;
    for (const auto& f : found) s += "  " + f + "\n";
    return s;
  }());
  CHECK(found.empty());
}

TEST_CASE("json: every JSON text is made by dump_json which writes any name whether UTF-8 or not") {
  // nlohmann's dump() throws on a string that is not UTF-8 (a file name in another encoding): each
  // JSON output once ended so with an internal error. One function writes them all (sim/base/io.h).
  std::regex dump(R"re((\.|->)dump\((-?[0-9]+)?\))re");
  std::vector<std::string> found;
  for (const char* dir : {"sim", "traces", "policies", "hardware_models"})
    for (const auto& e : fs::recursive_directory_iterator(root() + "/" + dir)) {
      auto ext = e.path().extension().string();
      std::string rel = fs::relative(e.path(), root()).generic_string();
      if ((ext != ".h" && ext != ".cpp") || rel == "sim/base/io.cpp") continue;
      std::ifstream in(e.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      text = std::regex_replace(text, std::regex(R"(//[^\n]*)"), "");
      if (std::regex_search(text, dump)) found.push_back(rel);
    }
  INFO(lines(found));
  CHECK(found.empty());
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

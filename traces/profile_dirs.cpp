#include "traces/profile_dirs.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/base/error.h"

namespace fragsim {

bool holds_files(const std::filesystem::path& dir, const std::function<bool(const std::filesystem::path&)>& is_file) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (is_file(e.path()) && !e.is_directory(ec)) return true;
  return false;
}

std::vector<std::filesystem::path> profile_runs(const std::string& dir,
                                                const std::function<bool(const std::filesystem::path&)>& is_file) {
  if (holds_files(dir, is_file)) return {dir};
  std::vector<std::filesystem::path> level{dir}, runs;
  size_t seen = 0;
  for (int d = 0; d < kProfileDepth && !level.empty() && seen < kProfileFolders; ++d) {
    std::vector<std::filesystem::path> next;
    for (const auto& p : level) {
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(p, ec)) {
        if (e.is_symlink(ec) || !e.is_directory(ec) || ++seen > kProfileFolders) continue;
        if (holds_files(e.path(), is_file))
          runs.push_back(e.path());
        else
          next.push_back(e.path());
      }
    }
    level = std::move(next);
  }
  std::sort(runs.begin(), runs.end());
  return runs;
}

std::string find_one_run(const std::string& dir, const std::string& what,
                         const std::function<bool(const std::filesystem::path&)>& is_file) {
  std::vector<std::filesystem::path> runs = profile_runs(dir, is_file);
  if (runs.empty())
    throw InputError(fmt::format("{}: no {} in this folder or the {} levels below it", dir, what, kProfileDepth));
  if (runs.size() > 1) {
    std::string list;
    for (size_t i = 0; i < runs.size() && i < 8; ++i) list += (i ? ", " : "") + runs[i].string();
    throw InputError(fmt::format("{}: {} profile runs under it ({}{}): name the one to read", dir, runs.size(), list,
                                 runs.size() > 8 ? ", ..." : ""));
  }
  return runs.front().string();
}

}  // namespace fragsim

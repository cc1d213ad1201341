// Profile log directories: the folders under a path that hold a profiler's output files, as JAX
// (DIR/plugins/profile/<run>/<host>.xplane.pb) and PyTorch's TensorBoard handler
// (DIR/<worker>.<ns>.pt.trace.json) write them. Shared by the XProf and Kineto importers.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace fragsim {

// How deep below a folder runs are looked for, and how many folders are visited at most.
inline constexpr int kProfileDepth = 6;
inline constexpr size_t kProfileFolders = 20000;

// Whether `dir` itself holds a regular file (not a folder) for which `is_file` holds.
[[nodiscard]] bool holds_files(const std::filesystem::path& dir,
                               const std::function<bool(const std::filesystem::path&)>& is_file);
// The folders under `dir` (itself included) that hold such files, sorted: dir alone when it holds
// some, else breadth first, without following links, at most kProfileDepth levels down and
// kProfileFolders folders.
[[nodiscard]] std::vector<std::filesystem::path> profile_runs(
    const std::string& dir, const std::function<bool(const std::filesystem::path&)>& is_file);
// The one run under `dir`: InputError naming `what` ("*.xplane.pb capture") when there is none,
// and the runs when there are several.
[[nodiscard]] std::string find_one_run(const std::string& dir, const std::string& what,
                                       const std::function<bool(const std::filesystem::path&)>& is_file);

}  // namespace fragsim

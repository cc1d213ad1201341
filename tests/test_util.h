// Helpers shared by the tests: temporary files, running the CLI, reading JSON(L).
#pragma once
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace fragsim::test {

// The bundled samples (traces/samples/) and the tests' own fixtures (tests/data/, SOURCES.md).
inline std::string sample(const std::string& name) {
  return std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/" + name;
}
inline std::string test_data(const std::string& rel) { return std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/" + rel; }
// The small JAX training trace most CLI tests run.
inline const std::string kSample = sample("jax_train_small.jsonl");
// 3 GPUs of PyTorch with expandable segments, device 1 runs out of memory.
inline const std::string k3dev = test_data("torch/expandable_3dev_oom.pickle.zst");
// One training step of a small transformer on one GPU (PyTorch snapshot).
inline const std::string kTrain = test_data("torch/transformer_ctx128_train_step.pickle.zst");
inline constexpr std::uint64_t MiB = 1 << 20;

// One scratch folder per test process, removed when the process exits.
inline std::string tmp_dir() {
  static std::string d = [] {
    auto p = std::filesystem::temp_directory_path() / ("fragsim-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(
          std::filesystem::temp_directory_path() / ("fragsim-test-" + std::to_string(::getpid())), ec);
    });
    return p.string();
  }();
  return d;
}
inline std::string tmp_path(const std::string& name) { return tmp_dir() + "/" + name; }

// A profile directory (under tmp_path(name)) of two ranks on other GPUs: the Switch Transformer's
// trace from an A100 as hostA's rank and a matmul's from a T4 as hostB's (tests/data/kineto).
inline std::string mixed_gpu_ranks(const std::string& name) {
  namespace fs = std::filesystem;
  const std::string dir = tmp_path(name);
  fs::create_directories(dir);
  fs::copy_file(test_data("kineto/a100_switch_transformer.json.gz"), dir + "/hostA_1.1700000000.pt.trace.json.gz",
                fs::copy_options::overwrite_existing);
  fs::copy_file(test_data("kineto/t4_matmul_full.pt.trace.json.gz"), dir + "/hostB_2.1700000001.pt.trace.json.gz",
                fs::copy_options::overwrite_existing);
  return dir;
}

inline std::string write_text(const std::string& name, const std::string& text) {
  std::string p = tmp_path(name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// A trace of n events (JSONL): alloc of id i at even i, the free of it at the next event; event
// `bad` (when below n) is replaced by a free of id 999999999, never allocated.
inline std::string alloc_free_trace(const std::string& name, int n, int bad = -1) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += i == bad ? std::string("{\"op\":\"free\",\"id\":999999999}\n")
         : i % 2  ? "{\"op\":\"free\",\"id\":" + std::to_string(i - 1) + "}\n"
                  : "{\"op\":\"alloc\",\"id\":" + std::to_string(i) + ",\"size\":" + std::to_string(256 + i) + "}\n";
  return write_text(name, s);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<nlohmann::json> read_jsonl_text(const std::string& text) {
  std::vector<nlohmann::json> v;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) { return read_jsonl_text(read_text(path)); }

struct CliResult {
  int code;
  std::string out, err;
};

// Runs the built fragsim with args (shell-quoted by the caller where needed).
inline CliResult cli(const std::string& args) {
  std::string o = tmp_path("cli.out"), e = tmp_path("cli.err");
  std::string cmd = std::string(FRAGSIM_BINARY) + " " + args + " >" + o + " 2>" + e;
  int rc = std::system(cmd.c_str());
  return {WEXITSTATUS(rc), read_text(o), read_text(e)};
}

// Runs a shell command in a child; its exit code (128 + signal when killed) and peak resident
// memory (KiB). A child forked from this process counts this process's pages in its peak until it
// execs (Linux carries the old memory's high-water mark across exec), and a test process can be
// large (under ASan freed memory stays in a quarantine): so the command runs under GNU time
// (Debian's `time`, which scripts/test installs), whose own small process forks it; without it,
// the child's own rusage (an overestimate by this process's size).
struct Measured {
  int code;
  long maxrss_kib;
};
inline Measured run_measured(const std::string& cmd) {
  static const bool gnu_time = ::access("/usr/bin/time", X_OK) == 0;
  std::string report = tmp_path("maxrss." + std::to_string(::getpid()));
  pid_t pid = fork();
  if (pid == 0) {
    if (gnu_time)
      execl("/usr/bin/time", "time", "-q", "-f", "%M", "-o", report.c_str(), "/bin/sh", "-c", cmd.c_str(),
            static_cast<char*>(nullptr));
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  long kib = ru.ru_maxrss;
  if (gnu_time) {
    std::ifstream in(report);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) kib = std::stol(line);
  }
  return {code, kib};
}

// The fragsim command line for args, its output discarded (for run_measured).
inline std::string fragsim_cmd(const std::string& args) {
  return std::string(FRAGSIM_BINARY) + " " + args + " >/dev/null 2>&1";
}

}  // namespace fragsim::test

#include "sim/base/io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/limits.h"

namespace fragsim {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

namespace {
std::atomic<std::uint64_t> g_bytes_read{0}, g_events_read{0};
}  // namespace

std::uint64_t input_bytes_read() { return g_bytes_read.load(std::memory_order_relaxed); }
std::uint64_t input_events_read() { return g_events_read.load(std::memory_order_relaxed); }

namespace {
std::mutex g_reached_m;
std::unordered_map<std::string, std::uint64_t> g_reached;  // input → the furthest event any reader reached
}  // namespace

void count_input_events(const std::string& input, std::uint64_t reached) {
  std::lock_guard<std::mutex> l(g_reached_m);
  std::uint64_t& was = g_reached[input];
  if (reached <= was) return;
  g_events_read.fetch_add(reached - was, std::memory_order_relaxed);
  was = reached;
}

void new_input_epoch() {
  std::lock_guard<std::mutex> l(g_reached_m);
  g_reached.clear();
}

namespace {

std::FILE* open_or_throw(const std::string& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (!f) throw EnvError(path + ": cannot open: " + std::strerror(errno));
  return f;
}

const char* file_kind(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

// Opens an input for reading: a regular file only (a device such as /dev/zero never ends, a FIFO
// may never open), checked on the descriptor itself so that what is read is what was checked.
std::FILE* open_input(const std::string& path, std::uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw EnvError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw EnvError(path + ": cannot open: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("{}: {}; fragsim reads regular files only", path, file_kind(st.st_mode)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::FILE* f = ::fdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    throw EnvError(path + ": cannot open: " + std::strerror(errno));
  }
  *size = static_cast<std::uint64_t>(st.st_size);
  return f;
}

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : f_(open_input(path, &size_)), path_(path) {}
  ~FileSource() override { std::fclose(f_); }
  size_t read(char* dst, size_t n) override {
    size_t got = std::fread(dst, 1, n, f_);
    if (got == 0 && std::ferror(f_)) throw EnvError(path_ + ": read error");
    g_bytes_read.fetch_add(got, std::memory_order_relaxed);
    return got;
  }
  std::uint64_t size() const { return size_; }

 private:
  std::uint64_t size_ = 0;
  std::FILE* f_;
  std::string path_;
};

class ZstdSource : public ByteSource {
 public:
  explicit ZstdSource(const std::string& path)
      : file_(path),
        path_(path),
        in_(ZSTD_DStreamInSize()),
        ds_(ZSTD_createDStream()),
        out_(Limit::kDecompressed, path, file_.size()) {
    ZSTD_initDStream(ds_);
  }
  ~ZstdSource() override { ZSTD_freeDStream(ds_); }
  size_t read(char* dst, size_t n) override {
    ZSTD_outBuffer out{dst, n, 0};
    while (out.pos == 0) {
      if (ib_.pos == ib_.size) {
        size_t got = file_.read(in_.data(), in_.size());
        if (got == 0) {
          // A zstd stream holds at least one frame: an empty file is none (trial 16: read as a trace of
          // no events, exit 0, where `zstd -t` says "unexpected end of file").
          if (!started_) throw InputError(path_ + ": the file is empty (0 bytes): no zstd stream");
          if (!frame_done_) throw InputError(path_ + ": truncated zstd stream");
          return 0;
        }
        started_ = true;
        ib_ = {in_.data(), got, 0};
      }
      size_t r = ZSTD_decompressStream(ds_, &out, &ib_);
      if (ZSTD_isError(r)) throw InputError(path_ + ": corrupt zstd stream: " + ZSTD_getErrorName(r));
      frame_done_ = (r == 0);
    }
    out_.spend(out.pos);  // a small file must not expand without bound (sim/base/limits.h)
    return out.pos;
  }

 private:
  FileSource file_;
  std::string path_;
  std::vector<char> in_;
  ZSTD_inBuffer ib_{nullptr, 0, 0};
  ZSTD_DStream* ds_;
  bool frame_done_ = true;
  bool started_ = false;  // some input was read
  LimitCounter out_;
};

// Whether a file starts as a gzip stream does (1f 8b 08: JAX writes its gzipped memory profiles as
// `.prof`).
bool is_gzip(const std::string& path) {
  std::uint64_t size = 0;
  std::FILE* f = open_input(path, &size);
  unsigned char magic[3] = {0, 0, 0};
  size_t n = std::fread(magic, 1, 3, f);
  std::fclose(f);
  return n == 3 && magic[0] == 0x1f && magic[1] == 0x8b && magic[2] == 0x08;
}

// gzip (zlib's inflate; several members read as one, as gzip -d does): PyTorch's TensorBoard
// handler writes profiler traces so, and JAX its device memory profiles.
class GzipSource : public ByteSource {
 public:
  explicit GzipSource(const std::string& path)
      : file_(path), path_(path), in_(1 << 16), out_(Limit::kDecompressed, path, file_.size()) {
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) throw EnvError(path + ": zlib cannot start");
  }
  ~GzipSource() override { inflateEnd(&zs_); }
  size_t read(char* dst, size_t n) override {
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, UINT32_MAX));
    while (zs_.avail_out == std::min<size_t>(n, UINT32_MAX)) {
      if (zs_.avail_in == 0) {
        size_t got = file_.read(in_.data(), in_.size());
        if (got == 0) {
          if (!member_done_) throw InputError(path_ + ": truncated gzip stream");
          return 0;
        }
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(got);
      }
      if (member_done_) {  // another member follows
        if (inflateReset(&zs_) != Z_OK) throw InputError(path_ + ": corrupt gzip stream");
        member_done_ = false;
      }
      int r = inflate(&zs_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        member_done_ = true;
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        throw InputError(path_ + ": corrupt gzip stream: " + (zs_.msg ? zs_.msg : "inflate failed"));
      }
    }
    size_t got = std::min<size_t>(n, UINT32_MAX) - zs_.avail_out;
    out_.spend(got);  // a small file must not expand without bound (sim/base/limits.h)
    return got;
  }

 private:
  FileSource file_;
  std::string path_;
  std::vector<char> in_;
  z_stream zs_{};
  bool member_done_ = false;
  LimitCounter out_;
};

}  // namespace

std::unique_ptr<ByteSource> open_source(const std::string& path) {
  if (ends_with(path, ".zst")) return std::make_unique<ZstdSource>(path);
  if (ends_with(path, ".gz") || is_gzip(path)) return std::make_unique<GzipSource>(path);
  return std::make_unique<FileSource>(path);
}

struct AtomicFile::Zstd {
  ZSTD_CStream* cs = ZSTD_createCStream();
  std::vector<char> out = std::vector<char>(ZSTD_CStreamOutSize());
  ~Zstd() { ZSTD_freeCStream(cs); }
};

namespace {

// Temporaries to remove when a signal ends the process: fixed slots of owned C strings, so the
// handler only reads memory and calls unlink (async-signal-safe).
constexpr int kTempSlots = 64;
std::atomic<char*> g_temps[kTempSlots];
std::atomic<pid_t> g_temp_pids[kTempSlots];  // the process that registered each (a forked child is another)
std::atomic<bool> g_handlers{false};

// Every signal is blocked while this runs (sa_mask), so a second signal — `timeout` sends its
// signal to the process and to its group — cannot end the process before the unlinks; the
// re-raised one stays pending until the handler returns, then takes its default action.
extern "C" void remove_temps_and_reraise(int sig) {
  const pid_t self = ::getpid();
  for (int i = 0; i < kTempSlots; ++i)
    if (char* p = g_temps[i].load(); p && g_temp_pids[i].load() == self) ::unlink(p);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Every signal whose default action ends the process: all but those the kernel ignores, stops or
// continues on by default (signal(7)), and SIGKILL and SIGSTOP, which no handler sees. The
// real-time signals end it too. A signal the process inherited as ignored (nohup's SIGHUP), or that
// something loaded earlier handles, is left as it is: its default action is not what happens.
bool ends_process_by_default(int sig) {
  switch (sig) {
    case SIGKILL:
    case SIGSTOP:
    case SIGCHLD:
    case SIGCONT:
    case SIGURG:
    case SIGWINCH:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
      return false;
    default:
      return sig <= SIGSYS || sig >= SIGRTMIN;  // between them, glibc's own (its threads' signals)
  }
}

}  // namespace

void remove_temporaries_on_signals() {
  if (g_handlers.exchange(true)) return;
  for (int sig = 1; sig <= SIGRTMAX; ++sig) {
    if (!ends_process_by_default(sig)) continue;
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temps_and_reraise;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = 0;
    ::sigaction(sig, &sa, nullptr);
  }
}

namespace {

int register_temp(const std::string& path) {
  char* copy = ::strdup(path.c_str());
  for (int i = 0; i < kTempSlots; ++i) {
    char* expected = nullptr;
    if (g_temps[i].compare_exchange_strong(expected, copy)) {
      g_temp_pids[i] = ::getpid();
      return i;
    }
  }
  std::free(copy);  // more outputs open at once than slots: this one is cleaned up by its destructor only
  return -1;
}

// The process's umask, read without changing it (umask(2) would, for every thread at once).
mode_t process_umask() {
  static const mode_t mask = [] {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    char line[256];
    unsigned m = 022;
    while (f && std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "Umask: %o", &m) == 1) break;
    if (f) std::fclose(f);
    return static_cast<mode_t>(m);
  }();
  return mask;
}

// Where an output goes. Every writer (AtomicFile) and every command's check of its outputs
// (check_outputs) asks this one function, so that what is checked is what is written.
struct OutputTarget {
  enum Kind { kStdout, kThrough, kFile } kind = kFile;
  std::string path;  // kThrough: what to open; kFile: the file to replace (links followed)
};

// Names of standard output itself: written to the process's stdout, whatever it was opened on.
bool names_stdout(const std::string& p) {
  return p == "-" || p == "/dev/stdout" || p == "/dev/fd/1" || p == "/proc/self/fd/1";
}

// A file without write permission — for whoever runs fragsim, and for everyone when no write bit
// is set at all (root may write anything; the shell's `>` run by its owner refuses it).
bool read_only(const std::string& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return false;
  return (st.st_mode & 0222) == 0 || ::faccessat(AT_FDCWD, p.c_str(), W_OK, AT_EACCESS) != 0;
}

// The output `path` (option `what`) as it will be written, or an InputError (exit 2, nothing
// written) for one that fragsim refuses:
//   - a folder;
//   - a symbolic link whose target (after every hop) lies in another folder than the link: a link
//     planted where an output goes would make fragsim replace a file elsewhere (~/.bashrc). A link
//     within its own folder (latest.json -> run-42.json) is followed, and its target replaced;
//   - a read-only file, or a new file in a read-only folder, as the shell's `>` refuses them;
//   - a new file in a folder that does not exist (or a path ending in '/'): refused before the
//     command does its work, not when the output is written after it (exit 3, the work lost).
// Standard output under any of its names, a descriptor (/dev/fd/N), a FIFO or a device is written
// straight through (nothing to rename); everything else is replaced by rename (AtomicFile).
OutputTarget output_target(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  if (names_stdout(path)) return {OutputTarget::kStdout, path};
  auto refuse = [&](const std::string& why) { throw InputError(fmt::format("{} {}: {}", what, path, why)); };
  std::error_code ec;
  fs::path p = path;
  // A descriptor (/dev/fd/N) open on a pipe, a terminal or a device is written through. One open on
  // a file names that file, which every rule below protects as if it were named (`3<trace.jsonl`
  // must not make the trace the report; `3>>summary.md` keeps what the summary held).
  if (path.rfind("/dev/fd/", 0) == 0 || path.rfind("/proc/self/fd/", 0) == 0) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {OutputTarget::kThrough, path};
    const fs::path file = fs::canonical(path, ec);
    if (ec || !fs::is_regular_file(file, ec)) refuse("a descriptor open on a file fragsim cannot name; name the file");
    return output_target(file.string(), what);
  }
  const fs::path folder = fs::absolute(p, ec).parent_path();
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    fs::path t = fs::read_symlink(p, ec);
    if (ec || hops == 40) refuse("a symbolic link that does not resolve");
    p = t.is_absolute() ? t : p.parent_path() / t;
  }
  if (p != fs::path(path)) {
    std::error_code e1;
    const fs::path to = fs::absolute(p, e1).parent_path();
    if (e1 || !fs::equivalent(to, folder, e1) || e1)
      refuse(
          fmt::format("a symbolic link to {}, in another folder; fragsim does not write through it (remove the "
                      "link, or name the file itself)",
                      p.string()));
  }
  const auto st = fs::status(p, ec);
  if (!ec && fs::is_directory(st)) refuse("a directory; give a file name");
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) return {OutputTarget::kThrough, p.string()};
  if (!ec && fs::exists(st) && read_only(p.string()))
    refuse("a read-only file; refusing to replace it (the shell's > refuses it too)");
  if (!fs::exists(st) && !fs::is_directory(folder, ec))
    refuse(path.back() == '/'       ? std::string("a directory that does not exist; give a file name")
           : fs::exists(folder, ec) ? fmt::format("{} is not a folder", folder.string())
                                    : fmt::format("the folder {} does not exist", folder.string()));
  if (!fs::exists(st) && read_only(folder.string())) refuse(fmt::format("the folder {} is read-only", folder.string()));
  return {OutputTarget::kFile, p.string()};
}

// The summary of a GitHub Actions step (the file $GITHUB_STEP_SUMMARY names): GitHub documents it
// as appended to (`>>`), by every command of the step, so an output there keeps what it held.
bool is_step_summary(const std::string& file) {
  const char* summary = std::getenv("GITHUB_STEP_SUMMARY");
  std::error_code ec;
  return summary && *summary && std::filesystem::exists(file, ec) && std::filesystem::equivalent(summary, file, ec);
}

// What an input stands for: a file; each file of a comma-separated list of them (a set of ranks);
// every file under a folder, at any depth, and every file a link under it leads to (a profile or
// rank directory) — walked once, within a bound on the entries visited.
class InputFiles {
 public:
  explicit InputFiles(const std::vector<std::string>& inputs) {
    namespace fs = std::filesystem;
    for (const auto& in : inputs) {
      if (in.empty()) continue;
      std::error_code ec;
      if (!fs::exists(in, ec) && in.find(',') != std::string::npos) {
        for (size_t at = 0; at <= in.size();) {
          size_t comma = std::min(in.find(',', at), in.size());
          if (comma > at) add(in.substr(at, comma - at));
          at = comma + 1;
        }
        continue;
      }
      add(in);
    }
  }
  // Whether the existing file `out` is one of the inputs.
  bool holds(const std::string& out) const {
    namespace fs = std::filesystem;
    struct stat st {};
    if (::stat(out.c_str(), &st) != 0) return false;
    if (ids_.count({st.st_dev, st.st_ino})) return true;
    std::error_code ec;
    const fs::path c = fs::canonical(out, ec);
    if (ec) return false;
    for (const auto& dir : dirs_) {  // under a folder whose walk stopped at the bound
      if (std::mismatch(dir.begin(), dir.end(), c.begin(), c.end()).first == dir.end()) return true;
    }
    return false;
  }

 private:
  static constexpr size_t kMaxEntries = 200000;
  void add(const std::string& in) {
    namespace fs = std::filesystem;
    struct stat st {};
    if (::stat(in.c_str(), &st) != 0) return;
    ids_.insert({st.st_dev, st.st_ino});
    if (!S_ISDIR(st.st_mode)) return;
    std::error_code ec;
    dirs_.push_back(fs::canonical(in, ec));
    size_t seen = 0;
    for (fs::recursive_directory_iterator it(in, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end && seen < kMaxEntries; it.increment(ec), ++seen)
      if (::stat(it->path().c_str(), &st) == 0) ids_.insert({st.st_dev, st.st_ino});
  }
  std::set<std::pair<dev_t, ino_t>> ids_;
  std::vector<std::filesystem::path> dirs_;
};

}  // namespace

std::uint64_t input_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return fs::file_size(path, ec);
  std::uint64_t sum = 0;
  if (fs::is_directory(path, ec))
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) sum += e.file_size(ec);
  return sum;
}

void check_outputs(const std::vector<std::string>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  const InputFiles in(inputs);
  // Standard output under any of its names (or the terminal or pipe it is): two outputs there would interleave.
  auto is_stdout = [&](const OutputTarget& t) {
    if (t.kind == OutputTarget::kStdout) return true;
    struct stat a {
    }, b{};
    return t.kind == OutputTarget::kThrough && ::stat(t.path.c_str(), &a) == 0 && ::fstat(STDOUT_FILENO, &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  };
  std::vector<OutputTarget> targets;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [what, out] = outputs[i];
    targets.push_back(out.empty() ? OutputTarget{OutputTarget::kThrough, ""} : output_target(out, what));
    if (out.empty()) continue;
    const OutputTarget& t = targets.back();
    if (is_stdout(t))
      for (size_t j = 0; j < i; ++j)
        if (!outputs[j].second.empty() && is_stdout(targets[j]))
          throw InputError(fmt::format("{} {}: {} writes to standard output too", what, out, outputs[j].first));
    if (t.kind != OutputTarget::kFile) continue;
    if (in.holds(t.path))
      throw InputError(fmt::format("{} {}: that is an input of this command; refusing to overwrite it", what, out));
    // One file however spelled (./x, d/../x, its absolute path), existing or not.
    auto where = [](const std::string& f) {
      std::error_code ec;
      return fs::weakly_canonical(fs::absolute(f, ec), ec).lexically_normal();
    };
    for (size_t j = 0; j < i; ++j)
      if (targets[j].kind == OutputTarget::kFile && where(targets[j].path) == where(t.path))
        throw InputError(fmt::format("{} {}: {} writes the same file", what, out, outputs[j].first));
  }
}

AtomicFile::AtomicFile(std::string path, bool compress) : path_(std::move(path)) {
  const OutputTarget t = output_target(path_, "output");
  if (t.kind == OutputTarget::kStdout) {
    f_ = stdout;
  } else if (t.kind == OutputTarget::kThrough) {
    f_ = open_or_throw(t.path, "wb");  // a FIFO, a terminal, a descriptor: no rename possible
  } else {
    path_ = t.path;
    f_ = create_temp(t.path);
    if (!compress && is_step_summary(t.path)) {  // what earlier steps wrote stays, before this
      std::string kept = read_file(t.path);
      write_raw(kept.data(), kept.size());
    }
  }
  if (compress) {
    z_ = std::make_unique<Zstd>();
    ZSTD_initCStream(z_->cs, 3);
  }
}

// The temporary beside the target: a fresh name (mkostemp: O_CREAT | O_EXCL, so a file or link
// planted under any name is never opened, let alone followed), registered for removal on a
// signal before any signal can see it, with the mode a new file gets.
std::FILE* AtomicFile::create_temp(const std::string& target) {
  std::string name = target + ".tmp.XXXXXX";
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  int fd = ::mkostemp(name.data(), O_CLOEXEC);
  int err = errno;
  if (fd >= 0) {
    tmp_ = name;
    slot_ = register_temp(tmp_);
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (fd < 0) throw EnvError(target + ": cannot write: " + std::strerror(err));
  ::fchmod(fd, 0666 & ~process_umask());
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    throw EnvError(tmp_ + ": cannot write: " + std::strerror(errno));
  }
  return f;
}

void AtomicFile::unregister() {
  if (slot_ < 0) return;
  char* p = g_temps[slot_].exchange(nullptr);
  std::free(p);
  slot_ = -1;
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    if (f_ && f_ != stdout) std::fclose(f_);
    if (!tmp_.empty()) std::remove(tmp_.c_str());
  }
  unregister();
}

void AtomicFile::write_raw(const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, f_) != n)
    throw EnvError((f_ == stdout   ? std::string("standard output")
                    : tmp_.empty() ? path_
                                   : tmp_) +
                   ": write error: " + std::strerror(errno));
}

void AtomicFile::write(std::string_view bytes) {
  if (!z_) return write_raw(bytes.data(), bytes.size());
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  while (in.pos < in.size) {
    ZSTD_outBuffer out{z_->out.data(), z_->out.size(), 0};
    size_t r = ZSTD_compressStream(z_->cs, &out, &in);
    if (ZSTD_isError(r)) throw EnvError(tmp_ + ": zstd error");
    write_raw(out.dst, out.pos);
  }
}

void AtomicFile::commit() {
  if (z_) {
    size_t left;
    do {
      ZSTD_outBuffer out{z_->out.data(), z_->out.size(), 0};
      left = ZSTD_endStream(z_->cs, &out);
      if (ZSTD_isError(left)) throw EnvError(tmp_ + ": zstd error");
      write_raw(out.dst, out.pos);
    } while (left != 0);
  }
  if (f_ == stdout) {
    if (std::fflush(stdout) != 0) throw EnvError(std::string("standard output: write error: ") + std::strerror(errno));
    committed_ = true;
    return;
  }
  const std::string& written = tmp_.empty() ? path_ : tmp_;
  if (std::fclose(f_) != 0) {
    f_ = nullptr;
    throw EnvError(written + ": write error: " + std::strerror(errno));
  }
  f_ = nullptr;
  if (!tmp_.empty() && std::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw EnvError(path_ + ": cannot write: " + std::strerror(errno));
  committed_ = true;
  unregister();
}

std::string read_file(const std::string& path) {
  std::uint64_t size = 0;
  std::FILE* f = open_input(path, &size);
  std::string out;
  out.reserve(size);
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) throw EnvError(path + ": read error");
  return out;
}

std::string read_input(const std::string& path, std::uint64_t limit) {
  auto src = open_source(path);
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = src->read(buf, sizeof buf)) > 0) {
    if (out.size() + n > limit)
      throw InputError(path + ": larger than the " + std::to_string(limit >> 20) + " MiB this reader accepts");
    out.append(buf, n);
  }
  return out;
}

void read_lines(const std::string& path, size_t max_line,
                const std::function<void(std::string_view, std::uint64_t)>& f) {
  auto src = open_source(path);
  std::string line;
  std::uint64_t n = 0;
  std::vector<char> buf(1 << 16);
  for (size_t got; (got = src->read(buf.data(), buf.size())) > 0;) {
    for (size_t i = 0; i < got;) {
      const char* nl = static_cast<const char*>(std::memchr(buf.data() + i, '\n', got - i));
      size_t end = nl ? static_cast<size_t>(nl - buf.data()) : got;
      if (line.size() + (end - i) > max_line)
        throw InputError(path, n + 1, fmt::format("line longer than {} KiB", max_line >> 10));
      line.append(buf.data() + i, end - i);
      i = end;
      if (nl) {
        f(line, ++n);
        line.clear();
        ++i;
      }
    }
  }
  if (!line.empty()) f(line, ++n);
}

nlohmann::json parse_json(std::string_view text, const std::string& file, std::uint64_t line) {
  // nlohmann's parser keeps its own stack (no recursion); the callback refuses a value deeper than
  // the bound as it is opened, so no deeper tree is ever built.
  // (A container opens at the depth of the containers around it: 0 for the outermost.)
  auto depth = [&](int d, nlohmann::json::parse_event_t ev, nlohmann::json&) {
    const bool opens =
        ev == nlohmann::json::parse_event_t::object_start || ev == nlohmann::json::parse_event_t::array_start;
    if (opens && d >= kMaxNesting)
      throw InputError(file, line, fmt::format("JSON nested deeper than {} levels", kMaxNesting));
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), depth);
  } catch (const nlohmann::json::parse_error& e) {
    std::uint64_t at = line ? line : 1;
    if (!line)
      for (size_t i = 0; i < e.byte && i < text.size(); ++i) at += text[i] == '\n';
    throw InputError(file, at, "invalid JSON");
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double's range ("number overflow parsing '1e400'"): the line of its first
    // appearance in the text.
    const std::string w = e.what();
    const size_t q = w.find('\''), q2 = q == std::string::npos ? q : w.find('\'', q + 1);
    const std::string token = q2 == std::string::npos ? std::string() : w.substr(q + 1, q2 - q - 1);
    std::uint64_t at = line ? line : 1;
    if (const size_t pos = token.empty() ? std::string_view::npos : text.find(token);
        !line && pos != std::string_view::npos)
      at += static_cast<std::uint64_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
    throw InputError(
        file, at,
        token.empty() ? std::string("a number out of range") : fmt::format("{}: a number out of range", token));
  }
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json read_json_file(const std::string& path) { return parse_json(read_file(path), path); }

JsonFault json_fault(std::string_view text) {
  // A SAX reader that keeps nothing: nlohmann's parser walks with its own stack, so no depth of
  // nesting recurses, and it stops at the first error with the byte it reached.
  struct Finder : nlohmann::json_sax<nlohmann::json> {
    size_t byte = 0;
    bool failed = false;
    int depth = 0;
    bool whole = false;  // a top-level object or array was closed
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return ++depth, true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return whole = --depth == 0, true; }
    bool start_array(std::size_t) override { return ++depth, true; }
    bool end_array() override { return whole = --depth == 0, true; }
    bool parse_error(std::size_t at, const std::string&, const nlohmann::detail::exception&) override {
      byte = at, failed = true;
      return false;
    }
  } finder;
  (void)nlohmann::json::sax_parse(text.begin(), text.end(), &finder);
  JsonFault f;
  if (!finder.failed) return f;
  const size_t at = std::min(finder.byte ? finder.byte - 1 : 0, text.size());
  f.line =
      1 + static_cast<std::uint64_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  f.trailing = finder.whole && finder.depth == 0;
  f.at_end = !f.trailing && finder.byte >= text.size();
  return f;
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

}  // namespace fragsim

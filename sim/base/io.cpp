#include "sim/base/io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
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
          if (!frame_done_) throw InputError(path_ + ": truncated zstd stream");
          return 0;
        }
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
  LimitCounter out_;
};

}  // namespace

std::unique_ptr<ByteSource> open_source(const std::string& path) {
  if (ends_with(path, ".zst")) return std::make_unique<ZstdSource>(path);
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
std::atomic<bool> g_handlers{false};

// Every signal is blocked while this runs (sa_mask), so a second signal — `timeout` sends its
// signal to the process and to its group — cannot end the process before the unlinks; the
// re-raised one stays pending until the handler returns, then takes its default action.
extern "C" void remove_temps_and_reraise(int sig) {
  for (auto& slot : g_temps)
    if (char* p = slot.load()) ::unlink(p);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void remove_temporaries_on_signals() {
  if (g_handlers.exchange(true)) return;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGXFSZ}) {
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
    if (g_temps[i].compare_exchange_strong(expected, copy)) return i;
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

// The file a path finally names: symlinks followed (even dangling ones, whose target is created).
std::string final_target(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    fs::path t = fs::read_symlink(p, ec);
    if (ec) break;
    p = t.is_absolute() ? t : p.parent_path() / t;
  }
  return p.string();
}

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
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  };
  // Standard output under any of its names: two outputs there would interleave.
  auto is_stdout = [&](const std::string& p) {
    if (p == "-" || p == "/dev/stdout" || p == "/dev/fd/1" || p == "/proc/self/fd/1") return true;
    struct stat a {
    }, b{};
    return ::stat(p.c_str(), &a) == 0 && ::fstat(STDOUT_FILENO, &b) == 0 && !S_ISREG(a.st_mode) &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  };
  auto special = [](const std::string& p) {
    std::error_code ec;
    auto st = fs::status(p, ec);
    return p == "-" || (!ec && fs::exists(st) && !fs::is_regular_file(st));
  };
  // An input folder (a profile directory) stands for every file in it.
  auto inside = [](const std::string& dir, const std::string& out) {
    std::error_code ec;
    return fs::is_directory(dir, ec) && fs::exists(out, ec) &&
           fs::equivalent(fs::absolute(out, ec).parent_path(), dir, ec);
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [what, out] = outputs[i];
    if (out.empty()) continue;
    std::error_code ec;
    if (fs::is_directory(out, ec)) throw InputError(fmt::format("{} {}: a directory; give a file name", what, out));
    if (is_stdout(out))
      for (size_t j = 0; j < i; ++j)
        if (!outputs[j].second.empty() && is_stdout(outputs[j].second))
          throw InputError(fmt::format("{} {}: {} writes to standard output too", what, out, outputs[j].first));
    if (special(out)) continue;
    for (const auto& in : inputs)
      if (!in.empty() && (same(in, out) || inside(in, out)))
        throw InputError(fmt::format("{} {}: that is an input of this command; refusing to overwrite it", what, out));
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].second.empty() && same(outputs[j].second, out))
        throw InputError(fmt::format("{} {}: {} writes the same file", what, out, outputs[j].first));
  }
}

AtomicFile::AtomicFile(std::string path, bool compress) : path_(std::move(path)) {
  if (path_ == "-") {
    f_ = stdout;
  } else {
    std::string target = final_target(path_);
    std::error_code ec;
    auto st = std::filesystem::status(target, ec);
    if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
      f_ = open_or_throw(target, "wb");  // a FIFO, a terminal, /dev/stdout: no rename possible
    } else {
      path_ = target;
      f_ = create_temp(target);
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
    throw EnvError((tmp_.empty() ? path_ : tmp_) + ": write error: " + std::strerror(errno));
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
    if (std::fflush(stdout) != 0) throw EnvError("standard output: write error");
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

nlohmann::json read_json_file(const std::string& path) {
  std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    size_t line = 1;
    for (size_t i = 0; i < e.byte && i < text.size(); ++i) line += text[i] == '\n';
    throw InputError(path, line, "invalid JSON");
  }
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

}  // namespace fragsim

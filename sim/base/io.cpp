#include "sim/base/io.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>
#include <zstd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "sim/base/error.h"

namespace fragsim {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

namespace {
std::atomic<std::uint64_t> g_bytes_read{0}, g_events_read{0};
}  // namespace

std::uint64_t input_bytes_read() { return g_bytes_read.load(std::memory_order_relaxed); }
std::uint64_t input_events_read() { return g_events_read.load(std::memory_order_relaxed); }
void count_input_events(std::uint64_t n) { g_events_read.fetch_add(n, std::memory_order_relaxed); }

namespace {

std::FILE* open_or_throw(const std::string& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (!f) throw EnvError(path + ": cannot open: " + std::strerror(errno));
  return f;
}

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : f_(open_or_throw(path, "rb")), path_(path) {}
  ~FileSource() override { std::fclose(f_); }
  size_t read(char* dst, size_t n) override {
    size_t got = std::fread(dst, 1, n, f_);
    if (got == 0 && std::ferror(f_)) throw EnvError(path_ + ": read error");
    g_bytes_read.fetch_add(got, std::memory_order_relaxed);
    return got;
  }

 private:
  std::FILE* f_;
  std::string path_;
};

class ZstdSource : public ByteSource {
 public:
  explicit ZstdSource(const std::string& path)
      : file_(path), path_(path), in_(ZSTD_DStreamInSize()), ds_(ZSTD_createDStream()) {
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
    return out.pos;
  }

 private:
  FileSource file_;
  std::string path_;
  std::vector<char> in_;
  ZSTD_inBuffer ib_{nullptr, 0, 0};
  ZSTD_DStream* ds_;
  bool frame_done_ = true;
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

void check_outputs(const std::vector<std::string>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  };
  auto special = [](const std::string& p) {
    std::error_code ec;
    auto st = fs::status(p, ec);
    return p == "-" || (!ec && fs::exists(st) && !fs::is_regular_file(st));
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [what, out] = outputs[i];
    if (out.empty() || special(out)) continue;
    for (const auto& in : inputs)
      if (!in.empty() && same(in, out))
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
      tmp_ = target + ".tmp." + std::to_string(::getpid());
      slot_ = register_temp(tmp_);
      f_ = open_or_throw(tmp_, "wb");
    }
  }
  if (compress) {
    z_ = std::make_unique<Zstd>();
    ZSTD_initCStream(z_->cs, 3);
  }
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
  std::FILE* f = open_or_throw(path, "rb");
  std::string out;
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

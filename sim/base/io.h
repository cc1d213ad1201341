// Byte-level I/O shared by every reader and writer.
//
//   ByteSource  — sequential bytes of an input file, decompressing `.zst` transparently. Inputs
//                 are regular files only (here and in read_file): a device (/dev/zero), a FIFO
//                 or a folder is an input error, so no input is endless.
//   AtomicFile  — an output written to a fresh PATH.tmp.XXXXXX, created with O_EXCL beside PATH
//                 (a file or link planted under any name is never written through), and renamed
//                 onto PATH by commit(); if the object dies uncommitted (an error part-way) the
//                 temporary is removed, and so it is when the process is killed by a signal it
//                 can catch (the temporaries are registered with a handler), so no half-written
//                 output is ever left behind (contracts §4). A symlink PATH keeps being a symlink
//                 (its target is replaced); a PATH that is not a regular file (/dev/stdout, a
//                 FIFO) is written straight through; "-" is standard output.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fragsim {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes; 0 = end of input. Throws InputError on corrupt compressed data.
  virtual size_t read(char* dst, size_t n) = 0;
};
// Bytes read from input files and events decoded from traces so far, by every thread of the
// process (what a progress line and the Python module's progress callback show;
// sim/engine/progress.h). An input's events count once however often they are read: a reader
// reports how far into its input it got, and only events past the furthest any reader of that
// input reached since the last new_input_epoch() add to the count (a run's second pass for the
// page, an offline policy's pass for lifetimes, read what the first pass counted).
std::uint64_t input_bytes_read();
std::uint64_t input_events_read();
void count_input_events(const std::string& input, std::uint64_t reached);
// A command begins: what its readers reach counts from the start of each input again.
void new_input_epoch();
// Opens PATH (decompressing when it ends in .zst, up to the `decompressed` limit). Throws EnvError
// when it cannot be read, InputError when it is not a regular file or expands beyond the limit.
[[nodiscard]] std::unique_ptr<ByteSource> open_source(const std::string& path);

bool ends_with(std::string_view s, std::string_view suffix);

// The size of an input on disk: a file's size, a folder's regular files together, 0 otherwise
// (what the limits of sim/base/limits.h are proportional to).
[[nodiscard]] std::uint64_t input_bytes(const std::string& path);

// Refuses (InputError, exit 2) an output path that names an input file or an existing file inside
// an input folder, that two outputs share (standard output under any of its names included), or
// that is a folder: `what` names the option of each output ("--json").
void check_outputs(const std::vector<std::string>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& outputs);

// For programs (fragsim, fragsim-cuda-replay), called first in main: on SIGINT, SIGTERM, SIGHUP
// and the other signals that end a process, the temporaries of unfinished AtomicFiles are removed
// before the signal takes its default action. A library loaded into another program (the Python
// module) never calls it: that program owns its signals (Ctrl-C in Python is KeyboardInterrupt,
// and an interrupted output is removed by its AtomicFile's destructor).
void remove_temporaries_on_signals();

class AtomicFile {
 public:
  // compress: zstd-compress what is written (used for .zst outputs).
  explicit AtomicFile(std::string path, bool compress = false);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);
  void commit();  // flush, close, rename onto the final path. Throws EnvError.
  const std::string& path() const { return path_; }

 private:
  std::FILE* create_temp(const std::string& target);
  void write_raw(const void* p, size_t n);
  void unregister();
  std::string path_, tmp_;  // tmp_ empty: writing straight to path_ (stdout, a FIFO, a device)
  int slot_ = -1;           // registration for signal cleanup
  std::FILE* f_ = nullptr;
  bool committed_ = false;
  struct Zstd;
  std::unique_ptr<Zstd> z_;
};

// Reads a whole file (EnvError when it cannot be read).
[[nodiscard]] std::string read_file(const std::string& path);
// Reads a whole input, decompressing `.zst`; an InputError when it holds more than `limit` bytes.
[[nodiscard]] std::string read_input(const std::string& path, std::uint64_t limit);
// Calls f(line, line_number) for each line of an input (decompressing `.zst`), without the
// newline; a line longer than max_line bytes is an InputError naming the file and line.
void read_lines(const std::string& path, size_t max_line,
                const std::function<void(std::string_view, std::uint64_t)>& f);
// Reads a JSON file; a syntax error is an InputError naming the file and line.
[[nodiscard]] nlohmann::json read_json_file(const std::string& path);

// Writes a whole small file atomically.
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace fragsim

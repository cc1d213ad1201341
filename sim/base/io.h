// Byte-level I/O shared by every reader and writer.
//
//   ByteSource  — sequential bytes of an input file, decompressing `.zst` and `.gz` transparently. Inputs
//                 are regular files only (here and in read_file): a device (/dev/zero), a FIFO
//                 or a folder is an input error, so no input is endless.
//   AtomicFile  — an output written to a fresh PATH.tmp.XXXXXX, created with O_EXCL beside PATH
//                 (a file or link planted under any name is never written through), and renamed
//                 onto PATH by commit(); if the object dies uncommitted (an error part-way) the
//                 temporary is removed, and so it is when the process is killed by any signal
//                 that ends it (the temporaries are registered with a handler), so no half-written
//                 output is ever left behind (contracts §4). PATH is refused (InputError) when it
//                 is a folder, a read-only file (or a new file in a read-only folder), or a
//                 symbolic link whose target lies in another folder; a link within its folder keeps
//                 being a link (its target is replaced). Standard output (`-`, /dev/stdout), a
//                 descriptor (/dev/fd/N), a FIFO or a device is written straight through. The file
//                 $GITHUB_STEP_SUMMARY names is appended to, as GitHub documents it.
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
// Opens PATH (decompressing when it ends in .zst or .gz, up to the `decompressed` limit). Throws EnvError
// when it cannot be read, InputError when it is not a regular file or expands beyond the limit.
[[nodiscard]] std::unique_ptr<ByteSource> open_source(const std::string& path);

bool ends_with(std::string_view s, std::string_view suffix);

// The size of an input on disk: a file's size, a folder's regular files together, 0 otherwise
// (what the limits of sim/base/limits.h are proportional to).
[[nodiscard]] std::uint64_t input_bytes(const std::string& path);

// Refuses (InputError, exit 2) an output path that names an input: an input file; a member of an
// input given as a comma-separated list of files (a set of ranks); an existing file anywhere under an
// input folder, or one a link under it leads to; also any path AtomicFile refuses (a folder, a
// read-only file, a link out of its folder), and two outputs that are one file or both standard
// output (under any of its names). Links are followed as AtomicFile follows them, so what is
// checked is what would be written. `what` names the option of each output ("--json").
void check_outputs(const std::vector<std::string>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& outputs);

// Called first in main by programs (fragsim, fragsim-cuda-replay), and when the Python module is
// imported: on every signal whose default action ends the process (SIGINT, SIGTERM, SIGHUP,
// SIGXCPU, SIGALRM, SIGUSR1, the real-time ones, ...) and that is still at that default, the
// temporaries of unfinished AtomicFiles are removed before the signal takes its default action.
// A signal the host program handles or ignores is left alone (Python's SIGINT stays
// KeyboardInterrupt, nohup's SIGHUP stays ignored): only a signal that would end the process
// anyway gets the handler, so the process ends as it would have, without the temporaries. A
// child forked after (multiprocessing) never removes its parent's.
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
// Reads a whole input, decompressing `.zst` and `.gz`; an InputError when it holds more than `limit` bytes.
[[nodiscard]] std::string read_input(const std::string& path, std::uint64_t limit);
// Calls f(line, line_number) for each line of an input (decompressing `.zst`), without the
// newline; a line longer than max_line bytes is an InputError naming the file and line.
void read_lines(const std::string& path, size_t max_line,
                const std::function<void(std::string_view, std::uint64_t)>& f);
// Reads a JSON file; a syntax error is an InputError naming the file and line, and so is nesting
// deeper than kMaxNesting (sim/base/limits.h): every later walk of the tree (a copy, a comparison,
// dump) recurses, and a 400 KB file of brackets would otherwise end the process.
[[nodiscard]] nlohmann::json read_json_file(const std::string& path);
// JSON text from `file` (line `line` of it; 0: the file as a whole), checked as read_json_file
// checks a file's.
[[nodiscard]] nlohmann::json parse_json(std::string_view text, const std::string& file, std::uint64_t line = 0);

// JSON text as fragsim writes it, in a file, on standard output or in a message (`indent` as
// nlohmann's dump: -1 one line). Strings that are not UTF-8 — a file name in another encoding,
// carried into a report, a header or a --set value — are written with U+FFFD in their place (as
// the Python module reads them), never refused part-way through an output. Every JSON text
// fragsim makes goes through here (tests/test_layers.cpp).
[[nodiscard]] std::string dump_json(const nlohmann::json& j, int indent = -1);

// Where JSON text first goes wrong, for the message of a reader that parses it another way (one
// that says what is wrong, not where): the line, and whether the text ends first (a file cut
// short). line 0: nlohmann's parser finds nothing wrong. Builds no tree.
struct JsonFault {
  std::uint64_t line = 0;
  bool at_end = false;    // the text ends inside its value
  bool trailing = false;  // more follows a whole value
};
[[nodiscard]] JsonFault json_fault(std::string_view text);

// Writes a whole small file atomically.
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace fragsim

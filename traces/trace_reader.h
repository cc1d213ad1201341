// TraceReader: a validated stream of Events from any trace format (specs/contracts.md §1).
//
// Formats only decode (read_raw); this base applies every format-independent rule once:
// default time, non-decreasing time, shape/dtype vs size, live-id bookkeeping (double alloc,
// free of a non-live id, or --lenient skipping of such frees). Memory is O(live allocations).
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "sim/base/event.h"
#include "sim/base/recording.h"
#include "traces/live_table.h"

namespace fragsim {

struct ReaderOptions {
  bool lenient = false;         // count and skip frees of ids that are not live
  unsigned decode_threads = 0;  // JSONL: threads parsing lines beside the caller's (0: the caller alone)
  bool line_by_line = false;    // JSONL: parse every line on its own, not in blocks (the blocks' oracle in tests)
};

// Resets every field a reader decodes (strings and vectors keep their capacity).
void clear_decoded(Event& ev);
// Moves a decoded event into dst, leaving src's fields behind in its place: the fixed fields are
// copied and the name, shape and frames swapped only when one side holds some (a whole-Event swap
// moves every container three times, for events that mostly have none).
void take_event(Event& dst, Event& src);

class TraceReader {
 public:
  TraceReader(std::string path, ReaderOptions opt) : path_(std::move(path)), opt_(opt) {}
  virtual ~TraceReader() = default;

  // Next validated event; false at the end. Throws InputError("FILE:LINE: ...").
  bool next(Event& ev);

  const std::string& path() const { return path_; }
  // The header object (with "fragsim_trace") or null when the trace has none.
  const nlohmann::json& header() const { return header_; }
  // What the header says about the recording behind the trace (traces/recording_header.h).
  const Recording& recording() const { return recording_; }
  virtual std::uint64_t skipped_frees() const { return skipped_frees_; }
  // Digest of the events read so far (hex): equal for the same trace in any encoding.
  [[nodiscard]] std::string digest() const;
  // Whether some event read so far carried a time (else every t is the event's index).
  bool timed() const { return timed_; }
  Handle handle_limit() const { return live_.handle_limit(); }
  size_t live_count() const { return live_.size(); }
  // Whether what it reads counts toward the progress of its input (count_input_events); off for a
  // second reader of an input that runs beside the replay (a report's plan), which would run ahead.
  void count_progress(bool on) { counts_ = on; }

 protected:
  // Decodes the next event into ev (op, present, fields, line). False at the end.
  virtual bool read_raw(Event& ev) = 0;
  [[noreturn]] void fail(std::uint64_t line, const std::string& what) const;
  // The next event's index (a reader that passes on another's events keeps their indices).
  void continue_at(std::uint64_t index) { index_ = index; }
  // Sets the header and reads the recording it describes (InputError FILE:line on a malformed key).
  void set_header(nlohmann::json h, std::uint64_t line = 0);

  std::string path_;
  ReaderOptions opt_;
  nlohmann::json header_;
  Recording recording_;

 private:
  LiveTable live_;
  std::uint64_t index_ = 0;
  Tick last_t_;
  std::uint64_t skipped_frees_ = 0;
  bool timed_ = false;
  bool counts_ = true;
  std::uint64_t digest_ = 0x6a09e667f3bcc908ULL;
  std::unordered_set<std::uint64_t> stacks_;  // stack ids defined so far
  void mix_digest(const Event& ev);
  void check_rare_keys(const Event& ev) const;
};

// A trace held in memory (tests, generated inputs): the same validation as a file's.
[[nodiscard]] std::unique_ptr<TraceReader> make_event_reader(std::string name, std::vector<Event> events,
                                                             nlohmann::json header = nullptr);

// The trace decoded once into memory, for callers that replay it many times (a sweep, advice):
// each call of the returned factory reads the same validated events again — same header,
// recording, digest and skipped frees — without the file. Memory O(events).
using ReaderFactory = std::function<std::unique_ptr<TraceReader>()>;
[[nodiscard]] ReaderFactory decode_once(const std::string& path, const ReaderOptions& opt);
// The same for a trace that is not a file (a snapshot handed over in memory): `open` is called once.
[[nodiscard]] ReaderFactory decode_once(const ReaderFactory& open);

// Events a reader has decoded but not validated (JsonlLines), each with the line it came from:
// validated as they are read, as a file's (the header's errors name `header_line`).
[[nodiscard]] std::unique_ptr<TraceReader> make_decoded_reader(std::string name,
                                                               std::shared_ptr<const std::vector<Event>> events,
                                                               nlohmann::json header, std::uint64_t header_line,
                                                               const ReaderOptions& opt);
// Whether reading `path` holds the whole trace in memory anyway (snapshots, captures, modules):
// decode_once then costs no more memory than one read.
[[nodiscard]] bool decodes_whole(const std::string& path);

// An allocation the trace does not hold: the request a program failed on, which an XProf capture
// leaves out (it records the allocations that succeeded).
struct AppendedAlloc {
  std::uint32_t device = 0;
  Bytes size = 0;
  std::string name;
  std::uint64_t before = UINT64_MAX;  // inserted before the event of this index; else after the last
};
// `inner`'s events with each of `allocs` inserted (an id of its own, stream 0, main memory, the
// previous event's time; the events after it are numbered one more), validated again as one trace.
[[nodiscard]] std::unique_ptr<TraceReader> append_allocs(std::unique_ptr<TraceReader> inner,
                                                         std::vector<AppendedAlloc> allocs);

// Opens a trace by extension: .jsonl, .jsonl.zst, .fstrace, .pickle. Throws EnvError/InputError.
[[nodiscard]] std::unique_ptr<TraceReader> open_trace(const std::string& path, const ReaderOptions& opt = {});
// `reader`, counting no progress: a reader of a part of another input (a member of a set, a capture
// beside its memory profile), whose events count once, as the reader that hands them on reads them.
[[nodiscard]] std::unique_ptr<TraceReader> uncounted(std::unique_ptr<TraceReader> reader);

// Limits every reader enforces (docs/trace-format.md): a header of at most 1 MiB nested at most
// 32 deep, an event line of at most 64 MiB.
inline constexpr size_t kMaxHeaderBytes = 1 << 20, kMaxHeaderDepth = 32, kMaxLineBytes = size_t{64} << 20;

// Validates a header object (fragsim_trace == 1, time_unit); throws InputError(file:line).
void check_header(const nlohmann::json& h, const std::string& file, std::uint64_t line);
// Parses and validates a header within the limits above; throws InputError(file:line).
[[nodiscard]] nlohmann::json parse_header(std::string_view text, const std::string& file, std::uint64_t line);

}  // namespace fragsim

// JSONL trace v1 reader and writer (specs/contracts.md §1).
#pragma once
#include <memory>
#include <string>

#include "traces/trace_reader.h"
#include "traces/trace_writer.h"

namespace fragsim {

std::unique_ptr<TraceReader> make_jsonl_reader(const std::string& path, const ReaderOptions& opt);

// A JSONL trace handed over line by line instead of as a file (the Python module writes each
// event dict of an iterable as one line): line i (from 1) is read exactly as line i of a file
// named `name` — the same checks, the same messages ("NAME:i: key: what"), a first non-blank
// line with "fragsim_trace" as the header. Lines are decoded as they are added; reader() replays
// the events (validated as a file's are as they are read: times, live ids, --lenient) as often as
// asked. Memory O(events).
class JsonlLines {
 public:
  explicit JsonlLines(const std::string& name);
  ~JsonlLines();
  JsonlLines(const JsonlLines&) = delete;
  JsonlLines& operator=(const JsonlLines&) = delete;

  // Decodes the next line (without its '\n'). Throws InputError("NAME:LINE: key: what").
  void add(std::string_view line);
  std::uint64_t lines() const;  // added so far
  // The lines added, as a trace (the lines move into it: `std::move(lines).reader(opt)`).
  [[nodiscard]] ReaderFactory reader(const ReaderOptions& opt) &&;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
std::unique_ptr<TraceWriter> make_jsonl_writer(const std::string& path, const nlohmann::json& header);

// Appends the JSON string literal of s (quotes and escapes) to out.
void append_json_string(std::string& out, std::string_view s);

}  // namespace fragsim

// TraceWriter: writes Events in one format; the output appears only on finish() (atomic).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/base/event.h"

namespace fragsim {

class TraceWriter {
 public:
  virtual ~TraceWriter() = default;
  virtual void write(const Event& ev) = 0;
  virtual void finish() = 0;  // commit the file
};

// By extension: .jsonl, .jsonl.zst, .fstrace. header may be null (no header line).
std::unique_ptr<TraceWriter> open_trace_writer(const std::string& path, const nlohmann::json& header);

// `fragsim convert`: every event of `in` (any readable format; with `module`, that XLA module's
// heap trace from a capture) written to `out` (.jsonl, .jsonl.zst, .fstrace). Returns the count.
std::uint64_t convert_trace(const std::string& in, const std::string& out, const std::string& module, bool lenient);

}  // namespace fragsim

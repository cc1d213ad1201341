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

}  // namespace fragsim

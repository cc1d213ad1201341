// JSONL trace v1 reader and writer (specs/contracts.md §1).
#pragma once
#include <memory>
#include <string>

#include "traces/trace_reader.h"
#include "traces/trace_writer.h"

namespace fragsim {

std::unique_ptr<TraceReader> make_jsonl_reader(const std::string& path, const ReaderOptions& opt);
std::unique_ptr<TraceWriter> make_jsonl_writer(const std::string& path, const nlohmann::json& header);

// Appends the JSON string literal of s (quotes and escapes) to out.
void append_json_string(std::string& out, std::string_view s);

}  // namespace fragsim

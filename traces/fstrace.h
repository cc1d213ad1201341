// .fstrace: compact binary form of trace v1, lossless for every key of the contract.
//
//   file    = "FSTRACE" 0x01, varint(len), header JSON (len bytes; 0 = no header), record*, end
//   record  = u8 op, varint present (key::* bits), then the present fields in this order:
//             id, size, t as the delta from the previous event's time, stream (zigzag), device,
//             u8 space, name (varint len + bytes), shape (varint rank + varints), u8 dtype, addr,
//             stack, block_size, frames (varint count, then varint len + bytes each); pre_trace and
//             aggregate are their bits alone
//   end     = u8 0xFF, varint event count  (a file without it is reported as truncated)
// Errors name the record number as the "line".
#pragma once
#include <memory>
#include <string>

#include "traces/trace_reader.h"
#include "traces/trace_writer.h"

namespace fragsim {

std::unique_ptr<TraceReader> make_fstrace_reader(const std::string& path, const ReaderOptions& opt);
std::unique_ptr<TraceWriter> make_fstrace_writer(const std::string& path, const nlohmann::json& header);

}  // namespace fragsim

// PyTorch memory snapshot (`torch.cuda.memory._dump_snapshot`) → fragsim events
// (specs/torch-caching.md §8). Both the PyTorch 2.0-era format (no time_us) and current ones.
//
//   alloc            → alloc (id, size = requested, addr = recorded address, stream, device)
//   free_completed   → free (the block returns to the allocator here)
//   free_requested, segment_alloc/free/map/unmap, oom → observation events
//   snapshot         → mark
// Ring-buffer start: blocks live before recording began (frees of unknown addresses, and blocks
// still allocated at the dump that the trace never allocated) are synthesised as allocs at the
// start, in address order, marked pre_trace. Segments that existed before the first traced
// segment_alloc (final segments never traced, and segments freed before being traced) are
// emitted first as segment_alloc observations marked pre_trace, so that a policy can seed
// them (torch-caching does) and replay the recorded addresses.
#pragma once
#include <memory>
#include <string>

#include "traces/pickle.h"
#include "traces/trace_reader.h"

namespace fragsim {

// Decoding is most of the cost of a replay from a pickle: while a KeepConversions lives
// (traces/kept_conversions.h), a file is decoded once and its readers share the events (80 bytes each).
std::unique_ptr<TraceReader> make_torch_snapshot_reader(const std::string& path, const ReaderOptions& opt);

// A snapshot already parsed (the objects of `torch.cuda.memory._snapshot()` handed over by the
// Python module, as a pickle's would be): read exactly as the file, named `name` in messages.
// The reader converts the whole document when it is made; `doc` may go once it returns.
std::unique_ptr<TraceReader> make_torch_snapshot_reader_from(const std::string& name, const PickleDoc& doc,
                                                             const ReaderOptions& opt);

}  // namespace fragsim

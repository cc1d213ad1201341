// PyTorch profiler traces (Kineto's Chrome trace JSON, `torch.profiler.profile(profile_memory=True)`)
// → fragsim events (docs/importers.md, "PyTorch profiler traces"; the format: specs/kineto.md).
//
//   input      a trace file (`.json`, `.json.gz`, `.json.zst`), read whole (decompressed) and walked
//              once with simdjson's On Demand API: only memory events and operator spans are kept;
//              a TensorBoard log directory (`tensorboard_trace_handler`'s `<worker>.<ns>.pt.trace.json`,
//              at any depth): one run, else an input error listing the runs; the workers of one
//              run are a set of recordings (traces/recording_set.h), as are files joined by commas;
//   order      `[memory]` events sorted by `ts`, stably (threads are written one after the other);
//              `t` in ns since the epoch: `baseTimeNanoseconds` + ts × 1000 when the file has the
//              base (fractional µs after it), else ts × 1000 (whole µs since the epoch);
//   devices    Device Type 1 (CUDA) and 6 (HIP): device `Device Id`, hbm; Device Type 0 (CPU):
//              space host of the trace's first GPU device, without addresses (glibc's choices,
//              which no allocator model reproduces), with no limit (Recording::host_unbounded);
//              other device types are counted, not imported;
//   events     Bytes > 0: alloc (fresh id, size = Bytes, addr); Bytes < 0: free of the block live
//              at Addr; a free of an address the window never allocated: a pre_trace alloc first;
//              after each device event, the recorded Total Reserved as a `reserved` observation;
//              Total Reserved growing at an allocation: segment_alloc (Addr, growth) before it;
//              falling: empty_cache before it (named kReleaseMaybeRetry where the allocator's
//              own retry may have released it), then at an allocation the segment it obtained;
//   before     the segments and live blocks the window began with (traces/kineto_layout.h), as
//              pre_trace segment_alloc and alloc events, as a PyTorch snapshot's are;
//   names      the innermost `cpu_op` / `user_annotation` span enclosing the event on its thread;
//              with `with_stack=True` the enclosing `python_function` spans form its stack;
//   header     source "kineto"; recorded_hardware from deviceProperties (model, totalGlobalMem,
//              compute capability); per device the window's state before it and the inference's
//              figures; `rank` from distributedInfo.
// A file without `[memory]` events is refused with one line saying how to record them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "traces/trace_reader.h"

namespace fragsim {

// A Kineto trace file (by name, or a `.json` whose first bytes are a Chrome trace's), or a folder
// holding `*.pt.trace.json[.gz]` files at some depth.
[[nodiscard]] bool is_kineto_path(const std::string& path);
// Whether a file is one (the test for members of a set of recordings).
[[nodiscard]] bool is_kineto_file(const std::string& path);
// The trace files a path names: itself, or the files of the one run under a folder (InputError
// when none, several runs, or one worker's several profiles).
[[nodiscard]] std::vector<std::string> kineto_trace_files(const std::string& path);
[[nodiscard]] std::unique_ptr<TraceReader> make_kineto_reader(const std::string& path, const ReaderOptions& opt);

}  // namespace fragsim

// XProf profiler captures (`*.xplane.pb`, an XSpace protobuf, traces/proto/xplane.proto) → fragsim
// events (docs/importers.md, "XProf captures").
//
// While a capture is on, XLA's and TensorFlow's device allocators log every call as a
// MemoryAllocation / MemoryDeallocation event on a host-plane line, with stats: allocator_name
// (GPU_0_bfc, xla_gpu_host_bfc, ...) or, on TPU, index_on_host; addr; requested_bytes;
// allocation_bytes; bytes_allocated / bytes_reserved / bytes_available after the call; and where
// the framework knows them tf_op, shape, data_type, region_type.
//
//   events     ordered by the line's timestamp plus the event's offset (the offset alone
//              misorders events across lines), ties in file order;
//   devices    GPU_N_bfc / index_on_host N → device N, hbm; GPU_collectivememory_N_bfc →
//              device N, collective; *_host_bfc → device 0, host (pinned host memory);
//   alloc      id (fresh), size = requested_bytes, block_size = allocation_bytes, addr, name =
//              tf_op (with region_type), shape and dtype from the shape stat;
//   mid-run    a free of an address the capture never allocated was live before it began: it is
//              emitted first as a pre_trace alloc at that address (size from allocation_bytes or
//              the step of bytes_allocated); live bytes the capture never frees nor allocates are
//              one pre_trace alloc without an address, so that allocated memory starts where the
//              program was;
//   header     source "xprof"; per device the allocator's limit (bytes_available +
//              bytes_reserved + bytes_allocated), its mode as the addresses show it (one
//              preallocated region, or regions obtained on demand), the device plane's vendor,
//              memory size and model; recorded_hardware names the matching preset (and, where
//              device planes report other memory sizes, each device's own); recorded_by the
//              framework (TensorFlow when its op annotations are there, else JAX) and platform.
// A path may be a capture, a `.zst`-compressed one, or a profile run directory holding one
// capture per host (`plugins/profile/<run>/`); hosts after the first number their devices on, and
// each host's devices and allocators carry its name (`nodeB:0`, `nodeB/GPU_0_bfc`).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "traces/trace_reader.h"

namespace fragsim {

// A capture's name, or a folder (a profile log directory, at any depth).
[[nodiscard]] bool is_xprof_path(const std::string& path);
// The profile run folder under `dir` that holds the captures: dir itself when it does, else the
// one folder below (at most 6 levels, links not followed) that does; InputError naming the
// candidates when there are several, or none.
[[nodiscard]] std::string find_profile_run(const std::string& dir);
// The hardware preset of a TPU as a device plane names it ("TPU v6 Lite" → "tpu-v6e"), or "".
[[nodiscard]] std::string tpu_preset(std::string_view model);
[[nodiscard]] std::unique_ptr<TraceReader> make_xprof_reader(const std::string& path, const ReaderOptions& opt);

}  // namespace fragsim

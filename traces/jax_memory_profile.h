// JAX device memory profiles (`jax.profiler.save_device_memory_profile("memory.prof")`) → fragsim
// events (docs/importers.md, "JAX device memory profiles").
//
// The file is a gzipped pprof Profile (traces/proto/profile.proto) that jaxlib builds from the
// arrays and executables alive when it is taken (PyClient::HeapProfile): one sample per group of
// live buffers that share a size, a device and a Python traceback, with the values (buffers,
// bytes) and the labels kind = "buffer" and device = the device's name ("cuda:0", "rocm:1",
// "TPU_3(process=0,(1,1,0,0))", "TFRT_CPU_0"); compiled executables are samples of kind
// "executable" without a device (their generated code).
//
//   buffers   each buffer of a sample: a pre_trace alloc of bytes / buffers (its size on the device:
//             jaxlib's GetOnDeviceSizeInBytes, already padded on TPU, so replay pads nothing:
//             header device_sizes), no address; device N of the name's trailing number; space
//             hbm, or host for a CPU device;
//   stacks    the traceback's frames, leaf first, as "file:line function"; the buffer's name is
//             the innermost frame outside JAX's own packages;
//   header    source "jax-memory-profile", state_only (nothing happens after the moment), per device
//             its buffers and bytes, and the executables' count and code bytes.
// Refused (input error, one line): a file that does not decompress or parse, or a profile without
// the ("space", "bytes") sample type JAX writes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "traces/trace_reader.h"

namespace fragsim {

// `*.prof` / `*.prof.gz` (JAX's name in its documentation; the content is gzipped either way).
[[nodiscard]] bool is_jax_memory_profile_path(const std::string& path);
[[nodiscard]] std::unique_ptr<TraceReader> make_jax_memory_profile_reader(const std::string& path,
                                                                          const ReaderOptions& opt);

}  // namespace fragsim

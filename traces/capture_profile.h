// An XProf capture with a JAX device memory profile taken when it began (docs/importers.md, "A
// memory profile as the state before a capture"): `fragsim run CAPTURE PROFILE.prof`, or the two
// joined by a comma, in either order.
//
// A capture that starts mid-run states the bytes live before it (bytes_allocated) and the
// addresses of the earlier buffers it frees; the rest is one pre-trace allocation without an
// address (traces/xprof_capture.h). jax.profiler.save_device_memory_profile at that moment lists
// the buffers that memory is made of: their on-device sizes, devices and Python tracebacks
// (traces/jax_memory_profile.h). Per device (hbm):
//   recorded   an earlier buffer the capture frees at an address takes the stack and name of the
//              profile buffer of its size (BFC's 256 B chunk: the profile's size rounded up);
//   unknown    the capture's allocation without an address becomes the profile's other buffers,
//              the largest first, while their chunks fit in its bytes; what they do not cover
//              stays one allocation as before ("not in the profile");
//   left out   profile buffers beyond the capture's live bytes (the profile was taken at another
//              moment, or the memory is not the capture's): counted in the header, not replayed.
// Buffers of a CPU device (host memory of the CPU client, not the GPU's pinned host BFC) are left
// out too. Ids continue after the capture's; the profile's stacks are defined before their first
// use. The header is the capture's, with `pre_trace_profile` saying per device what was matched.
// Replay then holds those buffers as it holds any pre-trace state (docs/report.md, "Before the
// recording"): as recorded, in the extents the capture's addresses imply (one share each,
// sim/engine/recording_anchor.h); re-held under a what-if, one request per buffer.
#pragma once
#include <memory>
#include <string>

#include "traces/trace_reader.h"

namespace fragsim {

// "CAPTURE,PROFILE.prof" (either order): an XProf capture (file or profile directory) and a JAX
// memory profile.
[[nodiscard]] bool is_capture_with_profile(const std::string& path);
[[nodiscard]] std::unique_ptr<TraceReader> make_capture_with_profile_reader(const std::string& path,
                                                                            const ReaderOptions& opt);

}  // namespace fragsim

// The trace header as a Recording (sim/base/recording.h): the header is the Recording's
// serialised form — importers write these keys, every reader reads them back here, once — so a
// capture converted to JSONL or .fstrace carries the same recording as the capture itself.
//
//   source              "torch-snapshot" | "kineto" | "xprof" | "xla-hlo" | "jax-memory-profile" | "fragsim gen"
//                       (else a plain trace)
//   allocator_settings  a PyTorch snapshot's allocator_settings (max_split_size, expandable_segments,
//                       garbage_collection_threshold, roundup_power2_divisions)
//   recorded_devices    [{device, usable_bytes, basis}]: usable memory inferred from the recording
//   xprof.allocators    [{allocator, device, space, limit_bytes, mode: single_region|grow}]
//   recorded_hardware   {preset, capacity_bytes, basis, devices: [{device, capacity_bytes, basis}] (a set's)}
//   recorded_by         {framework: "JAX"|"TensorFlow"|"PyTorch", platform: "CUDA"|"ROCm"|"TPU", basis}:
//                       whose allocator logged the events, and on which platform (sim/base/framework.h)
//   alignment_bytes     (source xla-hlo) the alignment of every buffer
//   device_sizes        (xla-hlo, jax-memory-profile) sizes are the device's own, already padded
//   state_only          a snapshot without a trace
//   rank                the process's rank in its job (a Kineto trace's distributedInfo)
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/base/recording.h"

namespace fragsim {

// Reads the keys above; a malformed one is an InputError naming the file, the header's line and the key. Values a
// recording may legitimately leave out (a setting, a limit) are simply absent.
[[nodiscard]] Recording recording_from_header(const nlohmann::json& header, const std::string& file,
                                              std::uint64_t line = 0);

// The advice for a capture in which no allocator logged anything (info and reports).
[[nodiscard]] std::string no_allocator_events_hint();

// The header in words, one line each (fragsim info): who recorded the trace, the settings and
// limits it recorded, per allocator what an XProf capture logged; keys this build does not know
// are named, never dumped.
[[nodiscard]] std::vector<std::string> describe_header(const nlohmann::json& header);

}  // namespace fragsim

// What a snapshot's device trace tells about the device's usable memory (specs/torch-caching.md
// §3, §5): the most it held, a failed cudaMalloc (the allocator released its cache and retried
// inside a malloc), and the free memory a recorded oom reported; and which runs of segment
// releases were the program's empty_cache() calls.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "traces/torch_snapshot_parse.h"

namespace fragsim::torch_snapshot {

// A recorded oom the device had room for: the allocator's own cap refused it (a per-process
// memory fraction). cap ≥ every reserved + segment a successful growth reached, and < reserved +
// segment at the refusal; the least such cap is kept.
struct Refusal {
  size_t entry = 0;       // the oom's position in the device trace
  Bytes request = 0;      // the segment it asked for (segment_size of the rounded request)
  Bytes device_free = 0;  // cudaMemGetInfo's free then
  Bytes cap = 0;          // the least cap that lets every recorded growth through
};

struct DeviceBounds {
  Bytes peak_reserved = 0;         // lower bound: it held this much
  std::optional<Bytes> upper;      // a failed cudaMalloc: usable < reserved + request
  std::optional<Bytes> at_oom;     // reserved + cudaMemGetInfo's free at a recorded oom
  std::optional<Refusal> refused;  // the first recorded oom the allocator refused itself
  std::uint64_t retries = 0, empty_caches = 0;
};

// What each entry of a device trace is preceded by.
struct Releases {
  std::vector<bool> empty_cache_before;  // the program's empty_cache() call: a run of releases starts here
  std::vector<bool> request_before;      // the failed request of a recorded oom belongs here
};

// Reads one device trace: `reserved` the memory held before its first entry (prior segments and
// mapped ranges), `expandable` whether the device used expandable segments, `settings` the
// snapshot's allocator_settings (releases of max_split_size or GC can explain a burst too).
[[nodiscard]] Releases read_releases(const std::vector<Entry>& es, Bytes reserved, bool expandable,
                                     const nlohmann::json& settings, DeviceBounds* bounds);

// The header's recorded_devices entry of a device whose bounds say something (upper or at_oom);
// `oom_event` is the refused request's event in the trace (when b.refused).
[[nodiscard]] nlohmann::json bounds_json(std::uint32_t device, const DeviceBounds& b, std::uint64_t oom_event = 0);

}  // namespace fragsim::torch_snapshot

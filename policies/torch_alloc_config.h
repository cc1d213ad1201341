// PyTorch's allocator configuration, as c10/cuda/CUDAAllocatorConfig.cpp reads it
// (specs/torch-caching.md §2–§6): PYTORCH_CUDA_ALLOC_CONF, a snapshot's recorded
// allocator_settings, and the size arithmetic that depends on them (round_size, alloc_size) and
// PyTorch's own size formatter (format_size, as its OOM message prints sizes).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/base/recording.h"
#include "sim/base/torch_sizes.h"
#include "sim/base/units.h"

namespace fragsim {

namespace torch {

inline constexpr int kIntervals = 16;

struct Config {
  Bytes max_split_size = kTooLarge;  // kTooLarge: not set
  Bytes max_non_split_rounding = kLargeBuffer;
  double gc_threshold = 0;
  std::uint64_t divisions[kIntervals] = {};
  bool expandable = false;
  double memory_fraction = 0;            // set_per_process_memory_fraction; 0 = not set
  std::uint64_t stream_event_delay = 0;  // ticks until a record_stream free completes

  // Request rounding: 512 B, or the power-of-2 divisions of the request's interval.
  Bytes round_size(Bytes n) const;
  // The segment a miss asks the device for: 2 MiB (small), 20 MiB (< 10 MiB), else r to 2 MiB.
  static Bytes alloc_size(Bytes r);
};

// Parses PYTORCH_CUDA_ALLOC_CONF into c, with PyTorch's tokenizer and messages. Throws InputError.
void parse_alloc_conf(const std::string& conf, Config& c);
// A snapshot's allocator_settings (the effective configuration when it was recorded).
void apply_recorded_settings(const RecordedTorchSettings& s, Config& c);
// The configuration as PYTORCH_CUDA_ALLOC_CONF would state it: every key that differs from
// PyTorch's default, in PyTorch's syntax ("expandable_segments:True,max_split_size_mb:256"); "" when none.
std::string alloc_conf_text(const Config& c);
// The key:value parts of a PYTORCH_CUDA_ALLOC_CONF text, split on the commas outside brackets
// ("roundup_power2_divisions:[256:1,512:2]" is one part), and a part's key.
std::vector<std::string> conf_parts(const std::string& conf);
std::string conf_key(const std::string& part);
// The configuration as a snapshot records it (torch.cuda.memory._snapshot()["allocator_settings"],
// specs/torch-caching.md §8): PYTORCH_CUDA_ALLOC_CONF, max_split_size (-1: not set),
// garbage_collection_threshold, expandable_segments, roundup_power2_divisions per interval ("1" …
// "32768" MiB), and the pinned-memory keys at PyTorch's defaults. apply_recorded_settings reads it back.
nlohmann::json snapshot_settings(const Config& c);
// PyTorch's format_size: "512 bytes", "1.50 KiB", "20.00 MiB", "3.72 GiB".
std::string format_size(Bytes b);

}  // namespace torch

}  // namespace fragsim

// Recording: what a trace says about the run that produced it — which tool recorded it, the
// allocator settings in force, each device's usable memory and each allocator's limit and mode,
// the hardware, the alignment XLA gave its buffers (architecture.md: "a typed Recording").
//
// Readers (traces/) fill it; policies, the engine and the command line read these fields and
// never the importers' header keys. The trace header is its serialised form (traces/recording_header.h
// reads it back), so a capture converted to JSONL or .fstrace replays as the capture does, and
// reports keep the header as data.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/framework.h"
#include "sim/base/units.h"

namespace fragsim {

enum class RecordingSource : std::uint8_t {
  kPlain,             // a fragsim trace with no recording behind it (hand-written, converted without a source)
  kGenerated,         // fragsim gen
  kTorchSnapshot,     // torch.cuda.memory._snapshot() / _dump_snapshot()
  kXprof,             // an XProf (JAX / TensorFlow profiler) capture with allocator events
  kXlaHlo,            // XLA's compile-time heap-simulator trace of one module
  kKineto,            // a PyTorch profiler (Kineto) trace with memory events (profile_memory=True)
  kJaxMemoryProfile,  // jax.profiler.save_device_memory_profile(): the buffers live at one moment
};

// A recorded OOM that the device did not cause: the free memory the driver reported with it would
// have held the request, so the allocator refused it itself (PyTorch: under a per-process memory
// fraction). The cap it enforced is at least what the recording held; that least value is kept.
struct RecordedAllocatorCap {
  Bytes cap = 0;                // the most reserved memory the recording held (or asked for, when it grew)
  Bytes request = 0;            // the segment the refused request asked for
  Bytes device_free = 0;        // what cudaMemGetInfo reported free then
  std::uint64_t oom_event = 0;  // the refused request's event in the trace
};

// Usable memory of one device as the recording shows it (a recorded OOM, OOM retries).
struct RecordedDeviceMemory {
  std::uint32_t device = 0;
  Bytes usable = 0;
  std::string basis;                        // how it was inferred, in words
  std::optional<RecordedAllocatorCap> cap;  // the allocator refused a request the device had room for
};

// One allocator instance a capture logged (XLA's BFC on a device and memory space).
struct RecordedAllocator {
  enum class Mode : std::uint8_t { kUnknown, kSingleRegion, kGrow };
  std::string name;  // as logged, e.g. "GPU_0_bfc"
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  std::optional<Bytes> limit;  // bytes_allocated + bytes_available + bytes_reserved, as logged
  Mode mode = Mode::kUnknown;  // one preallocated region, or regions obtained on demand
  Bytes live_before = 0;       // bytes live when the capture began
};

// The memory one device of a set of recordings reported, in its own recording.
struct RecordedDeviceCapacity {
  Bytes capacity = 0;
  std::string basis;  // what in its recording says so
};

// The device a recording names.
struct RecordedHardware {
  std::string preset;              // the closest hardware preset ("tpu-v6e", "h100-80g")
  std::optional<Bytes> capacity;   // the memory the device reported, when it differs from the preset's
  std::string basis;               // what in the recording says so
  std::string compute_capability;  // an NVIDIA or AMD GPU's, as its device plane states it ("7.5"; "": unstated)
  // A set of recordings: each device's memory as its own recording reports it (a T4 rank beside an
  // A100 one), where the set's devices differ; the preset is the first recording's.
  std::map<std::uint32_t, RecordedDeviceCapacity> devices;
  // The memory `device` reported: its own where the devices differ, else the recording's.
  std::optional<Bytes> capacity_of(std::uint32_t device) const {
    auto it = devices.find(device);
    return it != devices.end() ? std::optional<Bytes>(it->second.capacity) : capacity;
  }
};

// A PyTorch snapshot's allocator_settings (the effective CUDACachingAllocator configuration).
struct RecordedTorchSettings {
  std::optional<Bytes> max_split_size;
  std::optional<double> garbage_collection_threshold;
  std::optional<bool> expandable_segments;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> roundup_power2_divisions;  // (interval in MiB, divisions)
  // Settings the snapshot shows without stating them (an older snapshot's expandable segments), and
  // what shows them; "" when every setting above was stated.
  std::string inferred;
};

struct Recording {
  RecordingSource source = RecordingSource::kPlain;
  // The framework whose allocator logged it, where the recording shows it (an XProf capture:
  // TensorFlow's allocator events name their ops); kUnknown leaves it to the source (framework_of()).
  Framework recorded_by = Framework::kUnknown;
  std::string recorded_by_basis;           // what in the recording says so
  Platform platform = Platform::kUnknown;  // the devices' platform, where the recording names their vendor
  std::optional<RecordedTorchSettings> torch_settings;
  // A set of recordings whose members recorded other settings than the first: each such device's
  // own (nullopt: its snapshot states none). Each rank's allocator was configured by its own process.
  std::map<std::uint32_t, std::optional<RecordedTorchSettings>> device_torch_settings;
  std::vector<RecordedDeviceMemory> devices;
  std::vector<RecordedAllocator> allocators;
  std::optional<RecordedHardware> hardware;
  std::optional<Bytes> alignment;                     // the alignment every buffer had (XLA:GPU modules: 256 B)
  std::map<std::uint32_t, Bytes> alignments;          // per device, where it differs (an XLA module's heap traces)
  bool device_sizes = false;                          // sizes are the device's own (an XLA module's: already padded)
  bool state_only = false;                            // a snapshot without a trace: nothing happened while recording
  std::map<std::uint32_t, std::string> device_names;  // "rank 3", "host1:0": a set of recordings, a profile folder
  std::optional<std::uint32_t> rank;  // the process's rank in a distributed job (Kineto's distributedInfo)
  // A set of recordings (the header's `recording_set`: one job's ranks, a profile directory's
  // hosts): the member whose process used each device. Each member is its own process, whose
  // allocator runs out on its own; empty: one process used every device.
  std::map<std::uint32_t, std::uint32_t> device_process;
  std::uint32_t processes = 1;  // how many members (at least one)
  // The most device memory each device's allocator held at once, as the recording states it (a
  // profiler trace's Total Reserved): the device had at least that much to give.
  std::map<std::uint32_t, Bytes> held_at_most;

  // Whether its host space is memory no limit of the recording bounds: a profiler trace's CPU
  // tensors (Device Type 0) are PyTorch's CPU allocator's — malloc and free per tensor, no cache and
  // no cap of its own — bounded only by the host's RAM, which the trace does not record. (A hardware
  // preset's host space is a framework's pinned pool, XLA's host BFC: not this memory.)
  bool host_unbounded() const { return source == RecordingSource::kKineto; }
  // The process that used device d (0 in a single recording; a set's devices its members do not
  // name — none in a set fragsim wrote — are one more process, `processes`).
  std::uint32_t process_of(std::uint32_t d) const {
    if (device_process.empty()) return 0;
    auto it = device_process.find(d);
    return it != device_process.end() ? it->second : processes;
  }
  // The settings device d's allocator recorded: its own in a set whose members differ, else the recording's.
  const RecordedTorchSettings* torch_settings_of(std::uint32_t d) const {
    if (auto it = device_torch_settings.find(d); it != device_torch_settings.end())
      return it->second ? &*it->second : nullptr;
    return torch_settings ? &*torch_settings : nullptr;
  }
  // The alignment every buffer of device d had, when the recording says.
  std::optional<Bytes> alignment_of(std::uint32_t d) const {
    if (auto it = alignments.find(d); it != alignments.end()) return it->second;
    return alignment;
  }
  const RecordedDeviceMemory* device(std::uint32_t d) const {
    for (const auto& x : devices)
      if (x.device == d) return &x;
    return nullptr;
  }
  const RecordedAllocator* allocator(std::uint32_t d, Space sp) const {
    for (const auto& a : allocators)
      if (a.device == d && a.space == sp) return &a;
    return nullptr;
  }
  // The framework that recorded it: as the recording says, else as its kind implies (a snapshot is
  // PyTorch's; a capture is JAX's unless it shows TensorFlow); kUnknown when nothing says.
  Framework framework_of() const {
    if (recorded_by != Framework::kUnknown) return recorded_by;
    switch (source) {
      case RecordingSource::kTorchSnapshot:
      case RecordingSource::kKineto:
        return Framework::kPyTorch;
      case RecordingSource::kXprof:
      case RecordingSource::kJaxMemoryProfile:
        return Framework::kJax;
      default:
        return Framework::kUnknown;
    }
  }
  // Whether settings of framework f could have configured the allocator that made it: an XLA
  // module's heap trace, or a capture that does not say, may be JAX's or TensorFlow's.
  bool may_be_from(Framework f) const {
    if (recorded_by != Framework::kUnknown) return f == recorded_by;
    switch (source) {
      case RecordingSource::kTorchSnapshot:
      case RecordingSource::kKineto:
        return f == Framework::kPyTorch;
      case RecordingSource::kJaxMemoryProfile:
        return f == Framework::kJax;
      case RecordingSource::kXprof:
      case RecordingSource::kXlaHlo:
        return f == Framework::kJax || f == Framework::kTensorFlow;
      default:
        return true;
    }
  }
  // The framework that recorded it, as users name it ("" when the trace does not say).
  std::string framework() const { return std::string(framework_name(framework_of())); }
  // How reports name the source ("a PyTorch memory snapshot").
  std::string what() const {
    switch (source) {
      case RecordingSource::kTorchSnapshot:
        return "a PyTorch memory snapshot";
      case RecordingSource::kKineto:
        return "a PyTorch profiler trace";
      case RecordingSource::kXprof:
        return recorded_by == Framework::kTensorFlow ? "an XProf capture of TensorFlow" : "an XProf capture";
      case RecordingSource::kXlaHlo:
        return "an XLA module's heap trace";
      case RecordingSource::kJaxMemoryProfile:
        return "a JAX device memory profile";
      case RecordingSource::kGenerated:
        return "a generated trace";
      default:
        return "a fragsim trace";
    }
  }
};

}  // namespace fragsim

// Event: one line of a fragsim trace v1 (specs/contracts.md §1), as every reader produces it.
//
// Readers fill one reusable Event at a time (streaming; strings and shapes keep their capacity).
// `present` records which optional keys the source carried, so that writers reproduce the trace
// losslessly and defaults (t = event_index, stream 0, device 0, space hbm) stay defaults.
// `handle` is filled by the reader's LiveTable for alloc and free: a dense index of the live
// allocation (recycled after its free), with `live_size`/`live_space` of the matching alloc on a free.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

enum class Op : std::uint8_t {
  kAlloc,
  kFree,
  kMark,
  // Observations: what the recording allocator/driver did. Replay never depends on them.
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kFreeRequested,
  kOom,
  // Program actions and metadata (appended: .fstrace stores op codes).
  kEmptyCache,  // the program asked the allocator to release its cache (torch.cuda.empty_cache())
  kStack,       // defines stack `id` as `frames`, for allocs that name it (`stack`)
  // The recording allocator's reserved memory on `device` after the event before it (`size`
  // bytes: a profiler trace's Total Reserved). An observation: replay never depends on it.
  kReserved,
  kCount
};
std::string_view op_name(Op op);
[[nodiscard]] bool parse_op(std::string_view s, Op* out);
inline bool is_observation(Op op) { return op >= Op::kSegmentAlloc && op <= Op::kOom; }
// The `name` of an `empty_cache` whose cause the recording leaves open: a release of the cache that
// may be the program's call or the allocator's own retry after a failed cudaMalloc (a profiler
// trace's Total Reserved falling where it obtains a segment the device may not have held).
inline constexpr std::string_view kReleaseMaybeRetry =
    "empty_cache, or the allocator's retry after a failed cudaMalloc";

enum class Dtype : std::uint8_t {
  kNone,
  kF32,
  kF16,
  kBf16,
  kF64,
  kS8,
  kU8,
  kS16,
  kU16,
  kS32,
  kU32,
  kS64,
  kU64,
  kPred,
  kF8e4m3,
  kF8e5m2,
  kS4,
  kU4,
  kC64,
  kC128,
  kCount
};
std::string_view dtype_name(Dtype d);
// Its NumPy name ("float32", "bfloat16", "bool"; "" for kNone).
std::string_view numpy_dtype_name(Dtype d);
// XLA names (f32, bf16, s8, pred, ...) and their NumPy/JAX names (float32, bfloat16, int8, bool, ...).
[[nodiscard]] bool parse_dtype(std::string_view s, Dtype* out);
int dtype_bits(Dtype d);
// Unpadded bytes of an array: product of dims × element bits, rounded up to a byte as a whole.
// Returns false on overflow.
[[nodiscard]] bool unpadded_bytes(const std::vector<std::uint64_t>& shape, Dtype d, Bytes* out);

namespace key {  // bits of Event::present
inline constexpr std::uint16_t kId = 1, kSize = 2, kT = 4, kStream = 8, kDevice = 16, kSpace = 32, kName = 64,
                               kShape = 128, kDtype = 256, kAddr = 512, kPreTrace = 1024, kStack = 2048, kFrames = 4096,
                               kBlockSize = 8192, kAggregate = 16384;
inline constexpr std::uint16_t kAll = 32767;
}  // namespace key

// The fields replay reads for every alloc and free come first; stacks, message lines, names and
// frames follow. Between threads a plain alloc or free travels as a 64-byte PackedEvent
// (sim/engine/parallel_runs.cpp), which must be updated with any field replay reads.
struct Event {
  Op op = Op::kMark;
  std::uint16_t present = 0;  // key::* bits
  Space space = Space::kHbm;
  Dtype dtype = Dtype::kNone;
  Space live_space = Space::kHbm;  // free: space of the allocation it frees (filled by the reader's LiveTable)
  std::uint32_t device = 0;
  Handle handle = kNoHandle;  // alloc: new handle; free: handle of the freed allocation (LiveTable)
  std::uint64_t index = 0;    // event_index: event lines from 0 in file order
  Tick t;                     // trace time unit; = index when absent
  AllocId id;
  Bytes size = 0;  // requested bytes (alloc), segment bytes (observations)
  std::int64_t stream = 0;
  Addr addr;                // recorded address (observation), valid when present & kAddr
  Bytes live_size = 0;      // free: requested size of the allocation it frees (LiveTable)
  std::uint64_t stack = 0;  // alloc: the stack (defined by an earlier `stack` op) that allocated it
  std::uint64_t line = 0;   // 1-based line (or record) number in the source, for messages
  Bytes block_size = 0;     // pre-trace alloc: the block the recording allocator held for it, when known
  std::vector<std::uint64_t> shape;
  std::string name;
  std::vector<std::string> frames;  // stack op: "file:line function", innermost first
  // present & kPreTrace: the allocation (or segment) existed before the recording began; an
  // importer synthesised it from the recorded state, at the recorded address (`pre_trace`).

  bool has(std::uint16_t k) const { return (present & k) != 0; }
};

// Whether `ev` is part of what a recording shows from before it began (a pre_trace alloc or
// observation), and whether it may lie among those events at the trace's start (the stacks and
// marks an importer puts beside them): the first event that may not ends that state
// (sim/engine/prior_state.h; a set of recordings puts every file's first, traces/recording_set.cpp).
inline bool shows_before_recording(const Event& ev) {
  return ev.has(key::kPreTrace) && (ev.op == Op::kAlloc || is_observation(ev.op));
}
inline bool among_before_recording(const Event& ev) {
  return shows_before_recording(ev) || ev.op == Op::kStack || ev.op == Op::kMark;
}

}  // namespace fragsim

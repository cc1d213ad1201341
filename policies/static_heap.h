// static-heap's planner (policies/static_heap.cpp): XLA's GlobalDecreasingSizeBestFitHeap over
// buffers whose lifetimes are all known, exposed so that tests can hold the indexed search to the
// plain one.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/base/limits.h"
#include "sim/base/units.h"

namespace fragsim {

struct HeapBuffer {
  std::uint64_t id;            // alloc event index
  Bytes size;                  // > 0
  std::uint64_t start, end;    // lives over [start, end]
  std::optional<Bytes> fixed;  // placed before planning (a pre_trace buffer's recorded offset)
  std::uint64_t tie = 0;       // the trace's id (an XLA module's: the logical buffer id, XLA's last sort key)
  std::uint64_t duration() const { return end - start; }
  bool operator==(const HeapBuffer&) const = default;
};

struct HeapPlan {
  std::vector<Bytes> offset;  // by the buffer's place in plan_heap's input (a vector, not a map by id: a
                              // replay reads it at every allocation, and copies none of it)
  Bytes heap = 0;             // the highest end
  size_t indexed = 0;         // buffers the BusyIndex placed (kIndexed)
  size_t coarsened = 0;       // times the BusyIndex doubled its time blocks
};

// How each buffer's gap is found: kScan lists every committed buffer overlapping it in time and
// scans them in offset order (XLA's way, the oracle); kIndexed asks a BusyIndex (busy_index.h,
// over time blocks of `time_block` instants), and scans only where the index cannot say (past
// its memory budget, or once a chunk is empty). Both give the same plan.
enum class HeapSearch { kIndexed, kScan };
inline constexpr size_t kHeapTimeBlock = 512;
// A time block length the index chooses from the lifetimes (BusyIndex::block_for: about √ of
// their mean duration, at least 128 instants): the static-heap policy's.
inline constexpr size_t kHeapAutoBlock = 0;

// Places every buffer in order — spatial: (size desc, duration desc, tie, id); temporal: (duration
// desc, size desc, tie, id) — in the smallest free gap that fits among the committed buffers that
// overlap it in time (chunk ends rounded up to `alignment`), the lowest on ties, else above them.
// `steps`, when given, is charged one step per buffer placed, one per committed buffer a scan
// visits, and one per list step and edge instant of an indexed search (the plan_steps limit, sim/base/limits.h: a plan
// that would take minutes is refused).
// True when the spatial and the temporal order place `bufs` in the same sequence (then their plans
// are the same plan) because every buffer has the same size; false otherwise (orders that
// coincide for other sizes are not looked for).
[[nodiscard]] bool same_heap_order(const std::vector<HeapBuffer>& bufs);

[[nodiscard]] HeapPlan plan_heap(std::vector<HeapBuffer> bufs, bool spatial, Bytes alignment,
                                 HeapSearch search = HeapSearch::kIndexed, size_t time_block = kHeapAutoBlock,
                                 LimitCounter* steps = nullptr);

}  // namespace fragsim

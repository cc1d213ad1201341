// Every allocation a run placed, kept compactly while the run goes (issue 51): what the page's
// live-memory chart draws (each allocation stacked on those allocated before it and still live),
// what its entries panel shows (the alloc and free: event, time, stream; sizes; stack or name; the
// address the policy gave and the one the recording had), and what the allocator state at any
// event is built from (the blocks in use then).
//
// Model: per (device, space) slot, columns of LEB128 varints (docs/viewer.md, "Data"), one value
// per record in each column a record uses, so that what repeats across records compresses:
//   alloc records, in allocation order (a record's ordinal is its position):
//     flags (one byte), Δalloc event, zigzag(Δalloc t − Δalloc event), zigzag(Δid − 1), requested,
//     zigzag(block − requested), [zigzag Δaddr] (kHasAddr: from the slot's previous address),
//     [zigzag(recorded − addr)] (kRecorded), [stack] (kStack), [name] (kName), [shape] (kShape),
//     [zigzag stream] (kStream: not 0)
//   free records, in free order, one per allocation freed while the run replayed:
//     ordinal back (allocations of the slot so far − 1 − ordinal), Δfree event,
//     zigzag(Δfree t − Δfree event), zigzag(free stream − alloc stream)
// Δ are from the slot's previous record (events and times never decrease); an untimed trace's
// times are its events, so its time columns are all zeros. An allocation with no free record was
// live when the run ended or stopped.
// Memory: about 10 bytes an allocation plus the live allocations' ordinals; the columns stop
// growing at `budget` bytes (truncated_at() says from which event: the page says so).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/base/event.h"
#include "sim/base/units.h"

namespace fragsim {

class AllocationLog {
 public:
  // flags: placed at an address; the recording's address differs (and follows); live before the
  // recording began; the recording's address is the same; a stack, a name, a shape, a stream follow.
  static constexpr std::uint8_t kHasAddr = 1, kRecorded = 2, kPreTrace = 4, kRecordedSame = 8, kStack = 16, kName = 32,
                                kShape = 64, kStream = 128;
  // The columns, in the order the page reads them.
  enum AllocColumn {
    kFlags,
    kEvent,
    kTime,
    kId,
    kRequested,
    kPad,
    kAddr,
    kRecordedAddr,
    kStackId,
    kNameId,
    kShapeId,
    kStreamId,
    kAllocColumns
  };
  enum FreeColumn { kBack, kFreeEvent, kFreeTime, kFreeStream, kFreeColumns };
  static constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();

  // One allocation as placed (decoded: tests and C++ readers; the page decodes the streams).
  struct Record {
    std::uint32_t slot = 0;
    std::uint64_t ordinal = 0;  // position in its slot's allocation order
    AllocId id;
    std::uint64_t alloc_event = 0, free_event = kNone;  // kNone: live when the run ended or stopped
    Tick alloc_t, free_t;
    Bytes requested = 0, block = 0;
    bool has_addr = false, has_recorded = false, pre_trace = false;
    Addr addr, recorded;                 // placed; the recording's, when it recorded one
    std::uint64_t stack = 0;             // stack id, 0: none
    std::int64_t name = -1, shape = -1;  // indices into names(), shapes()
    std::int64_t stream = 0, free_stream = 0;
  };
  struct Shape {
    Dtype dtype = Dtype::kNone;
    std::vector<std::uint64_t> dims;
  };

  explicit AllocationLog(size_t budget = std::numeric_limits<size_t>::max()) : budget_(budget) {}

  // The allocation `handle` of `slot` was placed (ev: its alloc event). Returns false once the
  // budget is spent (nothing more is kept from then on). A block in several pieces (Placement::pieces)
  // is one record a piece, in address order, each its share of the request, freed together.
  bool placed(std::uint32_t slot, Handle handle, const Event& ev, Bytes block, bool has_addr, Addr addr,
              std::span<const Extent> pieces = {});
  // Times are kept from `t` on (the run's first event: RunResult::first_t), as the page shows them.
  void set_origin(Tick t) { origin_ = t.value(); }
  // The allocation `handle` is freed by event `event` at time t (on `stream`, the free's own when it
  // names one, else its allocation's). No-op for an allocation the log does not hold.
  void freed(Handle handle, std::uint64_t event, Tick t, bool has_stream, std::int64_t stream);

  std::uint32_t slots() const { return static_cast<std::uint32_t>(slots_.size()); }
  std::uint64_t count(std::uint32_t slot) const { return slot < slots_.size() ? slots_[slot].count : 0; }
  const std::string& alloc_column(std::uint32_t slot, AllocColumn c) const { return slots_[slot].alloc[c]; }
  const std::string& free_column(std::uint32_t slot, FreeColumn c) const { return slots_[slot].free[c]; }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<Shape>& shapes() const { return shapes_; }
  // The first event whose allocation was not kept (the budget was spent), kNone when all were.
  std::uint64_t truncated_at() const { return truncated_at_; }
  size_t bytes() const { return bytes_; }

  // Every record of a slot, in allocation order, with its free (decodes the streams).
  [[nodiscard]] std::vector<Record> records(std::uint32_t slot) const;
  // The log as it stood before event `event`: the allocations made before it, the frees before it
  // (what a page too big for its budget keeps: truncated_at() is then `event`).
  [[nodiscard]] AllocationLog cut_before(std::uint64_t event) const;

 private:
  struct Slot {
    std::array<std::string, kAllocColumns> alloc;
    std::array<std::string, kFreeColumns> free;
    std::uint64_t count = 0, frees = 0;
    std::uint64_t last_event = 0, last_free_event = 0;
    std::uint64_t last_t = 0, last_free_t = 0, last_id = 0, last_addr = 0;
  };
  struct Live {
    std::uint32_t slot = 0;
    std::uint64_t ordinal = kNone;  // the first of its records
    std::int64_t stream = 0;
    std::uint32_t pieces = 1;  // records, consecutive ordinals (a block in several pieces)
  };
  // Appends one allocation's record to its slot (ordinal = the slot's count).
  void append_alloc(Slot& s, const Record& r);
  void append_free(Slot& s, std::uint64_t ordinal, std::uint64_t event, Tick t, std::int64_t stream_change);
  Tick since_origin(Tick t) const { return Tick(t.value() - std::min(t.value(), origin_)); }
  std::int64_t intern_name(const std::string& name);
  std::int64_t intern_shape(Dtype dtype, const std::vector<std::uint64_t>& dims);

  size_t budget_, bytes_ = 0;
  std::uint64_t origin_ = 0;  // set_origin
  std::uint64_t truncated_at_ = kNone;
  std::vector<Slot> slots_;
  std::vector<Live> live_;  // per handle, while live
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::int64_t> name_ids_;
  std::vector<Shape> shapes_;
  std::unordered_map<std::string, std::int64_t> shape_ids_;
};

}  // namespace fragsim

// Regions over time (issue 51, "segments over time"): each region a policy held — a PyTorch
// segment or an expandable segment's reservation, a BFC region, a cuda-async pool chunk, a static
// heap, a platform allocation — with when it was obtained and released, what released it, and how
// much of it was mapped and in use along the way.
//
// Model: regions are what the policy's memory_map() lists (the address maps draw the same ones),
// followed per (device, space) slot. The list is read again only when the slot's device calls or
// reserved bytes moved (a region can only come or go with one of them), so a run whose regions do
// not change pays nothing per event. In-use bytes per region follow each placement and free (the
// region holding the block's address), and are recounted from the map whenever it is read, or
// when their sum leaves the policy's allocated bytes (a deferred free the engine did not see).
// Usage points: at each sample event of the history (and when a region comes or goes), one point
// per region whose mapped or in-use bytes changed since its last point.
// Bounds: a run keeps at most kMaxRegions regions and kMaxUsagePoints points, and reads maps of at
// most kMapWork blocks in all; past any of them the log stops (cut_at says from which event, and
// the page says so). A policy that makes every buffer a region of its own (platform) reaches the
// map bound first on long traces.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "sim/base/event.h"
#include "sim/engine/live_set.h"

namespace fragsim {

struct RegionLife {
  std::uint32_t slot = 0;
  int id = -1;  // the policy's obtain order (placements' "region")
  Addr base;
  Bytes size = 0;  // the largest it was (a reservation's address space)
  std::uint64_t obtained_event = 0;
  Tick obtained_t;
  bool pre_trace = false;  // obtained for the state the recording began in
  static constexpr std::uint64_t kHeld = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t released_event = kHeld;  // kHeld: still held when the run ended or stopped
  Tick released_t;
  Op released_by = Op::kMark;  // the op of the event that released it (empty_cache, alloc, free, ...)
  struct Usage {
    std::uint64_t event = 0;
    Bytes mapped = 0, in_use = 0;
  };
  std::vector<Usage> usage;  // event order; the first at its obtain
};

class RegionLog {
 public:
  static constexpr size_t kMaxRegions = 100000, kMaxUsagePoints = 100000;
  static constexpr std::uint64_t kMapWork = 50000000;  // blocks read from maps, in all

  // A block placed or freed at `addr` in `slot`.
  void placed(std::uint32_t slot, Addr addr, Bytes block);
  void freed(std::uint32_t slot, Addr addr, Bytes block);
  // After each event: reads the maps of slots whose regions may have changed; `sample` asks for
  // a usage point of every region that changed.
  void after(const Event& ev, const std::vector<SlotView>& slots, bool sample);
  // Regions still held when the run ended or stopped keep released_event = kHeld.
  [[nodiscard]] std::vector<RegionLife> finish();
  std::uint64_t cut_at() const { return cut_at_; }  // kHeld: nothing was left out

 private:
  struct Live {
    size_t life = 0;  // index into lives_
    Bytes mapped = 0, in_use = 0;
    Bytes last_mapped = 0, last_in_use = 0;  // at its last usage point
  };
  struct SlotTrack {
    std::map<Addr, Live> regions;  // live regions by base
    std::uint64_t calls = 0;
    Bytes reserved = 0, in_use = 0;
    bool seen = false;
  };
  void refresh(std::uint32_t slot, const Event& ev, const SlotView& view);
  void point(Live& r, std::uint64_t event);
  Live* holding(std::uint32_t slot, Addr addr);
  void cut(std::uint64_t event);

  std::vector<SlotTrack> tracks_;
  std::vector<RegionLife> lives_;
  size_t points_ = 0;
  std::uint64_t work_ = 0;
  std::uint64_t cut_at_ = RegionLife::kHeld;
};

}  // namespace fragsim

// RecordingAnchor: the state before a recording began, as the recording's own addresses place
// it, for the replay (docs/importers.md, "Before the capture").
//
// An XProf capture that starts mid-run gives the bytes live before it (bytes_allocated) and the
// addresses of the buffers it frees, but not where the rest of that memory is, nor where the
// allocator's region begins. The importer emits that memory as one pre-trace allocation without
// an address. Before the replay, the anchor reads the whole trace once and, for an allocator
// whose addresses show one preallocated region (header mode "single_region"), places it where
// BFC's rules and every address the trace states put it (traces/recorded_layout.h): the region's
// base, and the extents of that allocation (gaps no buffer of the trace ever occupied, and the
// rest from the base up). The replay then obtains that region first and seeds the allocation in
// those extents, so that absolute recorded addresses can be reproduced, not only offsets.
//
// It reads only what the trace holds: an allocation whose address was removed contributes its
// size (traces/recorded_layout.h, `unplaced`), never an address. Event indices, ids and the
// trace digest are unchanged (nothing is inserted into the event stream).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

#include "policies/policy.h"
#include "traces/trace_reader.h"

namespace fragsim {

class RecordingAnchor {
 public:
  // Whether the header describes state worth inferring (cheap: reads the header only).
  static bool wanted(const nlohmann::json& header);
  // Reads the whole trace once (from a reader of its own) and infers each allocator's layout.
  void learn(TraceReader& reader);

  // For a pre-trace alloc without an address: the extents its bytes occupy (empty: not inferred).
  std::span<const Extent> extents(const Event& ev) const;
  // The first time per (device, space): the region to obtain before seeding anything there.
  std::optional<Observation> take_region(std::uint32_t device, Space space);
  // Per allocator: what the recording stated and what was inferred (null when nothing).
  nlohmann::json summary() const;
  // One line per allocator for the text report.
  std::vector<std::string> notes() const;

 private:
  struct Allocator {
    Bytes limit = 0, unknown = 0, known = 0;  // unknown: live before at no stated address; known: at stated ones
    std::uint64_t known_buffers = 0;
    AllocId unknown_id;
    bool has_unknown = false;
    Addr base;
    std::vector<Extent> extents;
    Bytes in_gaps = 0, below = 0, unplaced_bytes = 0;
    bool anchored = false, region_taken = false;
  };
  std::map<std::pair<std::uint32_t, Space>, Allocator> by_;
};

}  // namespace fragsim

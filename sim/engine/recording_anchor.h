// RecordingAnchor: the state before a recording began, as the recording's own addresses place
// it, for the replay (docs/importers.md, "Before the capture").
//
// An XProf capture that starts mid-run gives the bytes live before it (bytes_allocated) and the
// addresses of the buffers it frees, but not where the rest of that memory is, nor where the
// allocator's region begins. The importer emits that memory as one pre-trace allocation without
// an address (or, with a JAX memory profile taken at that moment, its buffers: each gets its share of
// the extents, traces/recorded_layout.h place_in_extents). Before the replay, the anchor reads the
// whole trace once and, for an allocator
// whose addresses show one preallocated region (header mode "single_region"), places it where
// BFC's rules and every address the trace states put it (traces/recorded_layout.h): the region's
// base, and the extents of that allocation (gaps no buffer of the trace ever occupied, and the
// rest from the base up). The replay then obtains that region first and seeds the allocation in
// those extents, so that absolute recorded addresses can be reproduced, not only offsets.
//
// A PyTorch snapshot whose ring buffer lost its start holds blocks allocated before the trace and
// freed in it, of which only the requested size is recorded. The large pool never splits off a
// remainder of 1 MiB or less (specs/torch-caching.md §3 should_split: remainder > kSmallSize),
// and no large-pool block, free or in use, is 1 MiB or smaller (requests are larger, remainders
// that small stay in their block, free neighbours merge). So when, while such a block [a, a + r)
// is live, a block starts at x with a + r < x ≤ a + r + 1 MiB in the same segment — a traced
// allocation, or another pre-trace block — the block at a ends exactly at x: it held x − a bytes
// (seeded_block). Blocks with a recorded size (the dump's) keep it; oversize blocks (r ≥
// max_split_size) may hold up to max_non_split_rounding more and stay as requested; expandable
// segments (segment_map) split any remainder of 512 B or more.
//
// A capture whose allocator grows its regions on demand begins after the program obtained regions
// and raised BFC's growth target (traces/bfc_growth.h): the anchor infers those regions from the
// whole trace and has the replay obtain them first, in the order and at the sizes inferred, at
// their bases; the memory live before the capture at addresses it never states is seeded where
// the inference placed it in them.
//
// It reads only what the trace holds: an allocation whose address was removed contributes its
// size (traces/recorded_layout.h, `unplaced`), never an address. Event indices, ids and the
// trace digest are unchanged (nothing is inserted into the event stream), and `fragsim convert`
// writes the recording, not these inferences.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

#include "policies/policy.h"
#include "traces/bfc_growth.h"
#include "traces/trace_reader.h"

namespace fragsim {

class RecordingAnchor {
 public:
  // Whether the recording describes state worth inferring (cheap: reads the header only).
  static bool wanted(const Recording& recording);
  // Reads the whole trace once (from a reader of its own) and infers each allocator's layout.
  void learn(TraceReader& reader);

  // For a pre-trace alloc without an address: the extents its bytes occupy (empty: not inferred).
  std::span<const Extent> extents(const Event& ev) const;
  // For a pre-trace alloc at an address with no recorded block size: the block it held, 0 when
  // the trace does not tell.
  Bytes block(const Event& ev) const;
  // The first time per (device, space): the regions to obtain, in order, before anything there (a
  // pre-trace segment_alloc each, bfc_region; size 0 for the one region that explains a capture —
  // its allocator's limit — else the region's size, grown as Extend grows one for a request that large).
  std::vector<Observation> take_regions(std::uint32_t device, Space space);
  // Per allocator: what the recording stated and what was inferred (null when nothing).
  nlohmann::json summary() const;
  // One line per allocator for the text report.
  std::vector<std::string> notes() const;

 private:
  struct Allocator {
    Bytes limit = 0, unknown = 0, known = 0;  // unknown: live before at no stated address; known: at stated ones
    std::uint64_t known_buffers = 0;
    // The allocations without an address: one (the capture's bytes live before it), or the
    // buffers of a memory profile taken at that moment (traces/capture_profile.h), in trace order.
    std::vector<std::pair<AllocId, Bytes>> unknowns;
    Addr base;
    std::vector<Extent> extents;                      // all of the unknown bytes
    std::map<AllocId, std::vector<Extent>> of_alloc;  // each unknown allocation's share (place_in_extents)
    Bytes in_gaps = 0, below = 0, unplaced_bytes = 0;
    bool anchored = false, region_taken = false;
    bool in_prior_regions = false;  // the unknown bytes lie in `extents` inside the prior regions
    // A growing allocator with nothing live before: the regions it held all the same
    // (traces/bfc_growth.h), and the recorded addresses its model reproduces without and with them.
    std::vector<Extent> prior_regions;
    std::uint64_t prior_matched_before = 0, prior_matched = 0, prior_compared = 0;
    std::vector<BfcEvent> growth_events;  // while learning
  };
  std::map<std::pair<std::uint32_t, Space>, Allocator> by_;
  // Each unknown allocation's share of the allocator's extents (place_in_extents).
  static void share_extents(Allocator& al);

  // PyTorch snapshots: pre-trace blocks sized by later allocations, per (device, address).
  struct PreBlock {
    Bytes rounded = 0;                    // the request rounded to 512 B
    std::uint64_t freed_at = UINT64_MAX;  // event index of its free
    Bytes block = 0;                      // inferred (0: not)
  };
  void learn_torch_blocks(TraceReader& reader);
  std::map<std::pair<std::uint32_t, std::uint64_t>, PreBlock> pre_blocks_;
  std::map<std::uint32_t, std::uint64_t> blocks_inferred_;  // per device
};

}  // namespace fragsim

// A simulated run as a PyTorch memory snapshot (`run --export-snapshot FILE`), so that a what-if
// opens in the tools PyTorch users already have: memory_viz (pytorch.org/memory_viz), and
// torch.cuda._memory_viz (its segment summary `stats`, the flame-graph lines of `memory` and
// `segments`, `compare`). The format is the dict torch.cuda.memory._snapshot() returns
// (specs/torch-caching.md §8), written by fragsim's own pickle writer (traces/pickle_writer.h):
//   segments      — each device's regions at the end of the replay (its last event, or the OOM it
//                   stopped at) with their blocks: 'active_allocated' (the buffer's requested size
//                   and frames, also as the pre-2.1 'history'), 'inactive' (free); an expandable
//                   reservation as its mapped ranges (is_expandable);
//   device_traces — per device, every change of the replay in order with the simulated addresses
//                   and the recorded frames: alloc, free_requested + free_completed, segment_alloc
//                   and segment_free (a region obtained or released), segment_map/segment_unmap
//                   (expandable ranges), oom (the rounded request and what the device had left).
//   allocator_settings — the policy's configuration in the snapshot's form, when the policy states
//                   one (torch-caching), so that the file replays as the what-if it shows.
// Sizes are the trace's requested bytes (blocks: the policy's); times are µs. Only device
// memory (hbm) is written: a snapshot has no other space. Needs the run's export history
// (add_history with events); a policy that places nothing at an address cannot be exported.
#pragma once
#include <memory>
#include <string>

#include "sim/base/io.h"
#include "sim/engine/run_result.h"

namespace fragsim {

// The refusal of a policy that places nothing at an address (ideal, the lower bound): InputError.
[[noreturn]] void refuse_unplaced_export(const std::string& policy);
// Throws InputError when the run cannot be exported to `path`: a policy that placed nothing at an
// address, or more device numbers than the devices limit allows (device_traces lists every number
// up to the largest). A command calls it before it writes any output, so that a refused export
// leaves nothing written.
void check_exportable(const RunResult& r, const std::string& path);
// check_exportable, then the export written to a temporary beside `path`, not yet in place:
// commit() puts it there. A command stages it before it writes any other output, so that an export
// refused part-way (InputError: a policy whose memory map and placements disagree) leaves nothing
// written. EnvError on I/O.
[[nodiscard]] std::unique_ptr<AtomicFile> stage_snapshot(const RunResult& r, const std::string& path);
// stage_snapshot, committed.
void export_snapshot(const RunResult& r, const std::string& path);

}  // namespace fragsim

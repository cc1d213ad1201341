#include "sim/commands/module_plans.h"

#include <map>

#include "sim/commands/run_setup.h"
#include "sim/engine/history.h"
#include "traces/trace_reader.h"
#include "traces/xprof_capture.h"

namespace fragsim {

std::shared_ptr<const std::vector<ModuleView>> module_plans(const std::string& trace, const Registry& reg) {
  if (!is_xprof_path(trace) && !is_hlo_proto_path(trace)) return nullptr;
  auto mods = std::make_shared<std::vector<ModuleView>>(describe_hlo_modules(trace, kModuleBuffers));
  if (mods->empty()) return nullptr;
  size_t planned = 0;
  for (ModuleView& m : *mods) {
    std::map<std::int64_t, ModuleView::Heap> heaps;  // by heap trace
    for (const auto& a : m.allocations)
      if (a.heap_trace >= 0) {
        heaps[a.heap_trace].trace = a.heap_trace;
        heaps[a.heap_trace].xla_bytes = std::max(heaps[a.heap_trace].xla_bytes, a.size);
      }
    if (m.heap_events && planned++ < kPlannedModules) {
      // The policy a module's heap trace gets by default (static-heap, which the registry names
      // for RecordingSource::kXlaHlo) replays it, one device per heap-simulator trace, with every
      // lifetime known, as XLA's HeapSimulator plans it; its allocation log gives each buffer's
      // place, its region the heap's base and size.
      RunRequest req;
      req.trace = trace + " [" + m.name + "]";
      // Its heap trace's events are none of the input's: they count toward no progress.
      req.source = [trace, name = m.name] { return uncounted(make_hlo_module_reader(trace, name)); };
      RunOptions o = prepare_run(req, reg);
      auto spec = std::make_shared<HistorySpec>();
      spec->viewer = true;
      spec->last = kStillLive - 1;  // every allocation of the module
      o.history = spec;
      RunResult r = run_simulation(o, reg);
      if (r.history && r.history->allocations) {
        // The plan places each buffer at its offset in the heap (its placements' addresses are
        // offsets, as XLA's are; its memory map draws the heap at DeviceMemory::kBase instead).
        std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> offset;  // (heap trace, buffer id) → offset
        const AllocationLog& log = *r.history->allocations;
        for (std::uint32_t s = 0; s < log.slots(); ++s)
          for (const auto& rec : log.records(s))
            if (rec.has_addr)
              offset[{r.history->slots[s].first, static_cast<std::int64_t>(rec.id.value())}] =
                  static_cast<std::int64_t>(rec.addr.value());
        for (auto& b : m.buffers)
          if (auto it = offset.find({b.heap_trace, b.id}); it != offset.end()) b.planned = it->second;
        for (const auto& sp : r.spaces) {
          heaps[sp.device].trace = sp.device;
          heaps[sp.device].planned_bytes = sp.peak_reserved;
        }
        m.planned_by = r.policy_name;
      }
    }
    for (auto& [t, h] : heaps) m.heaps.push_back(h);
  }
  return mods;
}

}  // namespace fragsim

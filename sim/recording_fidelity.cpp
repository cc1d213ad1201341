#include "sim/recording_fidelity.h"

#include <fmt/format.h>

namespace fragsim {

std::string no_allocator_events_hint() {
  return "start the capture before the first device allocation; some jaxlib versions on CUDA log none "
         "(jax-ml/jax#22890)";
}

std::string nothing_to_replay(const nlohmann::json& header, std::uint64_t events, std::uint64_t replayable,
                              std::uint64_t pre_trace) {
  if (replayable) return {};
  std::string source = header.is_object() ? header.value("source", std::string()) : std::string();
  if (source == "xprof" && events == 0)
    return "the capture holds no allocator events (MemoryAllocation/MemoryDeallocation): " + no_allocator_events_hint();
  if (source == "torch-snapshot" && events == 0) return "the snapshot holds no segments and no trace entries";
  if (events == 0) return "the trace holds no events";
  if (source == "torch-snapshot")
    return fmt::format(
        "a state-only snapshot (no trace entries: torch.cuda.memory_snapshot(), or _record_memory_history was not "
        "on): the {} buffers live at the dump are placed as state, and no allocation or free follows to replay",
        pre_trace);
  if (pre_trace)
    return fmt::format("only the state before the recording ({} buffers live then) and no allocation or free after it",
                       pre_trace);
  return "the trace holds no allocation or free";
}

}  // namespace fragsim

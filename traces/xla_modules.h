// XLA's compiled modules → fragsim traces of their compile-time heap (docs/importers.md, "XLA
// modules"). XProf captures embed every compiled module as an HloProto (the "Hlo Proto" stat of
// the metadata plane's event metadata, named like "jit_dot(79)"); XLA's dumps write them as
// `*.hlo_proto.pb`. The buffer assignment holds, per temp allocation, the heap simulator's trace
// (ALLOC / FREE / SHARE_WITH of logical buffers) and the offset XLA gave each buffer.
//
// A module becomes a trace with one device per heap-simulator trace (so each is planned on its
// own): ALLOC → alloc (id = the logical buffer id, size = its size, addr = XLA's offset in the
// allocation, name = the defining instruction, shape and dtype where they give the size);
// FREE → free; SHARE_WITH → no new memory: the canonical buffer stays live until it and every
// buffer sharing it are freed. `static-heap` replays it and its fidelity compares offsets.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "traces/trace_reader.h"

namespace fragsim {

struct HloModuleSummary {
  std::string name;  // as --module takes it: the capture's name ("jit_dot(79)") or the module's
  std::string module_name;
  std::uint64_t logical_buffers = 0, allocations = 0, heap_traces = 0, heap_events = 0;
  std::uint64_t largest_allocation_bytes = 0;
};

[[nodiscard]] bool is_hlo_proto_path(const std::string& path);
// The modules of a capture (or profile directory) or of a standalone HloProto file.
[[nodiscard]] std::vector<HloModuleSummary> list_hlo_modules(const std::string& path);
// The heap trace of one module; InputError naming the modules when `module` matches none or several.
[[nodiscard]] std::unique_ptr<TraceReader> make_hlo_module_reader(const std::string& path, const std::string& module);

}  // namespace fragsim

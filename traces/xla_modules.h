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

// A compiled module's buffers as XLA assigned them (the page's compiled-module view, issue 51):
// each logical buffer with its sizes, layout tile, kind and place, in program order.
struct ModuleBuffer {
  std::int64_t id = 0;           // XLA's logical buffer id (the module trace's alloc id)
  std::string name;              // the defining instruction ({shape index} for a tuple element)
  std::string shape;             // "bf16[8192,8192]", "" when not an array
  std::uint64_t logical = 0;     // unpadded bytes of its shape (0 when it has none)
  std::uint64_t padded = 0;      // XLA's size for it on the device (with layout padding)
  std::string tile;              // the layout's tiles, "(8,128)(2,1)"; "" when untiled
  std::string kind;              // parameter, output, alias, constant, thread-local, temporary
  std::int64_t allocation = -1;  // the buffer allocation holding it (its index), -1 none
  std::int64_t offset = -1;      // XLA's offset in that allocation, -1 none
  std::int64_t heap_trace = -1;  // the heap-simulator trace that planned it (= the module trace's device)
  std::int64_t order = -1;       // its ALLOC's position among that trace's events: program order; -1 outside
  std::int64_t end = -1;         // the position of the FREE that ended it, -1 when live to the end
  std::int64_t planned =
      -1;  // its offset in fragsim's plan of the same heap trace (filled by whoever plans it), -1 none
};
struct ModuleAllocation {
  std::int64_t index = 0;
  std::uint64_t size = 0;
  std::string kind;  // as its buffers' (parameter, output, temporary, ...)
  std::int64_t heap_trace = -1;
};
struct ModuleView {
  std::string name, module_name;
  std::vector<ModuleAllocation> allocations;
  std::vector<ModuleBuffer> buffers;  // by heap trace, then program order (outside the simulation first)
  std::uint64_t heap_events = 0;
  bool truncated = false;  // more than the buffers asked for: the rest left out
  // Per heap-simulator trace, the heap XLA's plan needs (its allocation's size) and fragsim's plan
  // of it (filled by whoever plans it: sim/commands/module_plans.h), by whom.
  struct Heap {
    std::int64_t trace = 0;
    std::uint64_t xla_bytes = 0, planned_bytes = 0;
  };
  std::vector<Heap> heaps;
  std::string planned_by;  // "" when nothing planned it
};
// The modules of a capture, a profile directory or an HloProto file, each with at most
// `max_buffers` buffers. Empty when the input holds none.
[[nodiscard]] std::vector<ModuleView> describe_hlo_modules(const std::string& path, size_t max_buffers);

[[nodiscard]] bool is_hlo_proto_path(const std::string& path);
// The modules of a capture (or profile directory) or of a standalone HloProto file.
[[nodiscard]] std::vector<HloModuleSummary> list_hlo_modules(const std::string& path);
// The heap trace of one module; InputError naming the modules when `module` matches none or several.
[[nodiscard]] std::unique_ptr<TraceReader> make_hlo_module_reader(const std::string& path, const std::string& module);

}  // namespace fragsim

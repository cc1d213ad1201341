// Filling a MemoryMap from the structures that hold policy state.
#pragma once
#include "policies/chunk_list.h"
#include "policies/policy.h"

namespace fragsim {

// Every live region of a ChunkList and its chunks; mapped(chunk) tells whether memory is behind
// a free chunk (expandable reservations), id(region) numbers it.
template <class CL, class Mapped>
void append_memory_map(const CL& chunks, MemoryMap* out, Mapped mapped) {
  for (typename CL::Index r = 0; r < chunks.region_count(); ++r) {
    const auto& rg = chunks.region(r);
    if (!rg.live) continue;
    out->regions.push_back({rg.base, rg.size, rg.id});
    for (auto c = rg.first; c != CL::kNil; c = chunks.chunk(c).next) {
      const auto& ch = chunks.chunk(c);
      out->blocks.push_back({ch.addr, ch.size, ch.in_use, mapped(ch)});
    }
  }
}
template <class CL>
void append_memory_map(const CL& chunks, MemoryMap* out) {
  append_memory_map(chunks, out, [](const auto&) { return true; });
}

}  // namespace fragsim

// A synthetic XProf capture built with the generated message classes (tests only).
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <string>

#include "test_util.h"
#include "xplane.pb.h"

namespace fragsim::test {

// A synthetic capture: one host plane whose lines carry allocator events (t in ns, offset in ps).
struct Synth {
  xprof::XSpace space;
  xprof::XPlane* plane;
  std::map<std::string, std::int64_t> stat_ids;
  std::string allocator = "GPU_0_bfc";  // the allocator_name of the events added next
  Synth() {
    plane = space.add_planes();
    plane->set_name("/host:CPU");
    (*plane->mutable_event_metadata())[1].set_name("MemoryAllocation");
    (*plane->mutable_event_metadata())[2].set_name("MemoryDeallocation");
  }
  std::int64_t stat(const std::string& n) {
    auto [it, fresh] = stat_ids.emplace(n, static_cast<std::int64_t>(stat_ids.size() + 10));
    if (fresh) (*plane->mutable_stat_metadata())[it->second].set_name(n);
    return it->second;
  }
  xprof::XLine* line(std::int64_t ts_ns) {
    auto* l = plane->add_lines();
    l->set_timestamp_ns(ts_ns);
    return l;
  }
  void event(xprof::XLine* l, bool alloc, std::int64_t offset_ps, std::uint64_t addr, std::uint64_t size,
             std::uint64_t in_use_after) {
    auto* e = l->add_events();
    e->set_metadata_id(alloc ? 1 : 2);
    e->set_offset_ps(offset_ps);
    auto add = [&](const char* n, std::uint64_t v) {
      auto* s = e->add_stats();
      s->set_metadata_id(stat(n));
      s->set_uint64_value(v);
    };
    auto* s = e->add_stats();
    s->set_metadata_id(stat("allocator_name"));
    s->set_str_value(allocator);
    add("addr", addr);
    add("requested_bytes", size);
    add("allocation_bytes", size);
    add("bytes_allocated", in_use_after);
    add("bytes_available", (1ULL << 30) - in_use_after);
    add("bytes_reserved", 0);
  }
  std::string write(const std::string& name) {
    std::string p = tmp_path(name);
    std::ofstream out(p, std::ios::binary);
    space.SerializeToOstream(&out);
    return p;
  }
};

}  // namespace fragsim::test

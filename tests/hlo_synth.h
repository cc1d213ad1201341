// A synthetic XLA module (HloProto) with one temp allocation and one heap-simulator trace (tests).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>

#include "hlo.pb.h"
#include "test_util.h"

namespace fragsim::test {

struct HloSynth {
  hlo::HloProto proto;
  hlo::BufferAllocationProto* alloc;
  hlo::HeapSimulatorTrace* trace;
  // `buffers` logical buffers 0..n-1 of `size` bytes, all assigned to allocation 0 one after another.
  explicit HloSynth(int buffers, std::int64_t size = 1024) {
    proto.mutable_hlo_module()->set_name("synth");
    auto* ba = proto.mutable_buffer_assignment();
    alloc = ba->add_buffer_allocations();
    alloc->set_index(0);
    alloc->set_size(buffers * size);
    for (int i = 0; i < buffers; ++i) {
      auto* b = ba->add_logical_buffers();
      b->set_id(i);
      b->set_size(size);
      auto* as = alloc->add_assigned();
      as->set_logical_buffer_id(i);
      as->set_offset(i * size);
      as->set_size(size);
    }
    trace = ba->add_heap_simulator_traces();
  }
  HloSynth& alloc_(std::int64_t id) { return event(hlo::HeapSimulatorTrace::Event::ALLOC, id); }
  HloSynth& free_(std::int64_t id) { return event(hlo::HeapSimulatorTrace::Event::FREE, id); }
  HloSynth& share(std::int64_t id, std::int64_t canonical) {
    return event(hlo::HeapSimulatorTrace::Event::SHARE_WITH, id, canonical);
  }
  HloSynth& event(hlo::HeapSimulatorTrace::Event::Kind k, std::int64_t id, std::int64_t canonical = 0) {
    auto* e = trace->add_events();
    e->set_kind(k);
    e->set_buffer_id(id);
    if (k == hlo::HeapSimulatorTrace::Event::SHARE_WITH) e->set_share_with_canonical_id(canonical);
    return *this;
  }
  std::string bytes() const { return proto.SerializeAsString(); }
  std::string write(const std::string& name) const { return write_text(name + ".hlo_proto.pb", bytes()); }
};

}  // namespace fragsim::test

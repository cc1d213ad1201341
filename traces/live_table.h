// LiveTable: (device, id) → live allocation, with dense recycled handles.
//
// Open addressing with linear probing and backward-shift deletion (no tombstones), so memory is
// O(live allocations) and lookups stay short however many events pass. Each slot holds its key
// and handle inline (16 bytes, four to a cache line): a probe, and each step of a backward shift
// (which recomputes the home of the key it moves from the key itself), reads the slot array only;
// the per-handle entry is touched once, by the lookup that wants it. The hash is keyed with a
// per-table random seed, so a trace cannot be crafted to make every id collide (handles do not
// depend on it: results are the same on every run). Invariants:
//   size() == number of slots in use == number of handles not on the free list;
//   slot s in use ⇒ entries_[s.handle] has s's (device, id).
#pragma once
#include <cstdint>
#include <vector>

#include "sim/base/units.h"

namespace fragsim {

class LiveTable {
 public:
  struct Entry {
    AllocId id;
    std::uint32_t device;
    Handle handle;
    Bytes size;
    Space space;
  };
  LiveTable();

  // Returns the entry of a live (device, id) or nullptr.
  const Entry* find(std::uint32_t device, AllocId id) const {
    const Slot& s = slots_[probe(device, id)];
    return s.handle == kEmpty ? nullptr : &entries_[s.handle];
  }
  // Inserts a new live allocation; returns its handle, or kNoHandle when it is already live.
  Handle insert(std::uint32_t device, AllocId id, Bytes size, Space space);
  // Removes a live allocation into *out (handle recycled); false when it is not live.
  bool erase(std::uint32_t device, AllocId id, Entry* out);
  size_t size() const { return live_; }
  // One past the largest handle ever issued: engines size their per-handle arrays by it.
  Handle handle_limit() const { return static_cast<Handle>(entries_.size()); }

 private:
  static constexpr Handle kEmpty = kNoHandle;
  struct Slot {
    AllocId id;
    std::uint32_t device = 0;
    Handle handle = kEmpty;  // kEmpty: the slot is free
  };
  // murmur3's 64-bit finaliser over (id, device) keyed by the table's seed.
  size_t hash(std::uint32_t device, AllocId id) const {
    std::uint64_t x = (id.value() ^ seed_) + (static_cast<std::uint64_t>(device) + 1) * 0x9e3779b97f4a7c15ULL;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
  // The slot holding (device, id), or the empty slot that ends its probe run.
  size_t probe(std::uint32_t device, AllocId id) const {
    const size_t mask = slots_.size() - 1;
    size_t i = hash(device, id) & mask;
    while (slots_[i].handle != kEmpty && (slots_[i].id != id || slots_[i].device != device)) i = (i + 1) & mask;
    return i;
  }
  void grow();

  std::vector<Slot> slots_;     // a power of two, at most a quarter full (see insert)
  std::vector<Entry> entries_;  // indexed by handle
  std::vector<Handle> free_handles_;
  size_t live_ = 0;
  std::uint64_t seed_;
};

}  // namespace fragsim

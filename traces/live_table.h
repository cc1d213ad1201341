// LiveTable: (device, id) → live allocation, with dense recycled handles.
//
// Open addressing with linear probing and backward-shift deletion (no tombstones), so memory is
// O(live allocations) and lookups stay short however many events pass. The hash is keyed with a
// per-table random seed, so a trace cannot be crafted to make every id collide (handles do not
// depend on it: results are the same on every run). Invariant:
//   size() == number of slots in use == number of handles not on the free list.
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
    size_t i = probe(device, id);
    return slots_[i] == kEmpty ? nullptr : &entries_[slots_[i]];
  }
  // Inserts a new live allocation; returns its handle, or kNoHandle when it is already live.
  Handle insert(std::uint32_t device, AllocId id, Bytes size, Space space);
  // Removes a live allocation into *out (handle recycled); false when it is not live.
  bool erase(std::uint32_t device, AllocId id, Entry* out);
  size_t size() const { return live_; }
  // One past the largest handle ever issued: engines size their per-handle arrays by it.
  Handle handle_limit() const { return static_cast<Handle>(entries_.size()); }

 private:
  static constexpr std::uint32_t kEmpty = 0xffffffffu;
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
  size_t probe(std::uint32_t device, AllocId id) const {
    size_t mask = slots_.size() - 1;
    size_t i = hash(device, id) & mask;
    while (slots_[i] != kEmpty) {
      const Entry& e = entries_[slots_[i]];
      if (e.id == id && e.device == device) return i;
      i = (i + 1) & mask;
    }
    return i;
  }
  void grow();

  std::vector<std::uint32_t> slots_;  // index into entries_ (== handle) or kEmpty
  std::vector<Entry> entries_;        // indexed by handle
  std::vector<Handle> free_handles_;
  size_t live_ = 0;
  std::uint64_t seed_;
};

}  // namespace fragsim

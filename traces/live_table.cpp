#include "traces/live_table.h"

#include <random>

namespace fragsim {

LiveTable::LiveTable() : seed_((static_cast<std::uint64_t>(std::random_device{}()) << 32) | std::random_device{}()) {
  slots_.assign(64, kEmpty);
}

Handle LiveTable::insert(std::uint32_t device, AllocId id, Bytes size, Space space) {
  if ((live_ + 1) * 2 > slots_.size()) grow();
  size_t i = probe(device, id);
  if (slots_[i] != kEmpty) return kNoHandle;
  Handle h;
  if (!free_handles_.empty()) {
    h = free_handles_.back();
    free_handles_.pop_back();
  } else {
    h = static_cast<Handle>(entries_.size());
    entries_.emplace_back();
  }
  entries_[h] = Entry{id, device, h, size, space};
  slots_[i] = h;
  ++live_;
  return h;
}

bool LiveTable::erase(std::uint32_t device, AllocId id, Entry* out) {
  size_t mask = slots_.size() - 1;
  size_t i = probe(device, id);
  if (slots_[i] == kEmpty) return false;
  *out = entries_[slots_[i]];
  free_handles_.push_back(out->handle);
  slots_[i] = kEmpty;
  --live_;
  // Backward-shift: move later members of the probe run into the hole when their home allows.
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (slots_[j] == kEmpty) break;
    const Entry& m = entries_[slots_[j]];
    size_t home = hash(m.device, m.id) & mask;
    // m may move to i when i lies cyclically in [home, j).
    bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
    if (movable) {
      slots_[i] = slots_[j];
      slots_[j] = kEmpty;
      i = j;
    }
  }
  return true;
}

void LiveTable::grow() {
  std::vector<std::uint32_t> old;
  old.swap(slots_);
  slots_.assign(old.size() * 2, kEmpty);
  for (auto s : old) {
    if (s == kEmpty) continue;
    size_t i = probe(entries_[s].device, entries_[s].id);
    slots_[i] = s;
  }
}

}  // namespace fragsim

// Records addressed by index (chunks, blocks) and recycled through a free list of indices, as
// XLA's BFC addresses chunks by handle: one helper for every policy that keeps such a pool.
#pragma once
#include <vector>

namespace fragsim {

// A fresh (value-initialised) record: a recycled index when one is spare, else a new one.
template <class T, class I>
I acquire_slot(std::vector<T>& items, std::vector<I>& spare) {
  if (!spare.empty()) {
    I i = spare.back();
    spare.pop_back();
    items[i] = T{};
    return i;
  }
  items.emplace_back();
  return static_cast<I>(items.size() - 1);
}

}  // namespace fragsim

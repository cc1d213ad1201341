// ChunkList: device regions cut into chunks — the one structure behind every contiguous-memory
// model here (XLA BFC's regions and chunks, the caching pools' segments and blocks, the baseline
// arena), as XLA's BFCAllocator keeps its chunks: records addressed by index handles, recycled
// through a free list of indices, with kNil as the only sentinel.
//
//   Region — [base, base + size), one device allocation (or the whole arena); never merged
//            with another. `in_use` counts in-use chunks, `chunks` all chunks, `free_bytes` the
//            bytes of free chunks; `first`/`last` are its lowest and highest chunk; `id` counts
//            regions in the order they were added (placements' "region"). Slots of removed
//            regions are reused, so memory is O(live regions + chunks), not O(regions ever).
//   Chunk  — [addr, addr + size) inside one region; prev/next are its physical neighbours
//            (kNil at the region's ends).
// Invariants (validate): the chunks of a live region tile it in address order with consistent
//   links; in_use, chunks and free_bytes equal their definitions; with the address index on,
//   it holds exactly the live chunks.
// chunk_at(r, a) walks r's chunks in address order unless the owner turned the address index on
// (index_addresses: an ordered map of chunk starts, kept from then on at a map update per split,
// merge and region change); owners that look chunks up by address often turn it on.
// What a free chunk is indexed by (bins, tags, mapped state) is the owner's business: the owner
// calls split/merge_next and keeps its indexes up to date around them. Both carry an Extra
// record for the owner (BFC's tag, a block's requested size, an expandable block's mapped state).
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/units.h"

namespace fragsim {

struct NoExtra {};

template <class ChunkExtra = NoExtra, class RegionExtra = NoExtra>
class ChunkList {
 public:
  using Index = std::int32_t;
  static constexpr Index kNil = -1;

  struct Chunk {
    Addr addr;
    Bytes size = 0;
    Index prev = kNil, next = kNil, region = kNil;
    bool in_use = false;
    ChunkExtra x{};
  };
  struct Region {
    Addr base;
    Bytes size = 0;
    Index first = kNil, last = kNil;
    std::uint32_t in_use = 0;  // in-use chunks
    std::uint32_t chunks = 0;  // all chunks (1 = unsplit)
    Bytes free_bytes = 0;
    bool live = false;
    int id = -1;  // obtain order
    RegionExtra x{};
  };

  // A new live region as one free chunk; returns the region's slot index. `id` numbers it for
  // placements (−1: this list's own obtain order; owners of several lists number them jointly).
  Index add_region(Addr base, Bytes size, ChunkExtra cx = {}, RegionExtra rx = {}, int id = -1) {
    Index c = new_chunk();
    Index r;
    if (!spare_regions_.empty()) {
      r = spare_regions_.back();
      spare_regions_.pop_back();
    } else {
      r = static_cast<Index>(regions_.size());
      regions_.emplace_back();
    }
    chunks_[c] = Chunk{base, size, kNil, kNil, r, false, cx};
    regions_[r] = Region{base, size, c, c, 0, 1, size, true, id >= 0 ? id : next_id_++, rx};
    ++live_regions_;
    index_add(c);
    return r;
  }
  // Region r grows by `size` bytes at its end (memory obtained right after it): the new bytes are
  // a new free chunk after r's last one. Returns the chunk; the owner may merge it.
  Index extend_region(Index r, Bytes size, ChunkExtra cx = {}) {
    Index c = new_chunk();
    Region& rg = regions_[r];
    chunks_[c] = Chunk{rg.base + rg.size, size, rg.last, kNil, r, false, cx};
    chunks_[rg.last].next = c;
    rg.last = c;
    rg.size += size;
    ++rg.chunks;
    rg.free_bytes += size;
    index_add(c);
    return c;
  }
  // Retires an unused region (pre: no chunk in use, a single chunk); its slot is reused later.
  void remove_region(Index r) {
    Region& rg = regions_[r];
    FRAGSIM_CHECK(rg.live && rg.in_use == 0 && rg.chunks == 1, "removing a region that is in use or split");
    index_remove(rg.first);
    spare_.push_back(rg.first);
    rg.first = rg.last = kNil;
    rg.live = false;
    rg.free_bytes = 0;
    --live_regions_;
    spare_regions_.push_back(r);
  }

  // Region r with every chunk moves to start at `base` (the owner re-keys what indexes them by
  // address). Pre: nothing else occupies the new range.
  void move_region(Index r, Addr base) {
    Region& rg = regions_[r];
    for (Index c = rg.first; c != kNil; c = chunks_[c].next) {
      index_remove(c);
      chunks_[c].addr = base + (chunks_[c].addr - rg.base);
      index_add(c);
    }
    rg.base = base;
  }

  // Free chunk c keeps [addr, addr + keep); the rest becomes a new free chunk right after it
  // with c's extras. Returns the new chunk. Pre: 0 < keep < size, c free.
  Index split(Index c, Bytes keep) {
    FRAGSIM_CHECK(!chunks_[c].in_use && keep > 0 && keep < chunks_[c].size, "bad split");
    Index n = new_chunk();
    Chunk& a = chunks_[c];  // after new_chunk: the vector may have grown
    chunks_[n] = Chunk{a.addr + keep, a.size - keep, c, a.next, a.region, false, a.x};
    if (a.next != kNil)
      chunks_[a.next].prev = n;
    else
      regions_[a.region].last = n;
    a.next = n;
    a.size = keep;
    ++regions_[a.region].chunks;
    index_add(n);
    return n;
  }
  // Free chunk c absorbs its free right neighbour, whose index is recycled. Extras stay c's.
  void merge_next(Index c) {
    Chunk& a = chunks_[c];
    Index n = a.next;
    FRAGSIM_CHECK(n != kNil && !a.in_use && !chunks_[n].in_use, "bad merge");
    Chunk& b = chunks_[n];
    a.size += b.size;
    a.next = b.next;
    if (b.next != kNil)
      chunks_[b.next].prev = c;
    else
      regions_[a.region].last = c;
    --regions_[a.region].chunks;
    index_remove(n);
    spare_.push_back(n);
  }
  // In-use chunk c takes over its free right neighbour (an unsplit remainder it always held).
  void absorb_next_free(Index c) {
    Chunk& a = chunks_[c];
    Index n = a.next;
    FRAGSIM_CHECK(a.in_use && n != kNil && !chunks_[n].in_use, "bad absorb");
    Chunk& b = chunks_[n];
    a.size += b.size;
    a.next = b.next;
    if (b.next != kNil)
      chunks_[b.next].prev = c;
    else
      regions_[a.region].last = c;
    --regions_[a.region].chunks;
    regions_[a.region].free_bytes -= b.size;
    index_remove(n);
    spare_.push_back(n);
  }
  void set_in_use(Index c, bool in_use) {
    Chunk& ch = chunks_[c];
    if (ch.in_use == in_use) return;
    ch.in_use = in_use;
    Region& rg = regions_[ch.region];
    if (in_use) {
      ++rg.in_use;
      rg.free_bytes -= ch.size;
    } else {
      --rg.in_use;
      rg.free_bytes += ch.size;
    }
  }

  // Turns the address index on (kept from now on).
  void index_addresses() {
    if (indexed_) return;
    indexed_ = true;
    for (Index r = 0; r < region_count(); ++r)
      if (regions_[r].live)
        for (Index c = regions_[r].first; c != kNil; c = chunks_[c].next) index_add(c);
  }
  // The chunk of live region r holding address at (pre: r holds it).
  Index chunk_at(Index r, Addr at) const {
    if (indexed_) return std::prev(by_addr_.upper_bound({r, at}))->second;
    Index c = regions_[r].first;
    while (chunks_[c].addr + chunks_[c].size <= at) c = chunks_[c].next;
    return c;
  }

  const Chunk& chunk(Index c) const { return chunks_[c]; }
  ChunkExtra& extra(Index c) { return chunks_[c].x; }
  const Region& region(Index r) const { return regions_[r]; }
  RegionExtra& region_extra(Index r) { return regions_[r].x; }
  // Region slots (live or not) to iterate with region(r).live.
  Index region_count() const { return static_cast<Index>(regions_.size()); }
  Index live_regions() const { return live_regions_; }
  // True when the region holds no in-use chunk (it is then a single free chunk).
  bool region_unused(Index r) const { return regions_[r].live && regions_[r].in_use == 0; }

  // Checks the structural invariants; calls each(c) for every chunk of every live region so the
  // owner can check its own. Throws InternalError prefixed by owner.
  void validate(const std::string& owner, const std::function<void(Index)>& each = {}) const {
    auto fail = [&](const std::string& m) { FRAGSIM_CHECK(false, owner + ": " + m); };
    Index live = 0;
    for (Index r = 0; r < region_count(); ++r) {
      const Region& rg = regions_[r];
      if (!rg.live) continue;
      ++live;
      Addr at = rg.base;
      Index prev = kNil;
      std::uint32_t used = 0, count = 0;
      Bytes free_bytes = 0;
      for (Index c = rg.first; c != kNil; c = chunks_[c].next) {
        const Chunk& ch = chunks_[c];
        if (ch.addr != at) fail(fmt::format("chunk at {:#x} expected at {:#x} (gap or overlap)", ch.addr, at));
        if (ch.prev != prev || ch.region != r) fail("broken chunk links");
        if (ch.size == 0) fail("empty chunk");
        if (ch.in_use)
          ++used;
        else
          free_bytes += ch.size;
        ++count;
        at = at + ch.size;
        prev = c;
        if (each) each(c);
      }
      if (at != rg.base + rg.size) fail("chunks do not cover the region");
      if (prev != rg.last) fail("region's last chunk is stale");
      if (used != rg.in_use || count != rg.chunks || free_bytes != rg.free_bytes)
        fail("region in-use count, chunk count or free bytes stale");
      if (indexed_)
        for (Index c = rg.first; c != kNil; c = chunks_[c].next) {
          auto it = by_addr_.find({r, chunks_[c].addr});
          if (it == by_addr_.end() || it->second != c) fail("address index stale");
        }
    }
    if (live != live_regions_) fail("live region count stale");
    if (indexed_) {
      size_t chunks = 0;
      for (Index r = 0; r < region_count(); ++r)
        if (regions_[r].live) chunks += regions_[r].chunks;
      if (chunks != by_addr_.size()) fail("address index holds chunks that are gone");
    }
  }

 private:
  Index new_chunk() {
    if (!spare_.empty()) {
      Index i = spare_.back();
      spare_.pop_back();
      return i;
    }
    chunks_.emplace_back();
    return static_cast<Index>(chunks_.size() - 1);
  }

  void index_add(Index c) {
    if (indexed_) by_addr_[{chunks_[c].region, chunks_[c].addr}] = c;
  }
  void index_remove(Index c) {
    if (indexed_) by_addr_.erase({chunks_[c].region, chunks_[c].addr});
  }

  std::vector<Chunk> chunks_;
  std::vector<Index> spare_;
  bool indexed_ = false;
  std::map<std::pair<Index, Addr>, Index> by_addr_;  // index_addresses(): (region, chunk start) → chunk
  std::vector<Region> regions_;
  std::vector<Index> spare_regions_;
  Index live_regions_ = 0;
  int next_id_ = 0;
};

}  // namespace fragsim

// tpu-runtime: the TPU runtime's device-memory allocator as XProf captures show it placing
// buffers (its rule is not public; inferred from openxla/xprof's tpu_inference_2 capture, TPU
// v6e, 453 allocations on 4 devices):
//   - addresses are offsets in [0, limit), limit = the runtime's HBM limit (the capture's
//     bytes_available + bytes_reserved + bytes_allocated; SpaceSpec::runtime_limit);
//   - blocks are rounded up to 128 bytes (a 32-byte request holds 128, 1472 holds 1536);
//   - placement is top-down: the smallest free hole that fits (ties: the higher one), and the
//     block takes the hole's top, so the first buffer sits at limit − block;
//   - frees coalesce with free neighbours.
// Usable as tpu-padded's inner policy (`tpu-padded[inner=tpu-runtime]`, the default for a TPU
// capture) or alone. The whole range counts as reserved (the runtime owns all HBM).
#include <fmt/format.h>

#include <vector>

#include "policies/chunk_list.h"
#include "policies/memory_map.h"
#include "policies/policy.h"
#include "policies/size_index.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

constexpr Bytes kTpuRuntimeUnit = 128;

class TpuRuntimePolicy : public AllocatorPolicy {
 public:
  Bytes limit() const override { return limit_; }
  Bytes preallocated() const override { return limit_; }  // the runtime owns all of it
  TpuRuntimePolicy(Bytes limit, bool as_recorded)
      : limit_(round_down(limit, kTpuRuntimeUnit)), as_recorded_(as_recorded) {
    if (limit_) index_free(chunks_.region(chunks_.add_region(Addr(0), limit_)).first);
  }

  // The recording's own allocator, at its recorded limit: the buffers live when the capture began
  // stay where it recorded them (AllocRequest::seeded_at).
  bool seeds_recording() const override { return as_recorded_; }

  Placement allocate(const AllocRequest& req) override {
    Bytes r = rounded_size(req);
    if (r == 0 || r == kTooLarge || r > limit_) return Placement::failed();
    Chunks::Index c = req.seeded_at ? carve_at(*req.seeded_at, r) : Chunks::kNil;
    if (c == Chunks::kNil) {
      // Smallest hole >= r; among equal sizes the highest address (indexed by (size, ~addr)).
      SizeIndex::Entry e{};
      if (!by_size_.pop_lower_bound(r, &e)) return Placement::failed();
      c = static_cast<Chunks::Index>(e.id);
      const Bytes size = e.size;
      // The block is the hole's top r bytes; the hole keeps its start and the rest.
      if (size > r) {
        Chunks::Index top = chunks_.split(c, size - r);
        index_free(c);
        c = top;
      }
    }
    chunks_.set_in_use(c, true);
    if (req.handle >= owner_.size()) owner_.resize(req.handle + 1, Chunks::kNil);
    owner_[req.handle] = c;
    allocated_ += r;
    return Placement::at(chunks_.chunk(c).addr, r, 0, Addr(0));
  }

  void release(Handle h) override {
    Chunks::Index c = owner_[h];
    owner_[h] = Chunks::kNil;
    allocated_ -= chunks_.chunk(c).size;
    chunks_.set_in_use(c, false);
    // The freed block joins the holes that touch it.
    Chunks::Index n = chunks_.chunk(c).next;
    if (n != Chunks::kNil && !chunks_.chunk(n).in_use) {
      unindex_free(n);
      chunks_.merge_next(c);
    }
    Chunks::Index p = chunks_.chunk(c).prev;
    if (p != Chunks::kNil && !chunks_.chunk(p).in_use) {
      unindex_free(p);
      chunks_.merge_next(p);
      c = p;
    }
    index_free(c);
  }

  Bytes rounded_size(const AllocRequest& req) const override { return round_up_sat(req.size, kTpuRuntimeUnit); }

  Usage usage() const override {
    Bytes largest = by_size_.largest_size();
    return {allocated_, limit_, largest, limit_ - allocated_, largest};
  }

  nlohmann::json stats() const override {
    return {{"limit_bytes", limit_}, {"bytes_in_use", allocated_}, {"free_holes", by_size_.size()}};
  }

  void memory_map(MemoryMap* out) const override { append_memory_map(chunks_, out); }

  std::string describe_oom(const AllocRequest& req) const override {
    Usage u = usage();
    return fmt::format(
        "    (tpu-runtime) {} B requested, {} B rounded; {} B free in {} holes, the largest {} B; limit {} B\n",
        req.size, rounded_size(req), u.available, by_size_.size(), u.largest_free, limit_);
  }

  void validate() const override {
    Bytes allocated = 0;
    size_t holes = 0;
    chunks_.validate("tpu-runtime", [&](Chunks::Index c) {
      const auto& ch = chunks_.chunk(c);
      if (ch.in_use) {
        allocated += ch.size;
        return;
      }
      ++holes;
      FRAGSIM_CHECK(ch.prev == Chunks::kNil || chunks_.chunk(ch.prev).in_use, "tpu-runtime: adjacent holes");
      FRAGSIM_CHECK(by_size_.contains(ch.size, Addr(~ch.addr.value())), "tpu-runtime: hole index stale");
    });
    FRAGSIM_CHECK(by_size_.size() == holes, "tpu-runtime: hole index size stale");
    FRAGSIM_CHECK(allocated == allocated_, "tpu-runtime: allocated != the in-use blocks");
  }

 private:
  using Chunks = ChunkList<>;
  // [at, at + r) out of the hole that holds it, as a free chunk (its hole's other parts stay
  // holes); kNil when no hole holds it (a recorded address this state has in use or past its limit).
  Chunks::Index carve_at(Addr at, Bytes r) {
    if (at.value() >= limit_ || r > limit_ - at.value()) return Chunks::kNil;
    chunks_.index_addresses();
    Chunks::Index c = chunks_.chunk_at(0, at);
    const Addr start = chunks_.chunk(c).addr;  // copied: a split may move the chunks
    if (chunks_.chunk(c).in_use || at + r > start + chunks_.chunk(c).size) return Chunks::kNil;
    unindex_free(c);
    if (at > start) {
      Chunks::Index rest = chunks_.split(c, at - start);
      index_free(c);
      c = rest;
    }
    if (chunks_.chunk(c).size > r) index_free(chunks_.split(c, r));
    return c;
  }
  void index_free(Chunks::Index c) {
    const auto& ch = chunks_.chunk(c);
    by_size_.insert({ch.size, Addr(~ch.addr.value()), static_cast<std::uint32_t>(c)});
  }
  void unindex_free(Chunks::Index c) { by_size_.erase(chunks_.chunk(c).size, Addr(~chunks_.chunk(c).addr.value())); }

  Bytes limit_;
  bool as_recorded_;
  Bytes allocated_ = 0;
  Chunks chunks_;                     // [0, limit) as holes and blocks, neighbours linked
  SizeIndex by_size_;                 // the holes by (size, ~start), id = chunk
  std::vector<Chunks::Index> owner_;  // handle → its block's chunk
};

}  // namespace

void register_tpu_runtime(Registry& r) {
  PolicyInfo info{"tpu-runtime",
                  "TPU runtime allocator as XProf captures show it: top-down best fit in [0, runtime limit), 128-byte "
                  "blocks (tpu-padded's inner policy for TPU captures)",
                  [](ConfigReader&, const ConfigContext& ctx) -> PolicyBuilder {
                    Bytes limit = ctx.space->runtime_usable();
                    // The allocator a capture logged on this device and space, with the limit it logged.
                    const RecordedAllocator* rec =
                        ctx.recording ? ctx.recording->allocator(ctx.device_index, ctx.space->space) : nullptr;
                    const bool as_recorded = ctx.recording && ctx.recording->platform == Platform::kTpu && rec &&
                                             rec->limit && *rec->limit == limit;
                    return [limit, as_recorded](const PolicyContext&) {
                      return std::make_unique<TpuRuntimePolicy>(limit, as_recorded);
                    };
                  },
                  false,
                  {}};
  info.hardware_kind = "tpu";
  r.add(std::move(info));
}

}  // namespace fragsim

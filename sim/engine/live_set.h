// LiveSet: the buffers live in a run, kept for what reports show of them — names (interned),
// shapes, stacks, where each was placed — and the moments built from them: the largest live
// buffers and every space's memory map at a space's peak or at an OOM. Memory O(live buffers +
// distinct names + stacks); nothing here is on the path of a plain run except remember().
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/base/limits.h"
#include "sim/engine/run_result.h"

namespace fragsim {

// What a moment needs of one (device, space) of the engine.
struct SlotView {
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  const AllocatorPolicy* policy = nullptr;
  Footprint footprint;             // as last accounted
  std::uint64_t device_calls = 0;  // allocations and frees the policy asked of the device so far
};

class LiveSet {
 public:
  // `names`: what the distinct names and stack frames a run keeps may grow to (sim/base/limits.h).
  explicit LiveSet(LimitCounter names) : names_kept_(std::move(names)) {}
  // Keeps the placed buffers of each slot in address order too, so that overlapping() visits only
  // those near the extent (--follow-recording asks it on every correction). Pre: nothing placed yet.
  void index_addresses() { indexed_ = true; }

  // kDisplaced: placed, then taken out of the simulated state by --follow-recording (its free is ignored).
  enum class State : std::uint8_t { kNotLive, kPlaced, kFailed, kEmpty, kDisplaced };

  // A new allocation's handle (not placed yet).
  void begin(Handle h) {
    if (h >= state_.size()) {
      state_.resize(h + 1, State::kNotLive);
      slot_.resize(h + 1, 0);
      local_.resize(h + 1, kNoHandle);
    }
    set(h, State::kNotLive);
  }
  // The handle its slot's policy knows the allocation by (dense per slot).
  void set_local(Handle h, Handle local) { local_[h] = local; }
  Handle local_of(Handle h) const { return local_[h]; }
  void set(Handle h, State s) {
    if (indexed_ && state_[h] == State::kPlaced && s != State::kPlaced) unindex(h);
    state_[h] = s;
  }
  State state(Handle h) const { return h < state_.size() ? state_[h] : State::kNotLive; }
  std::uint32_t slot_of(Handle h) const { return slot_[h]; }
  Handle handle_limit() const { return static_cast<Handle>(state_.size()); }
  // A placed allocation: what reports show of it.
  void remember(const Event& ev, const Placement& p, std::uint32_t slot);
  // A stack the trace defines (op stack): its frames, innermost first.
  void define_stack(std::uint64_t id, std::vector<std::string> frames) {
    for (const auto& f : frames) names_kept_.spend(f.size());
    stack_frames_[id] = std::move(frames);
  }
  // Its frames, nullptr when the trace defined none.
  const std::vector<std::string>* frames(std::uint64_t id) const {
    auto it = stack_frames_.find(id);
    return it == stack_frames_.end() ? nullptr : &it->second;
  }
  const std::string& name(std::uint32_t n) const { return names_[n]; }

  const std::string& name_of(Handle h) const { return names_[live_[h].name]; }
  AllocId id_of(Handle h) const { return live_[h].id; }
  // A placed buffer as reports show it, `now` the event it is shown at.
  [[nodiscard]] BufferView view(Handle h, std::uint64_t now, const std::vector<SlotView>& slots) const;
  // The placed buffers of `slot` (but `except`) whose blocks overlap e.
  [[nodiscard]] std::vector<Handle> overlapping(std::uint32_t slot, const Extent& e, Handle except) const;
  // The largest live buffers and the memory maps of the slots `include` accepts.
  [[nodiscard]] Moment moment(std::uint64_t event_index, Tick t, const std::vector<SlotView>& slots,
                              const std::function<bool(std::uint32_t slot)>& include, bool keep_live) const;
  // The frames of every stack a reported buffer of r names (and no other), into r.stacks.
  void collect_stacks(RunResult& r) const;

  // A request as reports show it (an OOM's failing allocation).
  [[nodiscard]] static BufferView request_view(const Event& ev);

 private:
  // One cache line each (remember() writes one line per allocation, not two).
  struct alignas(64) Rec {
    AllocId id;
    Bytes requested = 0, block = 0;
    std::uint64_t event_index = 0;
    Tick t;
    Addr addr;
    std::uint64_t stack = 0;
    std::uint32_t name = 0;  // index into names_ (0: none)
    bool has_addr = false, has_shape = false;
    Dtype dtype = Dtype::kNone;
  };
  static_assert(sizeof(Rec) == 64);
  std::uint32_t intern(const std::string& name);
  void unindex(Handle h);
  static void fill_rec(Rec& l, const Event& ev, const Placement& p, std::uint32_t name);
  static BufferView view_of(const Rec& l, std::string name, std::span<const std::uint64_t> shape, std::uint32_t device,
                            Space space, std::uint64_t now);

  std::vector<State> state_;                        // per handle
  std::vector<std::uint32_t> slot_;                 // per handle: its slot, while placed
  std::vector<Handle> local_;                       // per handle: its handle in its slot's policy
  std::vector<Rec> live_;                           // per handle, valid while placed
  std::vector<std::vector<std::uint64_t>> shapes_;  // per handle, when the alloc has a shape
  std::vector<std::string> names_{std::string()};   // interned buffer names (0: none)
  std::unordered_map<std::string, std::uint32_t> name_ids_;
  std::unordered_map<std::uint64_t, std::vector<std::string>> stack_frames_;  // the trace's stacks
  LimitCounter names_kept_;
  // index_addresses(): per slot, the placed buffers with an address by address, and the largest
  // block any of them had (a buffer starting that far below an extent may still reach into it).
  struct ByAddr {
    std::multimap<Addr, Handle> at;
    Bytes widest = 1;
  };
  bool indexed_ = false;
  std::vector<ByAddr> by_addr_;
};

}  // namespace fragsim

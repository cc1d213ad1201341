// tpu-padded: TPU memory as the runtime sees it — every allocation padded to its tiled layout
// (policies/tpu_padding.h, specs/hardware.md §3) and placed by an inner policy (best-fit by
// default; any registered policy). Options:
//   inner, inner_config    the placing policy and its config
//   defragment             model the TPU runtime's defragmentation: when no hole fits but
//                          enough memory is free, live buffers are compacted in address order
//                          (counted: compactions, bytes moved) and the request retried
//   shard, shard_dim       sharding what-if: per-device share of each allocation
// VMEM/SMEM: a space with a scoped limit (TPU presets' vmem) rejects an allocation that takes
// the live scoped bytes past the limit, reported as the compile-time scoped-VMEM OOM.
// Report: padding figures as TPU OOM reports give them — unpadded vs padded peak and
// utilization = unpadded / padded.
//   padded_live = Σ live padded sizes (what the inner policy was asked for)
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "policies/tpu_padding.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

struct TpuPaddedOptions {
  PaddingRule rule;
  PolicyBuilder inner;
  bool defrag = false;
  Bytes scoped_limit = 0;
  Space space = Space::kHbm;
};

class TpuPaddedPolicy : public AllocatorPolicy {
 public:
  TpuPaddedPolicy(TpuPaddedOptions o, const PolicyContext& ctx)
      : rule_(o.rule),
        make_inner_(std::move(o.inner)),
        ctx_(ctx),
        inner_(make_inner_(ctx_)),
        defrag_(o.defrag),
        scoped_limit_(o.scoped_limit),
        space_(o.space) {}

  Placement allocate(const AllocRequest& req) override {
    PaddedSize ps = rule_.apply(req);
    last_ = ps;
    last_scoped_ = false;
    if (ps.padded == kTooLarge) return Placement::failed();
    if (scoped_limit_ && (ps.padded > scoped_limit_ || live_padded_ > scoped_limit_ - ps.padded)) {
      last_scoped_ = true;
      return Placement::failed();
    }
    AllocRequest inner = req;
    inner.size = ps.padded;
    if (defrag_) inner.handle = take_inner_handle();
    Placement p = inner_->allocate(inner);
    if (inner_failed()) return p;
    if (!p.ok && defrag_ && inner_->usage().available >= inner_->rounded_size(inner) && compact())
      p = inner_->allocate(inner);
    if (inner_failed()) return p;
    if (!p.ok) {
      if (defrag_) free_inner_.push_back(inner.handle);
      return p;
    }
    if (req.handle >= live_.size()) live_.resize(req.handle + 1);
    live_[req.handle] = {ps, true, inner.handle};
    if (defrag_) placed_[inner.handle] = {position(p), OwnedRequest(inner), req.handle, true};
    live_padded_ += ps.padded;
    live_unpadded_ += ps.unpadded;
    if (live_padded_ > peak_padded_) {
      peak_padded_ = live_padded_;
      unpadded_at_peak_ = live_unpadded_;
    }
    peak_unpadded_ = std::max(peak_unpadded_, live_unpadded_);
    return p;
  }

  void release(Handle h) override {
    const Handle i = live_[h].inner;
    inner_->release(i);
    if (defrag_) {
      placed_[i].live = false;
      free_inner_.push_back(i);
    }
    inner_failed();
    live_[h].live = false;
    live_padded_ -= live_[h].size.padded;
    live_unpadded_ -= live_[h].size.unpadded;
  }

  // Unsharded, the inner policy places the recording's buffers (a capture's sizes are the device's
  // own: nothing shaped to pad): the recording's allocator, where the inner one is.
  bool seeds_recording() const override { return rule_.shard == 1 && inner_->seeds_recording(); }
  Usage usage() const override { return inner_->usage(); }
  std::string empty_cache() override {
    std::string said = inner_->empty_cache();
    inner_failed();
    return said;
  }
  void memory_map(MemoryMap* out) const override { inner_->memory_map(out); }
  Bytes rounded_size(const AllocRequest& req) const override {
    AllocRequest inner = req;
    inner.size = rule_.apply(req).padded;
    return inner_->rounded_size(inner);
  }
  nlohmann::json stats() const override {
    return {{"padded_bytes", live_padded_},
            {"unpadded_bytes", live_unpadded_},
            {"peak_padded_bytes", peak_padded_},
            {"unpadded_bytes_at_peak", unpadded_at_peak_},
            {"peak_unpadded_bytes", peak_unpadded_},
            {"utilization_at_peak",
             peak_padded_ ? static_cast<double>(unpadded_at_peak_) / static_cast<double>(peak_padded_) : 1.0},
            {"compactions", compactions_},
            {"bytes_moved", bytes_moved_},
            {"inner", inner_->stats()}};
  }
  Bytes limit() const override { return inner_->limit(); }
  Bytes preallocated() const override { return inner_->preallocated(); }
  nlohmann::json extra_report() const override {
    return {{"padding",
             {{"peak_padded_bytes", peak_padded_},
              {"peak_unpadded_bytes", peak_unpadded_},
              {"padding_bytes_at_peak", peak_padded_ - unpadded_at_peak_},
              {"utilization_at_peak",
               peak_padded_ ? static_cast<double>(unpadded_at_peak_) / static_cast<double>(peak_padded_) : 1.0},
              {"shard", rule_.shard},
              {"generation", rule_.generation}}}};
  }
  void validate() const override {
    inner_->validate();
    Bytes p = 0;
    for (const auto& l : live_)
      if (l.live) p += l.size.padded;
    FRAGSIM_CHECK(p == live_padded_, "tpu-padded: live padded bytes stale");
  }
  std::string oom_kind(const AllocRequest&) const override { return last_scoped_ ? "scoped_vmem_limit" : ""; }
  std::string describe_oom(const AllocRequest& req) const override {
    if (last_scoped_)
      return fmt::format(
          "    CompileTimeScopedVmemOom: scoped allocation of {} ({} padded) in {} with {} already live exceeds the "
          "scoped {} limit of {} by {} (raise it with --xla_tpu_scoped_vmem_limit_kib or a Pallas vmem_limit_bytes)\n",
          human_bytes(last_.unpadded), human_bytes(last_.padded), space_name(space_), human_bytes(live_padded_),
          space_name(space_), human_bytes(scoped_limit_), human_bytes(live_padded_ + last_.padded - scoped_limit_));
    Usage u = inner_->usage();
    double util = live_padded_ ? static_cast<double>(live_unpadded_) / static_cast<double>(live_padded_) : 1.0;
    // The TPU runtime's words and size format (pytorch/xla#1735: "Attempting to reserve 3.95G at the
    // bottom of memory. That was not possible. There are 1.92G free"), then fragsim's breakdown in
    // the compiler report's terms ("utilization: Unpadded (a) Padded (b)").
    std::string s = fmt::format(
        "    RESOURCE_EXHAUSTED: Attempting to allocate {} in {}. That was not possible. There are {} free.\n"
        "    (fragsim) {} before padding; live buffers {:.1f}% utilization: Unpadded ({}) Padded ({}); the largest "
        "free block is {}.\n",
        xla_tpu_bytes(last_.padded), space_name(space_), xla_tpu_bytes(u.available), xla_tpu_bytes(last_.unpadded),
        100.0 * util, xla_tpu_bytes(live_unpadded_), xla_tpu_bytes(live_padded_), xla_tpu_bytes(u.largest_available));
    return s + inner_->describe_oom(req);
  }

 private:
  // Where a buffer sits, comparable across a rebuild of the inner policy: (region, offset) for
  // policies that obtain regions (the rebuilt region's base address is new), else the address.
  using Position = std::pair<int, std::uint64_t>;
  static Position position(const Placement& p) {
    if (p.region >= 0) return {p.region, p.region_offset};
    return {-1, p.has_addr ? p.addr.value() : 0};
  }
  struct Live {
    PaddedSize size;
    bool live = false;
    Handle inner = kNoHandle;  // its handle in the inner policy (the engine's own without defragment)
  };
  // With defragment only: where a live buffer sits and its request as the inner policy saw it,
  // for re-placing on compaction (kept apart: copying the request at every allocation cost 7-8 %
  // of a replay without defragment on the 2 M-event bench trace), by its handle in the inner
  // policy. Those handles are reused once released, so that they number at most the buffers
  // live at once: a compaction walks them and its fresh inner policy sizes its per-handle tables
  // by them, in time that grows with the live buffers, not with every allocation so far (the
  // handles the engine gives: with those, each compaction of a many-live run on a device too
  // small cost as much as its allocations so far — quadratic in the run's length).
  struct Placed {
    Position pos;
    OwnedRequest req;
    Handle outer = kNoHandle;  // the engine's handle
    bool live = false;
  };
  // The inner allocator's own abort (a CHECK failure of the real one) is this policy's: the engine
  // asks this policy only, and stops the replay there, before anything touches the state the
  // failed check left (a wrapper that went on released and compacted on it, and crashed).
  bool inner_failed() {
    if (fatal_.empty() && !inner_->fatal_error().empty()) fatal_ = inner_->fatal_error();
    return !fatal_.empty();
  }
  Handle take_inner_handle() {
    if (!free_inner_.empty()) {
      Handle h = free_inner_.back();
      free_inner_.pop_back();
      return h;
    }
    placed_.emplace_back();
    return static_cast<Handle>(placed_.size() - 1);
  }

  // Rebuilds the inner policy with every live buffer re-placed in address order. The old inner
  // policy goes first, so its device memory is back before the new one asks for any. False (and
  // nothing changes) when the live buffers would not all fit again: an inner policy that rounds
  // per segment (torch-caching) can need more memory for them re-placed in another order. That
  // is tried first on a device of the same size that nothing else uses (this policy's is its
  // inner policy's alone), so the real rebuild, the same steps, cannot fail.
  bool compact() {
    // The live buffers in address order, sorted as (position, handle) pairs side by side: a sort
    // that looked each one up in placed_ spent a tenth of a many-live run on those reads.
    std::vector<Key>& order = order_;  // kept: a fresh one each time was a fresh mapping's page faults
    order.clear();
    for (Handle h = 0; h < placed_.size(); ++h)
      if (placed_[h].live) order.push_back({placed_[h].pos, placed_[h].outer, h});
    std::sort(order.begin(), order.end());
    {
      DeviceMemory scratch(*ctx_.space, ctx_.hw->cost);
      PolicyContext trial_ctx = ctx_;
      trial_ctx.device = &scratch;
      auto trial = make_inner_(trial_ctx);
      for (const Key& k : order)
        if (!trial->allocate(placed_[k.inner].req.get()).ok) return false;
    }
    ++compactions_;
    inner_.reset();
    inner_ = make_inner_(ctx_);
    for (const Key& k : order) {
      Placed& l = placed_[k.inner];
      Placement p = inner_->allocate(l.req.get());
      FRAGSIM_CHECK(p.ok, "tpu-padded: compaction could not re-place a live buffer");
      if (p.has_addr && position(p) != l.pos) bytes_moved_ += l.req.req.size;
      l.pos = position(p);
    }
    return true;
  }

  PaddingRule rule_;
  PolicyBuilder make_inner_;
  PolicyContext ctx_;
  std::unique_ptr<AllocatorPolicy> inner_;
  bool defrag_;
  Bytes scoped_limit_;
  Space space_;
  std::vector<Live> live_;  // by handle
  struct Key {              // a live buffer in compact()'s order
    Position pos;
    Handle outer, inner;
    bool operator<(const Key& o) const { return std::tie(pos, outer) < std::tie(o.pos, o.outer); }
  };
  std::vector<Key> order_;
  std::vector<Placed> placed_;      // by inner handle, with defragment only
  std::vector<Handle> free_inner_;  // inner handles released, to reuse
  Bytes live_padded_ = 0, live_unpadded_ = 0, peak_padded_ = 0, peak_unpadded_ = 0, unpadded_at_peak_ = 0;
  std::uint64_t compactions_ = 0;
  Bytes bytes_moved_ = 0;
  PaddedSize last_;
  bool last_scoped_ = false;
};

PolicyBuilder configure_tpu_padded(ConfigReader& cfg, const ConfigContext& ctx) {
  TpuPaddedOptions o;
  o.rule = PaddingRule::from_config(cfg, ctx);
  std::string inner = cfg.text("inner", "best-fit");
  if (inner == "tpu-padded") throw InputError("policy tpu-padded: inner: cannot be tpu-padded itself");
  const PolicyInfo& info = ctx.registry->find(inner, "policy tpu-padded: inner");
  if (info.needs_lifetimes)
    throw InputError("policy tpu-padded: inner: " + inner + " plans offline; it cannot be an inner policy");
  nlohmann::json inner_cfg = cfg.has("inner_config") ? cfg.raw("inner_config") : nlohmann::json::object();
  ConfigReader c(inner_cfg, "policy tpu-padded inner " + inner);
  // The inner policy is the TPU runtime's allocator: it works within the runtime's limit, which
  // can differ from what the compiler may use (SpaceSpec::runtime_limit).
  SpaceSpec runtime = *ctx.space;
  runtime.reserve = runtime.capacity - runtime.runtime_usable();
  ConfigContext inner_ctx = ctx;
  inner_ctx.space = &runtime;
  o.inner = info.configure(c, inner_ctx);  // checks the inner config now, with its message; builds nothing
  c.finish();
  cfg.record("inner_config", c.resolved());
  o.defrag = cfg.flag("defragment", false);
  o.scoped_limit = ctx.space->scoped_limit;
  o.space = ctx.space->space;
  return [o](const PolicyContext& pc) { return std::make_unique<TpuPaddedPolicy>(o, pc); };
}

}  // namespace

void register_tpu_padded(Registry& r) {
  std::vector<PolicyOption> options = {
      {"inner", "best-fit", "xla-bfc",
       "the policy that places the padded sizes (tpu-padded[inner=xla-bfc[preallocate=false]] also sets its options)"},
      {"inner_config", "{}", nlohmann::json::object(), "the inner policy's options, as a JSON object"},
      {"defragment", "false", true,
       "on a fragmentation OOM, compact the live buffers and retry (the TPU runtime's defragmentation)"}};
  for (auto& o : padding_options()) options.push_back(std::move(o));
  PolicyInfo info{"tpu-padded", "TPU tiled-layout padding in front of an inner policy; scoped VMEM limit checks",
                  configure_tpu_padded, false, std::move(options)};
  info.hardware_kind = "tpu";
  info.models_sharding = true;
  info.defaults = {{RecordingSource::kXprof, "tpu", "tpu-padded[inner=tpu-runtime]",
                    "the trace is an XProf capture of the TPU runtime's allocator"},
                   {RecordingSource::kJaxMemoryProfile, "tpu", "tpu-padded[inner=tpu-runtime]",
                    "the trace is a JAX device memory profile of a TPU"},
                   {std::nullopt, "tpu", "tpu-padded", "the hardware is a TPU"}};
  r.add(std::move(info));
}

}  // namespace fragsim

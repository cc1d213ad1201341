#include "traces/generators.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "sim/base/config.h"
#include "sim/base/error.h"
#include "sim/base/event.h"
#include "sim/base/text.h"
#include "traces/trace_writer.h"

namespace fragsim {

namespace {

// splitmix64: tiny, fast, identical everywhere (std distributions differ between libraries).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }
  // Log-uniform integer in [lo, hi].
  std::uint64_t log_uniform(std::uint64_t lo, std::uint64_t hi) {
    double a = std::log(static_cast<double>(std::max<std::uint64_t>(lo, 1))), b = std::log(static_cast<double>(hi));
    auto v = static_cast<std::uint64_t>(std::exp(a + (b - a) * unit()));
    return std::clamp(v, lo, hi);
  }

 private:
  std::uint64_t s_;
};

// Emits events with increasing ids and time; keeps nothing but the writer.
class Emitter {
 public:
  Emitter(const std::string& path, nlohmann::json header) : w_(open_trace_writer(path, header)) {}
  std::uint64_t alloc(std::uint64_t size, const std::string& name = {}, std::vector<std::uint64_t> shape = {},
                      Dtype dt = Dtype::kNone, std::uint32_t space_stream = 0, Space space = Space::kHbm) {
    Event e;
    e.op = Op::kAlloc;
    e.id = AllocId(next_id_++);
    e.size = size;
    e.t = tick();
    e.present = key::kId | key::kSize | key::kT;
    if (!name.empty()) e.name = name, e.present |= key::kName;
    if (!shape.empty() && dt != Dtype::kNone)
      e.shape = std::move(shape), e.dtype = dt, e.present |= key::kShape | key::kDtype;
    if (space_stream) e.stream = space_stream, e.present |= key::kStream;
    if (space != Space::kHbm) e.space = space, e.present |= key::kSpace;
    w_->write(e);
    return e.id.value();
  }
  void free(std::uint64_t id) {
    Event e;
    e.op = Op::kFree;
    e.id = AllocId(id);
    e.t = tick();
    e.present = key::kId | key::kT;
    w_->write(e);
  }
  void mark(const std::string& name) {
    Event e;
    e.op = Op::kMark;
    e.name = name;
    e.t = tick();
    e.present = key::kName | key::kT;
    w_->write(e);
  }
  void finish() { w_->finish(); }

 private:
  Tick tick() { return t_ = t_ + 1000; }  // 1 µs per event in ns
  std::unique_ptr<TraceWriter> w_;
  std::uint64_t next_id_ = 1;
  Tick t_;
};

// Bytes of a tensor of dims; an input error when the knobs make it larger than 64 bits hold.
std::uint64_t tensor_bytes(const std::vector<std::uint64_t>& dims, Dtype dt) {
  Bytes b = 0;
  if (!unpadded_bytes(dims, dt, &b))
    throw InputError(fmt::format("gen: a {}[{}] tensor does not fit in 64 bits", dtype_name(dt), fmt::join(dims, ",")));
  return b;
}

// Knob ranges: wide enough for any real model, narrow enough that every product fits and every
// loop ends.
constexpr std::int64_t kMaxCount = 1'000'000'000, kMaxDim = 1 << 24;

// Gradient checkpointing (rematerialisation) as the training generators take it: "none" keeps
// every activation for the backward pass; "every:K" keeps only the input of every K-th layer and
// recomputes each K-layer segment just before its backward pass (jax.checkpoint / torch.utils.
// checkpoint around K layers); "full" checkpoints every layer (every:1). Returns K, 0 for none.
std::int64_t remat_segment(ConfigReader& c, const char* workload, std::int64_t layers) {
  std::string v = c.text("remat", "none");
  if (v == "none") return 0;
  if (v == "full") return 1;
  if (v.rfind("every:", 0) == 0) {
    char* end = nullptr;
    long long k = std::strtoll(v.c_str() + 6, &end, 10);
    if (end && *end == 0 && v.size() > 6 && k >= 1 && k <= layers) return k;
  }
  throw InputError(fmt::format("gen {}: remat: must be none, full or every:K with K in 1..{} (layers), got '{}'",
                               workload, layers, v));
}

// JAX-style training: persistent params + optimizer state (2×), per step a forward pass whose
// activations are freed in reverse by the backward pass, one large temporary per step, gradients,
// and a donated update (new params replace old ones, same sizes).
void gen_jax_train(Rng& rng, ConfigReader& c, Emitter& em) {
  auto layers = c.integer_in("layers", 12, 1, 100000), hidden = c.integer_in("hidden", 1024, 1, kMaxDim),
       batch = c.integer_in("batch", 8, 1, kMaxDim), seq = c.integer_in("seq", 512, 1, kMaxDim),
       steps = c.integer_in("steps", 4, 0, kMaxCount);
  Dtype dt = c.choice("dtype", "bf16", {"f32", "bf16"}) == "f32" ? Dtype::kF32 : Dtype::kBf16;
  auto H = static_cast<std::uint64_t>(hidden), B = static_cast<std::uint64_t>(batch),
       S = static_cast<std::uint64_t>(seq);
  struct P {
    std::uint64_t id;
    std::vector<std::uint64_t> shape;
  };
  std::vector<P> params, opt;
  for (int l = 0; l < layers; ++l) {
    for (auto shape : {std::vector<std::uint64_t>{H, 4 * H}, std::vector<std::uint64_t>{4 * H, H},
                       std::vector<std::uint64_t>{H, 3 * H}, std::vector<std::uint64_t>{H}}) {
      params.push_back(
          {em.alloc(tensor_bytes(shape, Dtype::kF32), fmt::format("params/l{}", l), shape, Dtype::kF32), shape});
      for (int k = 0; k < 2; ++k)
        opt.push_back(
            {em.alloc(tensor_bytes(shape, Dtype::kF32), fmt::format("opt{}/l{}", k, l), shape, Dtype::kF32), shape});
    }
  }
  const std::int64_t K = remat_segment(c, "jax-train", layers);
  for (int st = 0; st < steps; ++st) {
    em.mark(fmt::format("step {}", st));
    // Forward. Each layer makes its output (act) and an MLP intermediate (mlp). Without remat both
    // stay for the backward pass; with remat only each segment's first act stays (the checkpoint),
    // the rest are freed as soon as the next layer has used them.
    std::vector<std::uint64_t> jitter(static_cast<size_t>(layers)), act_id(static_cast<size_t>(layers)),
        mlp_id(static_cast<size_t>(layers));
    auto act_shape = [&](int) { return std::vector<std::uint64_t>{B, S, H}; };
    auto mlp_shape = [&](int l) { return std::vector<std::uint64_t>{B, S, 4 * H / jitter[l]}; };
    auto checkpoint = [&](int l) { return K == 0 || l % K == 0; };
    for (int l = 0; l < layers; ++l) {
      jitter[l] = 1 + rng.below(3);
      act_id[l] = em.alloc(tensor_bytes(act_shape(l), dt), fmt::format("act/l{}", l), act_shape(l), dt);
      mlp_id[l] = em.alloc(tensor_bytes(mlp_shape(l), dt), fmt::format("mlp/l{}", l), mlp_shape(l), dt);
      if (K) {
        em.free(mlp_id[l]);                                       // recomputed in the backward pass
        if (l > 0 && !checkpoint(l - 1)) em.free(act_id[l - 1]);  // used by this layer, not a checkpoint
      }
    }
    if (K && !checkpoint(static_cast<int>(layers) - 1)) em.free(act_id[layers - 1]);
    std::vector<std::uint64_t> tmp_shape{B, S, 8 * H};
    auto tmp = em.alloc(tensor_bytes(tmp_shape, Dtype::kF32), "loss/temp", tmp_shape, Dtype::kF32);
    em.free(tmp);
    std::vector<std::uint64_t> grads;
    // Backward, last layer first; with remat, each segment is recomputed from its checkpoint first.
    for (int l = static_cast<int>(layers) - 1; l >= 0; --l) {
      if (K && (l % K == K - 1 || l == layers - 1)) {
        for (int r = static_cast<int>(l / K * K); r <= l; ++r) {
          if (!checkpoint(r))
            act_id[r] = em.alloc(tensor_bytes(act_shape(r), dt), fmt::format("remat/act/l{}", r), act_shape(r), dt);
          mlp_id[r] = em.alloc(tensor_bytes(mlp_shape(r), dt), fmt::format("remat/mlp/l{}", r), mlp_shape(r), dt);
        }
      }
      em.free(mlp_id[l]);
      em.free(act_id[l]);
      for (int k = 3; k >= 0; --k) {
        const auto& p = params[l * 4 + k];
        grads.push_back(em.alloc(tensor_bytes(p.shape, Dtype::kF32), fmt::format("grad/l{}", l), p.shape, Dtype::kF32));
      }
    }
    // Donated update: each new param/opt buffer replaces the old one.
    for (size_t i = 0; i < params.size(); ++i) {
      auto np = em.alloc(tensor_bytes(params[i].shape, Dtype::kF32), "params/new", params[i].shape, Dtype::kF32);
      em.free(params[i].id);
      params[i].id = np;
    }
    for (auto& o : opt) {
      auto no = em.alloc(tensor_bytes(o.shape, Dtype::kF32), "opt/new", o.shape, Dtype::kF32);
      em.free(o.id);
      o.id = no;
    }
    for (auto g : grads) em.free(g);
  }
}

// PyTorch eager training: per step, a forward pass of many short-lived tensors of varied sizes
// (temporaries freed at once, saved activations kept for backward), then backward frees the
// saved ones in reverse while allocating gradients that live until the optimizer step.
void gen_torch_eager(Rng& rng, ConfigReader& c, Emitter& em) {
  auto steps = c.integer_in("steps", 20, 0, kMaxCount), ops = c.integer_in("ops_per_step", 200, 1, kMaxCount);
  Bytes max_tensor = c.size("max_tensor", 64 * kMiB), params = c.size("params", 256 * kMiB);
  if (max_tensor < 512 || max_tensor > kTooLarge / 4)
    throw InputError("gen torch-eager: max_tensor: must be in [512, 4 EiB]");
  if (params > 1ULL << 50) throw InputError("gen torch-eager: params: must be at most 1 PiB");
  std::vector<std::uint64_t> weights;
  Bytes w = 0;
  while (w < params) {
    Bytes s = round_up(rng.log_uniform(4 * kKiB, std::max<Bytes>(max_tensor, 8 * kKiB)), 4);
    weights.push_back(em.alloc(s, "weight"));
    w += s;
  }
  // The ops of a step form `layers` equal groups; remat checkpoints groups of them (remat_segment).
  const std::int64_t layers = c.integer_in("layers", 12, 1, kMaxCount);
  const std::int64_t K = remat_segment(c, "torch-eager", layers);
  struct Saved {
    std::uint64_t id;
    Bytes size;
    std::int64_t segment;
    bool live;
  };
  for (int st = 0; st < steps; ++st) {
    em.mark(fmt::format("step {}", st));
    std::vector<Saved> saved;
    // Forward. Tensors saved for backward stay; with remat, at the end of each segment all its
    // saved tensors but the first (the checkpoint, the segment's input) are freed.
    auto end_segment = [&](std::int64_t seg) {
      bool first = true;
      for (auto& v : saved)
        if (v.segment == seg) {
          if (!first) em.free(v.id), v.live = false;
          first = false;
        }
    };
    std::int64_t seg = 0;
    for (int i = 0; i < ops; ++i) {
      std::int64_t here = K ? static_cast<std::int64_t>(i) * layers / ops / K : 0;
      if (here != seg) end_segment(seg), seg = here;
      Bytes s = round_up(rng.log_uniform(512, max_tensor), 4);
      auto id = em.alloc(s, "activation");
      if (rng.unit() < 0.4)
        saved.push_back({id, s, here, true});
      else
        em.free(id);
      if (rng.unit() < 0.3) {
        auto t = em.alloc(round_up(rng.log_uniform(4, 64 * kKiB), 4), "scalar");
        em.free(t);
      }
    }
    if (K) end_segment(seg);
    // Backward in reverse; with remat, a segment's freed tensors are recomputed when its backward
    // pass begins.
    std::vector<std::uint64_t> grads;
    std::int64_t recomputed = -1;
    while (!saved.empty()) {
      if (K && saved.back().segment != recomputed) {
        recomputed = saved.back().segment;
        for (auto& v : saved)
          if (v.segment == recomputed && !v.live) v.id = em.alloc(v.size, "activation/remat"), v.live = true;
      }
      auto g = em.alloc(round_up(rng.log_uniform(512, max_tensor), 4), "grad_input");
      em.free(saved.back().id);
      saved.pop_back();
      if (rng.unit() < 0.5)
        grads.push_back(g);
      else
        em.free(g);
    }
    for (auto g : grads) em.free(g);
  }
}

// LLM serving: requests arrive with a prompt length, grow their KV cache token by token (a
// larger buffer is allocated and the old one freed each `grow_tokens`), and finish at a variable
// length; plus per-iteration activation temporaries.
void gen_llm_serving(Rng& rng, ConfigReader& c, Emitter& em) {
  auto requests = c.integer_in("requests", 64, 0, kMaxCount), concurrency = c.integer_in("concurrency", 8, 1, 1 << 20),
       max_tokens = c.integer_in("max_tokens", 2048, 2, kMaxDim), grow = c.integer_in("grow_tokens", 128, 1, kMaxDim);
  Bytes per_token = c.size("kv_bytes_per_token", 160 * kKiB), weights = c.size("weights", 1 * kGiB);
  if (per_token > (1ULL << 36)) throw InputError("gen llm-serving: kv_bytes_per_token: must be at most 64 GiB");
  em.alloc(weights, "weights");
  struct Req {
    std::uint64_t id, kv;
    std::int64_t len, target;
  };
  std::vector<Req> active;
  std::int64_t started = 0;
  auto kv_bytes = [&](std::int64_t tokens) {
    return static_cast<Bytes>((tokens + grow - 1) / grow * grow) * per_token;
  };
  while (started < requests || !active.empty()) {
    while (started < requests && static_cast<std::int64_t>(active.size()) < concurrency) {
      std::int64_t prompt = 16 + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(max_tokens / 2)));
      std::int64_t target = std::min<std::int64_t>(
          max_tokens, prompt + 1 + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(max_tokens))));
      active.push_back({static_cast<std::uint64_t>(started),
                        em.alloc(kv_bytes(prompt), fmt::format("kv/req{}", started)), prompt, target});
      ++started;
    }
    auto act = em.alloc(static_cast<Bytes>(active.size()) * 4 * kMiB, "decode/activations");
    for (auto& r : active) {
      std::int64_t next = std::min(r.target, r.len + grow);
      if (kv_bytes(next) != kv_bytes(r.len)) {
        auto nk = em.alloc(kv_bytes(next), fmt::format("kv/req{}", r.id));
        em.free(r.kv);
        r.kv = nk;
      }
      r.len = next;
    }
    em.free(act);
    for (size_t i = 0; i < active.size();) {
      if (active[i].len >= active[i].target) {
        em.free(active[i].kv);
        active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
}

// Random churn: `events` events keeping about `live` allocations, sizes log-uniform in
// [min_size, max_size], frees of a random live allocation. Used by stress tests and benchmarks.
void gen_random(Rng& rng, ConfigReader& c, Emitter& em) {
  auto events = c.integer_in("events", 100000, 0, 100 * kMaxCount),
       live_target = c.integer_in("live", 1000, 1, kMaxCount), streams = c.integer_in("streams", 1, 1, 1 << 20);
  double collective = c.number("collective", 0.0);
  if (!(collective >= 0 && collective <= 1)) throw InputError("gen random: collective: must be a share in [0, 1]");
  Bytes lo = c.size("min_size", 1), hi = c.size("max_size", 16 * kMiB);
  if (lo > hi || hi == 0) throw InputError("gen random: need 0 < min_size <= max_size");
  std::vector<std::uint64_t> live;
  for (std::int64_t i = 0; i < events; ++i) {
    bool do_alloc = live.empty() || (static_cast<std::int64_t>(live.size()) < 2 * live_target &&
                                     rng.below(static_cast<std::uint64_t>(2 * live_target)) >= live.size());
    if (do_alloc) {
      auto stream = static_cast<std::uint32_t>(streams > 1 ? rng.below(static_cast<std::uint64_t>(streams)) : 0);
      Space sp = collective > 0 && rng.unit() < collective ? Space::kCollective : Space::kHbm;
      live.push_back(em.alloc(rng.log_uniform(lo, hi), {}, {}, Dtype::kNone, stream, sp));
    } else {
      size_t k = rng.below(live.size());
      em.free(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
  }
}

// A compiler's buffer-assignment instance, as a schedule of `buffers` buffers over buffers / 2
// steps: the shapes that real instances (MindSpore's SOMAS dumps, XLA's live ranges in the IOPDDL
// contest's problems) share — most buffers live a step or two (an op's output read by the next),
// some live across a stretch of the program (residuals, activations kept for the backward pass),
// a few across most of it; sizes span eight orders of magnitude, half of them powers of two.
// At each step the buffers that end there are freed, then those that start are allocated: the
// trace's planning instance (fragsim plan) is the schedule. Online first fit (--policy first-fit)
// lands 13-15 % above the most bytes live at once on it, the planner's greedy about 2 %.
void gen_compiler(Rng& rng, ConfigReader& c, Emitter& em) {
  const auto n = static_cast<std::uint64_t>(c.integer_in("buffers", 20000, 1, kMaxCount));
  const double long_share = c.number("long", 0.3), longest_share = c.number("longest", 0.05);
  if (!(long_share >= 0 && longest_share >= 0 && long_share + longest_share <= 1))
    throw InputError("gen compiler: long, longest: shares in [0, 1] that add up to at most 1");
  const Bytes lo = c.size("min_size", 16), hi = c.size("max_size", kGiB);
  if (lo > hi || hi == 0) throw InputError("gen compiler: need 0 < min_size <= max_size");
  const std::uint64_t steps = std::max<std::uint64_t>(2, n / 2);
  const int lo_bit = std::bit_width(lo) - 1, hi_bit = std::bit_width(hi) - 1;
  std::vector<std::vector<std::pair<std::uint64_t, Bytes>>> starts(steps);  // per step: (end, size)
  for (std::uint64_t k = 0; k < n; ++k) {
    const double u = rng.unit();
    std::uint64_t life;
    if (u < 1 - long_share - longest_share)
      life = 1 + static_cast<std::uint64_t>(-std::log(1 - rng.unit()) / 0.7);  // geometric-like, mean ~2.4
    else if (u < 1 - longest_share)
      life = rng.log_uniform(1, std::max<std::uint64_t>(1, steps / 10));
    else
      life = rng.log_uniform(std::max<std::uint64_t>(1, steps / 10), steps);
    const std::uint64_t start = rng.below(steps);
    Bytes size = rng.log_uniform(lo, hi);
    if (rng.unit() < 0.5)
      size = std::clamp(
          Bytes{1} << (lo_bit + static_cast<int>(rng.below(static_cast<std::uint64_t>(hi_bit - lo_bit + 1)))), lo, hi);
    starts[start].push_back({std::min(steps, start + life), size});
  }
  std::vector<std::vector<std::uint64_t>> ends(steps + 1);
  for (std::uint64_t t = 0; t <= steps; ++t) {
    for (std::uint64_t id : ends[t]) em.free(id);
    if (t == steps) break;
    for (const auto& [end, size] : starts[t]) ends[end].push_back(em.alloc(size));
  }
}

// Shaped allocation helper: size from shape × dtype.
std::uint64_t shaped(Emitter& em, const std::string& name, std::vector<std::uint64_t> shape, Dtype dt,
                     Space space = Space::kHbm) {
  std::uint64_t n = tensor_bytes(shape, dt);
  return em.alloc(n, name, std::move(shape), dt, 0, space);
}

// TPU training step with shaped buffers: embedding [vocab, hidden] (vocab pads badly), per layer
// attention weights [hidden, 3·hidden], per-head activations [batch, seq, heads, head_dim]
// (head_dim 64 pads to 128 on the minor dim), MLP [hidden, mlp], layer norms [hidden] (rank 1),
// logits [batch·seq, vocab]; optimizer state in f32, activations in bf16.
void gen_tpu_train(Rng& rng, ConfigReader& c, Emitter& em) {
  auto layers = c.integer_in("layers", 4, 1, 100000), hidden = c.integer_in("hidden", 1024, 1, kMaxDim),
       batch = c.integer_in("batch", 8, 1, kMaxDim), seq = c.integer_in("seq", 512, 1, kMaxDim),
       heads = c.integer_in("heads", 16, 1, 1 << 16), head_dim = c.integer_in("head_dim", 64, 1, 1 << 16),
       vocab = c.integer_in("vocab", 50257, 1, kMaxDim), steps = c.integer_in("steps", 2, 0, kMaxCount);
  auto H = static_cast<std::uint64_t>(hidden), B = static_cast<std::uint64_t>(batch),
       S = static_cast<std::uint64_t>(seq), NH = static_cast<std::uint64_t>(heads),
       HD = static_cast<std::uint64_t>(head_dim), V = static_cast<std::uint64_t>(vocab);
  std::vector<std::uint64_t> persistent;
  auto param = [&](const std::string& n, std::vector<std::uint64_t> shape) {
    persistent.push_back(shaped(em, n, shape, Dtype::kBf16));
    persistent.push_back(shaped(em, n + "/mu", shape, Dtype::kF32));
    persistent.push_back(shaped(em, n + "/nu", shape, Dtype::kF32));
  };
  param("embed", {V, H});
  for (int l = 0; l < layers; ++l) {
    param(fmt::format("l{}/qkv", l), {H, 3 * H});
    param(fmt::format("l{}/out", l), {NH * HD, H});
    param(fmt::format("l{}/mlp_in", l), {H, 4 * H});
    param(fmt::format("l{}/mlp_out", l), {4 * H, H});
    param(fmt::format("l{}/ln", l), {H});
  }
  for (int st = 0; st < steps; ++st) {
    em.mark(fmt::format("step {}", st));
    std::vector<std::uint64_t> saved;
    for (int l = 0; l < layers; ++l) {
      saved.push_back(shaped(em, fmt::format("l{}/q", l), {B, S, NH, HD}, Dtype::kBf16));
      saved.push_back(shaped(em, fmt::format("l{}/k", l), {B, S, NH, HD}, Dtype::kBf16));
      saved.push_back(shaped(em, fmt::format("l{}/v", l), {B, S, NH, HD}, Dtype::kBf16));
      auto scores = shaped(em, fmt::format("l{}/scores", l), {B, NH, S, S}, Dtype::kF32);
      em.free(scores);
      saved.push_back(shaped(em, fmt::format("l{}/mlp", l), {B, S, 4 * H}, Dtype::kBf16));
      if (rng.unit() < 0.5) {
        auto stat = shaped(em, fmt::format("l{}/ln_stat", l), {B, S, 1}, Dtype::kF32);  // pads 128x on the minor dim
        em.free(stat);
      }
    }
    auto logits = shaped(em, "logits", {B * S, V}, Dtype::kF32);
    em.free(logits);
    std::vector<std::uint64_t> grads;
    while (!saved.empty()) {
      em.free(saved.back());
      saved.pop_back();
      if (saved.size() % 4 == 0) grads.push_back(shaped(em, "grad", {H, 4 * H}, Dtype::kF32));
    }
    for (auto g : grads) em.free(g);
  }
}

// Pallas-style kernel sequence: each kernel allocates VMEM scratch tiles (double-buffered
// input blocks, an f32 accumulator) and a few SMEM scalars, and frees them when it ends; block
// sizes vary per kernel up to max_block, so some kernels need more scoped VMEM than others.
void gen_pallas_kernels(Rng& rng, ConfigReader& c, Emitter& em) {
  auto kernels = c.integer_in("kernels", 50, 0, kMaxCount), max_block = c.integer_in("max_block", 1024, 128, 1 << 20);
  for (int k = 0; k < kernels; ++k) {
    std::uint64_t bm = 128ULL << rng.below(static_cast<std::uint64_t>(std::max<std::int64_t>(
                           1, 64 - __builtin_clzll(static_cast<std::uint64_t>(max_block / 128)))));
    bm = std::min<std::uint64_t>(bm, static_cast<std::uint64_t>(max_block));
    std::uint64_t bk = 128 + 64 * rng.below(8);  // some multiples of 128, some not
    std::vector<std::uint64_t> ids;
    em.mark(fmt::format("kernel {}", k));
    for (int buf = 0; buf < 2; ++buf) {
      ids.push_back(shaped(em, fmt::format("k{}/x{}", k, buf), {bm, bk}, Dtype::kBf16, Space::kVmem));
      ids.push_back(shaped(em, fmt::format("k{}/w{}", k, buf), {bk, bm}, Dtype::kBf16, Space::kVmem));
    }
    ids.push_back(shaped(em, fmt::format("k{}/acc", k), {bm, bm}, Dtype::kF32, Space::kVmem));
    for (int s = 0; s < 3; ++s)
      ids.push_back(shaped(em, fmt::format("k{}/idx{}", k, s), {}, Dtype::kS32, Space::kSmem));
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) em.free(*it);
  }
}

struct Workload {
  WorkloadInfo info;
  std::function<void(Rng&, ConfigReader&, Emitter&)> run;
};

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> kAll = {
      {{"jax-train",
        "JAX training loop: params + 2x optimizer state, activations freed in reverse, one big temporary "
        "per step, donated updates (layers, hidden, batch, seq, steps, dtype, remat: none|every:K|full)"},
       gen_jax_train},
      {{"torch-eager",
        "PyTorch eager training: many short-lived tensors of varied sizes (steps, ops_per_step, "
        "max_tensor, params, layers, remat: none|every:K|full)"},
       gen_torch_eager},
      {{"llm-serving",
        "LLM serving: KV caches growing per request of variable length (requests, concurrency, "
        "max_tokens, grow_tokens, kv_bytes_per_token, weights)"},
       gen_llm_serving},
      {{"random", "random churn around a live-set size (events, live, min_size, max_size, streams, collective)"},
       gen_random},
      {{"compiler",
        "a compiler's buffer-assignment instance: short, long and program-long lives, sizes of eight orders of "
        "magnitude (buffers, long, longest, min_size, max_size)"},
       gen_compiler},
      {{"tpu-train",
        "TPU training step with shaped buffers that pad badly and well (layers, hidden, batch, seq, "
        "heads, head_dim, vocab, steps)"},
       gen_tpu_train},
      {{"pallas-kernels", "Pallas-style kernels with VMEM scratch tiles and SMEM scalars (kernels, max_block)"},
       gen_pallas_kernels},
  };
  return kAll;
}

}  // namespace

const std::vector<WorkloadInfo>& list_workloads() {
  static const std::vector<WorkloadInfo> kInfos = [] {
    std::vector<WorkloadInfo> v;
    for (const auto& w : workloads()) v.push_back(w.info);
    return v;
  }();
  return kInfos;
}

nlohmann::json generate_workload(const std::string& name, std::uint64_t seed, const nlohmann::json& settings,
                                 const std::string& path) {
  for (const auto& w : workloads()) {
    if (w.info.name != name) continue;
    ConfigReader cfg(settings, "gen " + name);
    Rng rng(seed);
    // The header carries the knobs as given; defaults are implied by the workload's code.
    nlohmann::json header = {{"fragsim_trace", 1}, {"time_unit", "ns"}, {"source", "fragsim gen"},
                             {"workload", name},   {"seed", seed},      {"settings", settings}};
    Emitter em(path, header);
    w.run(rng, cfg, em);
    cfg.finish();
    em.finish();
    return cfg.resolved();
  }
  std::vector<std::string_view> names;
  for (const auto& w : workloads()) names.push_back(w.info.name);
  throw InputError(
      fmt::format("gen: unknown workload '{}'{} (valid: {})", name, did_you_mean(name, names), fmt::join(names, ", ")));
}

}  // namespace fragsim

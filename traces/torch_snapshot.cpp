#include "traces/torch_snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/base/text.h"
#include "traces/pickle.h"

namespace fragsim {

namespace {

constexpr Bytes kSmallSegment = 2 * kMiB;  // a small-pool segment (and expandable small page)
constexpr Bytes kLargePage = 20 * kMiB;    // an expandable large-pool page
constexpr Bytes kSmallRequest = 1 * kMiB;  // requests up to this go to the small pool
constexpr size_t kMaxFrames = 48;          // frames kept per stack (innermost first)

// Work on a snapshot is bounded by its size, in bytes (sim/base/limits.h): a pickle can reference
// one object many times (its memo), so a small file could otherwise describe an exponential amount
// of data and, through one shared string, copy it many times. Every object visited costs 16 bytes
// and every byte copied out of the pickle one, against the `strings` limit; what the conversion
// keeps — events and stacks — counts against `objects` and `names`.
struct WorkBudget {
  LimitCounter bytes, kept, names;
  explicit WorkBudget(const std::string& path)
      : bytes(Limit::kStrings, path, input_bytes(path)),
        kept(Limit::kObjects, path, input_bytes(path)),
        names(Limit::kNames, path, input_bytes(path)) {}
  void spend(std::uint64_t visits = 1) { bytes.spend(16 * visits); }
  void copy(std::uint64_t n) { bytes.spend(n); }
};

nlohmann::json to_json(const PyObj& o, WorkBudget& budget, int depth = 0) {
  budget.spend();
  budget.kept.spend(1);  // each object visited becomes a node of the JSON kept in the header
  if (depth > 16) return nullptr;
  switch (o.kind) {
    case PyObj::kNone:
      return nullptr;
    case PyObj::kBool:
      return o.b;
    case PyObj::kInt:
      return o.big ? nlohmann::json(o.u) : nlohmann::json(o.i);
    case PyObj::kFloat:
      return o.f;
    case PyObj::kStr:
      budget.copy(o.s.size());
      return sanitize_utf8(o.s);
    case PyObj::kBytes:
      return nullptr;
    case PyObj::kList:
    case PyObj::kTuple: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& x : o.items) a.push_back(to_json(*x, budget, depth + 1));
      return a;
    }
    case PyObj::kDict: {
      nlohmann::json d = nlohmann::json::object();
      for (const auto& [k, v] : o.kv)
        if (k->kind == PyObj::kStr) {
          budget.copy(k->s.size());
          d[sanitize_utf8(k->s)] = to_json(*v, budget, depth + 1);
        }
      return d;
    }
  }
  return nullptr;
}

// Half-open address ranges [lo, hi), kept disjoint and merged.
class RangeSet {
 public:
  void add(std::uint64_t lo, std::uint64_t hi) {
    if (lo >= hi) return;
    auto it = r_.upper_bound(lo);
    if (it != r_.begin() && std::prev(it)->second >= lo) --it;
    while (it != r_.end() && it->first <= hi) {
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
      it = r_.erase(it);
    }
    r_.emplace(lo, hi);
  }
  void remove(std::uint64_t lo, std::uint64_t hi) {
    if (lo >= hi) return;
    auto it = r_.upper_bound(lo);
    if (it != r_.begin()) --it;
    while (it != r_.end() && it->first < hi) {
      auto [a, b] = *it;
      if (b <= lo) {
        ++it;
        continue;
      }
      it = r_.erase(it);
      if (a < lo) r_.emplace(a, lo);
      if (b > hi) r_.emplace(hi, b);
    }
  }
  const std::map<std::uint64_t, std::uint64_t>& ranges() const { return r_; }

 private:
  std::map<std::uint64_t, std::uint64_t> r_;
};

// One event of the output, before devices are merged by time.
struct Raw {
  Op op = Op::kMark;
  std::uint64_t t = 0;  // µs
  bool has_t = false;
  std::uint32_t device = 0;
  std::uint64_t id = 0;
  Bytes size = 0;
  std::uint64_t addr = 0;
  bool has_addr = false;
  std::int64_t stream = 0;
  bool pre_trace = false;
  std::uint64_t line = 0;   // 1-based position in its device trace (messages)
  std::uint64_t stack = 0;  // 0: none
  std::uint32_t name = 0;   // index into names_ (0: none)
  Bytes block = 0;          // pre-trace alloc: the recorded block size (0: unknown)
};

// A trace entry as recorded.
enum class Action { kAlloc, kFreeRequested, kFreeCompleted, kSegAlloc, kSegFree, kSegMap, kSegUnmap, kOom, kMark };

struct Entry {
  Action action;
  std::uint64_t t = 0;
  bool has_t = false;
  std::uint64_t addr = 0;
  Bytes size = 0;
  std::int64_t stream = 0;
  std::uint64_t device_free = 0;
  bool has_device_free = false;
  const PyObj* frames = nullptr;
  std::uint64_t line = 0;
};

// What a device's trace tells about its usable memory (specs/torch-caching.md §3, §5).
struct DeviceBounds {
  Bytes peak_reserved = 0;      // lower bound: it held this much
  std::optional<Bytes> upper;   // a failed cudaMalloc: usable < reserved + request
  std::optional<Bytes> at_oom;  // reserved + cudaMemGetInfo's free at a recorded oom
  std::uint64_t retries = 0, empty_caches = 0;
};

class SnapshotReader : public TraceReader {
 public:
  SnapshotReader(const std::string& path, const ReaderOptions& opt) : TraceReader(path, opt) {
    auto doc = load_pickle(path);
    budget_ = std::make_unique<WorkBudget>(path);
    convert(*doc->root);
  }

 protected:
  bool read_raw(Event& ev) override {
    if (next_ >= events_.size()) return false;
    const Raw& r = events_[next_];
    // A stack is defined just before its first use.
    if (r.stack && !emitted_stacks_.count(r.stack)) {
      emitted_stacks_.insert(r.stack);
      ev.op = Op::kStack;
      ev.line = r.line;
      ev.id = AllocId(r.stack);
      ev.frames = stacks_[r.stack - 1];
      ev.present = key::kId | key::kFrames;
      if (r.has_t) ev.t = Tick(r.t), ev.present |= key::kT;
      return true;
    }
    ++next_;
    ev.op = r.op;
    ev.line = r.line;
    ev.device = r.device;
    ev.present = key::kDevice;
    if (r.has_t) ev.t = Tick(r.t), ev.present |= key::kT;
    if (r.op == Op::kAlloc || r.op == Op::kFree) ev.id = AllocId(r.id), ev.present |= key::kId;
    if (r.op != Op::kFree && r.op != Op::kMark && r.op != Op::kEmptyCache) ev.size = r.size, ev.present |= key::kSize;
    if (r.has_addr) ev.addr = Addr(r.addr), ev.present |= key::kAddr;
    if (r.op != Op::kMark && r.op != Op::kOom && r.op != Op::kEmptyCache)
      ev.stream = r.stream, ev.present |= key::kStream;
    if (r.pre_trace) ev.present |= key::kPreTrace;
    if (r.stack) ev.stack = r.stack, ev.present |= key::kStack;
    if (r.name) ev.name = names_[r.name], ev.present |= key::kName;
    if (r.block) ev.block_size = r.block, ev.present |= key::kBlockSize;
    return true;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { throw InputError(path_ + ": " + what); }

  static std::uint64_t u64(const PyObj* o) { return o->big ? o->u : static_cast<std::uint64_t>(o->as_int()); }

  std::uint64_t field_u(const PyObj& d, const char* k, std::uint64_t line, const char* where) const {
    const PyObj* v = d.get(k);
    if (!v || !v->is_int() || (!v->big && v->as_int() < 0))
      bad(fmt::format("{} entry {}: {}: missing or not a non-negative integer", where, line, k));
    return u64(v);
  }
  static std::int64_t stream_of(const PyObj& d) {
    const PyObj* v = d.get("stream");
    if (!v || !v->is_int()) return 0;
    return v->big ? static_cast<std::int64_t>(v->u) : v->as_int();
  }

  // ---- names and stacks (issue 10 §6) ----
  // "file:line function" of the Python frames of a recorded stack, innermost first; C++ frames
  // (no .py file) are left out.
  std::vector<std::string> python_frames(const PyObj* frames) {
    std::vector<std::string> out;
    if (!frames || frames->kind != PyObj::kList) return out;
    for (const auto& f : frames->items) {
      budget_->spend();
      if (out.size() == kMaxFrames) break;
      const PyObj* file = f->get("filename");
      const PyObj* fn = f->get("name");
      const PyObj* ln = f->get("line");
      if (!file || file->kind != PyObj::kStr || file->s.size() < 3 || file->s.compare(file->s.size() - 3, 3, ".py"))
        continue;
      budget_->copy(file->s.size() + (fn && fn->kind == PyObj::kStr ? fn->s.size() : 1) + 24);
      out.push_back(sanitize_utf8(fmt::format("{}:{} {}", file->s, ln && ln->is_int() ? ln->as_int() : 0,
                                              fn && fn->kind == PyObj::kStr ? fn->s : "?")));
    }
    return out;
  }
  // The innermost frame of the user's code: the first Python frame outside torch itself.
  static std::string user_frame(const std::vector<std::string>& frames) {
    for (const auto& f : frames) {
      if (f.find("/torch/") != std::string::npos || f.front() == '<') continue;
      auto slash = f.rfind('/', f.find(':'));
      return slash == std::string::npos ? f : f.substr(slash + 1);
    }
    return {};
  }
  // Interns a stack; returns (stack id or 0, name index or 0).
  std::pair<std::uint64_t, std::uint32_t> stack_and_name(const PyObj* frames) {
    auto fr = python_frames(frames);
    if (fr.empty()) return {0, 0};
    std::string key = fmt::format("{}", fmt::join(fr, "\n"));
    budget_->copy(key.size());
    auto [it, fresh] = stack_ids_.try_emplace(key, stacks_.size() + 1);
    if (fresh) {
      budget_->names.spend(2 * key.size());  // the key and the frames, kept
      stacks_.push_back(fr);
    }
    std::string nm = user_frame(fr);
    std::uint32_t name = 0;
    if (!nm.empty()) {
      auto [nit, nfresh] = name_ids_.try_emplace(nm, static_cast<std::uint32_t>(names_.size()));
      if (nfresh) names_.push_back(nm);
      name = nit->second;
    }
    return {it->second, name};
  }
  std::uint32_t name_of(const std::string& nm) {
    auto [it, fresh] = name_ids_.try_emplace(nm, static_cast<std::uint32_t>(names_.size()));
    if (fresh) names_.push_back(nm);
    return it->second;
  }

  // ---- parsing ----
  std::vector<Entry> parse_trace(const PyObj& tr, size_t dev, bool* any_time) {
    std::vector<Entry> es;
    es.reserve(tr.items.size());
    std::uint64_t line = 0;
    for (const auto& ep : tr.items) {
      budget_->spend();
      budget_->kept.spend(2);  // its entry, then its events: about two objects' memory
      ++line;
      const PyObj& e = *ep;
      const PyObj* a = e.get("action");
      if (!a || a->kind != PyObj::kStr) bad(fmt::format("device_traces[{}] entry {}: action: missing", dev, line));
      Entry x;
      x.line = line;
      x.stream = stream_of(e);
      x.frames = e.get("frames");
      if (const PyObj* t = e.get("time_us"); t && t->is_int() && (t->big || t->as_int() >= 0)) {
        x.t = u64(t);
        x.has_t = *any_time = true;
      }
      const std::string& act = a->s;
      static const std::pair<const char*, Action> kActions[] = {{"alloc", Action::kAlloc},
                                                                {"free_requested", Action::kFreeRequested},
                                                                {"free_completed", Action::kFreeCompleted},
                                                                {"segment_alloc", Action::kSegAlloc},
                                                                {"segment_free", Action::kSegFree},
                                                                {"segment_map", Action::kSegMap},
                                                                {"segment_unmap", Action::kSegUnmap},
                                                                {"oom", Action::kOom},
                                                                {"snapshot", Action::kMark},
                                                                {"annotate", Action::kMark}};
      bool known = false;
      for (const auto& [n, act_v] : kActions)
        if (act == n) x.action = act_v, known = true;
      if (!known) bad(fmt::format("device_traces[{}] entry {}: action: unknown action '{}'", dev, line, act));
      if (x.action == Action::kOom) {
        x.size = field_u(e, "size", line, "trace");
        if (const PyObj* f = e.get("device_free"); f && f->is_int() && (f->big || f->as_int() >= 0))
          x.device_free = u64(f), x.has_device_free = true;
      } else if (x.action != Action::kMark) {
        x.size = field_u(e, "size", line, "trace");
        x.addr = field_u(e, "addr", line, "trace");
      }
      es.push_back(x);
    }
    return es;
  }

  // The segments of the state at the dump, with each block's address (older layouts give none:
  // each block starts where the previous one ended, from the segment's address).
  struct Block {
    std::uint64_t addr;
    Bytes size, requested;
    bool active;
    const PyObj* frames;
  };
  struct Segment {
    std::uint32_t device;
    std::uint64_t addr;
    Bytes size;
    std::int64_t stream;
    bool expandable, small;
    std::vector<Block> blocks;
  };
  std::vector<Segment> parse_segments(const PyObj* segments) {
    std::vector<Segment> out;
    if (!segments) return out;
    for (const auto& gp : segments->items) {
      budget_->spend();
      const PyObj& g = *gp;
      if (g.kind != PyObj::kDict) bad("segments: an entry is not a dict");
      Segment s;
      const PyObj* gd = g.get("device");
      if (!gd || !gd->is_int() || gd->as_int() < 0 || gd->as_int() > 0xffff)
        bad("segments: device: missing or invalid");
      s.device = static_cast<std::uint32_t>(gd->as_int());
      s.addr = field_u(g, "address", 0, "segments");
      s.size = field_u(g, "total_size", 0, "segments");
      s.stream = stream_of(g);
      const PyObj* ex = g.get("is_expandable");
      s.expandable = ex && ex->is_int() && ex->as_int() != 0;
      const PyObj* ty = g.get("segment_type");
      s.small = ty && ty->kind == PyObj::kStr ? ty->s == "small" : s.size == kSmallSegment;
      const PyObj* blocks = g.get("blocks");
      std::uint64_t at = s.addr;
      if (blocks && blocks->kind == PyObj::kList) {
        std::uint64_t k = 0;
        for (const auto& bp : blocks->items) {
          budget_->spend();
          budget_->kept.spend(1);
          ++k;
          const PyObj& b = *bp;
          Block blk;
          const PyObj* ad = b.get("address");
          blk.addr = ad ? field_u(b, "address", k, "segments.blocks") : at;
          blk.size = field_u(b, "size", k, "segments.blocks");
          const PyObj* rq = b.get("requested_size");
          blk.requested = rq && rq->is_int() && rq->as_int() >= 0 ? u64(rq) : blk.size;
          const PyObj* st = b.get("state");
          blk.active = st && st->kind == PyObj::kStr && (st->s == "active_allocated" || st->s == "active_pending_free");
          blk.frames = b.get("frames");
          if (const PyObj* h = b.get("history");
              (!blk.frames || blk.frames->items.empty()) && h && h->kind == PyObj::kList && !h->items.empty())
            blk.frames = h->items.back()->get("frames");  // the 2.0 layout keeps frames in history
          at = blk.addr + blk.size;
          s.blocks.push_back(blk);
        }
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  // ---- conversion ----
  void convert(const PyObj& root) {
    const PyObj* traces = nullptr;
    const PyObj* segments = nullptr;
    if (root.kind == PyObj::kList) {  // torch.cuda.memory_snapshot(): the segments alone
      segments = &root;
    } else if (root.kind == PyObj::kDict) {
      traces = root.get("device_traces");
      segments = root.get("segments");
      if (traces && traces->kind != PyObj::kList) bad("not a PyTorch memory snapshot: device_traces is not a list");
      if (!segments || segments->kind != PyObj::kList) bad("not a PyTorch memory snapshot: no segments list");
    } else {
      bad("not a PyTorch memory snapshot (top level is neither a dict nor a list of segments)");
    }
    nlohmann::json header = {{"fragsim_trace", 1}, {"source", "torch-snapshot"}};
    if (root.kind == PyObj::kDict)
      if (const PyObj* s = root.get("allocator_settings"))
        header["allocator_settings"] = settings_ = to_json(*s, *budget_);
    if (!traces) header["state_only"] = true;
    names_.emplace_back();  // index 0: no name
    auto segs = parse_segments(segments);

    bool any_time = false;
    std::vector<Raw> head, body;
    nlohmann::json devices = nlohmann::json::array();
    size_t ndev = traces ? traces->items.size() : 0;
    std::map<size_t, std::vector<const Segment*>> segs_of;  // device → its segments
    for (const auto& s : segs) {
      ndev = std::max<size_t>(ndev, s.device + 1);
      segs_of[s.device].push_back(&s);
    }
    for (size_t dev = 0; dev < ndev; ++dev) {
      std::vector<Entry> es;
      if (traces && dev < traces->items.size()) {
        const PyObj& tr = *traces->items[dev];
        if (tr.kind != PyObj::kList) bad(fmt::format("device_traces[{}] is not a list", dev));
        es = parse_trace(tr, dev, &any_time);
      }
      std::vector<const Segment*> dsegs;
      if (auto it = segs_of.find(dev); it != segs_of.end()) dsegs = it->second;
      if (es.empty() && dsegs.empty()) continue;
      DeviceBounds b = convert_device(static_cast<std::uint32_t>(dev), es, dsegs, &head, &body);
      if (b.upper || b.at_oom) devices.push_back(bounds_json(static_cast<std::uint32_t>(dev), b));
      if (b.empty_caches) empty_cache_calls_ += b.empty_caches;
    }
    if (!devices.empty()) header["recorded_devices"] = devices;
    if (empty_cache_calls_) header["empty_cache_calls"] = empty_cache_calls_;
    // Devices interleave by time (stable); times are made non-decreasing.
    if (any_time) {
      std::stable_sort(body.begin(), body.end(), [](const Raw& a, const Raw& b) { return a.t < b.t; });
      header["time_unit"] = "us";
    }
    std::uint64_t t0 = body.empty() ? 0 : body.front().t;
    for (auto& r : head) r.t = t0, r.has_t = any_time;
    events_ = std::move(head);
    events_.insert(events_.end(), body.begin(), body.end());
    std::uint64_t k = 0;
    for (auto& r : events_)
      if (r.pre_trace) r.line = ++k;
    set_header(header);
  }

  static nlohmann::json bounds_json(std::uint32_t dev, const DeviceBounds& b) {
    nlohmann::json j = {{"device", dev}, {"lower_bytes", b.peak_reserved}};
    if (b.upper) j["upper_bytes"] = *b.upper;
    if (b.at_oom) {
      j["usable_bytes"] = *b.at_oom;
      j["basis"] = fmt::format(
          "a recorded oom: reserved memory plus the free memory the driver reported then ({}); it held at most {}",
          human_bytes(*b.at_oom), human_bytes(b.peak_reserved));
    } else {
      j["usable_bytes"] = b.peak_reserved;
      j["basis"] = fmt::format(
          "{} OOM retr{} (cudaMalloc failed, the cache was released and the allocation retried): usable memory is "
          "at least the {} it held and less than {}; the replay uses the lower bound",
          b.retries, b.retries == 1 ? "y" : "ies", human_bytes(b.peak_reserved), human_bytes(*b.upper));
    }
    return j;
  }

  DeviceBounds convert_device(std::uint32_t d, const std::vector<Entry>& es, const std::vector<const Segment*>& dsegs,
                              std::vector<Raw>* head, std::vector<Raw>* body) {
    DeviceBounds bounds;
    // -- 1. What the trace itself allocated, freed, mapped and unmapped.
    std::unordered_map<std::uint64_t, std::uint64_t> live;               // addr → id
    std::map<std::uint64_t, std::pair<Bytes, std::int64_t>> pre_allocs;  // addr → (requested, stream)
    std::map<std::uint64_t, std::uint64_t> pre_ids;
    std::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> pre_names;  // addr → (stack, name)
    std::map<std::uint64_t, Bytes> pre_blocks;                                   // addr → recorded block size
    std::map<std::uint64_t, std::pair<Bytes, std::int64_t>> pre_segs;  // non-expandable, addr → (size, stream)
    std::set<std::uint64_t> traced_segs, ever_allocated;
    RangeSet mapped_in_trace;
    for (const auto& e : es) {
      if (e.action == Action::kAlloc) {
        live[e.addr] = 0;
        ever_allocated.insert(e.addr);
      } else if (e.action == Action::kFreeCompleted) {
        if (!live.erase(e.addr) && !pre_allocs.count(e.addr)) {  // allocated before recording began
          pre_allocs[e.addr] = {e.size, e.stream};
          pre_ids[e.addr] = next_id_++;
        }
      } else if (e.action == Action::kSegAlloc) {
        traced_segs.insert(e.addr);
      } else if (e.action == Action::kSegFree) {
        if (!traced_segs.count(e.addr)) pre_segs[e.addr] = {e.size, e.stream};
      }
    }
    live.clear();
    // Expandable segments: what was mapped when recording began = what is mapped at the dump,
    // with the trace's own maps undone and its unmaps redone (walking it backwards).
    RangeSet mapped;
    bool expandable = false;
    for (const Segment* s : dsegs)
      if (s->expandable) mapped.add(s->addr, s->addr + s->size), expandable = true;
    for (auto it = es.rbegin(); it != es.rend(); ++it) {
      if (it->action == Action::kSegMap) mapped.remove(it->addr, it->addr + it->size), expandable = true;
      if (it->action == Action::kSegUnmap) mapped.add(it->addr, it->addr + it->size), expandable = true;
    }
    Bytes reserved = 0;
    for (const Segment* s : dsegs)
      if (!s->expandable && !traced_segs.count(s->addr)) pre_segs[s->addr] = {s->size, s->stream};
    for (const auto& [addr, v] : pre_segs) {
      reserved += v.first;
      head->push_back(pre_event(Op::kSegmentAlloc, d, 0, v.first, addr, v.second));
    }
    for (const auto& [lo, hi] : mapped.ranges()) {
      reserved += hi - lo;
      head->push_back(pre_event(Op::kSegmentMap, d, 0, hi - lo, lo, 0));
    }
    // Blocks live at the dump that the trace never allocated existed before recording began.
    for (const Segment* s : dsegs)
      for (const auto& blk : s->blocks) {
        if (!blk.active || ever_allocated.count(blk.addr)) continue;
        if (!pre_allocs.count(blk.addr)) {
          pre_allocs[blk.addr] = {blk.requested, s->stream};
          pre_ids[blk.addr] = next_id_++;
        }
        pre_names[blk.addr] = stack_and_name(blk.frames);
        if (blk.size > pre_allocs[blk.addr].first) pre_blocks[blk.addr] = blk.size;  // more than requested
      }
    for (const auto& [addr, v] : pre_allocs) {
      Raw r = pre_event(Op::kAlloc, d, pre_ids[addr], v.first, addr, v.second);
      if (auto it = pre_names.find(addr); it != pre_names.end()) r.stack = it->second.first, r.name = it->second.second;
      if (auto it = pre_blocks.find(addr); it != pre_blocks.end()) r.block = it->second;
      head->push_back(r);
    }

    // -- 2. The events, with the program's empty_cache calls and the requests that failed.
    bounds.peak_reserved = reserved;
    std::vector<Bytes> reserved_before(es.size());
    Bytes peak = reserved;
    for (size_t i = 0; i < es.size(); ++i) {
      reserved_before[i] = reserved;
      const Entry& e = es[i];
      if (e.action == Action::kSegAlloc || e.action == Action::kSegMap) reserved += e.size;
      if (e.action == Action::kSegFree || e.action == Action::kSegUnmap) reserved -= std::min(reserved, e.size);
      peak = std::max(peak, reserved);
    }
    bounds.peak_reserved = peak;
    std::vector<bool> empty_cache_before(es.size(), false), request_before(es.size(), false);
    classify_bursts(es, reserved_before, expandable, &bounds, &empty_cache_before, &request_before);

    for (size_t i = 0; i < es.size(); ++i) {
      const Entry& e = es[i];
      Raw r;
      r.t = e.t;
      r.has_t = e.has_t;
      r.device = d;
      r.stream = e.stream;
      r.line = e.line;
      if (empty_cache_before[i]) {
        Raw c = r;
        c.op = Op::kEmptyCache;
        body->push_back(c);
      }
      if (request_before[i]) {  // the failed request of a recorded oom, before its retry's releases
        failed_requests_.push_back(body->size());
      }
      switch (e.action) {
        case Action::kAlloc: {
          r.op = Op::kAlloc;
          r.size = e.size;
          r.addr = e.addr;
          r.has_addr = true;
          if (live.count(e.addr))
            bad(fmt::format("device_traces[{}] entry {}: alloc at {:#x} which is live", d, e.line, e.addr));
          r.id = next_id_++;
          live[e.addr] = r.id;
          auto [stack, name] = stack_and_name(e.frames);
          r.stack = stack;
          r.name = name;
          break;
        }
        case Action::kFreeCompleted: {
          r.op = Op::kFree;
          auto it = live.find(e.addr);
          if (it == live.end()) {
            r.id = pre_ids.at(e.addr);
          } else {
            r.id = it->second;
            live.erase(it);
          }
          break;
        }
        case Action::kOom: {
          // The request that failed has no alloc entry: it is replayed here so that the
          // simulation meets the same failure, and freed at once should the simulation place it.
          std::uint64_t id = next_id_++;
          size_t at = failed_requests_.empty() ? body->size() : failed_requests_.back();
          if (!failed_requests_.empty()) failed_requests_.pop_back();
          Raw req = r;
          req.op = Op::kAlloc;
          req.id = id;
          req.size = e.size;
          req.name = name_of("the request that failed (recorded oom)");
          auto [stack, name] = stack_and_name(e.frames);
          req.stack = stack;
          if (name) req.name = name;
          body->insert(body->begin() + static_cast<std::ptrdiff_t>(at), req);
          r.op = Op::kOom;
          r.size = e.size;
          body->push_back(r);
          Raw f = r;
          f.op = Op::kFree;
          f.id = id;
          body->push_back(f);
          continue;
        }
        case Action::kMark:
          r.op = Op::kMark;
          r.name = name_of("snapshot");
          break;
        default: {
          r.op = e.action == Action::kFreeRequested ? Op::kFreeRequested
                 : e.action == Action::kSegAlloc    ? Op::kSegmentAlloc
                 : e.action == Action::kSegFree     ? Op::kSegmentFree
                 : e.action == Action::kSegMap      ? Op::kSegmentMap
                                                    : Op::kSegmentUnmap;
          r.size = e.size;
          r.addr = e.addr;
          r.has_addr = true;
          break;
        }
      }
      body->push_back(r);
    }
    failed_requests_.clear();
    return bounds;
  }

  Raw pre_event(Op op, std::uint32_t d, std::uint64_t id, Bytes size, std::uint64_t addr, std::int64_t stream) {
    Raw r;
    r.op = op;
    r.device = d;
    r.id = id;
    r.size = size;
    r.addr = addr;
    r.has_addr = true;
    r.stream = stream;
    r.pre_trace = true;
    return r;
  }

  // A run of segment_free (or segment_unmap) entries is the cache being released: by the
  // program (torch.cuda.empty_cache()) or by the allocator itself, when cudaMalloc failed inside
  // a malloc and it released the cache to retry (specs/torch-caching.md §3, §5). The snapshot does
  // not say which; the allocator releases inside a malloc only when
  //   (a) the next entries are that malloc: segment_alloc/segment_map, then its alloc (or its oom);
  //   (b) none of the released memory could have served the request (else best fit would have
  //       found it: a released whole segment of the request's pool at least as large, or an
  //       unmapped range at least as large, means the cache could serve it);
  //   (c) the device could not hold what the malloc asked for: reserved + that segment exceeds
  //       the most the process ever held.
  // Anything else is the program's call. A retry bounds the device's usable memory from above.
  void classify_bursts(const std::vector<Entry>& es, const std::vector<Bytes>& reserved_before, bool expandable,
                       DeviceBounds* bounds, std::vector<bool>* empty_cache_before, std::vector<bool>* request_before) {
    bool fraction_or_mss = false;  // releases of max_split_size or GC could explain a burst too
    if (settings_.is_object()) {
      if (settings_.contains("max_split_size") && settings_["max_split_size"].is_number_integer() &&
          settings_["max_split_size"].get<std::int64_t>() > 0)
        fraction_or_mss = true;
      if (settings_.contains("garbage_collection_threshold") && settings_["garbage_collection_threshold"].is_number() &&
          settings_["garbage_collection_threshold"].get<double>() > 0)
        fraction_or_mss = true;
    }
    for (size_t i = 0; i < es.size();) {
      auto releases = [&](size_t k) { return es[k].action == Action::kSegFree || es[k].action == Action::kSegUnmap; };
      if (!releases(i)) {
        ++i;
        continue;
      }
      size_t j = i;
      Bytes largest_small = 0, largest_large = 0, largest_range = 0;
      while (j < es.size() && releases(j)) {
        const Entry& e = es[j];
        if (e.action == Action::kSegUnmap)
          largest_range = std::max(largest_range, e.size);
        else if (e.size == kSmallSegment)
          largest_small = std::max(largest_small, e.size);
        else
          largest_large = std::max(largest_large, e.size);
        ++j;
      }
      // (a) the malloc this burst would be part of.
      size_t k = j;
      Bytes first_growth = 0;
      while (k < es.size() && (es[k].action == Action::kSegAlloc || es[k].action == Action::kSegMap)) {
        if (!first_growth) first_growth = es[k].size;
        ++k;
      }
      bool in_malloc =
          k < es.size() && (es[k].action == Action::kOom || (es[k].action == Action::kAlloc && first_growth));
      bool retry = in_malloc && !fraction_or_mss;
      if (retry) {
        Bytes r = round_up_sat(es[k].size, 512);
        // (b) could the released cache have served it?
        if (r <= kSmallRequest ? largest_small >= r : largest_large >= r) retry = false;
        if (largest_range >= r) retry = false;
        // (c) could the device have held the segment it asked for?
        Bytes ask = first_growth ? first_growth
                    : expandable ? round_up_sat(r, r <= kSmallRequest ? kSmallSegment : kLargePage)
                                 : r;
        Bytes before = reserved_before[i];
        if (before > kTooLarge - ask || before + ask <= bounds->peak_reserved) retry = false;
        if (retry) {
          bounds->upper = std::min(bounds->upper.value_or(kTooLarge), before + ask);
          ++bounds->retries;
          if (es[k].action == Action::kOom) (*request_before)[i] = true;
        }
      }
      if (!retry) {
        (*empty_cache_before)[i] = true;
        ++bounds->empty_caches;
      }
      i = j;
    }
    // A recorded oom says what the driver had left: usable ≈ reserved then + that free memory.
    for (size_t i = 0; i < es.size(); ++i) {
      const Entry& e = es[i];
      if (e.action != Action::kOom) continue;
      if (e.has_device_free) bounds->at_oom = reserved_before[i] + e.device_free;
      bool released_before = i > 0 && (es[i - 1].action == Action::kSegFree || es[i - 1].action == Action::kSegUnmap ||
                                       es[i - 1].action == Action::kSegMap);
      if (!released_before && !(*request_before)[i]) (*request_before)[i] = true;  // the request sits right here
    }
  }

  nlohmann::json settings_;  // the snapshot's allocator_settings
  std::vector<Raw> events_;
  size_t next_ = 0;
  std::unique_ptr<WorkBudget> budget_;
  std::uint64_t next_id_ = 0, empty_cache_calls_ = 0;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
  std::vector<std::vector<std::string>> stacks_;  // stack id − 1 → frames
  std::unordered_map<std::string, std::uint64_t> stack_ids_;
  std::set<std::uint64_t> emitted_stacks_;
  std::vector<size_t> failed_requests_;  // positions in body where a recorded oom's request goes
};

}  // namespace

std::unique_ptr<TraceReader> make_torch_snapshot_reader(const std::string& path, const ReaderOptions& opt) {
  return std::make_unique<SnapshotReader>(path, opt);
}

}  // namespace fragsim

#include "traces/torch_snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "sim/base/error.h"
#include "traces/pickle.h"

namespace fragsim {

namespace {

// Work on a snapshot is bounded by its size: a pickle can reference one object many times (its
// memo), so a small file could otherwise describe an exponential amount of data.
class WorkBudget {
 public:
  WorkBudget(std::string path, std::uint64_t file_bytes) : path_(std::move(path)), left_(16 * file_bytes + (1 << 20)) {}
  void spend(std::uint64_t n = 1) {
    if (n > left_)
      throw InputError(path_ + ": snapshot: describes far more entries than its size allows (shared references?)");
    left_ -= n;
  }

 private:
  std::string path_;
  std::uint64_t left_;
};

nlohmann::json to_json(const PyObj& o, WorkBudget& budget, int depth = 0) {
  budget.spend();
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
      return o.s;
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
        if (k->kind == PyObj::kStr) d[k->s] = to_json(*v, budget, depth + 1);
      return d;
    }
  }
  return nullptr;
}

struct Raw {
  Op op;
  std::uint64_t t;  // µs
  bool has_t;
  std::uint32_t device;
  std::uint64_t id;
  Bytes size;
  std::uint64_t addr;
  bool has_addr;
  std::int64_t stream;
  bool pre_trace;
  std::uint64_t line;  // 1-based position in its device trace (messages)
};

class SnapshotReader : public TraceReader {
 public:
  SnapshotReader(const std::string& path, const ReaderOptions& opt) : TraceReader(path, opt) {
    auto doc = load_pickle(path);
    budget_ = std::make_unique<WorkBudget>(path, doc->arena.size() * sizeof(PyObj));
    convert(*doc->root);
  }

 protected:
  bool read_raw(Event& ev) override {
    if (next_ >= events_.size()) return false;
    const Raw& r = events_[next_++];
    ev.op = r.op;
    ev.line = r.line;
    ev.device = r.device;
    ev.present = key::kDevice;
    if (r.has_t) ev.t = Tick(r.t), ev.present |= key::kT;
    if (r.op == Op::kAlloc || r.op == Op::kFree) ev.id = AllocId(r.id), ev.present |= key::kId;
    if (r.op != Op::kFree && r.op != Op::kMark) ev.size = r.size, ev.present |= key::kSize;
    if (r.has_addr) ev.addr = Addr(r.addr), ev.present |= key::kAddr;
    if (r.op != Op::kMark && r.op != Op::kOom) ev.stream = r.stream, ev.present |= key::kStream;
    if (r.pre_trace) ev.present |= key::kPreTrace;
    if (r.op == Op::kMark) ev.name = "snapshot", ev.present |= key::kName;
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
  std::int64_t stream_of(const PyObj& d) const {
    const PyObj* v = d.get("stream");
    if (!v || !v->is_int()) return 0;
    return v->big ? static_cast<std::int64_t>(v->u) : v->as_int();
  }

  void convert(const PyObj& root) {
    if (root.kind != PyObj::kDict) bad("not a PyTorch memory snapshot (top level is not a dict)");
    const PyObj* traces = root.get("device_traces");
    const PyObj* segments = root.get("segments");
    if (!traces || traces->kind != PyObj::kList) bad("not a PyTorch memory snapshot: no device_traces list");
    if (!segments || segments->kind != PyObj::kList) bad("not a PyTorch memory snapshot: no segments list");
    nlohmann::json header = {{"fragsim_trace", 1}, {"source", "torch-snapshot"}};
    if (const PyObj* s = root.get("allocator_settings")) header["allocator_settings"] = to_json(*s, *budget_);

    bool any_time = false;
    std::vector<Raw> head, body;
    std::uint64_t nid = 0;
    for (size_t dev = 0; dev < traces->items.size(); ++dev) {
      const PyObj& tr = *traces->items[dev];
      if (tr.kind != PyObj::kList) bad(fmt::format("device_traces[{}] is not a list", dev));
      auto d = static_cast<std::uint32_t>(dev);
      std::unordered_map<std::uint64_t, std::uint64_t> live;  // addr → id
      std::unordered_map<std::uint64_t, Bytes> live_size;
      std::map<std::uint64_t, std::pair<Bytes, std::int64_t>> pre_allocs;  // addr → (size, stream)
      std::map<std::uint64_t, std::pair<Bytes, std::int64_t>> pre_segs;
      std::set<std::uint64_t> traced_segs;
      std::map<std::uint64_t, std::uint64_t> pre_ids;
      std::uint64_t line = 0;
      for (const auto& ep : tr.items) {
        budget_->spend();
        ++line;
        const PyObj& e = *ep;
        const PyObj* a = e.get("action");
        if (!a || a->kind != PyObj::kStr) bad(fmt::format("device_traces[{}] entry {}: action: missing", dev, line));
        Raw r{Op::kMark, 0, false, d, 0, 0, 0, false, stream_of(e), false, line};
        if (const PyObj* t = e.get("time_us"); t && t->is_int()) {
          r.t = u64(t);
          r.has_t = any_time = true;
        }
        const std::string& act = a->s;
        if (act == "alloc") {
          r.op = Op::kAlloc;
          r.size = field_u(e, "size", line, "trace");
          r.addr = field_u(e, "addr", line, "trace");
          r.has_addr = true;
          if (live.count(r.addr))
            bad(fmt::format("device_traces[{}] entry {}: alloc at {:#x} which is live", dev, line, r.addr));
          r.id = nid++;
          live[r.addr] = r.id;
          live_size[r.addr] = r.size;
        } else if (act == "free_completed") {
          r.op = Op::kFree;
          std::uint64_t addr = field_u(e, "addr", line, "trace");
          auto it = live.find(addr);
          if (it == live.end()) {  // allocated before recording began
            r.id = nid++;
            pre_allocs[addr] = {field_u(e, "size", line, "trace"), r.stream};
            pre_ids[addr] = r.id;
          } else {
            r.id = it->second;
            live.erase(it);
            live_size.erase(addr);
          }
        } else if (act == "free_requested" || act == "segment_alloc" || act == "segment_free" || act == "segment_map" ||
                   act == "segment_unmap") {
          r.op = act == "free_requested"  ? Op::kFreeRequested
                 : act == "segment_alloc" ? Op::kSegmentAlloc
                 : act == "segment_free"  ? Op::kSegmentFree
                 : act == "segment_map"   ? Op::kSegmentMap
                                          : Op::kSegmentUnmap;
          r.size = field_u(e, "size", line, "trace");
          r.addr = field_u(e, "addr", line, "trace");
          r.has_addr = true;
          if (r.op == Op::kSegmentAlloc) traced_segs.insert(r.addr);
          if (r.op == Op::kSegmentFree) {
            if (!traced_segs.erase(r.addr)) pre_segs[r.addr] = {r.size, r.stream};
          }
        } else if (act == "oom") {
          r.op = Op::kOom;
          r.size = field_u(e, "size", line, "trace");
        } else if (act == "snapshot" || act == "annotate") {
          r.op = Op::kMark;
        } else {
          bad(fmt::format("device_traces[{}] entry {}: action: unknown action '{}'", dev, line, act));
        }
        body.push_back(r);
      }
      // The state at the dump: blocks still allocated that the trace never allocated, and
      // segments the trace never allocated, existed before recording began.
      for (const auto& gp : segments->items) {
        budget_->spend();
        const PyObj& g = *gp;
        if (g.kind != PyObj::kDict) bad("segments: an entry is not a dict");
        const PyObj* gd = g.get("device");
        if (!gd || !gd->is_int() || gd->as_int() != static_cast<std::int64_t>(dev)) continue;
        std::uint64_t base = field_u(g, "address", 0, "segments");
        Bytes total = field_u(g, "total_size", 0, "segments");
        std::int64_t stream = stream_of(g);
        if (!traced_segs.count(base)) pre_segs[base] = {total, stream};
        const PyObj* blocks = g.get("blocks");
        if (!blocks || blocks->kind != PyObj::kList) continue;
        for (const auto& bp : blocks->items) {
          budget_->spend();
          const PyObj& b = *bp;
          const PyObj* st = b.get("state");
          if (!st || st->kind != PyObj::kStr) continue;
          if (st->s != "active_allocated" && st->s != "active_pending_free") continue;
          std::uint64_t addr = field_u(b, "address", 0, "segments.blocks");
          if (live.count(addr) || pre_allocs.count(addr)) continue;
          const PyObj* rq = b.get("requested_size");
          Bytes size = rq && rq->is_int() ? u64(rq) : field_u(b, "size", 0, "segments.blocks");
          pre_allocs[addr] = {size, stream};
          pre_ids[addr] = nid++;
        }
      }
      for (const auto& [addr, v] : pre_segs)
        head.push_back(Raw{Op::kSegmentAlloc, 0, false, d, 0, v.first, addr, true, v.second, true, 0});
      for (const auto& [addr, v] : pre_allocs)
        head.push_back(Raw{Op::kAlloc, 0, false, d, pre_ids[addr], v.first, addr, true, v.second, true, 0});
    }
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
    for (auto& r : events_) {
      if (r.pre_trace) r.line = ++k;
    }
    set_header(header);
  }

  std::vector<Raw> events_;
  size_t next_ = 0;
  std::unique_ptr<WorkBudget> budget_;
};

}  // namespace

std::unique_ptr<TraceReader> make_torch_snapshot_reader(const std::string& path, const ReaderOptions& opt) {
  return std::make_unique<SnapshotReader>(path, opt);
}

}  // namespace fragsim

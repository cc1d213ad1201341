#include "traces/torch_snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "sim/base/torch_sizes.h"
#include "traces/kept_conversions.h"
#include "traces/pickle.h"
#include "traces/range_set.h"
#include "traces/stack_table.h"
#include "traces/torch_snapshot_bounds.h"
#include "traces/torch_snapshot_parse.h"

namespace fragsim {

namespace {

// What reports call memory a snapshot shows live when recording began, without the frames that
// allocated it (the XProf importer's "(live before the capture)").
constexpr const char* kBeforeRecording = "(allocated before the recording began)";

using namespace torch_snapshot;

// One event of the output, before devices are merged by time. Every event of the recording is
// one of these while it is replayed (24 M for a 1 GB pickle): the fields are ordered so that they
// pack into 80 bytes (104 in declaration order by meaning).
struct Raw {
  std::uint64_t t = 0;  // µs
  std::uint64_t id = 0;
  Bytes size = 0;
  std::uint64_t addr = 0;
  std::int64_t stream = 0;
  std::uint64_t line = 0;   // 1-based position in its device trace (messages)
  std::uint64_t stack = 0;  // 0: none
  Bytes block = 0;          // pre-trace alloc: the recorded block size (0: unknown)
  std::uint32_t device = 0;
  std::uint32_t name = 0;  // index into names_ (0: none)
  Op op = Op::kMark;
  bool has_t = false;
  bool has_addr = false;
  bool pre_trace = false;
};
static_assert(sizeof(Raw) <= 80);

// What a snapshot converts to: its events in order, the names they index, their stacks, the
// header. Every reader of one conversion reads the same (readers differ only in where they are).
struct Converted {
  std::vector<Raw> events;
  std::vector<std::string> names;
  StackTable stacks;
  nlohmann::json header;
};

class SnapshotReader : public TraceReader {
 public:
  // The file is read as a stream: each device trace's entries are decoded as they are read, and
  // the pickle's objects for them recycled (traces/pickle.h), so that what is held is the entries.
  SnapshotReader(const std::string& path, const ReaderOptions& opt)
      : TraceReader(path, opt), budget_(path, input_bytes(path)), parser_(path, budget_) {
    const ListStream stream{"device_traces",
                            [this](const PyObj& list, const PyObj& outer, std::uint64_t index,
                                   std::span<const PyRef> items) { take_entries(list, outer, index, items); }};
    auto doc = load_pickle(path, &stream);
    if (!doc->root) bad("not a PyTorch memory snapshot (empty)");
    convert(*doc->root);
  }
  // A reader of a conversion made (traces/kept_conversions.h): reads what it holds.
  SnapshotReader(const std::string& path, const ReaderOptions& opt, std::shared_ptr<const Converted> done)
      : TraceReader(path, opt), budget_(path, 0), parser_(path, budget_), conv_(std::move(done)) {
    stacks_ = conv_->stacks.for_another_reader();
    set_header(conv_->header);
  }
  std::shared_ptr<const Converted> converted() const { return conv_; }
  // `input` sizes the limits on what the conversion may hold (sim/base/limits.h): the file's size,
  // or for a document held in memory the size of its objects.
  SnapshotReader(const std::string& name, const PickleDoc& doc, const ReaderOptions& opt, std::uint64_t input)
      : TraceReader(name, opt), budget_(name, input), parser_(name, budget_) {
    if (!doc.root) bad("not a PyTorch memory snapshot (empty)");
    convert(*doc.root);  // the events hold what replay needs: the document may go
  }

 protected:
  bool read_raw(Event& ev) override {
    const std::vector<Raw>& events = conv_->events;
    if (next_ >= events.size()) return false;
    const Raw& r = events[next_];
    if (stacks_.define_before_use(r.stack, r.line, ev)) {
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
    if (r.name) ev.name = conv_->names[r.name], ev.present |= key::kName;
    if (r.block) ev.block_size = r.block, ev.present |= key::kBlockSize;
    return true;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { parser_.bad(what); }

  // ---- names and stacks (issue 10 §6) ----
  // Interns a stack (frames innermost first); returns its id.
  std::uint64_t stack_id(const std::vector<std::string>& fr) {
    std::string key = fmt::format("{}", fmt::join(fr, "\n"));
    budget_.copy(key.size());
    auto [it, fresh] = stack_ids_.try_emplace(key, stacks_.next_id());
    if (fresh) {
      budget_.names.spend(2 * key.size());  // the key and the frames, kept
      stacks_.add(fr);
    }
    return it->second;
  }
  // Interns a stack; returns (stack id or 0, name index or 0).
  std::pair<std::uint64_t, std::uint32_t> stack_and_name(const PyObj* frames) {
    auto fr = parser_.stack_frames(frames);
    if (fr.empty()) return {0, 0};
    const std::uint64_t id = stack_id(fr);
    std::string nm = user_frame(fr);
    std::uint32_t name = 0;
    if (!nm.empty()) {
      auto [nit, nfresh] = name_ids_.try_emplace(nm, static_cast<std::uint32_t>(names_.size()));
      if (nfresh) names_.push_back(nm);
      name = nit->second;
    }
    return {id, name};
  }
  // A block live when recording began that the snapshot gives no frames (its allocation fell before
  // the ring buffer, or history was off): named for that, with a stack whose frame is the segment it
  // lies in — so that by call site its bytes sum to one row, by frame (and in the flame graph) to one
  // per segment, and a buffer's line says where it is. `segments`: base → (size, expandable).
  std::pair<std::uint64_t, std::uint32_t> pre_recording_site(
      std::uint64_t addr, const std::map<std::uint64_t, std::pair<Bytes, bool>>& segments) {
    std::vector<std::string> fr;
    if (auto it = segments.upper_bound(addr); it != segments.begin()) {
      --it;
      if (addr - it->first < it->second.first)
        fr.push_back(fmt::format("{}segment 0x{:x} ({})", it->second.second ? "expandable " : "", it->first,
                                 human_bytes(it->second.first)));
    }
    fr.push_back(kBeforeRecording);
    return {stack_id(fr), name_of(kBeforeRecording)};
  }
  std::uint32_t name_of(const std::string& nm) {
    auto [it, fresh] = name_ids_.try_emplace(nm, static_cast<std::uint32_t>(names_.size()));
    if (fresh) names_.push_back(nm);
    return it->second;
  }

  // ---- entries decoded while the pickle is read ----
  struct StreamedTrace {
    const PyObj* outer = nullptr;  // the device_traces list it is an element of
    std::uint64_t index = 0;       // its position there: the device
    std::vector<Entry> entries;
    bool any_time = false;
    std::string error;  // the first entry's error: raised where reading the trace whole would raise it
  };
  void take_entries(const PyObj& list, const PyObj& outer, std::uint64_t index, std::span<const PyRef> items) {
    list.pin();  // its address keys streamed_
    StreamedTrace& st = streamed_[&list];
    st.outer = &outer;
    st.index = index;
    for (PyRef e : items) {
      if (!st.error.empty()) return;
      try {
        Entry x = parser_.entry(*e, index, st.entries.size() + 1, &st.any_time);
        if (x.frames) x.frames->pin();  // the entry keeps it
        st.entries.push_back(x);
      } catch (const InputError& err) {
        st.error = err.what();
      }
    }
  }
  // device_traces[dev]'s entries: decoded while the file was read, or now (a document in memory).
  std::vector<Entry> trace_entries(const PyObj& traces, const PyObj& tr, size_t dev, bool* any_time) {
    auto it = streamed_.find(&tr);
    if (it == streamed_.end()) return parser_.trace(tr, dev, any_time);
    StreamedTrace& st = it->second;
    if (st.outer != &traces || st.index != dev)
      bad(fmt::format("device_traces[{}]: the list of another device's trace (not a snapshot PyTorch writes)", dev));
    if (!st.error.empty()) throw InputError(st.error);
    *any_time |= st.any_time;
    return std::move(st.entries);
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
        header["allocator_settings"] = settings_ = to_json(*s, budget_);
    if (!traces) header["state_only"] = true;
    names_.emplace_back();  // index 0: no name
    auto segs = parser_.segments(segments);

    bool any_time = false;
    std::vector<Raw> head, body;
    std::vector<std::pair<std::uint32_t, DeviceBounds>> bounds;  // devices whose bounds say something
    // The devices: each list of device_traces, and each device a segment names (any 32-bit number;
    // only the devices present are visited, so none is sized by its number).
    const size_t ntraces = traces ? traces->items.size() : 0;
    std::map<size_t, std::vector<const Segment*>> segs_of;  // device → its segments
    for (const auto& s : segs) segs_of[s.device].push_back(&s);
    std::vector<size_t> devs(ntraces);
    for (size_t d = 0; d < ntraces; ++d) devs[d] = d;
    for (auto it = segs_of.lower_bound(ntraces); it != segs_of.end(); ++it) devs.push_back(it->first);
    for (size_t dev : devs) {
      std::vector<Entry> es;
      if (traces && dev < traces->items.size()) {
        const PyObj& tr = *traces->items[dev];
        if (tr.kind != PyObj::kList) bad(fmt::format("device_traces[{}] is not a list", dev));
        es = trace_entries(*traces, tr, dev, &any_time);
      }
      std::vector<const Segment*> dsegs;
      if (auto it = segs_of.find(dev); it != segs_of.end()) dsegs = it->second;
      if (es.empty() && dsegs.empty()) continue;
      DeviceBounds b = convert_device(static_cast<std::uint32_t>(dev), es, dsegs, &head, &body);
      if (b.empty_caches) empty_cache_calls_ += b.empty_caches;
      if (b.upper || b.at_oom) bounds.emplace_back(static_cast<std::uint32_t>(dev), b);
    }
    if (root.kind == PyObj::kDict) annotations(root.get("external_annotations"), &body, &any_time);
    if (empty_cache_calls_) header["empty_cache_calls"] = empty_cache_calls_;
    // Snapshots older than allocator_settings (PyTorch before 2.5, viewers' demo files) still show
    // expandable segments: segments marked is_expandable, segment_map in the trace. The allocator
    // that made them had them on (its placements differ: one growing segment per stream and pool).
    if (expandable_seen_ && !(settings_.is_object() && settings_.contains("expandable_segments")))
      header["inferred_allocator_settings"] = {
          {"expandable_segments", true},
          {"basis",
           "the snapshot's segments are expandable (is_expandable, segment_map), which its "
           "allocator_settings do not state"}};
    // Devices interleave by time (stable); times are made non-decreasing.
    if (any_time) {
      auto by_time = [](const Raw& a, const Raw& b) { return a.t < b.t; };
      if (!std::is_sorted(body.begin(), body.end(), by_time))  // one device's trace is (its buffer)
        std::stable_sort(body.begin(), body.end(), by_time);
      header["time_unit"] = "us";
    }
    std::uint64_t t0 = body.empty() ? 0 : body.front().t;
    for (auto& r : head) r.t = t0, r.has_t = any_time;
    body.insert(body.begin(), head.begin(), head.end());  // in place: a copy of body would double the peak
    events_ = std::move(body);
    std::uint64_t k = 0;
    for (auto& r : events_)
      if (r.pre_trace) r.line = ++k;
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& [dev, b] : bounds)
      devices.push_back(bounds_json(dev, b, b.refused ? event_index_of(refused_ids_.at(dev)) : 0));
    if (!devices.empty()) header["recorded_devices"] = devices;
    set_header(header);
    auto conv = std::make_shared<Converted>();
    conv->events = std::move(events_);
    conv->names = std::move(names_);
    conv->stacks = stacks_.for_another_reader();
    conv->header = std::move(header);
    conv_ = std::move(conv);
  }

  // external_annotations (record_function ranges the snapshot kept, e.g. the optimizer's phases:
  // {name, stage START|END, device, time_us}) as marks "START name" / "END name" at their time.
  // Entries without a name, a stage or a time are left out: nothing places them.
  void annotations(const PyObj* a, std::vector<Raw>* body, bool* any_time) {
    if (!a || a->kind != PyObj::kList) return;
    for (const PyObj* x : a->items) {
      const PyObj *name = x->get("name"), *stage = x->get("stage"), *t = x->get("time_us"), *dev = x->get("device");
      if (!name || name->kind != PyObj::kStr || !stage || stage->kind != PyObj::kStr || !t || !t->is_int() ||
          t->as_int() < 0)
        continue;
      Raw r;
      r.op = Op::kMark;
      r.t = static_cast<std::uint64_t>(t->as_int());
      r.has_t = *any_time = true;
      r.device = dev && dev->is_int() && dev->as_int() >= 0 && dev->as_int() <= UINT32_MAX
                     ? static_cast<std::uint32_t>(dev->as_int())
                     : 0;
      r.name = name_of(sanitize_utf8(stage->s + " " + name->s));
      body->push_back(r);
    }
  }

  // One device: its state before recording began into head, its trace into body.
  DeviceBounds convert_device(std::uint32_t d, const std::vector<Entry>& es, const std::vector<const Segment*>& dsegs,
                              std::vector<Raw>* head, std::vector<Raw>* body) {
    Prior prior = prior_state(d, es, dsegs, head);
    expandable_seen_ = expandable_seen_ || prior.expandable;
    DeviceBounds bounds;
    const Releases rel = read_releases(es, prior.reserved, prior.expandable, settings_, &bounds);
    std::uint64_t refused_id =
        trace_events(d, es, prior.ids, rel, bounds.refused ? bounds.refused->entry : es.size(), body);
    if (bounds.refused) refused_ids_[d] = refused_id;
    return bounds;
  }

  // What existed before recording began, as the trace and the state at the dump imply it.
  struct Prior {
    std::map<std::uint64_t, std::uint64_t> ids;  // addr → id of a block allocated before recording began
    Bytes reserved = 0;                          // segments and mapped ranges held then
    bool expandable = false;
  };
  Prior prior_state(std::uint32_t d, const std::vector<Entry>& es, const std::vector<const Segment*>& dsegs,
                    std::vector<Raw>* head) {
    Prior prior;
    auto& pre_ids = prior.ids;
    // What the trace itself allocated, freed, mapped and unmapped.
    std::unordered_set<std::uint64_t> live;                                      // addrs allocated in the trace
    std::map<std::uint64_t, std::pair<Bytes, std::int64_t>> pre_allocs;          // addr → (requested, stream)
    std::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> pre_names;  // addr → (stack, name)
    std::map<std::uint64_t, Bytes> pre_blocks;                                   // addr → recorded block size
    std::map<std::uint64_t, std::pair<Bytes, std::int64_t>> pre_segs;  // non-expandable, addr → (size, stream)
    std::set<std::uint64_t> traced_segs, ever_allocated;
    for (const auto& e : es) {
      if (e.action == Action::kAlloc) {
        live.insert(e.addr);
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
    // Expandable segments: what was mapped when recording began = what is mapped at the dump,
    // with the trace's own maps undone and its unmaps redone (walking it backwards). PyTorch maps
    // whole pages (2 MiB in the small pool, 20 MiB in the large: torch_expandable.h), so a range
    // PyTorch lists is whole pages. One that ends short of any page (its blocks listed end to end,
    // all live, no free tail, as a snapshot written by another tool has it) still held the rest of
    // its pool's page — and taken at its listed size, a large-pool range is no whole number of
    // large pages, which is how the model tells the pools' ranges apart.
    RangeSet mapped;
    bool& expandable = prior.expandable;
    for (const Segment* s : dsegs) {
      if (!s->expandable) continue;
      expandable = true;
      const Bytes size = s->size % torch::kSmallBuffer == 0
                             ? s->size
                             : round_up_sat(s->size, s->small ? torch::kSmallBuffer : torch::kLargeBuffer);
      mapped.add(s->addr, s->addr + size);
    }
    for (auto it = es.rbegin(); it != es.rend(); ++it) {
      if (it->action == Action::kSegMap) mapped.remove(it->addr, it->addr + it->size), expandable = true;
      if (it->action == Action::kSegUnmap) mapped.add(it->addr, it->addr + it->size), expandable = true;
    }
    Bytes& reserved = prior.reserved;
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
    // The segments they may lie in: those at the dump, and those the trace released.
    std::map<std::uint64_t, std::pair<Bytes, bool>> where;
    for (const Segment* s : dsegs) where[s->addr] = {s->size, s->expandable};
    for (const auto& [addr, v] : pre_segs) where.try_emplace(addr, v.first, false);
    for (const auto& [addr, v] : pre_allocs) {
      Raw r = pre_event(Op::kAlloc, d, pre_ids[addr], v.first, addr, v.second);
      auto it = pre_names.find(addr);
      std::tie(r.stack, r.name) =
          it != pre_names.end() && it->second.first ? it->second : pre_recording_site(addr, where);
      if (auto it = pre_blocks.find(addr); it != pre_blocks.end()) r.block = it->second;
      head->push_back(r);
    }
    return prior;
  }

  // The trace's entries as events, with the program's empty_cache calls and the requests that failed.
  // Returns the id of the failed request of entry `oom` (an oom entry).
  std::uint64_t trace_events(std::uint32_t d, const std::vector<Entry>& es,
                             const std::map<std::uint64_t, std::uint64_t>& pre_ids, const Releases& rel, size_t oom,
                             std::vector<Raw>* body) {
    std::uint64_t oom_id = 0;
    std::unordered_map<std::uint64_t, std::uint64_t> live;     // addr → id
    body->reserve(body->size() + es.size() + es.size() / 64);  // the entries, and some empty_cache calls
    for (size_t i = 0; i < es.size(); ++i) {
      const Entry& e = es[i];
      Raw r;
      r.t = e.t;
      r.has_t = e.has_t;
      r.device = d;
      r.stream = e.stream;
      r.line = e.line;
      if (rel.empty_cache_before[i]) {
        Raw c = r;
        c.op = Op::kEmptyCache;
        body->push_back(c);
      }
      if (rel.request_before[i]) {  // the failed request of a recorded oom, before its retry's releases
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
          if (i == oom) oom_id = id;
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
    return oom_id;
  }

  // The index the reader gives the alloc of `id`: its place among the events, counting the stack
  // definitions read_raw emits before each stack's first use.
  std::uint64_t event_index_of(std::uint64_t id) const {
    std::set<std::uint64_t> stacks;
    for (size_t k = 0; k < events_.size(); ++k) {
      const Raw& r = events_[k];
      if (r.stack) stacks.insert(r.stack);
      if (r.op == Op::kAlloc && r.id == id) return k + stacks.size();
    }
    return 0;
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

  WorkBudget budget_;
  Parser parser_;
  nlohmann::json settings_;  // the snapshot's allocator_settings
  std::vector<Raw> events_;
  size_t next_ = 0;
  std::uint64_t next_id_ = 0, empty_cache_calls_ = 0;
  bool expandable_seen_ = false;  // a device's segments are expandable ones
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
  StackTable stacks_;
  std::unordered_map<std::string, std::uint64_t> stack_ids_;
  std::map<std::uint32_t, std::uint64_t> refused_ids_;  // device → the request its allocator refused (DeviceBounds)
  std::vector<size_t> failed_requests_;                 // positions in body where a recorded oom's request goes
  std::unordered_map<const PyObj*, StreamedTrace> streamed_;  // device trace list → its entries
  std::shared_ptr<const Converted> conv_;                     // what read_raw reads
};

}  // namespace

// The pickle is decoded once per file while conversions are kept (traces/kept_conversions.h).
std::unique_ptr<TraceReader> make_torch_snapshot_reader(const std::string& path, const ReaderOptions& opt) {
  auto conv = kept_conversion<Converted>("torch snapshot", path, [&] { return SnapshotReader(path, opt).converted(); });
  return std::make_unique<SnapshotReader>(path, opt, std::move(conv));
}

std::unique_ptr<TraceReader> make_torch_snapshot_reader_from(const std::string& name, const PickleDoc& doc,
                                                             const ReaderOptions& opt) {
  return std::make_unique<SnapshotReader>(name, doc, opt, doc.arena.size() * sizeof(PyObj));
}

}  // namespace fragsim

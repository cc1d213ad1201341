#include "sim/report/snapshot_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/base/torch_sizes.h"
#include "sim/engine/history.h"
#include "sim/engine/window.h"
#include "traces/pickle_writer.h"
#include "traces/range_set.h"

namespace fragsim {

namespace {

struct Frame {
  std::string file, name;
  std::int64_t line = 0;
};

// "path/to/file.py:45 forward" (traces/torch_snapshot.cpp's form) back into its parts; any other
// text is a C++ function (the importer keeps those of a stack without Python frames), which
// PyTorch's snapshots give as {"filename": "??", "line": 0, "name": function}.
Frame parse_frame(const std::string& f) {
  Frame out;
  out.file = "??";
  out.name = f;
  for (size_t sp = f.rfind(' '); sp != std::string::npos && sp > 0; sp = f.rfind(' ', sp - 1)) {
    size_t colon = f.rfind(':', sp);
    if (colon == std::string::npos || colon + 1 == sp) continue;
    std::string digits = f.substr(colon + 1, sp - colon - 1);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.file = f.substr(0, colon);
    out.line = std::stoll(digits);
    out.name = f.substr(sp + 1);
    return out;
  }
  return out;
}

// Lists device_traces holds: one per device number up to the largest one whose main memory the
// run used (64 bits: device 2^32 - 1 needs 2^32 of them).
std::uint64_t exported_devices(const RunHistory& h) {
  std::uint64_t n = 0;
  for (const auto& [dev, space] : h.slots)
    if (space == Space::kHbm) n = std::max<std::uint64_t>(n, std::uint64_t{dev} + 1);
  return n;
}

class Exporter {
 public:
  Exporter(const RunResult& r, const RunHistory& h, AtomicFile& file) : r_(r), h_(h), w_(file) {}

  void write() {
    // Each device's deltas and OOMs, found in one pass: a device's list is written from its own,
    // so that devices cost what their events do (device_traces lists every number up to the
    // largest: those that hold nothing are empty lists).
    std::map<std::uint32_t, std::vector<const DeltaEvent*>> deltas_of;
    for (const auto& d : h_.deltas)
      for (const auto& c : d.changes)
        if (exported(c.slot)) {
          auto& v = deltas_of[device(c.slot)];
          if (v.empty() || v.back() != &d) v.push_back(&d);
        }
    for (const auto& o : r_.ooms)
      if (o.space == Space::kHbm) ooms_of_[o.device].push_back(&o);
    const std::uint64_t ndev = exported_devices(h_);
    w_.begin_dict();
    w_.key("segments");
    segments();
    w_.key("device_traces");
    w_.begin_list();
    static const std::vector<const DeltaEvent*> kNone;
    for (std::uint64_t d = 0; d < ndev; ++d) {
      auto it = deltas_of.find(static_cast<std::uint32_t>(d));
      device_trace(static_cast<std::uint32_t>(d), it == deltas_of.end() ? kNone : it->second);
    }
    w_.end_list();
    annotations();
    settings();
    w_.end_dict();
    w_.finish();
  }

 private:
  bool exported(std::uint32_t slot) const { return h_.slots[slot].second == Space::kHbm; }
  std::uint32_t device(std::uint32_t slot) const { return h_.slots[slot].first; }

  std::int64_t time_us(Tick t) const {
    return std::llround(static_cast<double>(t.value()) * (seconds_per_tick(r_.time_unit) * 1e6));
  }

  // The frames of a stack, memoised: written once, referred to after.
  void frames(std::uint64_t stack) {
    auto it = frames_memo_.find(stack);
    if (it != frames_memo_.end()) return w_.get(it->second);
    w_.begin_list();
    if (auto f = h_.stacks.find(stack); stack && f != h_.stacks.end())
      for (const auto& text : f->second) {
        Frame fr = parse_frame(text);
        w_.begin_dict();
        w_.key("filename");
        w_.key(fr.file);
        w_.key("line");
        w_.integer(fr.line);
        w_.key("name");
        w_.key(fr.name);
        w_.end_dict();
      }
    w_.end_list();
    frames_memo_[stack] = w_.put();
  }

  void entry(const char* action, std::uint64_t addr, Bytes size, Tick t, std::uint64_t stack, bool with_frames) {
    if (before_trace_) return;
    w_.begin_dict();
    w_.key("action");
    w_.key(action);
    w_.key("addr");
    w_.unsigned_integer(addr);
    w_.key("size");
    w_.unsigned_integer(size);
    w_.key("stream");
    w_.integer(0);
    w_.key("time_us");
    w_.integer(time_us(t));
    if (with_frames) {
      w_.key("frames");
      frames(stack);
    }
    w_.end_dict();
  }

  // Mapped ranges of a region (all of it unless some blocks are unmapped).
  static RangeSet mapped_of(const HistoryRegion& g) {
    RangeSet m;
    for (const auto& b : g.blocks)
      if (b.kind != HistoryBlock::kUnmapped) m.add(b.addr.value(), b.addr.value() + b.size);
    if (g.blocks.empty()) m.add(g.base.value(), g.base.value() + g.size);
    return m;
  }
  static bool expandable(const HistoryRegion& g) {
    for (const auto& b : g.blocks)
      if (b.kind == HistoryBlock::kUnmapped) return true;
    return false;
  }

  struct Seen {
    Bytes size = 0;
    bool expandable = false;
    RangeSet mapped;
  };

  // A region's new state against what the trace said of it so far.
  void region_change(std::uint32_t slot, const HistoryRegion* g, Addr base, Tick t) {
    auto& known = regions_[slot];
    auto it = known.find(base.value());
    if (!g) {  // released
      if (it == known.end()) return;
      if (it->second.expandable) {
        for (const auto& [lo, hi] : it->second.mapped.ranges()) entry("segment_unmap", lo, hi - lo, t, 0, false);
      } else {
        entry("segment_free", base.value(), it->second.size, t, 0, false);
      }
      known.erase(it);
      return;
    }
    Seen now{g->size, expandable(*g) || (it != known.end() && it->second.expandable), mapped_of(*g)};
    if (now.expandable) {
      RangeSet added = now.mapped, removed = it == known.end() ? RangeSet() : it->second.mapped;
      if (it != known.end())
        for (const auto& [lo, hi] : it->second.mapped.ranges()) added.remove(lo, hi);
      for (const auto& [lo, hi] : now.mapped.ranges()) removed.remove(lo, hi);
      for (const auto& [lo, hi] : removed.ranges()) entry("segment_unmap", lo, hi - lo, t, 0, false);
      for (const auto& [lo, hi] : added.ranges()) entry("segment_map", lo, hi - lo, t, 0, false);
    } else if (it == known.end() || it->second.size != g->size) {
      if (it != known.end()) entry("segment_free", base.value(), it->second.size, t, 0, false);
      entry("segment_alloc", base.value(), g->size, t, 0, false);
    }
    known[base.value()] = std::move(now);
  }

  // The size the trace last gave a region (0 when it gave none).
  Bytes known_size(std::uint32_t slot, Addr base) const {
    auto s = regions_.find(slot);
    if (s == regions_.end()) return 0;
    auto it = s->second.find(base.value());
    return it == s->second.end() ? 0 : it->second.size;
  }

  // A block placed where the trace so far maps nothing of its device's memory. A pool that maps
  // memory in chunks it already holds (cuda-async remapping a cached chunk) changes no device call
  // and no reserved figure, so the replay's history records no region change there: the range the
  // block covers is mapped first, as the pool did. A block outside every region the trace knows is
  // a policy whose memory map and placements disagree: refused, before anything is written.
  void map_under(std::uint32_t slot, std::uint64_t lo, std::uint64_t hi, Tick t) {
    if (before_trace_ || hi <= lo) return;
    auto& known = regions_[slot];
    auto it = known.upper_bound(lo);
    if (it != known.begin()) --it;
    for (; it != known.end() && it->first < hi; ++it) {
      const std::uint64_t base = it->first, end = base + it->second.size;
      if (end <= lo || base > lo) continue;
      if (!it->second.expandable) {
        if (hi > end) refuse_inconsistent(lo);
        return;
      }
      RangeSet missing;
      missing.add(lo, std::min(hi, end));
      for (const auto& [a, b] : it->second.mapped.ranges()) missing.remove(a, b);
      for (const auto& [a, b] : missing.ranges()) {
        entry("segment_map", a, b - a, t, 0, false);
        it->second.mapped.add(a, b);
      }
      return;
    }
    refuse_inconsistent(lo);
  }
  [[noreturn]] void refuse_inconsistent(std::uint64_t addr) const {
    throw InputError(fmt::format(
        "--export-snapshot: policy {} placed a block at {:#x} outside every segment its memory map shows; a "
        "snapshot cannot hold that run (nothing written)",
        r_.policy_name, addr));
  }

  // The bytes a block of `size` holds of its buffer's request: all of it, or, for one piece of a
  // buffer held in several (Placement::pieces: bytes live before a capture at unstated addresses),
  // at most the piece — a snapshot's block never requested more than its size, and each piece
  // claiming the whole request read back as that request several times over (trial 20).
  static Bytes requested_in(const HistoryBuffer& b, Bytes size) { return std::min(b.view.requested, size); }

  void change(const Delta& c, Tick t) {
    const HistoryBuffer* b = c.buffer >= 0 ? &h_.buffers[static_cast<size_t>(c.buffer)] : nullptr;
    switch (c.kind) {
      case Delta::kPlace:
        if (b) {
          map_under(c.slot, c.addr.value(), c.addr.value() + c.size, t);
          entry("alloc", c.addr.value(), requested_in(*b, c.size), t, b->view.stack, true);
        }
        break;
      case Delta::kFree:
        if (b) {
          entry("free_requested", c.addr.value(), requested_in(*b, c.size), t, b->view.stack, true);
          entry("free_completed", c.addr.value(), requested_in(*b, c.size), t, b->view.stack, true);
        }
        break;
      case Delta::kRegion:
        region_change(c.slot, &c.region, c.addr, t);
        break;
      case Delta::kRegionGone:
        region_change(c.slot, nullptr, c.addr, t);
        break;
    }
  }

  void device_trace(std::uint32_t dev, const std::vector<const DeltaEvent*>& deltas) {
    regions_.clear();
    w_.begin_list();
    const auto found = ooms_of_.find(dev);
    const std::vector<const OomRecord*> none;
    const std::vector<const OomRecord*>& ooms = found == ooms_of_.end() ? none : found->second;
    size_t oom = 0;
    auto ooms_before = [&](std::uint64_t event) {  // the recorded OOMs of this device, in order
      for (; oom < ooms.size() && ooms[oom]->event_index <= event; ++oom) {
        const OomRecord& o = *ooms[oom];
        w_.begin_dict();
        w_.key("action");
        w_.key("oom");
        w_.key("addr");
        w_.integer(0);
        w_.key("size");
        w_.unsigned_integer(o.rounded);
        w_.key("device_free");
        w_.unsigned_integer(o.free > o.reserved - std::min(o.reserved, o.allocated)
                                ? o.free - (o.reserved - std::min(o.reserved, o.allocated))
                                : 0);
        w_.key("stream");
        w_.integer(0);
        w_.key("time_us");
        w_.integer(time_us(o.t));
        w_.key("frames");
        frames(o.request.stack);
        w_.end_dict();
      }
    };
    for (const DeltaEvent* dp : deltas) {
      const DeltaEvent& d = *dp;
      ooms_before(d.event > 0 ? d.event - 1 : 0);
      // What was there before a recording began is no event of its trace: PyTorch's importer (and
      // fragsim's) rebuilds it from the segments, so its changes only update what is known.
      before_trace_ = d.pre_trace;
      // PyTorch's order: an allocation's segment changes come before its alloc, a free's after it;
      // segments released together (empty_cache, an OOM's retry) go first, as its release_blocks
      // walks them: the large pool, then the small, each by size, then address.
      std::vector<const Delta*> gone, regions, blocks;
      for (const auto& c : d.changes) {
        if (!exported(c.slot) || device(c.slot) != dev) continue;
        (c.kind == Delta::kRegionGone ? gone : c.kind == Delta::kRegion ? regions : blocks).push_back(&c);
      }
      std::stable_sort(gone.begin(), gone.end(), [&](const Delta* x, const Delta* y) {
        auto key = [&](const Delta* c) {
          const Bytes size = known_size(c->slot, c->addr);
          return std::make_tuple(size == torch::kSmallBuffer, size, c->addr.value());
        };
        return key(x) < key(y);
      });
      const bool places =
          std::any_of(blocks.begin(), blocks.end(), [](const Delta* c) { return c->kind == Delta::kPlace; });
      if (!places)
        for (const Delta* c : blocks) change(*c, d.t);
      for (const Delta* c : gone) change(*c, d.t);
      for (const Delta* c : regions) change(*c, d.t);
      if (places)
        for (const Delta* c : blocks) change(*c, d.t);
    }
    before_trace_ = false;
    ooms_before(kStillLive - 1);
    w_.end_list();
  }

  // The allocator's settings as the policy states them in a snapshot's own form (a what-if's
  // expandable segments or rounding), so that the file replays as what it shows; none for a
  // policy that is not PyTorch's.
  void settings() {
    for (const auto& s : r_.spaces)
      if (s.space == Space::kHbm && !s.snapshot_settings.is_null()) {
        w_.key("allocator_settings");
        w_.json(s.snapshot_settings);
        return;
      }
  }

  // The trace's marks that are record_function ranges ("START name", "END name", as the importer
  // reads a snapshot's external_annotations) back as external_annotations; other marks have no
  // place in a snapshot.
  void annotations() {
    w_.key("external_annotations");
    w_.begin_list();
    for (const auto& m : r_.marks)
      for (const char* stage : {"START", "END"}) {
        const std::string prefix = std::string(stage) + " ";
        if (m.name.rfind(prefix, 0) != 0) continue;
        w_.begin_dict();
        w_.key("name");
        w_.str(m.name.substr(prefix.size()));
        w_.key("stage");
        w_.key(stage);
        w_.key("device");
        w_.integer(0);
        w_.key("time_us");
        w_.integer(time_us(m.t));
        w_.end_dict();
      }
    w_.end_list();
  }

  void block(const HistoryBlock& b, Bytes size, std::uint64_t addr) {
    const HistoryBuffer* buf = b.buffer >= 0 ? &h_.buffers[static_cast<size_t>(b.buffer)] : nullptr;
    w_.begin_dict();
    w_.key("address");
    w_.unsigned_integer(addr);
    w_.key("size");
    w_.unsigned_integer(size);
    w_.key("requested_size");
    w_.unsigned_integer(b.kind == HistoryBlock::kInUse ? (buf ? requested_in(*buf, size) : size) : 0);
    w_.key("state");
    w_.key(b.kind == HistoryBlock::kInUse ? "active_allocated" : "inactive");
    if (b.kind == HistoryBlock::kInUse) {
      w_.key("frames");
      frames(buf ? buf->view.stack : 0);
      w_.key("history");  // the pre-2.1 layout, which torch.cuda._memory_viz of 1.13 reads
      w_.begin_list();
      w_.begin_dict();
      w_.key("addr");
      w_.unsigned_integer(addr);
      w_.key("real_size");
      w_.unsigned_integer(buf ? requested_in(*buf, size) : size);
      w_.key("frames");
      frames(buf ? buf->view.stack : 0);
      w_.end_dict();
      w_.end_list();
    }
    w_.end_dict();
  }

  // One segment: [lo, hi) of region g (its whole extent, or a mapped range of an expandable one).
  void segment(std::uint32_t dev, const HistoryRegion& g, std::uint64_t lo, std::uint64_t hi, bool is_expandable) {
    Bytes allocated = 0, requested = 0;
    std::vector<const HistoryBlock*> in;
    for (const auto& b : g.blocks)
      if (b.kind != HistoryBlock::kUnmapped && b.addr.value() >= lo && b.addr.value() < hi) in.push_back(&b);
    for (const auto* b : in)
      if (b->kind == HistoryBlock::kInUse) {
        allocated += b->size;
        requested += b->buffer >= 0 ? requested_in(h_.buffers[static_cast<size_t>(b->buffer)], b->size) : b->size;
      }
    w_.begin_dict();
    w_.key("device");
    w_.integer(dev);
    w_.key("address");
    w_.unsigned_integer(lo);
    w_.key("total_size");
    w_.unsigned_integer(hi - lo);
    w_.key("allocated_size");
    w_.unsigned_integer(allocated);
    w_.key("active_size");
    w_.unsigned_integer(allocated);
    w_.key("requested_size");
    w_.unsigned_integer(requested);
    w_.key("stream");
    w_.integer(0);
    w_.key("segment_type");
    w_.key(hi - lo == torch::kSmallBuffer && !is_expandable ? "small" : "large");
    w_.key("is_expandable");
    w_.boolean(is_expandable);
    w_.key("blocks");
    w_.begin_list();
    std::uint64_t at = lo;
    for (const auto* b : in) {
      if (b->addr.value() > at)
        block({Addr(at), b->addr.value() - at, HistoryBlock::kFree, -1}, b->addr.value() - at, at);
      block(*b, std::min<std::uint64_t>(b->size, hi - b->addr.value()), b->addr.value());
      at = b->addr.value() + b->size;
    }
    if (at < hi) block({Addr(at), hi - at, HistoryBlock::kFree, -1}, hi - at, at);
    w_.end_list();
    w_.end_dict();
  }

  void segments() {
    w_.begin_list();
    if (!h_.keyframes.empty()) {
      const Keyframe& k = h_.keyframes.back();
      for (std::uint32_t s = 0; s < k.slots.size() && s < h_.slots.size(); ++s) {
        if (!exported(s)) continue;
        for (const auto& g : k.slots[s].regions) {
          if (expandable(g)) {
            const RangeSet mapped = mapped_of(g);  // kept: ranges() refers into it
            for (const auto& [lo, hi] : mapped.ranges()) segment(device(s), g, lo, hi, true);
          } else {
            segment(device(s), g, g.base.value(), g.base.value() + g.size, false);
          }
        }
      }
    }
    w_.end_list();
  }

  const RunResult& r_;
  const RunHistory& h_;
  PickleWriter w_;
  std::map<std::uint64_t, std::uint32_t> frames_memo_;
  std::map<std::uint32_t, std::vector<const OomRecord*>> ooms_of_;  // device → its OOMs (hbm), in event order
  std::map<std::uint32_t, std::map<std::uint64_t, Seen>> regions_;  // slot → base → as last written
  bool before_trace_ = false;                                       // writing nothing: the state before
};

}  // namespace

void refuse_unplaced_export(const std::string& policy) {
  throw InputError(fmt::format(
      "--export-snapshot: policy {} placed no buffer at an address; a snapshot needs addresses (choose a policy "
      "that places buffers, e.g. the one the input suggests: fragsim run TRACE without --policy)",
      policy));
}

void check_exportable(const RunResult& r, const std::string& path) {
  if (!r.export_history) throw InputError("--export-snapshot: the run kept no history to export (a fragsim bug)");
  const RunHistory& h = *r.export_history;
  bool placed = std::any_of(h.buffers.begin(), h.buffers.end(), [](const auto& b) { return b.view.has_addr; });
  if (r.allocs && !placed) refuse_unplaced_export(r.policy_name);
  // Every entry and segment is written on stream 0: the allocations of several streams, which
  // PyTorch's caching allocator keeps in pools of their own, would read back as another run.
  if (r.several_streams)
    throw InputError(
        "--export-snapshot: the trace allocates on more than one stream, and the export writes every block on "
        "stream 0: it would not read back as this run (a limit of this version)");
  // device_traces holds a list for every device number up to the largest: as many as the input
  // may make fragsim hold devices (the devices limit, sim/base/limits.h), not 2^32 of them.
  if (const std::uint64_t n = exported_devices(h); n > 0) check_device_lists(n - 1, path, input_bytes(r.trace_path));
}

std::unique_ptr<AtomicFile> stage_snapshot(const RunResult& r, const std::string& path) {
  check_exportable(r, path);
  auto file = std::make_unique<AtomicFile>(path);
  Exporter(r, *r.export_history, *file).write();
  return file;
}

void export_snapshot(const RunResult& r, const std::string& path) { stage_snapshot(r, path)->commit(); }

}  // namespace fragsim

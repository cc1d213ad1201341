#include "sim/engine/allocation_log.h"

#include <algorithm>
#include <stdexcept>

namespace fragsim {

namespace {

void put(std::string& s, std::uint64_t v) {  // LEB128
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}
std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
template <class Columns>
size_t total_size(const Columns& cols) {
  size_t n = 0;
  for (const auto& c : cols) n += c.size();
  return n;
}
std::int64_t unzigzag(std::uint64_t v) { return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1); }

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  bool done() const { return p_ >= s_.size(); }
  std::uint64_t get() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ >= s_.size() || shift > 63) throw std::logic_error("allocation log: a truncated varint");
      auto b = static_cast<unsigned char>(s_[p_++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  std::int64_t sget() { return unzigzag(get()); }

 private:
  const std::string& s_;
  size_t p_ = 0;
};

}  // namespace

std::int64_t AllocationLog::intern_name(const std::string& name) {
  if (name.empty()) return -1;
  auto [it, fresh] = name_ids_.try_emplace(name, static_cast<std::int64_t>(names_.size()));
  if (fresh) {
    names_.push_back(name);
    bytes_ += name.size();
  }
  return it->second;
}

std::int64_t AllocationLog::intern_shape(Dtype dtype, const std::vector<std::uint64_t>& dims) {
  std::string key(1, static_cast<char>(dtype));
  for (auto d : dims) put(key, d);
  auto [it, fresh] = shape_ids_.try_emplace(key, static_cast<std::int64_t>(shapes_.size()));
  if (fresh) {
    shapes_.push_back({dtype, dims});
    bytes_ += key.size();
  }
  return it->second;
}

void AllocationLog::append_alloc(Slot& s, const Record& r) {
  auto& c = s.alloc;
  const size_t before = total_size(c);
  const std::uint8_t flags = (r.has_addr ? kHasAddr : 0) | (r.has_recorded && r.recorded != r.addr ? kRecorded : 0) |
                             (r.pre_trace ? kPreTrace : 0) |
                             (r.has_recorded && r.recorded == r.addr ? kRecordedSame : 0) | (r.stack ? kStack : 0) |
                             (r.name >= 0 ? kName : 0) | (r.shape >= 0 ? kShape : 0) | (r.stream ? kStream : 0);
  c[kFlags].push_back(static_cast<char>(flags));
  const std::uint64_t de = r.alloc_event - s.last_event;
  const std::uint64_t dt = r.alloc_t.value() - std::min(r.alloc_t.value(), s.last_t);
  put(c[kEvent], de);
  put(c[kTime], zigzag(static_cast<std::int64_t>(dt - de)));
  put(c[kId], zigzag(static_cast<std::int64_t>(r.id.value() - s.last_id - 1)));
  put(c[kRequested], r.requested);
  put(c[kPad], zigzag(static_cast<std::int64_t>(r.block - r.requested)));
  if (r.has_addr) {
    put(c[kAddr], zigzag(static_cast<std::int64_t>(r.addr.value() - s.last_addr)));
    s.last_addr = r.addr.value();
  }
  if (flags & kRecorded) put(c[kRecordedAddr], zigzag(static_cast<std::int64_t>(r.recorded.value() - r.addr.value())));
  if (r.stack) put(c[kStackId], r.stack);
  if (r.name >= 0) put(c[kNameId], static_cast<std::uint64_t>(r.name));
  if (r.shape >= 0) put(c[kShapeId], static_cast<std::uint64_t>(r.shape));
  if (r.stream) put(c[kStreamId], zigzag(r.stream));
  s.last_event = r.alloc_event;
  s.last_t = std::max(s.last_t, r.alloc_t.value());
  s.last_id = r.id.value();
  ++s.count;
  bytes_ += total_size(c) - before;
}

void AllocationLog::append_free(Slot& s, std::uint64_t ordinal, std::uint64_t event, Tick t,
                                std::int64_t stream_change) {
  auto& c = s.free;
  const size_t before = total_size(c);
  const std::uint64_t de = event - std::min(event, s.last_free_event);
  const std::uint64_t dt = t.value() - std::min(t.value(), s.last_free_t);
  put(c[kBack], s.count - 1 - ordinal);
  put(c[kFreeEvent], de);
  put(c[kFreeTime], zigzag(static_cast<std::int64_t>(dt - de)));
  put(c[kFreeStream], zigzag(stream_change));
  s.last_free_event = std::max(s.last_free_event, event);
  s.last_free_t = std::max(s.last_free_t, t.value());
  ++s.frees;
  bytes_ += total_size(c) - before;
}

bool AllocationLog::placed(std::uint32_t slot, Handle handle, const Event& ev, Bytes block, bool has_addr, Addr addr,
                           std::span<const Extent> pieces) {
  if (truncated_at_ != kNone) return false;
  if (bytes_ >= budget_) {
    truncated_at_ = ev.index;
    return false;
  }
  if (slot >= slots_.size()) slots_.resize(slot + 1);
  Record r;
  r.id = ev.id;
  r.alloc_event = ev.index;
  r.alloc_t = since_origin(ev.t);
  r.requested = ev.size;
  r.block = block;
  r.has_addr = has_addr;
  r.addr = addr;
  r.has_recorded = ev.has(key::kAddr);
  r.recorded = ev.addr;
  r.pre_trace = ev.has(key::kPreTrace);
  r.stack = ev.has(key::kStack) ? ev.stack : 0;
  r.name = ev.has(key::kName) ? intern_name(ev.name) : -1;
  r.shape = ev.has(key::kShape) && ev.dtype != Dtype::kNone ? intern_shape(ev.dtype, ev.shape) : -1;
  r.stream = ev.has(key::kStream) ? ev.stream : 0;
  Slot& s = slots_[slot];
  if (handle >= live_.size()) live_.resize(handle + 1);
  live_[handle] = {slot, s.count, r.stream, static_cast<std::uint32_t>(std::max<size_t>(pieces.size(), 1))};
  if (pieces.empty()) {
    append_alloc(s, r);
    return true;
  }
  Bytes left = ev.size;
  for (const Extent& e : pieces) {
    r.addr = e.addr;
    r.block = e.bytes;
    r.requested = &e == &pieces.back() ? left : std::min(left, e.bytes);
    left -= r.requested;
    append_alloc(s, r);
  }
  return true;
}

void AllocationLog::freed(Handle handle, std::uint64_t event, Tick t, bool has_stream, std::int64_t stream) {
  if (handle >= live_.size() || live_[handle].ordinal == kNone) return;
  Live& l = live_[handle];
  for (std::uint32_t k = 0; k < l.pieces; ++k)
    append_free(slots_[l.slot], l.ordinal + k, event, since_origin(t), (has_stream ? stream : l.stream) - l.stream);
  l.ordinal = kNone;
}

AllocationLog AllocationLog::cut_before(std::uint64_t event) const {
  AllocationLog out(budget_);
  out.names_ = names_;
  out.shapes_ = shapes_;
  out.truncated_at_ = std::min(truncated_at_, event);
  out.slots_.resize(slots_.size());
  for (std::uint32_t k = 0; k < slots_.size(); ++k) {
    std::vector<Record> rs = records(k);
    std::vector<const Record*> frees;
    for (const auto& r : rs)
      if (r.alloc_event < event && r.free_event < event) frees.push_back(&r);
    std::sort(frees.begin(), frees.end(),
              [](const Record* a, const Record* b) { return a->free_event < b->free_event; });
    // Allocations and frees in event order, as the run made them.
    size_t f = 0;
    Slot& s = out.slots_[k];
    for (const auto& r : rs) {
      if (r.alloc_event >= event) break;
      for (; f < frees.size() && frees[f]->free_event < r.alloc_event; ++f)
        out.append_free(s, frees[f]->ordinal, frees[f]->free_event, frees[f]->free_t,
                        frees[f]->free_stream - frees[f]->stream);
      out.append_alloc(s, r);
    }
    for (; f < frees.size(); ++f)
      out.append_free(s, frees[f]->ordinal, frees[f]->free_event, frees[f]->free_t,
                      frees[f]->free_stream - frees[f]->stream);
  }
  return out;
}

std::vector<AllocationLog::Record> AllocationLog::records(std::uint32_t slot) const {
  std::vector<Record> out;
  if (slot >= slots_.size()) return out;
  const Slot& s = slots_[slot];
  std::vector<Reader> a;
  for (const auto& x : s.alloc) a.emplace_back(x);
  std::uint64_t event = 0, t = 0, id = 0, addr = 0;
  for (const char f : s.alloc[kFlags]) {
    Record r;
    r.slot = slot;
    r.ordinal = out.size();
    const auto flags = static_cast<std::uint8_t>(f);
    const std::uint64_t de = a[kEvent].get();
    r.alloc_event = event += de;
    r.alloc_t = Tick(t += de + static_cast<std::uint64_t>(a[kTime].sget()));
    r.id = AllocId(id += 1 + static_cast<std::uint64_t>(a[kId].sget()));
    r.requested = a[kRequested].get();
    r.block = r.requested + static_cast<std::uint64_t>(a[kPad].sget());
    r.has_addr = flags & kHasAddr;
    r.pre_trace = flags & kPreTrace;
    if (r.has_addr) r.addr = Addr(addr += static_cast<std::uint64_t>(a[kAddr].sget()));
    if (flags & kRecorded) {
      r.has_recorded = true;
      r.recorded = Addr(r.addr.value() + static_cast<std::uint64_t>(a[kRecordedAddr].sget()));
    } else if (flags & kRecordedSame) {
      r.has_recorded = true;
      r.recorded = r.addr;
    }
    if (flags & kStack) r.stack = a[kStackId].get();
    if (flags & kName) r.name = static_cast<std::int64_t>(a[kNameId].get());
    if (flags & kShape) r.shape = static_cast<std::int64_t>(a[kShapeId].get());
    r.stream = r.free_stream = flags & kStream ? a[kStreamId].sget() : 0;
    out.push_back(r);
  }
  std::vector<Reader> f;
  for (const auto& x : s.free) f.emplace_back(x);
  std::uint64_t fe = 0, ft = 0;
  // The ordinal is counted back from the allocations made before the free: replay the count.
  size_t made = 0;
  while (!f[kBack].done()) {
    const std::uint64_t back = f[kBack].get(), de = f[kFreeEvent].get();
    fe += de;
    ft += de + static_cast<std::uint64_t>(f[kFreeTime].sget());
    const std::int64_t dstream = f[kFreeStream].sget();
    while (made < out.size() && out[made].alloc_event < fe) ++made;
    // A buffer is freed at an event after its allocation: the ordinal is among those made by then.
    if (back + 1 > made) throw std::logic_error("allocation log: a free of an allocation not yet made");
    Record& r = out[made - 1 - back];
    r.free_event = fe;
    r.free_t = Tick(ft);
    r.free_stream = r.stream + dstream;
  }
  return out;
}

}  // namespace fragsim

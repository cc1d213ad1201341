#include "traces/trace_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "traces/capture_profile.h"
#include "traces/fstrace.h"
#include "traces/jax_memory_profile.h"
#include "traces/jsonl.h"
#include "traces/kineto.h"
#include "traces/recording_header.h"
#include "traces/recording_set.h"
#include "traces/torch_snapshot.h"
#include "traces/trace_writer.h"
#include "traces/xla_modules.h"
#include "traces/xprof_capture.h"

namespace fragsim {

void TraceReader::fail(std::uint64_t line, const std::string& what) const { throw InputError(path_, line, what); }

void TraceReader::set_header(nlohmann::json h, std::uint64_t line) {
  recording_ = recording_from_header(h, path_, line);
  header_ = std::move(h);
}

void check_header(const nlohmann::json& h, const std::string& file, std::uint64_t line) {
  if (!h.is_object() || !h.contains("fragsim_trace"))
    throw InputError(file, line, "fragsim_trace: the header must be an object with the trace version");
  const auto& v = h.at("fragsim_trace");
  if (!v.is_number_integer() || v.get<std::int64_t>() != 1)
    throw InputError(file, line, "fragsim_trace: unsupported trace version " + dump_json(v) + " (this build reads 1)");
  if (h.contains("time_unit")) {
    const auto& u = h.at("time_unit");
    if (!u.is_string() || (u != "ns" && u != "us" && u != "ms" && u != "s"))
      throw InputError(file, line, "time_unit: must be one of ns, us, ms, s, got " + dump_json(u));
  }
}

nlohmann::json parse_header(std::string_view text, const std::string& file, std::uint64_t line) {
  if (text.size() > kMaxHeaderBytes)
    throw InputError(file, line, fmt::format("header: larger than {} KiB", kMaxHeaderBytes >> 10));
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text.begin(), text.end(), [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > static_cast<int>(kMaxHeaderDepth))
        throw InputError(file, line, fmt::format("header: nested deeper than {} levels", kMaxHeaderDepth));
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    std::string w = e.what();
    auto p = w.find("] ");
    throw InputError(file, line, "invalid JSON in header: " + (p == std::string::npos ? w : w.substr(p + 2)));
  }
  check_header(h, file, line);
  return h;
}

void clear_decoded(Event& ev) {
  ev.present = 0;
  ev.t = Tick();
  ev.id = AllocId();
  ev.size = 0;
  ev.stream = 0;
  ev.device = 0;
  ev.space = Space::kHbm;
  ev.dtype = Dtype::kNone;
  ev.addr = Addr();
  ev.name.clear();
  ev.shape.clear();
  ev.stack = 0;
  ev.block_size = 0;
  ev.frames.clear();
  ev.handle = kNoHandle;
}

void take_event(Event& dst, Event& src) {
  // Every field of Event is named below: one added to it must be added here too.
  static_assert(sizeof(Event) == 176, "Event changed: update take_event");
  dst.op = src.op;
  dst.present = src.present;
  dst.space = src.space;
  dst.dtype = src.dtype;
  dst.live_space = src.live_space;
  dst.device = src.device;
  dst.handle = src.handle;
  dst.index = src.index;
  dst.t = src.t;
  dst.id = src.id;
  dst.size = src.size;
  dst.stream = src.stream;
  dst.addr = src.addr;
  dst.live_size = src.live_size;
  dst.stack = src.stack;
  dst.line = src.line;
  dst.block_size = src.block_size;
  if (!dst.shape.empty() || !src.shape.empty()) dst.shape.swap(src.shape);
  if (!dst.name.empty() || !src.name.empty()) dst.name.swap(src.name);
  if (!dst.frames.empty() || !src.frames.empty()) dst.frames.swap(src.frames);
}

bool TraceReader::next(Event& ev) {
  for (;;) {
    clear_decoded(ev);
    if (!read_raw(ev)) {
      if (counts_) count_input_events(path_, index_);  // the last events, fewer than a count's step
      return false;
    }
    ev.index = index_;
    if (!ev.has(key::kT))
      ev.t = Tick(index_);
    else
      timed_ = true;
    if (ev.t < last_t_) fail(ev.line, fmt::format("t: time {} is before the previous event's {}", ev.t, last_t_));
    if (ev.present & (key::kPreTrace | key::kStack | key::kBlockSize | key::kFrames | key::kAggregate))
      check_rare_keys(ev);

    switch (ev.op) {
      case Op::kAlloc: {
        if (ev.has(key::kShape) && ev.has(key::kDtype)) {
          Bytes want = 0;
          if (!unpadded_bytes(ev.shape, ev.dtype, &want))
            fail(ev.line, fmt::format("shape: the array's size ({} elements of {}) does not fit in 64 bits",
                                      fmt::join(ev.shape, " x "), dtype_name(ev.dtype)));
          if (want != ev.size)
            fail(ev.line, fmt::format("size: {} does not match shape and dtype {} ({} bytes)", ev.size,
                                      dtype_name(ev.dtype), want));
        }
        if (ev.has(key::kStack) && !stacks_.count(ev.stack))
          fail(ev.line, fmt::format("stack: stack {} is not defined (a stack op must come first)", ev.stack));
        ev.handle = live_.insert(ev.device, ev.id, ev.size, ev.space);
        if (ev.handle == kNoHandle)
          fail(ev.line, fmt::format("id: alloc of id {} which is already live on device {}", ev.id, ev.device));
        break;
      }
      case Op::kReserved:
        if (!ev.has(key::kSize)) fail(ev.line, "size: missing required key");
        break;
      case Op::kStack:
        if (!ev.has(key::kId)) fail(ev.line, "id: missing required key");
        if (!ev.has(key::kFrames)) fail(ev.line, "frames: missing required key");
        if (!stacks_.insert(ev.id.value()).second) fail(ev.line, fmt::format("id: stack {} is defined twice", ev.id));
        break;
      case Op::kFree: {
        LiveTable::Entry e;
        if (!live_.erase(ev.device, ev.id, &e)) {
          if (opt_.lenient) {  // the line keeps its event_index but is not replayed
            ++skipped_frees_;
            last_t_ = ev.t;
            ++index_;
            continue;
          }
          fail(ev.line, fmt::format("id: free of id {} which is not live", ev.id));
        }
        ev.handle = e.handle;
        ev.live_size = e.size;
        ev.live_space = e.space;
        break;
      }
      default:
        break;
    }
    last_t_ = ev.t;
    if ((++index_ & 4095) == 0 && counts_) count_input_events(path_, index_);  // for progress lines
    mix_digest(ev);
    return true;
  }
}

// The keys only some events may carry (one test of the present bits passes the common event).
void TraceReader::check_rare_keys(const Event& ev) const {
  if (ev.has(key::kPreTrace) && ev.op != Op::kAlloc && ev.op != Op::kSegmentAlloc && ev.op != Op::kSegmentMap)
    fail(ev.line, "pre_trace: only alloc, segment_alloc and segment_map events can be marked pre_trace");
  if (ev.has(key::kStack) && ev.op != Op::kAlloc) fail(ev.line, "stack: only an alloc names a stack");
  // A recorded block size may outlive its address (a trace whose addresses were removed).
  if (ev.has(key::kBlockSize) && ev.op != Op::kAlloc)
    fail(ev.line, "block_size: only an alloc carries the recorded block size");
  if (ev.has(key::kBlockSize) && ev.block_size < ev.size)
    fail(ev.line, fmt::format("block_size: {} is smaller than the request ({})", ev.block_size, ev.size));
  if (ev.has(key::kFrames) && ev.op != Op::kStack) fail(ev.line, "frames: only a stack op carries frames");
  if (ev.has(key::kAggregate) && ((ev.op != Op::kAlloc && ev.op != Op::kSegmentAlloc) || !ev.has(key::kPreTrace)))
    fail(ev.line, "aggregate: only an alloc or a segment_alloc marked pre_trace can stand for several");
}

// A 64-bit digest of what replay depends on: every event's op, id, size, effective time, stream,
// device, space, dtype, shape, address and pre_trace mark, in order (names are left out: renaming
// buffers does not change a run). The same trace in any encoding has the same digest.
void TraceReader::mix_digest(const Event& ev) {
  auto mix = [&](std::uint64_t v) {
    std::uint64_t x = (digest_ ^ v) * 0x9e3779b97f4a7c15ULL;
    digest_ = x ^ (x >> 29);
  };
  mix(static_cast<std::uint64_t>(ev.op) | (static_cast<std::uint64_t>(ev.present & ~key::kName) << 8) |
      (static_cast<std::uint64_t>(ev.space) << 24) | (static_cast<std::uint64_t>(ev.dtype) << 32));
  mix(ev.id.value());
  mix(ev.size);
  mix(ev.t.value());
  mix(static_cast<std::uint64_t>(ev.stream));
  mix(ev.device);
  mix(ev.addr.value());
  for (auto d : ev.shape) mix(d);
}

std::string TraceReader::digest() const { return fmt::format("{:016x}", digest_); }

namespace {

// Events held in memory. Unless `own_lines`, they are numbered 1, 2, ... in messages; else each
// keeps the line it was decoded from (and the header its own line).
class EventReader : public TraceReader {
 public:
  struct Options {
    ReaderOptions read;
    std::uint64_t skipped_before = 0;  // frees the first read skipped (--lenient): the events hold none
    bool own_lines = false;
    std::uint64_t header_line = 0;
  };
  EventReader(std::string name, std::shared_ptr<const std::vector<Event>> events, nlohmann::json header,
              const Options& o)
      : TraceReader(std::move(name), o.read),
        events_(std::move(events)),
        skipped_before_(o.skipped_before),
        own_lines_(o.own_lines) {
    if (!header.is_null()) {
      check_header(header, path_, o.header_line);
      set_header(std::move(header), o.header_line);
    }
  }
  std::uint64_t skipped_frees() const override { return TraceReader::skipped_frees() + skipped_before_; }

 protected:
  bool read_raw(Event& ev) override {
    if (next_ == events_->size()) return false;
    ev = (*events_)[next_++];
    if (!own_lines_) ev.line = next_;
    return true;
  }

 private:
  std::shared_ptr<const std::vector<Event>> events_;
  size_t next_ = 0;
  std::uint64_t skipped_before_;
  bool own_lines_;
};

// Another reader's events, with allocations it does not hold inserted (append_allocs).
class AppendingReader : public TraceReader {
 public:
  AppendingReader(std::unique_ptr<TraceReader> inner, std::vector<AppendedAlloc> allocs)
      : TraceReader(inner->path(), ReaderOptions{}), inner_(std::move(inner)), allocs_(std::move(allocs)) {
    header_ = inner_->header();
    recording_ = inner_->recording();
    count_progress(false);  // the input's events count as the inner reader reads them; the inserted are none of them
    std::stable_sort(allocs_.begin(), allocs_.end(),
                     [](const AppendedAlloc& x, const AppendedAlloc& y) { return x.before < y.before; });
  }
  std::uint64_t skipped_frees() const override { return TraceReader::skipped_frees() + inner_->skipped_frees(); }

 protected:
  bool read_raw(Event& ev) override {
    if (!held_ && !done_) {
      held_ = inner_->next(held_ev_);
      done_ = !held_;
    }
    if (next_ < allocs_.size() && (done_ || allocs_[next_].before <= held_ev_.index)) {
      const AppendedAlloc& a = allocs_[next_++];
      if (done_ && a.before != UINT64_MAX && a.before > after_)
        fail(0, fmt::format("--failed-alloc: event {} is past the trace's end (its events are numbered 0 to {})",
                            a.before, after_ ? after_ - 1 : 0));
      continue_at((done_ ? after_ : held_ev_.index) + shift_++);
      ev.op = Op::kAlloc;
      ev.device = a.device;
      ev.id = AllocId((std::uint64_t{1} << 63) + next_);  // no trace's: the request stays apart
      ev.size = a.size;
      ev.name = a.name;
      ev.line = last_line_;
      ev.present |= key::kId | key::kSize | key::kName;
      if (inner_->timed()) {  // at the previous event's time (else at its index, as every event)
        ev.t = last_t_;
        ev.present |= key::kT;
      }
      return true;
    }
    if (!held_) {
      // A device no event of the trace uses would be made up, with the hardware preset's memory.
      for (const AppendedAlloc& a : allocs_)
        if (!devices_.count(a.device))
          fail(0, devices_.empty() ? std::string("--failed-alloc: the trace has no events to add a request to")
                                   : fmt::format("--failed-alloc: device {} is not in the trace (its devices: {})",
                                                 a.device, fmt::join(devices_, ", ")));
      return false;
    }
    held_ = false;
    if (devices_.empty() || held_ev_.device != last_device_) devices_.insert(last_device_ = held_ev_.device);
    take_event(ev, held_ev_);
    continue_at(ev.index + shift_);  // the inner reader's indices (--lenient skips some), after insertions
    after_ = ev.index + 1;
    last_t_ = ev.t;
    last_line_ = ev.line;
    return true;
  }

 private:
  std::unique_ptr<TraceReader> inner_;
  std::vector<AppendedAlloc> allocs_;
  Event held_ev_;  // the inner reader's next event, read ahead
  bool held_ = false, done_ = false;
  size_t next_ = 0;
  std::uint64_t after_ = 0, shift_ = 0, last_line_ = 0;
  Tick last_t_;
  std::set<std::uint32_t> devices_;  // the devices the trace's events use
  std::uint32_t last_device_ = 0;
};

}  // namespace

std::unique_ptr<TraceReader> append_allocs(std::unique_ptr<TraceReader> inner, std::vector<AppendedAlloc> allocs) {
  return std::make_unique<AppendingReader>(std::move(inner), std::move(allocs));
}

std::unique_ptr<TraceReader> make_event_reader(std::string name, std::vector<Event> events, nlohmann::json header) {
  return std::make_unique<EventReader>(std::move(name), std::make_shared<const std::vector<Event>>(std::move(events)),
                                       std::move(header), EventReader::Options{});
}

std::unique_ptr<TraceReader> make_decoded_reader(std::string name, std::shared_ptr<const std::vector<Event>> events,
                                                 nlohmann::json header, std::uint64_t header_line,
                                                 const ReaderOptions& opt) {
  EventReader::Options o;
  o.read = opt;
  o.own_lines = true;
  o.header_line = header_line;
  return std::make_unique<EventReader>(std::move(name), std::move(events), std::move(header), o);
}

namespace {
// Every event of `reader`, for readers named `name`.
ReaderFactory decode_all(TraceReader& reader, std::string name) {
  auto events = std::make_shared<std::vector<Event>>();
  Event ev;
  while (reader.next(ev)) events->push_back(ev);
  nlohmann::json header = reader.header();
  EventReader::Options o;
  o.skipped_before = reader.skipped_frees();
  std::shared_ptr<const std::vector<Event>> shared = std::move(events);
  return [name = std::move(name), shared, header, o]() -> std::unique_ptr<TraceReader> {
    return std::make_unique<EventReader>(name, shared, header, o);
  };
}
}  // namespace

ReaderFactory decode_once(const ReaderFactory& open) {
  auto reader = open();
  return decode_all(*reader, reader->path());
}

ReaderFactory decode_once(const std::string& path, const ReaderOptions& opt) {
  return decode_all(*open_trace(path, opt), path);
}

bool decodes_whole(const std::string& path) {
  return is_capture_with_profile(path) || is_xprof_path(path) || is_kineto_path(path) ||
         is_jax_memory_profile_path(path) || is_recording_set(path) || is_hlo_proto_path(path) ||
         ends_with(path, ".pickle") || ends_with(path, ".pkl") || ends_with(path, ".pickle.zst") ||
         ends_with(path, ".pkl.zst");
}

std::unique_ptr<TraceReader> uncounted(std::unique_ptr<TraceReader> reader) {
  reader->count_progress(false);
  return reader;
}

std::unique_ptr<TraceReader> open_trace(const std::string& path, const ReaderOptions& opt) {
  if (is_capture_with_profile(path)) return make_capture_with_profile_reader(path, opt);  // a capture + its state
  // Any other list is a set, whatever its last piece's name ends in: its reader names a piece that
  // is not a member (a list ending in .xplane.pb was opened as one capture: 'cannot open', exit 3).
  if (is_file_list(path)) return make_recording_set_reader(path, opt);
  if (ends_with(path, ".fstrace")) return make_fstrace_reader(path, opt);
  if (is_xprof_path(path)) return make_xprof_reader(path, opt);
  if (is_kineto_path(path)) return make_kineto_reader(path, opt);  // profiler traces, a log directory
  if (is_jax_memory_profile_path(path)) return make_jax_memory_profile_reader(path, opt);
  if (is_recording_set(path)) return make_recording_set_reader(path, opt);  // per-rank snapshots or traces
  if (is_hlo_proto_path(path)) {  // a dumped module: its compile-time heap trace
    auto mods = list_hlo_modules(path);
    return make_hlo_module_reader(path, mods.empty() ? std::string() : mods.front().name);
  }
  if (ends_with(path, ".pickle") || ends_with(path, ".pkl") || ends_with(path, ".pickle.zst") ||
      ends_with(path, ".pkl.zst"))
    return make_torch_snapshot_reader(path, opt);
  if (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.zst") || ends_with(path, ".json"))
    return make_jsonl_reader(path, opt);
  throw InputError(path +
                   ": unknown trace format (expected .jsonl, .jsonl.zst, .fstrace, .pickle, .pickle.zst, .xplane.pb, "
                   "a PyTorch profiler trace .json or .json.gz, a JAX memory profile .prof, or a profile directory)");
}

std::uint64_t convert_trace(const std::string& in, const std::string& out, const std::string& module, bool lenient) {
  ReaderOptions ro;
  ro.lenient = lenient;
  auto r = module.empty() ? open_trace(in, ro) : make_hlo_module_reader(in, module);
  auto w = open_trace_writer(out, r->header());
  Event ev;
  std::uint64_t n = 0;
  while (r->next(ev)) {
    w->write(ev);
    ++n;
  }
  w->finish();
  return n;
}

}  // namespace fragsim

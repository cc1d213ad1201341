#include "traces/kineto.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/base/text.h"
#include "sim/base/torch_sizes.h"
#include "traces/gpu_preset.h"
#include "traces/kept_conversions.h"
#include "traces/kineto_layout.h"
#include "traces/profile_dirs.h"
#include "traces/recording_set.h"
#include "traces/stack_table.h"

namespace fragsim {

namespace {

namespace od = simdjson::ondemand;

// The segment (of those in address order) that holds `a`; null when none does.
const KinetoLayout::Segment* segment_at(const std::vector<KinetoLayout::Segment>& segments, Addr a) {
  auto it = std::upper_bound(segments.begin(), segments.end(), a,
                             [](Addr x, const KinetoLayout::Segment& s) { return x < s.base; });
  if (it == segments.begin()) return nullptr;
  --it;
  return a.value() < it->base.value() + it->size ? &*it : nullptr;
}

// The UTF-8 byte-order mark some editors write before a JSON document.
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

bool has_trace_suffix(const std::string& p) {
  return ends_with(p, ".pt.trace.json") || ends_with(p, ".pt.trace.json.gz") || ends_with(p, ".pt.trace.json.zst");
}

// A file read a chunk at a time, for a walk over the top level of the JSON document it holds.
class JsonBytes {
 public:
  explicit JsonBytes(std::FILE* f) : f_(f), buf_(65536) {}
  int peek() {
    if (at_ == n_) {
      n_ = std::fread(buf_.data(), 1, buf_.size(), f_);
      at_ = 0;
      if (n_ == 0) return EOF;
    }
    return static_cast<unsigned char>(buf_[at_]);
  }
  int get() {
    const int c = peek();
    if (c != EOF) ++at_;
    return c;
  }
  int skip_space() {
    int c;
    while ((c = peek()) == ' ' || c == '\t' || c == '\r' || c == '\n') ++at_;
    return c;
  }
  // Past a string whose opening quote was read; its bytes, as written, in *out.
  bool string(std::string* out) {
    for (int c; (c = get()) != EOF;) {
      if (c == '"') return true;
      if (c == '\\' && get() == EOF) return false;
      if (out && out->size() < 64) out->push_back(c == '\\' ? '\\' : static_cast<char>(c));
    }
    return false;
  }
  // Past one value, however large: its strings and nested brackets counted, never decoded.
  bool value() {
    int c = skip_space();
    if (c == '"') {
      get();
      return string(nullptr);
    }
    if (c == '{' || c == '[') {
      for (int depth = 0; (c = get()) != EOF;) {
        if (c == '"' && !string(nullptr)) return false;
        if (c == '{' || c == '[') ++depth;
        if ((c == '}' || c == ']') && --depth == 0) return true;
      }
      return false;
    }
    while ((c = peek()) != EOF && c != ',' && c != '}' && c != ']' && c != ' ' && c != '\t' && c != '\r' && c != '\n')
      ++at_;
    return c != EOF;
  }

 private:
  std::FILE* f_;
  std::vector<char> buf_;
  size_t at_ = 0, n_ = 0;
};

// Whether the object a file begins with has a Chrome trace's key (traceEvents, schemaVersion,
// deviceProperties) at its top level, walked key by key past values of any size: Kineto writes
// its top-level keys before traceEvents, and a deviceProperties or distributedInfo of many
// devices may fill more than any prefix the detection could read. False at a report's key, at
// the end of the object (the first line of a JSONL trace) or where the text is no JSON.
bool top_level_keys_name_chrome_trace(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return false;
  JsonBytes in(f.get());
  if (in.peek() == static_cast<unsigned char>(kUtf8Bom[0]))
    for (size_t i = 0; i < kUtf8Bom.size(); ++i) in.get();
  if (in.skip_space() != '{') return false;
  in.get();
  for (std::string key; in.skip_space() == '"'; key.clear()) {
    in.get();
    if (!in.string(&key) || in.skip_space() != ':') return false;
    in.get();
    if (key == "traceEvents" || key == "schemaVersion" || key == "deviceProperties") return true;
    if (key == "fragsim_report" || key == "fragsim_trace") return false;
    if (!in.value() || in.skip_space() != ',') return false;
    in.get();
  }
  return false;
}

// Whether an uncompressed .json file is a Chrome trace rather than a fragsim JSONL trace or
// report: an array of events (its first event within the first 64 KiB), or an object whose top
// level names a Chrome trace's keys (Kineto writes schemaVersion and deviceProperties first,
// traceEvents after them), however far into the file they are.
bool looks_like_chrome_trace(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  std::string buf(65536, '\0');
  buf.resize(std::fread(buf.data(), 1, buf.size(), f));
  std::fclose(f);
  std::string_view s(buf);
  if (s.substr(0, 3) == kUtf8Bom) s.remove_prefix(3);  // a file an editor saved with one
  size_t at = s.find_first_not_of(" \t\r\n");
  if (at == std::string_view::npos) return false;
  if (s.find("\"fragsim_report\"") != std::string_view::npos) return false;  // a report, or compare's array of them
  // An array of events: its first event has a phase ("ph": ...); compare's array of reports, whose
  // "fragsim_report" key may lie beyond the first 64 KiB, has none.
  if (s[at] == '[') {
    for (size_t k = s.find("\"ph\""); k != std::string_view::npos; k = s.find("\"ph\"", k + 1)) {
      size_t colon = s.find_first_not_of(" \t\r\n", k + 4);
      if (colon != std::string_view::npos && s[colon] == ':') return true;
    }
    return false;
  }
  return s[at] == '{' && top_level_keys_name_chrome_trace(path);
}

bool is_trace_entry(const std::filesystem::path& p) { return has_trace_suffix(p.filename().string()); }

// "<worker>.<ns>.pt.trace.json[.gz]" (tensorboard_trace_handler) → worker; else the file's name.
std::string worker_of(const std::string& file) {
  std::string name = std::filesystem::path(file).filename().string();
  name = name.substr(0, name.find(".pt.trace.json"));
  size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot + 1 < name.size() &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(dot) + 1, name.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return name.substr(0, dot);
  return name;
}

// The whole file, decompressed, with room for simdjson's padding.
std::string read_trace_bytes(const std::string& path) {
  constexpr std::uint64_t kMaxDocument = (std::uint64_t{4} << 30) - simdjson::SIMDJSON_PADDING - 1;  // simdjson's bound
  std::string s = read_input(path, kMaxDocument);
  if (s.compare(0, 3, kUtf8Bom) == 0) s.erase(0, 3);  // simdjson reads no byte-order mark
  // Said as such, not as JSON cut short at line 1 (a trace handler that failed writes one).
  if (s.find_first_not_of(" \t\r\n") == std::string::npos) {
    std::error_code ec;
    const bool zero = std::filesystem::file_size(path, ec) == 0 && !ec;
    throw InputError(path + (zero ? ": the file is empty (0 bytes)" : ": the file is empty (no JSON in it)") +
                     ": not a PyTorch profiler trace");
  }
  s.reserve(s.size() + simdjson::SIMDJSON_PADDING);
  return s;
}

// One [memory] event as written.
struct MemRec {
  std::int64_t t = 0;        // ns (since the epoch when the file says so)
  std::uint64_t line = 0;    // of the event in the file
  std::uint32_t thread = 0;  // (pid, tid)
  std::int64_t type = -1, device = -1;
  std::int64_t bytes = 0;
  std::uint64_t addr = 0, allocated = 0, reserved = 0;
  bool has_addr = false, has_allocated = false, has_reserved = false, has_type = false, has_bytes = false;
  std::uint32_t name = 0;   // innermost operator (0: none)
  std::uint64_t stack = 0;  // Python stack (0: none)
};

// An operator or Python frame span ("ph": "X").
struct Span {
  std::int64_t start = 0, end = 0;  // ns
  std::uint32_t thread = 0, name = 0;
  bool python = false;
};

struct DeviceProps {
  std::string name;
  Bytes memory = 0;
  int cc_major = -1, cc_minor = -1;
};

// One event of the output, before it becomes an Event.
struct Raw {
  Op op = Op::kMark;
  std::int64_t t = 0;
  std::uint32_t device = 0;
  Space space = Space::kHbm;
  std::uint64_t id = 0;
  Bytes size = 0, block = 0;
  std::uint64_t addr = 0;
  bool has_addr = false, pre_trace = false, aggregate = false;
  std::int64_t stream = 0;
  bool has_stream = false;
  std::uint64_t line = 0, stack = 0;
  std::uint32_t name = 0;
};

// What a trace converts to: its events in order (the state before the window first), the names
// they index, their stacks, the header. Every reader of one conversion reads the same.
struct Converted {
  std::vector<Raw> events;
  std::vector<std::string> names;
  StackTable stacks;
  nlohmann::json header;
};

class KinetoReader : public TraceReader {
 public:
  // Converts the file: parses it, infers each device's state before the window (the costly part).
  KinetoReader(const std::string& path, const ReaderOptions& opt)
      : TraceReader(path, opt),
        objects_(Limit::kObjects, path, input_bytes(path)),
        strings_(Limit::kStrings, path, input_bytes(path)) {
    names_.emplace_back();  // 0: no name
    {
      std::string bytes = read_trace_bytes(path);
      parse(bytes);
    }  // the document goes: what is kept is the events and spans
    convert();
  }
  // A reader of a conversion made (traces/kept_conversions.h): reads what it holds.
  KinetoReader(const std::string& path, const ReaderOptions& opt, std::shared_ptr<const Converted> done)
      : TraceReader(path, opt),
        objects_(Limit::kObjects, path, 0),
        strings_(Limit::kStrings, path, 0),
        conv_(std::move(done)) {
    stacks_ = conv_->stacks.for_another_reader();
    set_header(conv_->header);
  }
  std::shared_ptr<const Converted> converted() const { return conv_; }

 protected:
  bool read_raw(Event& ev) override {
    const std::vector<Raw>& events = conv_->events;
    if (next_ >= events.size()) return false;
    const Raw& r = events[next_];
    if (stacks_.define_before_use(r.stack, r.line, ev)) {
      ev.t = Tick(static_cast<std::uint64_t>(r.t));
      ev.present |= key::kT;
      return true;
    }
    ++next_;
    ev.op = r.op;
    ev.line = r.line;
    ev.t = Tick(static_cast<std::uint64_t>(r.t));
    ev.device = r.device;
    ev.present = key::kT | key::kDevice;
    if (r.op == Op::kAlloc || r.op == Op::kFree) ev.id = AllocId(r.id), ev.present |= key::kId;
    if (r.op == Op::kAlloc || r.op == Op::kSegmentAlloc || r.op == Op::kReserved)
      ev.size = r.size, ev.present |= key::kSize;
    if (r.op == Op::kAlloc && r.space != Space::kHbm) ev.space = r.space, ev.present |= key::kSpace;
    if (r.has_addr) ev.addr = Addr(r.addr), ev.present |= key::kAddr;
    if (r.has_stream) ev.stream = r.stream, ev.present |= key::kStream;
    if (r.pre_trace) ev.present |= key::kPreTrace;
    if (r.aggregate) ev.present |= key::kAggregate;
    if (r.block) ev.block_size = r.block, ev.present |= key::kBlockSize;
    if (r.stack) ev.stack = r.stack, ev.present |= key::kStack;
    if (r.name) ev.name = conv_->names[r.name], ev.present |= key::kName;
    return true;
  }

 private:
  [[noreturn]] void bad(std::uint64_t line, const std::string& what) const { throw InputError(path_, line, what); }

  // ---- parsing ----
  std::uint64_t line_of(const char* p) {
    if (p < last_pos_) return last_line_;  // (never: events are visited in order)
    last_line_ += static_cast<std::uint64_t>(std::count(last_pos_, p, '\n'));
    last_pos_ = p;
    return last_line_;
  }
  // simdjson says what is wrong, not where: the line comes from a second look at the text, on
  // this path only.
  [[noreturn]] void bad_json(simdjson::error_code e) const {
    const JsonFault f = bytes_ ? json_fault(*bytes_) : JsonFault{};
    if (f.at_end) bad(f.line, "not valid JSON: the file ends before its JSON does (cut short?)");
    if (f.trailing) bad(f.line, "not valid JSON: more follows the end of the JSON document");
    bad(f.line, std::string("not valid JSON: ") + simdjson::error_message(e));
  }
  // Whether a value is of the type asked: false for another type (a key fragsim does not read as
  // written, skipped); a syntax error is an input error.
  bool of_type(simdjson::error_code e) const {
    if (e == simdjson::INCORRECT_TYPE) return false;
    if (e) bad_json(e);
    return true;
  }
  // One member of an object: its key and value (a syntax error is an input error).
  template <class Field>
  void member(Field& f, std::string_view* key, od::value* value) const {
    if (auto e = f.unescaped_key().get(*key)) bad_json(e);
    if (auto e = f.value().get(*value)) bad_json(e);
  }
  // The document holds nothing after its value.
  void at_end(od::document& doc) const {
    if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) bad_json(simdjson::TRAILING_CONTENT);
  }
  std::uint32_t intern(std::string_view s) {
    auto it = name_ids_.find(std::string(s));
    if (it != name_ids_.end()) return it->second;
    strings_.spend(2 * s.size() + 32);
    auto id = static_cast<std::uint32_t>(names_.size());
    names_.push_back(sanitize_utf8(s));
    name_ids_.emplace(std::string(s), id);
    return id;
  }
  // An integer, as JSON writers may write it (an integral double included).
  static bool integer(od::value v, std::int64_t* out) {
    od::number n;
    if (v.get_number().get(n)) return false;
    switch (n.get_number_type()) {
      case od::number_type::signed_integer:
        *out = n.get_int64();
        return true;
      case od::number_type::unsigned_integer:
        if (n.get_uint64() > static_cast<std::uint64_t>(INT64_MAX)) return false;
        *out = static_cast<std::int64_t>(n.get_uint64());
        return true;
      default: {
        double d = n.get_double();
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) return false;
        *out = static_cast<std::int64_t>(d);
        return true;
      }
    }
  }
  // µs as written → ns: whole microseconds exactly, fractions rounded to the ns.
  static bool micros_to_ns(od::value v, std::int64_t* out) {
    od::number n;
    if (v.get_number().get(n)) return false;
    if (n.get_number_type() == od::number_type::signed_integer) {
      *out = n.get_int64() * 1000;
      return std::llabs(n.get_int64()) < INT64_MAX / 1000;
    }
    if (n.get_number_type() == od::number_type::unsigned_integer) {
      if (n.get_uint64() >= static_cast<std::uint64_t>(INT64_MAX / 1000)) return false;
      *out = static_cast<std::int64_t>(n.get_uint64()) * 1000;
      return true;
    }
    double d = n.get_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.0e15) return false;
    double whole = std::floor(d);
    *out = static_cast<std::int64_t>(whole) * 1000 + std::llround((d - whole) * 1000.0);
    return true;
  }
  // (pid, tid), each an integer or a string, as one thread index.
  struct Id {
    std::int64_t num = 0;
    bool is_str = false;
  };
  Id id_of(od::value v) {
    Id id;
    std::int64_t n = 0;
    if (integer(v, &n)) {
      id.num = n;
      return id;
    }
    std::string_view s;
    if (!v.get_string().get(s)) {
      auto [it, fresh] = str_ids_.try_emplace(std::string(s), static_cast<std::int64_t>(str_ids_.size()));
      if (fresh) strings_.spend(s.size() + 32);
      id.num = it->second;
      id.is_str = true;
    }
    return id;
  }
  std::uint32_t thread_of(Id pid, Id tid) {
    auto key = std::make_tuple(pid.num, pid.is_str, tid.num, tid.is_str);
    auto [it, fresh] = threads_.try_emplace(key, static_cast<std::uint32_t>(threads_.size()));
    return it->second;
  }

  void parse(std::string& bytes) {
    const char* base = bytes.data();
    bytes_ = &bytes;
    last_pos_ = base;
    last_line_ = 1;
    od::parser parser(bytes.size() + 1);
    od::document doc;
    if (auto e = parser.iterate(bytes.data(), bytes.size(), bytes.capacity()).get(doc)) bad_json(e);
    od::json_type top;
    if (auto e = doc.type().get(top)) bad_json(e);
    if (top == od::json_type::array) {  // the Chrome trace format's array of events
      od::array events;
      if (auto e = doc.get_array().get(events)) bad_json(e);
      trace_events(events);
      at_end(doc);
      return;
    }
    od::object root;
    if (top != od::json_type::object)
      bad(0, "not a Chrome trace: the top level is neither an object nor an array of events");
    if (auto e = doc.get_object().get(root)) bad_json(e);
    for (auto field : root) {
      std::string_view key;
      od::value v;
      member(field, &key, &v);
      if (key == "traceEvents") {
        od::array events;
        if (v.get_array().get(events)) bad(line_of(last_pos_), "traceEvents: not an array");
        trace_events(events);
        saw_events_ = true;
      } else if (key == "deviceProperties") {
        device_properties(v);
      } else if (key == "baseTimeNanoseconds") {
        std::int64_t n = 0;
        if (!integer(v, &n) || n < 0) bad(0, "baseTimeNanoseconds: not a time in ns");
        base_ns_ = n;
      } else if (key == "distributedInfo") {
        od::object o;
        if (of_type(v.get_object().get(o)))
          for (auto f : o) {
            std::string_view k;
            od::value x;
            std::int64_t n = 0;
            member(f, &k, &x);
            if (k == "rank" && integer(x, &n) && n >= 0 && n <= UINT32_MAX) rank_ = static_cast<std::uint32_t>(n);
            if (k == "world_size" && integer(x, &n) && n > 0 && n <= UINT32_MAX) world_ = static_cast<std::uint32_t>(n);
          }
      } else if (key == "profile_memory") {
        std::int64_t n = 0;
        bool b = false;
        profile_memory_ = (integer(v, &n) && n != 0) || (!v.get_bool().get(b) && b);
      } else if (key == "with_stack") {
        std::int64_t n = 0;
        bool b = false;
        with_stack_ = (integer(v, &n) && n != 0) || (!v.get_bool().get(b) && b);
      }
    }
    at_end(doc);
    if (!saw_events_) bad(0, "not a Chrome trace: no traceEvents");
  }

  void device_properties(od::value v) {
    od::array a;
    if (!of_type(v.get_array().get(a))) return;
    for (auto el : a) {
      od::object o;
      if (!of_type(el.get_object().get(o))) continue;
      DeviceProps p;
      std::int64_t id = -1;
      for (auto f : o) {
        std::string_view k;
        od::value x;
        member(f, &k, &x);
        std::int64_t n = 0;
        std::string_view s;
        if (k == "id" && integer(x, &n)) id = n;
        if (k == "name" && !x.get_string().get(s)) p.name = sanitize_utf8(s);
        if (k == "totalGlobalMem") {  // the GPU's memory: a run's capacity, so never guessed past
          if (!integer(x, &n) || n <= 0)
            bad(0, "deviceProperties[].totalGlobalMem: must be a positive integer (the GPU's memory in bytes)");
          p.memory = static_cast<Bytes>(n);
        }
        if (k == "computeMajor" && integer(x, &n)) p.cc_major = static_cast<int>(n);
        if (k == "computeMinor" && integer(x, &n)) p.cc_minor = static_cast<int>(n);
      }
      if (id >= 0) props_[id] = std::move(p);
    }
  }

  void trace_events(od::array& events) {
    for (auto el : events) {
      od::value ev;
      if (auto e = el.get(ev)) bad_json(e);
      const char* at = nullptr;
      if (ev.current_location().get(at)) at = last_pos_;
      const std::uint64_t line = line_of(at);
      od::object o;
      if (ev.get_object().get(o)) bad(line, "traceEvents: an event is not an object");
      std::string_view ph, name, cat;
      Id pid, tid;
      std::int64_t ts = 0, dur = -1;
      bool has_ts = false;
      MemRec m;
      bool has_args = false;
      for (auto f : o) {
        std::string_view k;
        od::value x;
        member(f, &k, &x);
        if (k == "ph") {
          if (x.get_string().get(ph)) ph = {};
        } else if (k == "name") {
          if (x.get_string().get(name)) name = {};
        } else if (k == "cat") {
          if (x.get_string().get(cat)) cat = {};
        } else if (k == "pid") {
          pid = id_of(x);
        } else if (k == "tid") {
          tid = id_of(x);
        } else if (k == "ts") {
          if (!micros_to_ns(x, &ts)) bad(line, "ts: not a time in microseconds");
          has_ts = true;
        } else if (k == "dur") {
          if (!micros_to_ns(x, &dur)) dur = -1;
        } else if (k == "args") {
          od::object args;
          if (x.get_object().get(args)) continue;
          has_args = true;
          memory_args(args, line, &m);
        }
      }
      if (name == "[memory]") {
        if (!has_ts) bad(line, "ts: missing in a [memory] event");
        if (!has_args) bad(line, "args: missing in a [memory] event");
        m.t = ts;
        m.line = line;
        m.thread = thread_of(pid, tid);
        objects_.spend(2);
        mem_.push_back(m);
      } else if (ph == "X" && has_ts && dur >= 0 &&
                 (cat == "cpu_op" || cat == "user_annotation" || cat == "python_function" || cat == "Operator")) {
        Span s;
        s.start = ts;
        s.end = ts + dur;
        s.thread = thread_of(pid, tid);
        s.python = cat == "python_function";
        s.name = intern(s.python ? frame_text(name) : std::string(name));
        objects_.spend(2);
        spans_.push_back(s);
      }
    }
  }

  // "path/file.py(123): func" (Kineto's python_function names) → "path/file.py:123 func", as every
  // fragsim frame reads; other names ("nn.Module: Linear_0", "<built-in method ...>") as they are.
  static std::string frame_text(std::string_view n) {
    size_t open = n.find('(');
    if (open == std::string_view::npos || open == 0) return std::string(n);
    size_t close = n.find("): ", open);
    if (close == std::string_view::npos || close == open + 1) return std::string(n);
    std::string_view num = n.substr(open + 1, close - open - 1);
    if (!std::all_of(num.begin(), num.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      return std::string(n);
    return fmt::format("{}:{} {}", n.substr(0, open), num, n.substr(close + 3));
  }

  void memory_args(od::object& args, std::uint64_t line, MemRec* m) {
    for (auto f : args) {
      std::string_view k;
      od::value x;
      member(f, &k, &x);
      std::int64_t n = 0;
      auto need = [&](const char* what) {
        if (!integer(x, &n)) bad(line, fmt::format("args.{}: not an integer", what));
      };
      // An address or a total is never negative (Bytes is: a free).
      auto need_count = [&](const char* what) {
        need(what);
        if (n < 0) bad(line, fmt::format("args.{}: negative ({})", what, n));
      };
      if (k == "Addr") {
        need_count("Addr");
        m->addr = static_cast<std::uint64_t>(n);
        m->has_addr = true;
      } else if (k == "Bytes") {
        need("Bytes");
        m->bytes = n;
        m->has_bytes = true;
      } else if (k == "Total Allocated") {
        need_count("Total Allocated");
        m->allocated = static_cast<std::uint64_t>(n);
        m->has_allocated = true;
      } else if (k == "Total Reserved") {
        need_count("Total Reserved");
        m->reserved = static_cast<std::uint64_t>(n);
        m->has_reserved = true;
      } else if (k == "Device Type") {
        need("Device Type");
        m->type = n;
        m->has_type = true;
      } else if (k == "Device Id") {
        need("Device Id");
        m->device = n;
      }
    }
  }

  // ---- conversion ----
  void convert() {
    if (mem_.empty())
      bad(0,
          profile_memory_
              ? "no [memory] events: the profile recorded none (was memory allocated while the profiler was active?)"
              : "no [memory] events: not a memory profile; record it with torch.profiler.profile(profile_memory=True)");
    const std::int64_t base = base_ns_ ? *base_ns_ : 0;
    for (auto& m : mem_) m.t += base;
    for (auto& s : spans_) s.start += base, s.end += base;
    // Threads write their events one after the other: the window's order is by time, stably.
    std::stable_sort(mem_.begin(), mem_.end(), [](const MemRec& a, const MemRec& b) { return a.t < b.t; });
    name_events();

    // Devices: the GPUs' events with addresses and totals; CPU events on the first GPU's host space.
    std::map<std::uint32_t, std::vector<size_t>> gpu;  // device → its events (indices into mem_)
    std::vector<size_t> host;
    std::uint64_t other = 0, zero = 0;
    bool hip = false;
    for (size_t i = 0; i < mem_.size(); ++i) {
      const MemRec& m = mem_[i];
      if (!m.has_type) bad(m.line, "args.Device Type: missing in a [memory] event");
      // Kineto writes every memory event's size (negative for a free): one without it says nothing.
      if (!m.has_bytes) bad(m.line, "args.Bytes: missing in a [memory] event");
      if (m.bytes == 0) {
        ++zero;
        continue;
      }
      if (m.type == 1 || m.type == 6) {
        if (m.device < 0 || m.device > UINT32_MAX)
          bad(m.line, fmt::format("args.Device Id: {} is no device", m.device));
        if (!m.has_addr)
          bad(m.line,
              "args.Addr: missing: memory events without addresses (PyTorch before 1.10) cannot pair frees "
              "with allocations");
        if (!m.has_allocated || !m.has_reserved) {
          const std::string which = !m.has_allocated && !m.has_reserved ? "Total Allocated and Total Reserved"
                                    : !m.has_allocated                  ? "Total Allocated"
                                                                        : "Total Reserved";
          // The first device event without them: a profile this old; a later one: this event lost them.
          bad(m.line, gpu.empty() ? fmt::format("args: {} missing: a profile this old cannot tell the allocator's "
                                                "state",
                                                which)
                                  : fmt::format("args.{}: missing in [memory] event {} of the file (the device "
                                                "events before it have it)",
                                                which, i + 1));
        }
        hip |= m.type == 6;
        gpu[static_cast<std::uint32_t>(m.device)].push_back(i);
      } else if (m.type == 0) {
        host.push_back(i);
      } else {
        ++other;
      }
    }
    if (gpu.empty() && host.empty()) bad(0, "no [memory] events of a CPU, CUDA or HIP device");
    const std::uint32_t host_device = gpu.empty() ? 0 : gpu.begin()->first;

    nlohmann::json header = {{"fragsim_trace", 1}, {"time_unit", "ns"}, {"source", "kineto"}};
    nlohmann::json kin = {{"events", mem_.size()},
                          {"time", base_ns_ ? "baseTimeNanoseconds + ts" : "ts since the epoch"}};
    if (with_stack_) kin["with_stack"] = true;
    if (rank_) header["rank"] = *rank_, kin["rank"] = *rank_;
    if (world_) kin["world_size"] = *world_;
    if (other) kin["skipped_other_device_events"] = other;
    if (zero) kin["skipped_zero_byte_events"] = zero;

    std::vector<Raw> head, body;
    std::vector<std::pair<size_t, Raw>> tagged;  // body events by their source's position in mem_
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& [d, idx] : gpu) devices.push_back(convert_device(d, hip, idx, &head, &tagged));
    if (!host.empty()) kin["host"] = convert_host(host_device, host, &head, &tagged);
    std::stable_sort(tagged.begin(), tagged.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [i, r] : tagged) body.push_back(std::move(r));
    const std::int64_t t0 = body.empty() ? 0 : body.front().t;
    for (auto& r : head) r.t = t0;
    std::uint64_t k = 0;
    for (auto& r : head) r.line = ++k;
    auto conv = std::make_shared<Converted>();
    conv->events = std::move(head);
    conv->events.insert(conv->events.end(), body.begin(), body.end());
    kin["devices"] = devices;
    header["kineto"] = kin;
    if (auto hw = recorded_hardware(gpu.empty() ? std::nullopt : std::optional<std::uint32_t>(gpu.begin()->first), hip);
        !hw.is_null())
      header["recorded_hardware"] = hw;
    set_header(header);
    conv->names = std::move(names_);
    conv->stacks = stacks_.for_another_reader();
    conv->header = std::move(header);
    conv_ = std::move(conv);
  }

  // The innermost operator and the Python frames enclosing each memory event on its thread.
  void name_events() {
    if (spans_.empty()) return;
    std::stable_sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) {
      return a.thread != b.thread ? a.thread < b.thread : a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<size_t> order(mem_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return mem_[a].thread != mem_[b].thread ? mem_[a].thread < mem_[b].thread : mem_[a].t < mem_[b].t;
    });
    size_t s = 0;
    std::vector<const Span*> open;
    std::uint32_t thread = UINT32_MAX;
    std::map<std::vector<std::uint32_t>, std::uint64_t> stack_ids;
    for (size_t i : order) {
      MemRec& m = mem_[i];
      if (m.thread != thread) {
        thread = m.thread;
        open.clear();
        while (s < spans_.size() && spans_[s].thread < thread) ++s;
      }
      while (s < spans_.size() && spans_[s].thread == thread && spans_[s].start <= m.t) {
        while (!open.empty() && open.back()->end < spans_[s].start) open.pop_back();
        open.push_back(&spans_[s++]);
      }
      while (!open.empty() && open.back()->end < m.t) open.pop_back();
      std::vector<std::uint32_t> frames;
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        if ((*it)->end < m.t) continue;  // a sibling that ended (spans that overlap without nesting)
        if ((*it)->python)
          frames.push_back((*it)->name);
        else if (!m.name)
          m.name = (*it)->name;
      }
      if (frames.empty()) continue;
      if (frames.size() > 48) frames.resize(48);
      auto [it, fresh] = stack_ids.try_emplace(frames, stacks_.next_id());
      if (fresh) {
        std::vector<std::string> text;
        for (auto f : frames) {
          strings_.spend(names_[f].size());
          text.push_back(names_[f]);
        }
        stacks_.add(std::move(text));
      }
      m.stack = it->second;
      if (!m.name) m.name = frames.front();
    }
  }

  // A fall of Total Reserved is the cache released: by the program (torch.cuda.empty_cache()), or by
  // the allocator itself inside a malloc whose cudaMalloc failed, before it retries (specs/kineto.md,
  // specs/torch-caching.md §3). As for a snapshot (traces/torch_snapshot_bounds.cpp), a retry sits
  // in a malloc that then obtains a segment (the fall is seen at that allocation, which grew) and
  // asks for more than the device could hold with the cache: reserved before + that segment exceeds
  // the most the window held. Anything else is the program's call; where this holds, the trace
  // cannot tell which (it records no OOM and no call).
  static bool may_be_retry(Bytes reserved_before, Bytes growth, Bytes peak_reserved) {
    return growth > 0 && reserved_before + growth > peak_reserved;
  }

  Raw body_event(const MemRec& m, Op op, std::uint32_t device) const {
    Raw r;
    r.op = op;
    r.t = m.t;
    r.device = device;
    r.line = m.line;
    return r;
  }

  // One GPU's events: its state before the window, then the window, each event followed by the
  // recorded Total Reserved.
  nlohmann::json convert_device(std::uint32_t d, bool hip, const std::vector<size_t>& idx, std::vector<Raw>* head,
                                std::vector<std::pair<size_t, Raw>>* body) {
    std::vector<KinetoMemEvent> evs;
    evs.reserve(idx.size());
    for (size_t i : idx) {
      const MemRec& m = mem_[i];
      evs.push_back({Addr(m.addr), m.bytes, m.allocated, m.reserved});
    }
    KinetoLayout lay = infer_kineto_layout(evs);
    for (const auto& s : lay.segments) {
      Raw r;
      r.op = Op::kSegmentAlloc;
      r.device = d;
      r.size = s.size;
      r.addr = s.base.value();
      r.has_addr = r.pre_trace = r.has_stream = true;
      r.stream = s.stream;
      // The reserved memory left over is no segment a request obtained: an aggregate.
      r.aggregate = s.stream == KinetoLayout::kIdleStream;
      head->push_back(r);
    }
    std::unordered_map<std::uint64_t, std::uint64_t> live;  // address → id
    // Highest address first: a block is seeded after the blocks above it, so the allocator's
    // seeding never takes a gap above it for an unsplit remainder (specs/torch-caching.md §3) while
    // the block that holds the gap is still to come.
    std::vector<KinetoLayout::Block> blocks = lay.blocks;
    std::stable_sort(blocks.begin(), blocks.end(), [](const auto& a, const auto& b) { return a.addr > b.addr; });
    static const char* kNames[] = {"(allocated before the window)",
                                   "(live before the window: inferred, in a range the window never touches)",
                                   "(live before the window: bytes at no address the trace states)"};
    for (const auto& b : blocks) {
      // An inferred block is live bytes, not one tensor (an aggregate: a what-if that re-holds the
      // state holds them as they are, not rounded as one request). In a small-pool segment (2 MiB)
      // every block was a request of at most 1 MiB: such bytes are held in pieces of at most that,
      // so that a re-held state keeps them in the small pool, as the recording did.
      const KinetoLayout::Segment* seg = segment_at(lay.segments, b.addr);
      const bool inferred = b.kind != KinetoLayout::BlockKind::kFreedInWindow;
      const Bytes piece = inferred && seg && seg->size == torch::kSmallBuffer ? torch::kSmallSize : b.size;
      for (Bytes at = b.size; at > 0;) {  // the highest piece first, as the blocks
        const Bytes n = at % piece ? at % piece : piece;
        at -= n;
        Raw r;
        r.op = Op::kAlloc;
        r.device = d;
        r.id = next_id_++;
        r.size = r.block = n;
        r.addr = b.addr.value() + at;
        r.has_addr = r.pre_trace = true;
        r.aggregate = inferred;
        r.name = intern(kNames[static_cast<int>(b.kind)]);
        if (!inferred) live[r.addr] = r.id;
        head->push_back(r);
      }
    }
    std::uint64_t allocs = 0, frees = 0, stale = 0, unknown = 0, releases = 0, maybe_retries = 0;
    Bytes peak_reserved = 0;
    for (size_t i : idx) peak_reserved = std::max(peak_reserved, mem_[i].reserved);
    for (size_t k = 0; k < idx.size(); ++k) {
      const MemRec& m = mem_[idx[k]];
      const size_t at = idx[k];
      if (lay.release[k]) {
        Raw r = body_event(m, Op::kEmptyCache, d);
        ++releases;
        if (may_be_retry(mem_[idx[k - 1]].reserved, lay.growth[k], peak_reserved)) {
          r.name = intern(kReleaseMaybeRetry);
          ++maybe_retries;
        }
        body->push_back({at, r});
      }
      if (lay.growth[k]) {
        Raw g = body_event(m, Op::kSegmentAlloc, d);
        g.size = lay.growth[k];
        g.addr = m.addr;
        g.has_addr = g.has_stream = true;
        body->push_back({at, g});
      }
      if (m.bytes > 0) {
        if (auto it = live.find(m.addr); it != live.end()) {  // its free is missing: the block went before
          Raw f = body_event(m, Op::kFree, d);
          f.id = it->second;
          body->push_back({at, f});
          ++stale;
        }
        Raw r = body_event(m, Op::kAlloc, d);
        r.id = next_id_++;
        r.size = static_cast<Bytes>(m.bytes);
        r.addr = m.addr;
        r.has_addr = true;
        r.name = m.name;
        r.stack = m.stack;
        live[m.addr] = r.id;
        body->push_back({at, r});
        ++allocs;
      } else {
        auto it = live.find(m.addr);
        if (it == live.end()) {
          ++unknown;  // freed twice, or inside a segment obtained in the window before it was traced
        } else {
          Raw r = body_event(m, Op::kFree, d);
          r.id = it->second;
          live.erase(it);
          body->push_back({at, r});
          ++frees;
        }
      }
      Raw obs = body_event(m, Op::kReserved, d);
      obs.size = m.reserved;
      body->push_back({at, obs});
    }
    nlohmann::json j = {{"device", d},
                        {"platform", hip ? "HIP" : "CUDA"},
                        {"events", idx.size()},
                        {"allocations", allocs},
                        {"frees", frees},
                        {"peak_reserved_bytes", peak_reserved},
                        {"reserved_before_bytes", lay.reserved_before},
                        {"live_before_bytes", lay.live_before},
                        {"freed_in_window_bytes", lay.freed_in_window},
                        {"untouched_live_bytes", lay.untouched_live},
                        {"unplaced_live_bytes", lay.unplaced_live},
                        {"idle_free_bytes", lay.idle_free},
                        {"segments_before", lay.segments.size()},
                        {"layout_search",
                         {{"replays", lay.replays},
                          {"boundaries", lay.boundaries},
                          {"tails_freed", lay.tails_freed},
                          {"extended", lay.extended},
                          {"addresses_predicted", lay.predicted},
                          {"allocations", lay.allocations}}}};
    if (releases) j["cache_releases"] = releases;
    if (maybe_retries) j["cache_releases_maybe_retry"] = maybe_retries;
    if (stale) j["frees_missing"] = stale;
    if (unknown) j["frees_skipped"] = unknown;
    if (auto p = props_.find(d); p != props_.end()) {
      if (!p->second.name.empty()) j["name"] = p->second.name;
      if (p->second.memory) j["memory_bytes"] = p->second.memory;
      if (p->second.cc_major >= 0)
        j["compute_capability"] = fmt::format("{}.{}", p->second.cc_major, p->second.cc_minor);
    }
    return j;
  }

  // CPU memory: its own space; blocks from before the window from frees of unknown addresses and
  // the allocator's Total Allocated at the first event. Addresses are not kept (no model of the
  // host allocator reproduces them).
  nlohmann::json convert_host(std::uint32_t d, const std::vector<size_t>& idx, std::vector<Raw>* head,
                              std::vector<std::pair<size_t, Raw>>* body) {
    std::unordered_map<std::uint64_t, std::uint64_t> live;
    std::map<std::uint64_t, std::pair<std::uint64_t, Bytes>> pre;  // address → (id, bytes)
    {
      std::unordered_set<std::uint64_t> seen;
      for (size_t i : idx) {
        const MemRec& m = mem_[i];
        if (m.bytes > 0)
          seen.insert(m.addr);
        else if (!seen.erase(m.addr) && !pre.count(m.addr))
          pre[m.addr] = {next_id_++, static_cast<Bytes>(-m.bytes)};
      }
    }
    Bytes known = 0;
    for (const auto& [a, v] : pre) {
      Raw r;
      r.op = Op::kAlloc;
      r.device = d;
      r.space = Space::kHost;
      r.id = v.first;
      r.size = v.second;
      r.pre_trace = true;
      r.name = intern("(allocated before the window)");
      head->push_back(r);
      live[a] = v.first;
      known += v.second;
    }
    // The CPU allocator's Total Allocated before its first event (after it, less its Bytes).
    const MemRec& first = mem_[idx.front()];
    const std::int64_t was = static_cast<std::int64_t>(first.allocated) - first.bytes;
    const Bytes before = first.has_allocated && was > 0 ? static_cast<Bytes>(was) : 0;
    if (before > known) {
      Raw r;
      r.op = Op::kAlloc;
      r.device = d;
      r.space = Space::kHost;
      r.id = next_id_++;
      r.size = before - known;
      r.pre_trace = r.aggregate = true;
      r.name = intern("(host memory live before the window)");
      head->push_back(r);
    }
    std::uint64_t allocs = 0, frees = 0;
    for (size_t i : idx) {
      const MemRec& m = mem_[i];
      if (m.bytes > 0) {
        if (auto it = live.find(m.addr); it != live.end()) {
          Raw f = body_event(m, Op::kFree, d);
          f.id = it->second;
          body->push_back({i, f});
        }
        Raw r = body_event(m, Op::kAlloc, d);
        r.space = Space::kHost;
        r.id = next_id_++;
        r.size = static_cast<Bytes>(m.bytes);
        r.name = m.name;
        r.stack = m.stack;
        live[m.addr] = r.id;
        body->push_back({i, r});
        ++allocs;
      } else if (auto it = live.find(m.addr); it != live.end()) {
        Raw r = body_event(m, Op::kFree, d);
        r.id = it->second;
        live.erase(it);
        body->push_back({i, r});
        ++frees;
      }
    }
    return {{"device", d},
            {"events", idx.size()},
            {"allocations", allocs},
            {"frees", frees},
            {"live_before_bytes", std::max(before, known)}};
  }

  // The device the trace names (deviceProperties of its first GPU): the preset of its family, its memory.
  nlohmann::json recorded_hardware(std::optional<std::uint32_t> d, bool hip) const {
    if (!d) return nullptr;
    auto p = props_.find(*d);
    if (p == props_.end() || !p->second.memory) return nullptr;
    const DeviceProps& dp = p->second;
    const std::string preset = gpu_preset(hip, dp.cc_major, dp.cc_minor, dp.memory);
    const std::string stand_in = gpu_base_preset(hip);
    // `device`: what the trace says of the GPU (a set of recordings names each rank's by it).
    const std::string device = fmt::format(
        "deviceProperties: {}{}, totalGlobalMem {} B", dp.name.empty() ? (hip ? "an AMD GPU" : "a GPU") : dp.name,
        dp.cc_major >= 0 ? fmt::format(" (compute capability {}.{})", dp.cc_major, dp.cc_minor) : "", dp.memory);
    std::string basis = device;
    if (preset.empty())
      basis += fmt::format("; no preset models that device: {}'s allocation granularity and device-call costs stand in",
                           stand_in);
    return {{"preset", preset.empty() ? stand_in : preset},
            {"capacity_bytes", dp.memory},
            {"basis", basis},
            {"device", device}};
  }

  LimitCounter objects_, strings_;
  std::vector<MemRec> mem_;
  std::vector<Span> spans_;
  std::map<std::int64_t, DeviceProps> props_;
  std::optional<std::int64_t> base_ns_;
  std::optional<std::uint32_t> rank_, world_;
  bool profile_memory_ = false, with_stack_ = false, saw_events_ = false;
  const char* last_pos_ = nullptr;
  const std::string* bytes_ = nullptr;  // the text being parsed (a JSON error's line is looked up in it)
  std::uint64_t last_line_ = 1;
  std::map<std::tuple<std::int64_t, bool, std::int64_t, bool>, std::uint32_t> threads_;
  std::unordered_map<std::string, std::int64_t> str_ids_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
  StackTable stacks_;                      // frames innermost first
  std::shared_ptr<const Converted> conv_;  // what read_raw reads
  size_t next_ = 0;
  std::uint64_t next_id_ = 0;
};

}  // namespace

bool is_kineto_file(const std::string& path) {
  if (has_trace_suffix(path) || ends_with(path, ".json.gz") || ends_with(path, ".json.zst")) return true;
  return ends_with(path, ".json") && looks_like_chrome_trace(path);
}

bool is_kineto_path(const std::string& path) {
  if (path.find(',') != std::string::npos) return false;  // a set of recordings (recording_set.h)
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return !profile_runs(path, is_trace_entry).empty();
  return is_kineto_file(path);
}

std::vector<std::string> kineto_trace_files(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return {path};
  const std::string run = find_one_run(path, "*.pt.trace.json trace", is_trace_entry);
  std::map<std::string, std::vector<std::string>> by_worker;
  for (const auto& e : std::filesystem::directory_iterator(run, ec))
    if (is_trace_entry(e.path()) && !e.is_directory(ec))
      by_worker[worker_of(e.path().string())].push_back(e.path().string());
  std::vector<std::string> files;
  for (auto& [worker, fs] : by_worker) {
    std::sort(fs.begin(), fs.end());
    if (fs.size() > 1) {
      std::string list;
      for (size_t i = 0; i < fs.size() && i < 8; ++i)
        list += (i ? ", " : "") + std::filesystem::path(fs[i]).filename().string();
      throw InputError(fmt::format("{}: {} profiles of worker {} ({}{}): name the file to read", run, fs.size(), worker,
                                   list, fs.size() > 8 ? ", ..." : ""));
    }
    files.push_back(fs.front());
  }
  return files;
}

std::unique_ptr<TraceReader> make_kineto_reader(const std::string& path, const ReaderOptions& opt) {
  std::vector<std::string> files = kineto_trace_files(path);
  if (files.size() > 1) return make_recording_set_reader(path, files, opt);  // one job's ranks
  // A trace is parsed and its layout inferred once per file while conversions are kept.
  const std::string& file = files.front();
  auto conv = kept_conversion<Converted>("kineto", file, [&] { return KinetoReader(file, opt).converted(); });
  return std::make_unique<KinetoReader>(file, opt, std::move(conv));
}

}  // namespace fragsim

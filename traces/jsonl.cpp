// JSONL trace reader and writer (specs/contracts.md §1, docs/trace-format.md).
//
// Event lines of the common shape — op alloc or free and unsigned integer keys, as generators,
// converters and most writers emit them — are read first by a strict scanner
// (LineParser::plain_line) that takes only lines it reads exactly as simdjson would and hands any
// other line on. The rest are parsed by simdjson's On Demand API (Debian's libsimdjson-dev, 3.x) a
// chunk of lines at a time: one first stage (iterate_many) checks the chunk's UTF-8, string escapes and
// structure and indexes it, then each line's document is decoded (LineParser::parse_block). Any
// line the block path doubts — its document does not start where the line does, the next one not
// where the next line does, or a check fails — goes to the line-by-line parser (one first stage
// per line), which alone words errors: messages are the same whichever path reads a line
// (ReaderOptions::line_by_line reads every line that way, the oracle of the tests). The reader
// visits every value, so nothing goes unchecked. Known keys decode straight into the reusable Event, each with
// its own type and range errors ("size: must be a non-negative integer"); unknown keys (ignored for
// forward compatibility) are walked to their end, so they too must be valid JSON (RFC 8259; like
// simdjson, numbers beyond a double's range are refused). Nothing is built per line: no DOM, no
// allocation once the buffers have grown. Every error names FILE:LINE, the key, and the column
// where simdjson stopped. When the caller has threads to spare (ReaderOptions::decode_threads),
// workers parse chunks of lines while the caller's thread splits the file and validates the
// events it is handed, in file order (ParallelLines). The optional header line (arbitrary JSON,
// echoed into the report) goes through nlohmann/json.
#include "traces/jsonl.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"

namespace fragsim {

namespace {

namespace od = simdjson::ondemand;
using simdjson::error_code;
using simdjson::SIMDJSON_PADDING;
using simdjson::SUCCESS;

// Splits a ByteSource into lines (without '\n' or a trailing '\r'), reusing one buffer. Every line
// handed out is followed by SIMDJSON_PADDING readable bytes, as simdjson requires.
class LineReader {
 public:
  // The buffer starts at kFirstBytes and doubles at each refill up to kSteadyBytes (further only
  // for a longer line): a reader opened for the header alone touches a few pages, not a MiB (a
  // new page costs about 10 µs on the bench machine).
  static constexpr size_t kFirstBytes = 64 << 10, kSteadyBytes = 1 << 20;
  LineReader(std::unique_ptr<ByteSource> src, std::string path)
      : src_(std::move(src)), path_(std::move(path)), buf_(kFirstBytes + SIMDJSON_PADDING) {}
  bool next(std::string_view* line) {
    for (;;) {
      last_start_ = pos_;
      const char* nl = static_cast<const char*>(std::memchr(buf_.data() + pos_, '\n', len_ - pos_));
      if (nl) {
        size_t n = nl - (buf_.data() + pos_);
        *line = std::string_view(buf_.data() + pos_, n);
        pos_ += n + 1;
        ++lineno_;
        if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
        return true;
      }
      if (eof_) {
        if (pos_ == len_) return false;
        buf_[len_] = '\n';  // what follows the last line is whitespace, as it is for every other line
        *line = std::string_view(buf_.data() + pos_, len_ - pos_);
        pos_ = len_;
        ++lineno_;
        if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
        return true;
      }
      // Keep the partial line, refill behind it.
      if (pos_ > 0) {
        std::memmove(buf_.data(), buf_.data() + pos_, len_ - pos_);
        len_ -= pos_;
        pos_ = 0;
      }
      size_t cap = buf_.size() - SIMDJSON_PADDING;
      if (len_ == cap && cap >= kMaxLineBytes)
        throw InputError(path_, lineno_ + 1, fmt::format("line longer than {} MiB", kMaxLineBytes >> 20));
      if (len_ == cap || cap < kSteadyBytes) {
        buf_.resize(cap * 2 + SIMDJSON_PADDING);
        cap *= 2;
      }
      size_t got = src_->read(buf_.data() + len_, cap - len_);
      if (got == 0) eof_ = true;
      len_ += got;
    }
  }
  // Hands the line last returned by next() out again (the buffer has not moved since).
  void unread() {
    pos_ = last_start_;
    --lineno_;
  }
  std::uint64_t lineno() const { return lineno_; }

 private:
  std::unique_ptr<ByteSource> src_;
  std::string path_;
  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0, last_start_ = 0;
  bool eof_ = false;
  std::uint64_t lineno_ = 0;
};

// Error path only: where the first stage of simdjson stopped in a line whose strings it refused.
// `control` is the first control character inside a string, `open` the opening quote of a
// string that is never closed (npos when there is none).
struct StringScan {
  size_t control = std::string_view::npos, open = std::string_view::npos;
};
StringScan scan_strings(std::string_view s) {
  StringScan r;
  bool in = false;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    if (in && c == '\\') {
      ++i;
    } else if (c == '"') {
      in = !in;
      r.open = in ? i : std::string_view::npos;
    } else if (in && c < 0x20 && r.control == std::string_view::npos) {
      r.control = i;
    }
  }
  return r;
}

// The text of the string whose opening quote is just before `raw`, when it holds no escape (its
// bytes are then the string: the first stage has checked their encoding); false otherwise.
bool plain(const char* raw, std::string_view* out) {
  const char* p = raw;
  for (; *p != '"'; ++p)
    if (*p == '\\') return false;
  *out = std::string_view(raw, static_cast<size_t>(p - raw));
  return true;
}

// The keys of an event line (docs/trace-format.md), told apart by length first.
enum class Key {
  kOther,
  kOp,
  kId,
  kSize,
  kT,
  kStream,
  kDevice,
  kSpace,
  kName,
  kDtype,
  kAddr,
  kPreTrace,
  kBlockSize,
  kAggregate,
  kStack,
  kFrames,
  kShape
};
// k == lit, for a k already known to have lit's length: a fixed-length compare the compiler
// turns into a load or two (string_view's == calls out to memcmp on every key of every line).
template <size_t N>
bool is(std::string_view k, const char (&lit)[N]) {
  return std::memcmp(k.data(), lit, N - 1) == 0;
}

Key key_of(std::string_view k) {
  switch (k.size()) {
    case 1:
      return k[0] == 't' ? Key::kT : Key::kOther;
    case 2:
      return is(k, "op") ? Key::kOp : is(k, "id") ? Key::kId : Key::kOther;
    case 4:
      return is(k, "size") ? Key::kSize : is(k, "name") ? Key::kName : is(k, "addr") ? Key::kAddr : Key::kOther;
    case 5:
      return is(k, "space")   ? Key::kSpace
             : is(k, "dtype") ? Key::kDtype
             : is(k, "stack") ? Key::kStack
             : is(k, "shape") ? Key::kShape
                              : Key::kOther;
    case 6:
      return is(k, "stream")   ? Key::kStream
             : is(k, "device") ? Key::kDevice
             : is(k, "frames") ? Key::kFrames
                               : Key::kOther;
    case 9:
      return is(k, "pre_trace") ? Key::kPreTrace : is(k, "aggregate") ? Key::kAggregate : Key::kOther;
    case 10:
      return is(k, "block_size") ? Key::kBlockSize : Key::kOther;
    default:
      return Key::kOther;
  }
}

// What a simdjson error means to someone who wrote the line. `token` is the value's raw text
// where known (numbers: to say "leading zero").
std::string describe(error_code e, std::string_view token = {}) {
  switch (e) {
    case simdjson::NUMBER_ERROR: {
      size_t i = !token.empty() && token[0] == '-';
      bool leading_zero = token.size() > i + 1 && token[i] == '0' && token[i + 1] >= '0' && token[i + 1] <= '9';
      return leading_zero ? "invalid JSON number: leading zero" : "invalid JSON number";
    }
    case simdjson::STRING_ERROR:
      return "invalid JSON string: a bad escape or an unpaired surrogate";
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
    case simdjson::INCORRECT_TYPE:
      return "invalid JSON value";
    case simdjson::TAPE_ERROR:
      return "invalid JSON: a comma, colon, brace or bracket is missing or out of place";
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      return "truncated JSON: an object or array is not closed";
    case simdjson::UTF8_ERROR:
      return "invalid UTF-8";
    case simdjson::UNESCAPED_CHARS:
      return "control character in a string (JSON requires it escaped, e.g. \\t or \\u0001)";
    case simdjson::UNCLOSED_STRING:
      return "truncated JSON: unterminated string";
    case simdjson::DEPTH_ERROR:
      return "JSON nested too deeply";
    default:
      return fmt::format("invalid JSON: {}", simdjson::error_message(e));
  }
}

constexpr const char* kTrailing = "trailing characters after the JSON object";

bool blank(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t') return false;
  return true;
}

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Whole non-blank lines of a trace, copied out to be parsed: each followed by '\n', the last by a
// sentinel line "{}" (for the block path, LineParser::parse_block), then SIMDJSON_PADDING spaces.
struct LineChunk {
  struct Line {
    size_t offset, size;
    std::uint64_t lineno;
  };
  static constexpr size_t kLines = 2048, kBytes = 256 << 10;

  std::string text;
  std::vector<Line> lines;
  size_t sentinel = 0;  // where the "{}" after the last line starts
  std::vector<Event> events;
  size_t parsed = 0;         // events[0, parsed) are good
  std::exception_ptr error;  // after them
  bool last = false;         // no chunk follows

  std::string_view line(size_t i) const { return {text.data() + lines[i].offset, lines[i].size}; }
  // Where line i's JSON document must start: its first byte that is not JSON whitespace (npos: none).
  size_t doc_start(size_t i) const {
    for (size_t p = lines[i].offset, end = p + lines[i].size; p < end; ++p)
      if (!json_space(text[p])) return p;
    return std::string_view::npos;
  }
  // Refills with up to kLines non-blank lines (or kBytes) from `from`; an error reading it ends the chunk.
  void fill(LineReader& from) {
    text.clear();
    lines.clear();
    parsed = 0;
    error = nullptr;
    last = false;
    try {
      std::string_view l;
      while (lines.size() < kLines && text.size() < kBytes && from.next(&l)) {
        if (blank(l)) continue;
        lines.push_back({text.size(), l.size(), from.lineno()});
        text.append(l);
        text.push_back('\n');
      }
      last = lines.empty();
    } catch (...) {
      error = std::current_exception();
      last = true;
    }
    sentinel = text.size();
    text.append("{}\n");
    text.append(SIMDJSON_PADDING, ' ');
  }
  // Hands the next parsed event out (taken into ev); false when the chunk is done, after
  // throwing its error if it has one.
  bool take(size_t& pos, Event& ev) {
    if (pos < parsed) {
      take_event(ev, events[pos++]);
      return true;
    }
    if (error) std::rethrow_exception(error);
    return false;
  }
};

// Decodes one event line into an Event (its line number already set in ev.line). Every error is
// an InputError naming FILE:LINE and the key.
class LineParser {
 public:
  LineParser(std::string path, bool blocks) : path_(std::move(path)), blocks_(blocks) {
    block_parser_.threaded = false;
  }

  // Parses one line (the line-by-line path: every error's exact message comes from here).
  void parse(std::string_view line, Event& ev) {
    line_ = ev.line;
    text_ = line;
    error_code e = parser_.iterate(line.data(), line.size(), line.size() + SIMDJSON_PADDING).get(doc_);
    if (e) stage1_err(e);
    od::object obj;
    if ((e = doc_.get_object().get(obj))) {
      if (e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT) top_incomplete();
      if (e == simdjson::INCORRECT_TYPE) err({}, "invalid JSON: each line must be one JSON object" + not_a_profile());
      json_err({}, e);
    }
    Fields f = fields(obj, ev);
    const char* rest = nullptr;
    if (doc_.current_location().get(rest) == SUCCESS) err_at({}, kTrailing, rest - line.data());
    finish(f, ev);
  }

  // Parses every line of a chunk into c.events, c.parsed of them; the first error, after the
  // events before it, goes into c.error (and c.last), as the line-by-line path throws it.
  void parse_chunk(LineChunk& c) {
    if (c.events.size() < c.lines.size()) c.events.resize(c.lines.size());
    size_t i = 0;
    try {
      if (blocks_) {
        while (i < c.lines.size() && plain_line(c.line(i), start_event(c, i))) ++i;
        i += parse_block(c, i);
      }
      for (; i < c.lines.size(); ++i) parse(c.line(i), start_event(c, i));
    } catch (...) {
      c.error = std::current_exception();
      c.last = true;
    }
    c.parsed = i;
  }

 private:
  struct Retry {};  // the block path gives a line up: the line-by-line path decides on it
  struct Fields {
    bool have_op = false, pre_false = false, aggregate_false = false;
    std::uint16_t seen = 0;
  };

  static Event& start_event(LineChunk& c, size_t i) {
    Event& ev = c.events[i];
    clear_decoded(ev);
    ev.line = c.lines[i].lineno;
    return ev;
  }

  // The block path: one simdjson stage 1 over the whole chunk (iterate_many), then each document
  // decoded as a line would be. A line is taken only when its document starts at the line's
  // first non-whitespace byte and the next document (a sentinel "{}" follows the last line)
  // starts at the next line's: then its tokens are exactly those the line alone gives (the
  // quote state at the '{' is the same), nothing trails it, and it ends within the line. At the
  // first line that is not so, or that fails any check, the chunk's remaining lines go through
  // parse(), which finds the error and words it. Returns how many lines were decoded.
  size_t parse_block(LineChunk& c, size_t from) {
    size_t n = c.lines.size(), base = from < n ? c.doc_start(from) : std::string_view::npos;
    if (base == std::string_view::npos || c.sentinel + 2 - base > kBlockBatch) return 0;
    od::document_stream docs;
    if (block_parser_.iterate_many(c.text.data() + base, c.sentinel + 2 - base, kBlockBatch).get(docs)) return 0;
    auto it = docs.begin();  // its first document is at base, then current_index() says where each starts
    auto at = [&](size_t where) { return it != docs.end() && !it.error() && base + it.current_index() == where; };
    block_ = true;
    size_t i = from;
    try {
      for (; i < n; ++i) {
        Event& ev = start_event(c, i);
        od::document_reference doc;
        od::object obj;
        if ((*it).get(doc) || doc.get_object().get(obj)) break;
        Fields f = fields(obj, ev);
        finish(f, ev);
        ++it;
        if (!at(i + 1 < n ? c.doc_start(i + 1) : c.sentinel)) break;
      }
    } catch (const Retry&) {
    }
    block_ = false;
    return i - from;
  }

  // The plain path, before the block path: a line of the shape almost every trace line has — an
  // object whose keys are op (the string alloc or free), id, size, t, stream, device, addr,
  // block_size or stack (each an unsigned integer of at most 19 digits, so no overflow), with
  // spaces or tabs between tokens (and a CR at the end) — is read by a strict scanner. Anything else (another key or
  // value form, escapes, a duplicate key, bytes after the object) returns false before ev is
  // used, and the block or line path decides, as it would have without this one: so a line it
  // takes decodes to the same event and fails finish() with the same message.
  // An integer key's value x into ev, for plain_line: the key's bit, or 0 when the key is not one
  // of its integer keys or x is out of the key's range (the other paths then word the error).
  static std::uint16_t plain_integer(Key key, std::uint64_t x, Event& ev) {
    switch (key) {
      case Key::kId:
        ev.id = AllocId(x);
        return key::kId;
      case Key::kSize:
        ev.size = x;
        return key::kSize;
      case Key::kT:
        ev.t = Tick(x);
        return key::kT;
      case Key::kStream:
        ev.stream = static_cast<std::int64_t>(x);
        return x > static_cast<std::uint64_t>(INT64_MAX) ? 0 : key::kStream;
      case Key::kDevice:
        ev.device = static_cast<std::uint32_t>(x);
        return x > UINT32_MAX ? 0 : key::kDevice;
      case Key::kAddr:
        ev.addr = Addr(x);
        return key::kAddr;
      case Key::kBlockSize:
        ev.block_size = x;
        return key::kBlockSize;
      case Key::kStack:
        ev.stack = x;
        return key::kStack;
      default:
        return 0;
    }
  }

  bool plain_line(std::string_view line, Event& ev) {
    // The line is followed by '\n' in its chunk (LineChunk::fill): every loop below stops there
    // without a bounds check, and the end is checked once, after the object.
    const char* p = line.data();
    const char* const end = p + line.size();
    auto ws = [&] {
      while (*p == ' ' || *p == '\t') ++p;
    };
    auto number = [&](std::uint64_t* out) {
      const char* start = p;
      std::uint64_t x = 0;
      for (unsigned d; (d = static_cast<unsigned char>(*p) - unsigned{'0'}) < 10; ++p) x = x * 10 + d;
      const auto digits = p - start;
      *out = x;
      return digits > 0 && digits <= 19 && (*start != '0' || digits == 1);
    };
    Fields f;
    ws();
    if (*p++ != '{') return false;
    for (;;) {
      ws();
      if (*p++ != '"') return false;
      const char* k0 = p;
      while (static_cast<unsigned char>(*p) - unsigned{'a'} < 26 || *p == '_') ++p;
      if (*p != '"') return false;
      const std::string_view k(k0, static_cast<size_t>(p - k0));
      ++p;
      ws();
      if (*p++ != ':') return false;
      ws();
      std::uint64_t x = 0;
      std::uint16_t bit = 0;
      const Key key = key_of(k);
      switch (key) {
        case Key::kOp: {
          if (f.have_op || *p++ != '"') return false;
          const char* v0 = p;
          while (static_cast<unsigned char>(*p) - unsigned{'a'} < 26) ++p;
          if (*p != '"') return false;
          const std::string_view op(v0, static_cast<size_t>(p - v0));
          ++p;
          if (op.size() == 5 && is(op, "alloc"))
            ev.op = Op::kAlloc;
          else if (op.size() == 4 && is(op, "free"))
            ev.op = Op::kFree;
          else
            return false;
          f.have_op = true;
          break;
        }
        default:  // an integer key, or not one for this path
          if (!number(&x) || !(bit = plain_integer(key, x, ev))) return false;
      }
      if (f.seen & bit) return false;
      f.seen |= bit;
      ws();
      const char sep = *p++;
      if (sep == '}') break;
      if (sep != ',') return false;
    }
    ws();
    if (*p == '\r') ++p;  // a CRLF line's CR
    if (p != end) return false;
    line_ = ev.line;
    text_ = line;
    finish(f, ev);
    return true;
  }

  // Decodes the object's fields into ev.
  Fields fields(od::object& obj, Event& ev) {
    Fields f;
    error_code e;
    std::string_view k = "key";  // named when the next key is malformed: the error is after it
    for (auto result : obj) {
      od::field field;
      if ((e = std::move(result).get(field))) json_err(k, e);
      if (!plain(field.key().raw(), &k) && (e = field.unescaped_key().get(k))) json_err(k, e);
      od::value& v = field.value();
      std::uint16_t bit = 0;
      switch (key_of(k)) {
        case Key::kOp: {
          if (f.have_op) err(k, "duplicate key");
          f.have_op = true;
          std::string_view op = string(v, k);
          if (op.size() == 5 && is(op, "alloc"))  // the two ops of nearly every line, first
            ev.op = Op::kAlloc;
          else if (op.size() == 4 && is(op, "free"))
            ev.op = Op::kFree;
          else if (!parse_op(op, &ev.op))
            err(k, fmt::format("unknown op '{}'", op));
          break;
        }
        case Key::kId:
          bit = key::kId;
          ev.id = AllocId(uint(v, k));
          break;
        case Key::kSize:
          bit = key::kSize;
          ev.size = uint(v, k);
          break;
        case Key::kT:
          bit = key::kT;
          ev.t = Tick(uint(v, k));
          break;
        case Key::kStream:
          bit = key::kStream;
          ev.stream = sint(v, k);
          break;
        case Key::kDevice: {
          bit = key::kDevice;
          std::uint64_t d = uint(v, k);
          if (d > UINT32_MAX) err(k, "does not fit in 32 bits");
          ev.device = static_cast<std::uint32_t>(d);
          break;
        }
        case Key::kSpace: {
          bit = key::kSpace;
          std::string_view sp = string(v, k);
          if (!parse_space(sp, &ev.space)) err(k, fmt::format("unknown space '{}'", sp));
          break;
        }
        case Key::kName:
          bit = key::kName;
          ev.name.assign(string(v, k));
          break;
        case Key::kDtype: {
          bit = key::kDtype;
          std::string_view dt = string(v, k);
          if (!parse_dtype(dt, &ev.dtype)) err(k, fmt::format("unknown dtype '{}'", dt));
          break;
        }
        case Key::kAddr:
          if (type_of(v, k) == od::json_type::null) {
            skip(v, k);  // null: as if absent
          } else {
            bit = key::kAddr;
            ev.addr = Addr(uint(v, k));
          }
          break;
        case Key::kPreTrace:
          bit = key::kPreTrace;
          f.pre_false = !boolean(v, k);  // false: as if absent
          break;
        case Key::kAggregate:
          bit = key::kAggregate;
          f.aggregate_false = !boolean(v, k);  // false: as if absent
          break;
        case Key::kBlockSize:
          bit = key::kBlockSize;
          ev.block_size = uint(v, k);
          break;
        case Key::kStack:
          bit = key::kStack;
          ev.stack = uint(v, k);
          break;
        case Key::kFrames:
          bit = key::kFrames;
          array(v, k, [&](od::value x) { ev.frames.emplace_back(string(x, k)); });
          break;
        case Key::kShape:
          bit = key::kShape;
          array(v, k, [&](od::value x) { ev.shape.push_back(uint(x, k)); });
          break;
        case Key::kOther:
          skip(v, k);  // unknown event keys are ignored (forward compatibility), once valid JSON
          break;
      }
      if (bit) {
        if (f.seen & bit) err(k, "duplicate key");
        f.seen |= bit;
      }
    }
    return f;
  }
  // The keys a line must have.
  void finish(const Fields& f, Event& ev) {
    if (!f.have_op) err("op", "missing required key" + not_a_profile());
    ev.present = f.seen;
    if (f.pre_false) ev.present &= static_cast<std::uint16_t>(~key::kPreTrace);
    if (f.aggregate_false) ev.present &= static_cast<std::uint16_t>(~key::kAggregate);
    if ((ev.op == Op::kAlloc || ev.op == Op::kFree) && !(f.seen & key::kId)) err("id", "missing required key");
    if (ev.op == Op::kAlloc && !(f.seen & key::kSize)) err("size", "missing required key");
  }

  // ---- errors ----
  // A .json file reaches this reader when its first bytes showed no Chrome trace (kineto.h): say so
  // to whoever took it for a profiler trace.
  std::string not_a_profile() const {
    if (path_.size() < 5 || path_.compare(path_.size() - 5, 5, ".json") != 0) return {};
    return " (read as a fragsim JSONL trace: not a PyTorch profiler trace either, which names traceEvents, "
           "schemaVersion or deviceProperties at its top level)";
  }
  [[noreturn]] void err(std::string_view key, const std::string& what) {
    if (block_) throw Retry{};
    throw InputError(path_, line_, key.empty() ? what : fmt::format("{}: {}", key, what));
  }
  // An error at byte `at` of the line, named as its column.
  [[noreturn]] void err_at(std::string_view key, const std::string& what, size_t at) {
    err(key, fmt::format("{} (column {})", what, at + 1));
  }
  // Names the column where simdjson stopped, when it says.
  [[noreturn]] void json_err(std::string_view key, error_code e, std::string_view token = {}) {
    if (block_) throw Retry{};  // doc_ is not the document being read
    const char* at = nullptr;
    if (doc_.current_location().get(at) == SUCCESS && at >= text_.data() && at <= text_.data() + text_.size())
      err_at(key, describe(e, token), at - text_.data());
    err(key, describe(e, token));
  }
  // The first stage refused the line (encoding, strings): find the byte and the key it is in.
  [[noreturn]] void stage1_err(error_code e) {
    size_t at = std::string_view::npos;
    if (e == simdjson::UTF8_ERROR) at = utf8_error_offset(text_);
    if (e == simdjson::UNESCAPED_CHARS) at = scan_strings(text_).control;
    if (e == simdjson::UNCLOSED_STRING) at = scan_strings(text_).open;
    if (at == std::string_view::npos) err({}, describe(e));
    err_at(e == simdjson::UNCLOSED_STRING ? std::string() : key_at(at), describe(e), at);
  }
  // The top-level key whose key or value holds byte `at`, read from a copy of the line whose
  // control and non-ASCII bytes are spaces (whitespace between tokens, a character in strings).
  std::string key_at(size_t at) {
    std::string copy(text_);
    for (char& c : copy)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80) c = ' ';
    copy.resize(copy.size() + SIMDJSON_PADDING);
    std::string found;
    od::document doc;
    od::object obj;
    if (parser_.iterate(copy.data(), text_.size(), copy.size()).get(doc) || doc.get_object().get(obj)) return found;
    for (auto field : obj) {
      const char* where = nullptr;
      std::string_view k;
      if (doc.current_location().get(where) || static_cast<size_t>(where - copy.data()) > at) break;
      if (field.unescaped_key().get(k)) break;
      found.assign(k);
    }
    return found;
  }
  // An INCOMPLETE_ARRAY_OR_OBJECT at the top: a line that holds a whole object and then more, or
  // one whose object is never closed.
  [[noreturn]] void top_incomplete() {
    od::document_stream docs;
    if (parser_.iterate_many(text_.data(), text_.size(), std::max<size_t>(text_.size(), 64)).get(docs) == SUCCESS) {
      auto first = docs.begin();
      if (first != docs.end()) {
        size_t end = first.current_index() + first.source().size();
        if (end < text_.size() && !blank(text_.substr(end))) err_at({}, kTrailing, end);
      }
    }
    err({}, describe(simdjson::INCOMPLETE_ARRAY_OR_OBJECT));
  }

  // ---- values ----
  od::json_type type_of(od::value& v, std::string_view key) {
    od::json_type t{};
    if (error_code e = v.type().get(t)) json_err(key, e);
    return t;
  }
  // A number value, or the error naming key: not a number, not JSON, beyond 64-bit integers.
  od::number number(od::value& v, std::string_view key, bool non_negative) {
    if (type_of(v, key) != od::json_type::number)
      err(key, non_negative ? "must be a non-negative integer" : "must be an integer");
    std::string_view token = v.raw_json_token();
    if (non_negative && token[0] == '-' && token.size() > 1 && token[1] >= '0' && token[1] <= '9')
      err(key, "must be non-negative");
    od::number n;
    error_code e = v.get_number().get(n);
    if (e == SUCCESS) {
      if (n.get_number_type() == od::number_type::floating_point_number) err(key, "must be an integer, not a fraction");
      return n;
    }
    double d;
    if (v.get_double().get(d) == SUCCESS)  // valid JSON, beyond what 64 bits hold
      err(key, token.find_first_of(".eE") != std::string_view::npos ? "must be an integer, not a fraction"
                                                                    : "does not fit in 64 bits");
    json_err(key, e, token);
  }
  std::uint64_t uint(od::value v, std::string_view key) {
    std::uint64_t x;
    if (v.get_uint64().get(x) == SUCCESS) return x;  // the common case; else say what is wrong
    od::number n = number(v, key, true);
    return n.get_number_type() == od::number_type::unsigned_integer ? n.get_uint64()
                                                                    : static_cast<std::uint64_t>(n.get_int64());
  }
  std::int64_t sint(od::value v, std::string_view key) {
    od::number n = number(v, key, false);
    if (n.get_number_type() == od::number_type::unsigned_integer) err(key, "does not fit in 64 bits");
    return n.get_int64();
  }
  std::string_view string(od::value v, std::string_view key) {
    std::string_view s = v.raw_json_token();
    od::raw_json_string raw;
    if (s[0] == '"' && plain(s.data() + 1, &s) && v.get_raw_json_string().get(raw) == SUCCESS) return s;
    error_code e = v.get_string().get(s);
    if (e == SUCCESS) return s;
    if (type_of(v, key) != od::json_type::string) err(key, "must be a string");
    json_err(key, e);
  }
  bool boolean(od::value v, std::string_view key) {
    if (type_of(v, key) != od::json_type::boolean) err(key, "must be true or false");
    bool b = false;
    if (error_code e = v.get_bool().get(b)) json_err(key, e);
    return b;
  }
  // Calls each(element) for every element of an array value.
  template <class F>
  void array(od::value v, std::string_view key, F&& each) {
    if (type_of(v, key) != od::json_type::array) err(key, "must be an array");
    od::array a;
    if (error_code e = v.get_array().get(a)) json_err(key, e);
    for (auto element : a) {
      od::value x;
      if (error_code e = std::move(element).get(x)) json_err(key, e);
      each(x);
    }
  }
  // Reads an unknown key's value to its end, so that simdjson checks every part of it.
  void skip(od::value v, std::string_view key, int depth = 0) {
    if (depth > 64) err(key, "JSON nested too deeply");
    error_code e = SUCCESS;
    switch (type_of(v, key)) {
      case od::json_type::array:
        array(v, key, [&](od::value x) { skip(x, key, depth + 1); });
        return;
      case od::json_type::object: {
        od::object o;
        if ((e = v.get_object().get(o))) json_err(key, e);
        for (auto field : o) {
          std::string_view k;
          od::value x;
          if ((e = field.unescaped_key().get(k)) || (e = field.value().get(x))) json_err(key, e);
          skip(x, key, depth + 1);
        }
        return;
      }
      case od::json_type::number: {
        double d;
        if ((e = v.get_double().get(d))) json_err(key, e, v.raw_json_token());
        return;
      }
      case od::json_type::string: {
        std::string_view s;
        if ((e = v.get_string().get(s))) json_err(key, e);
        return;
      }
      case od::json_type::boolean: {
        bool b;
        if ((e = v.get_bool().get(b))) json_err(key, e);
        return;
      }
      case od::json_type::null: {
        bool null = false;
        if ((e = v.is_null().get(null)) || !null) json_err(key, e ? e : simdjson::N_ATOM_ERROR);
        return;
      }
    }
  }

  // The block path's batch: chunks up to this size (the sentinel included) are parsed as one.
  static constexpr size_t kBlockBatch = 1 << 19;

  std::string path_;
  od::parser parser_, block_parser_;  // line by line; blocks (a fixed capacity, kept)
  bool blocks_;                       // parse chunks as blocks first (ReaderOptions::line_by_line off)
  bool block_ = false;                // in parse_block: errors are Retry
  od::document doc_;
  std::string_view text_;  // the line being parsed
  std::uint64_t line_ = 0;
};

// Parses event lines on `threads` worker threads, in chunks of whole lines, and hands the events
// out in file order. The caller's thread reads and splits the file (memchr, a copy) and later
// validates what it is handed (TraceReader::next); the workers run simdjson. An error — a line a
// worker refused, or one the splitter could not read — is handed out where it stands, after
// every event before it, so a run fails exactly where and as the one-thread reader makes it fail.
class ParallelLines {
 public:
  ParallelLines(LineReader& lines, const std::string& path, unsigned threads, bool blocks) : lines_(lines) {
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this, path, blocks] { work(path, blocks); });
  }
  ~ParallelLines() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  ParallelLines(const ParallelLines&) = delete;
  ParallelLines& operator=(const ParallelLines&) = delete;

  // The next event (swapped into ev, whose fields are clear), false at the end; throws the
  // chunk's error once its events are out.
  bool next(Event& ev) {
    for (;;) {
      if (cur_) {
        if (cur_->take(pos_, ev)) return true;
        if (cur_->last) return false;
        spare_.push_back(std::move(cur_));
      }
      while (!input_done_ && in_flight_.size() < 2 * workers_.size() + 1) submit(fill());
      if (in_flight_.empty()) return false;
      cur_ = std::move(in_flight_.front());
      in_flight_.pop_front();
      pos_ = 0;
      std::unique_lock<std::mutex> l(m_);
      done_cv_.wait(l, [&] { return cur_->ready; });
    }
  }

 private:
  struct Chunk : LineChunk {
    bool ready = false;  // (under m_) the workers are done with it
  };

  std::unique_ptr<Chunk> fill() {
    std::unique_ptr<Chunk> c;
    if (spare_.empty()) {
      c = std::make_unique<Chunk>();
    } else {
      c = std::move(spare_.back());
      spare_.pop_back();
    }
    c->ready = false;
    c->fill(lines_);
    input_done_ = c->last;
    return c;
  }
  void submit(std::unique_ptr<Chunk> c) {
    Chunk* raw = c.get();
    in_flight_.push_back(std::move(c));
    {
      std::lock_guard<std::mutex> l(m_);
      if (raw->lines.empty()) {
        raw->ready = true;
        return;
      }
      jobs_.push_back(raw);
    }
    work_cv_.notify_one();
  }
  void work(const std::string& path, bool blocks) {
    LineParser parser(path, blocks);
    for (;;) {
      Chunk* c;
      {
        std::unique_lock<std::mutex> l(m_);
        work_cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        c = jobs_.front();
        jobs_.pop_front();
      }
      parser.parse_chunk(*c);
      {
        std::lock_guard<std::mutex> l(m_);
        c->ready = true;
      }
      done_cv_.notify_all();
    }
  }

  LineReader& lines_;
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Chunk*> jobs_;  // under m_
  bool stop_ = false;        // under m_
  // The caller's thread only:
  std::deque<std::unique_ptr<Chunk>> in_flight_;
  std::vector<std::unique_ptr<Chunk>> spare_;
  std::unique_ptr<Chunk> cur_;
  size_t pos_ = 0;
  bool input_done_ = false;
};

// The first non-blank line of a trace: its header (validated, InputError naming FILE:LINE), or
// null when it is an event line.
nlohmann::json header_of(std::string_view line, const std::string& path, std::uint64_t lineno) {
  if (line.find("\"fragsim_trace\"") == std::string_view::npos) return nullptr;
  if (size_t bad = utf8_error_offset(line); bad != std::string_view::npos)
    throw InputError(path, lineno, fmt::format("invalid UTF-8 (column {})", bad + 1));
  nlohmann::json h = line.size() > kMaxHeaderBytes ? nlohmann::json() : nlohmann::json::parse(line, nullptr, false);
  if (line.size() > kMaxHeaderBytes || h.is_discarded() || (h.is_object() && h.contains("fragsim_trace")))
    return parse_header(line, path, lineno);
  return nullptr;
}

class JsonlReader : public TraceReader {
 public:
  JsonlReader(const std::string& path, const ReaderOptions& opt)
      : TraceReader(path, opt), lines_(open_source(path), path), parser_(path, !opt.line_by_line) {
    // The header, when present, is the first non-blank line; peek at it now so header() is known.
    std::string_view line;
    bool any = false;
    while (lines_.next(&line)) {
      if (blank(line)) continue;
      any = true;
      if (nlohmann::json h = header_of(line, path_, lines_.lineno()); !h.is_null()) {
        set_header(std::move(h), lines_.lineno());
        break;
      }
      lines_.unread();  // an event line: read_raw parses it
      break;
    }
    // An empty .jsonl is a trace of no events (specs/contracts.md §1: blank lines are ignored). A
    // .json holds one JSON document, a profiler trace's or a report's, or is read as JSONL when it
    // is neither: with nothing in it, it is none of them, most likely a file cut short or never
    // written (a trace handler that failed), and the run would report nothing as if it had run.
    if (!any && ends_with(path, ".json")) {
      std::error_code ec;
      const bool zero = std::filesystem::file_size(path, ec) == 0 && !ec;
      throw InputError(path + (zero ? ": the file is empty (0 bytes)" : ": the file is empty (only blank lines)") +
                       ": neither a PyTorch profiler trace nor a fragsim JSONL trace");
    }
    if (opt.decode_threads > 0)
      parallel_ = std::make_unique<ParallelLines>(lines_, path, opt.decode_threads, !opt.line_by_line);
  }

 protected:
  bool read_raw(Event& ev) override {
    if (parallel_) return parallel_->next(ev);
    for (;;) {
      if (chunk_.take(pos_, ev)) return true;
      if (chunk_.last) return false;
      chunk_.fill(lines_);
      parser_.parse_chunk(chunk_);
      pos_ = 0;
    }
  }

 private:
  LineReader lines_;
  LineParser parser_;
  LineChunk chunk_;  // the caller's thread parses a chunk at a time (when there are no workers)
  size_t pos_ = 0;
  std::unique_ptr<ParallelLines> parallel_;  // declared last: its workers stop before the rest goes
};

class JsonlWriter : public TraceWriter {
 public:
  JsonlWriter(const std::string& path, const nlohmann::json& header) : file_(path, ends_with(path, ".zst")) {
    if (!header.is_null()) {
      buf_ = dump_json(header);
      buf_.push_back('\n');
    }
  }
  void write(const Event& ev) override {
    buf_ += "{\"op\":\"";
    buf_ += op_name(ev.op);
    buf_ += '"';
    auto num = [&](const char* k, auto v) { fmt::format_to(std::back_inserter(buf_), ",\"{}\":{}", k, v); };
    if (ev.has(key::kId)) num("id", ev.id);
    if (ev.has(key::kSize)) num("size", ev.size);
    if (ev.has(key::kT)) num("t", ev.t);
    if (ev.has(key::kStream)) num("stream", ev.stream);
    if (ev.has(key::kDevice)) num("device", ev.device);
    if (ev.has(key::kSpace)) {
      buf_ += ",\"space\":\"";
      buf_ += space_name(ev.space);
      buf_ += '"';
    }
    if (ev.has(key::kName)) {
      buf_ += ",\"name\":";
      append_json_string(buf_, ev.name);
    }
    if (ev.has(key::kShape)) {
      buf_ += ",\"shape\":[";
      for (size_t i = 0; i < ev.shape.size(); ++i)
        fmt::format_to(std::back_inserter(buf_), "{}{}", i ? "," : "", ev.shape[i]);
      buf_ += ']';
    }
    if (ev.has(key::kDtype)) {
      buf_ += ",\"dtype\":\"";
      buf_ += dtype_name(ev.dtype);
      buf_ += '"';
    }
    if (ev.has(key::kAddr)) num("addr", ev.addr);
    if (ev.has(key::kPreTrace)) buf_ += ",\"pre_trace\":true";
    if (ev.has(key::kAggregate)) buf_ += ",\"aggregate\":true";
    if (ev.has(key::kStack)) num("stack", ev.stack);
    if (ev.has(key::kBlockSize)) num("block_size", ev.block_size);
    if (ev.has(key::kFrames)) {
      buf_ += ",\"frames\":[";
      for (size_t i = 0; i < ev.frames.size(); ++i) {
        if (i) buf_ += ',';
        append_json_string(buf_, ev.frames[i]);
      }
      buf_ += ']';
    }
    buf_ += "}\n";
    if (buf_.size() > (1 << 20)) flush();
  }
  void finish() override {
    flush();
    file_.commit();
  }

 private:
  void flush() {
    file_.write(buf_);
    buf_.clear();
  }
  AtomicFile file_;
  std::string buf_;
};

}  // namespace

struct JsonlLines::Impl {
  explicit Impl(const std::string& n) : name(n), parser(n, false) {}  // lines come one by one
  std::string name;
  LineParser parser;
  std::shared_ptr<std::vector<Event>> events = std::make_shared<std::vector<Event>>();
  nlohmann::json header;
  std::uint64_t header_line = 0, lineno = 0;
  bool seen_event = false;  // a non-blank line has been added
  std::string padded;       // the line being parsed, followed by SIMDJSON_PADDING bytes
};

JsonlLines::JsonlLines(const std::string& name) : impl_(std::make_unique<Impl>(name)) {}
JsonlLines::~JsonlLines() = default;

void JsonlLines::add(std::string_view line) {
  Impl& m = *impl_;
  ++m.lineno;
  if (blank(line)) return;
  if (!m.seen_event) {
    m.seen_event = true;
    if (nlohmann::json h = header_of(line, m.name, m.lineno); !h.is_null()) {
      m.header = std::move(h);
      m.header_line = m.lineno;
      return;
    }
  }
  m.padded.assign(line);
  m.padded.append(SIMDJSON_PADDING, ' ');
  Event& ev = m.events->emplace_back();
  ev.line = m.lineno;
  try {
    m.parser.parse(std::string_view(m.padded.data(), line.size()), ev);
  } catch (...) {
    m.events->pop_back();
    throw;
  }
}

std::uint64_t JsonlLines::lines() const { return impl_->lineno; }

ReaderFactory JsonlLines::reader(const ReaderOptions& opt) && {
  return [name = impl_->name, events = std::shared_ptr<const std::vector<Event>>(std::move(impl_->events)),
          header = impl_->header, line = impl_->header_line,
          opt]() { return make_decoded_reader(name, events, header, line, opt); };
}

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (u < 0x20)
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", u);
    else
      out.push_back(c);
  }
  out.push_back('"');
}

std::unique_ptr<TraceReader> make_jsonl_reader(const std::string& path, const ReaderOptions& opt) {
  return std::make_unique<JsonlReader>(path, opt);
}

std::unique_ptr<TraceWriter> make_jsonl_writer(const std::string& path, const nlohmann::json& header) {
  return std::make_unique<JsonlWriter>(path, header);
}

}  // namespace fragsim

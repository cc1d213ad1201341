// JSONL trace reader: a hand-written parser for the flat event objects of trace v1.
//
// Why not a general JSON library on the hot path: an event line is a flat object of a dozen known
// keys, so a direct scanner decodes it into the reusable Event without building a DOM, and every
// error names the key at fault ("size: must be a non-negative integer"). The optional header line
// (arbitrary JSON, echoed into the report) goes through nlohmann/json.
#include "traces/jsonl.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"

namespace fragsim {

namespace {

// Splits a ByteSource into lines (without '\n' or a trailing '\r'), reusing one buffer.
class LineReader {
 public:
  LineReader(std::unique_ptr<ByteSource> src, std::string path)
      : src_(std::move(src)), path_(std::move(path)), buf_(1 << 20) {}
  bool next(std::string_view* line) {
    for (;;) {
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
      if (len_ == buf_.size()) {
        if (buf_.size() >= kMaxLineBytes)
          throw InputError(path_, lineno_ + 1, fmt::format("line longer than {} MiB", kMaxLineBytes >> 20));
        buf_.resize(buf_.size() * 2);
      }
      size_t got = src_->read(buf_.data() + len_, buf_.size() - len_);
      if (got == 0) eof_ = true;
      len_ += got;
    }
  }
  std::uint64_t lineno() const { return lineno_; }

 private:
  std::unique_ptr<ByteSource> src_;
  std::string path_;
  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
  std::uint64_t lineno_ = 0;
};

class JsonlReader : public TraceReader {
 public:
  JsonlReader(const std::string& path, const ReaderOptions& opt)
      : TraceReader(path, opt), lines_(open_source(path), path) {
    // The header, when present, is the first non-blank line; peek at it now so header() is known.
    std::string_view line;
    while (lines_.next(&line)) {
      if (blank(line)) continue;
      if (line.find("\"fragsim_trace\"") != std::string_view::npos) {
        check_utf8(line);
        nlohmann::json h =
            line.size() > kMaxHeaderBytes ? nlohmann::json() : nlohmann::json::parse(line, nullptr, false);
        if (line.size() > kMaxHeaderBytes || h.is_discarded() || (h.is_object() && h.contains("fragsim_trace"))) {
          set_header(parse_header(line, path_, lines_.lineno()));
          break;
        }
      }
      pending_ = line;
      pending_line_ = lines_.lineno();
      has_pending_ = true;
      break;
    }
  }

 protected:
  bool read_raw(Event& ev) override {
    std::string_view line;
    if (has_pending_) {
      has_pending_ = false;
      pending_copy_.assign(pending_.data(), pending_.size());  // the line buffer may have moved on
      ev.line = pending_line_;
      parse(pending_copy_, ev);
      return true;
    }
    while (lines_.next(&line)) {
      if (blank(line)) continue;
      ev.line = lines_.lineno();
      parse(line, ev);
      return true;
    }
    return false;
  }

 private:
  static bool blank(std::string_view s) {
    for (char c : s)
      if (c != ' ' && c != '\t') return false;
    return true;
  }
  void check_utf8(std::string_view line) {
    if (!valid_utf8(line)) fail(lines_.lineno(), "invalid UTF-8");
  }

  // ---- the flat-object scanner ----
  [[noreturn]] void err(const std::string& what) {
    fail(line_, skipping_.empty() ? what : fmt::format("{}: {}", skipping_, what));
  }
  std::string skipping_;  // the unknown key whose value is being skipped (named in errors)
  void ws() {
    while (p_ < e_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
  }
  void expect(char c, const char* what) {
    ws();
    if (p_ >= e_) err(fmt::format("truncated JSON: expected '{}' {}", c, what));
    if (*p_ != c) err(fmt::format("invalid JSON: expected '{}' {}, found '{}'", c, what, *p_));
    ++p_;
  }

  // Parses a JSON string into out (escapes decoded). p_ at the opening quote.
  void string(std::string& out, std::string_view key) {
    ws();
    if (p_ >= e_) err("truncated JSON");
    if (*p_ != '"') err(fmt::format("{}: must be a string", key));
    ++p_;
    const char* s = p_;
    while (p_ < e_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
    if (p_ < e_ && *p_ == '"') {
      out.assign(s, p_ - s);
      ++p_;
      return;
    }
    out.assign(s, p_ - s);
    while (p_ < e_) {
      char c = *p_++;
      if (c == '"') return;
      if (static_cast<unsigned char>(c) < 0x20) err(fmt::format("{}: control character in string", key));
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (p_ >= e_) break;
      char x = *p_++;
      switch (x) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          unsigned cp = hex4(key);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (e_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u') err(fmt::format("{}: unpaired surrogate", key));
            p_ += 2;
            unsigned lo = hex4(key);
            if (lo < 0xDC00 || lo > 0xDFFF) err(fmt::format("{}: unpaired surrogate", key));
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            err(fmt::format("{}: unpaired surrogate", key));
          }
          append_utf8(out, cp);
          break;
        }
        default:
          err(fmt::format("{}: invalid escape '\\{}'", key, x));
      }
    }
    err("truncated JSON: unterminated string");
  }
  unsigned hex4(std::string_view key) {
    if (e_ - p_ < 4) err("truncated JSON");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = *p_++;
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        err(fmt::format("{}: invalid \\u escape", key));
    }
    return v;
  }
  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Unsigned integer (u64); rejects signs, fractions, exponents, overflow, other types.
  std::uint64_t uint(std::string_view key) {
    ws();
    if (p_ >= e_) err("truncated JSON");
    if (*p_ == '-') {
      if (p_ + 1 < e_ && p_[1] >= '0' && p_[1] <= '9') err(fmt::format("{}: must be non-negative", key));
      err(fmt::format("{}: must be a non-negative integer", key));
    }
    if (*p_ < '0' || *p_ > '9') err(fmt::format("{}: must be a non-negative integer", key));
    if (*p_ == '0' && p_ + 1 < e_ && p_[1] >= '0' && p_[1] <= '9') err(fmt::format("{}: invalid number", key));
    std::uint64_t v = 0;
    while (p_ < e_ && *p_ >= '0' && *p_ <= '9') {
      unsigned d = *p_ - '0';
      if (v > (UINT64_MAX - d) / 10) err(fmt::format("{}: does not fit in 64 bits", key));
      v = v * 10 + d;
      ++p_;
    }
    if (p_ < e_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E'))
      err(fmt::format("{}: must be an integer, not a fraction", key));
    return v;
  }
  std::int64_t sint(std::string_view key) {
    ws();
    bool neg = p_ < e_ && *p_ == '-';
    if (neg) ++p_;
    if (p_ < e_ && *p_ == '-') err(fmt::format("{}: must be an integer", key));
    std::uint64_t m = uint(key);
    if (m > (neg ? 9223372036854775808ULL : 9223372036854775807ULL))
      err(fmt::format("{}: does not fit in 64 bits", key));
    return neg ? static_cast<std::int64_t>(0 - m) : static_cast<std::int64_t>(m);
  }
  bool boolean(std::string_view key) {
    ws();
    if (e_ - p_ >= 4 && std::memcmp(p_, "true", 4) == 0) {
      p_ += 4;
      return true;
    }
    if (e_ - p_ >= 5 && std::memcmp(p_, "false", 5) == 0) {
      p_ += 5;
      return false;
    }
    err(fmt::format("{}: must be true or false", key));
  }
  bool null_literal() {
    ws();
    if (e_ - p_ >= 4 && std::memcmp(p_, "null", 4) == 0) {
      p_ += 4;
      return true;
    }
    return false;
  }
  // Skips any JSON value (unknown keys).
  void skip_value(int depth = 0) {
    if (depth > 64) err("JSON nested too deeply");
    ws();
    if (p_ >= e_) err("truncated JSON");
    char c = *p_;
    if (c == '"') {
      scratch_.clear();
      string(scratch_, "value");
    } else if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++p_;
      ws();
      if (p_ < e_ && *p_ == close) {
        ++p_;
        return;
      }
      for (;;) {
        if (c == '{') {
          string(scratch_, "key");
          expect(':', "after a key");
        }
        skip_value(depth + 1);
        ws();
        if (p_ >= e_) err("truncated JSON");
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ == close) {
          ++p_;
          return;
        }
        err(fmt::format("invalid JSON: expected ',' or '{}'", close));
      }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      // RFC 8259 number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
      auto digits = [&] {
        const char* s = p_;
        while (p_ < e_ && *p_ >= '0' && *p_ <= '9') ++p_;
        if (p_ == s) err("invalid JSON number");
      };
      if (c == '-') ++p_;
      if (p_ < e_ && *p_ == '0') {
        ++p_;
        if (p_ < e_ && *p_ >= '0' && *p_ <= '9') err("invalid JSON number: leading zero");
      } else {
        digits();
      }
      if (p_ < e_ && *p_ == '.') {
        ++p_;
        digits();
      }
      if (p_ < e_ && (*p_ == 'e' || *p_ == 'E')) {
        ++p_;
        if (p_ < e_ && (*p_ == '+' || *p_ == '-')) ++p_;
        digits();
      }
    } else {
      for (const char* lit : {"true", "false", "null"}) {
        size_t n = std::strlen(lit);
        if (static_cast<size_t>(e_ - p_) >= n && std::memcmp(p_, lit, n) == 0) {
          p_ += n;
          return;
        }
      }
      err("invalid JSON value");
    }
  }

  void parse(std::string_view line, Event& ev) {
    line_ = ev.line;
    check_utf8(line);
    p_ = line.data();
    e_ = line.data() + line.size();
    ws();
    if (p_ >= e_ || *p_ != '{') err("invalid JSON: each line must be one JSON object");
    ++p_;
    bool have_op = false, pre_false = false;
    std::uint16_t seen = 0;
    ws();
    if (p_ < e_ && *p_ == '}') {
      ++p_;
    } else {
      for (;;) {
        string(key_, "key");
        expect(':', "after a key");
        std::uint16_t bit = 0;
        const std::string& k = key_;
        if (k == "op") {
          if (have_op) err("op: duplicate key");
          have_op = true;
          string(scratch_, "op");
          if (!parse_op(scratch_, &ev.op)) err(fmt::format("op: unknown op '{}'", scratch_));
        } else if (k == "id") {
          bit = key::kId;
          ev.id = AllocId(uint("id"));
        } else if (k == "size") {
          bit = key::kSize;
          ev.size = uint("size");
        } else if (k == "t") {
          bit = key::kT;
          ev.t = Tick(uint("t"));
        } else if (k == "stream") {
          bit = key::kStream;
          ev.stream = sint("stream");
        } else if (k == "device") {
          bit = key::kDevice;
          std::uint64_t d = uint("device");
          if (d > UINT32_MAX) err("device: does not fit in 32 bits");
          ev.device = static_cast<std::uint32_t>(d);
        } else if (k == "space") {
          bit = key::kSpace;
          string(scratch_, "space");
          if (!parse_space(scratch_, &ev.space)) err(fmt::format("space: unknown space '{}'", scratch_));
        } else if (k == "name") {
          bit = key::kName;
          string(ev.name, "name");
        } else if (k == "dtype") {
          bit = key::kDtype;
          string(scratch_, "dtype");
          if (!parse_dtype(scratch_, &ev.dtype)) err(fmt::format("dtype: unknown dtype '{}'", scratch_));
        } else if (k == "addr") {
          if (!null_literal()) {
            bit = key::kAddr;
            ev.addr = Addr(uint("addr"));
          }
        } else if (k == "pre_trace") {
          bit = key::kPreTrace;
          pre_false = !boolean("pre_trace");  // false: as if absent
        } else if (k == "block_size") {
          bit = key::kBlockSize;
          ev.block_size = uint("block_size");
        } else if (k == "stack") {
          bit = key::kStack;
          ev.stack = uint("stack");
        } else if (k == "frames") {
          bit = key::kFrames;
          expect('[', "to open frames");
          ws();
          if (p_ < e_ && *p_ == ']') {
            ++p_;
          } else {
            for (;;) {
              ev.frames.emplace_back();
              string(ev.frames.back(), "frames");
              ws();
              if (p_ < e_ && *p_ == ',') {
                ++p_;
                continue;
              }
              expect(']', "to close frames");
              break;
            }
          }
        } else if (k == "shape") {
          bit = key::kShape;
          expect('[', "to open shape");
          ws();
          if (p_ < e_ && *p_ == ']') {
            ++p_;
          } else {
            for (;;) {
              ev.shape.push_back(uint("shape"));
              ws();
              if (p_ < e_ && *p_ == ',') {
                ++p_;
                continue;
              }
              expect(']', "to close shape");
              break;
            }
          }
        } else {
          skipping_ = k;  // unknown event keys are ignored (forward compatibility), once valid JSON
          skip_value();
          skipping_ = {};
        }
        if (bit) {
          if (seen & bit) err(fmt::format("{}: duplicate key", k));
          seen |= bit;
        }
        ws();
        if (p_ >= e_) err("truncated JSON: expected ',' or '}'");
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ == '}') {
          ++p_;
          break;
        }
        err(fmt::format("invalid JSON: expected ',' or '}}' after {}", k));
      }
    }
    ws();
    if (p_ != e_) err("trailing characters after the JSON object");
    if (!have_op) err("op: missing required key");
    ev.present = pre_false ? static_cast<std::uint16_t>(seen & ~key::kPreTrace) : seen;
    if ((ev.op == Op::kAlloc || ev.op == Op::kFree) && !(seen & key::kId)) err("id: missing required key");
    if (ev.op == Op::kAlloc && !(seen & key::kSize)) err("size: missing required key");
  }

  LineReader lines_;
  std::string_view pending_;
  std::string pending_copy_;
  std::uint64_t pending_line_ = 0;
  bool has_pending_ = false;
  const char* p_ = nullptr;
  const char* e_ = nullptr;
  std::uint64_t line_ = 0;
  std::string key_, scratch_;
};

class JsonlWriter : public TraceWriter {
 public:
  JsonlWriter(const std::string& path, const nlohmann::json& header) : file_(path, ends_with(path, ".zst")) {
    if (!header.is_null()) {
      buf_ = header.dump();
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

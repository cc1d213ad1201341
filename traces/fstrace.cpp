#include "traces/fstrace.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "traces/jsonl.h"

namespace fragsim {

namespace {

constexpr char kMagic[8] = {'F', 'S', 'T', 'R', 'A', 'C', 'E', 1};
constexpr unsigned char kEnd = 0xFF;
constexpr size_t kWindow = 1 << 16;  // bytes guaranteed in the buffer before each record
constexpr size_t kBuffer = 1 << 18;  // the read buffer's size (more when a record needs it)
// The buffer the header is read into: a reader opened for the header alone touches one page, not
// kBuffer bytes (a new page costs about 10 µs on the bench machine); the first record grows it.
constexpr size_t kFirstBuffer = 4 << 10;

class FstraceReader : public TraceReader {
 public:
  FstraceReader(const std::string& path, const ReaderOptions& opt)
      : TraceReader(path, opt), src_(open_source(path)), buf_(new char[kFirstBuffer]), cap_(kFirstBuffer) {
    need(sizeof(kMagic) + 10);
    if (static_cast<size_t>(end_ - p_) < sizeof(kMagic) || std::memcmp(p_, kMagic, sizeof(kMagic)) != 0)
      fail(0, "not a .fstrace file (bad magic)");
    p_ += sizeof(kMagic);
    std::uint64_t n = varint();
    if (n > kMaxHeaderBytes) fail(0, fmt::format("header: larger than {} KiB", kMaxHeaderBytes >> 10));
    need(n);
    if (static_cast<std::uint64_t>(end_ - p_) < n) fail(0, "truncated header");
    if (n) {
      set_header(parse_header(std::string_view(p_, n), path_, 0));
      p_ += n;
    }
  }

 protected:
  bool read_raw(Event& ev) override {
    if (done_) return false;
    need(kWindow);
    ev.line = ++record_;
    if (p_ >= end_) fail(record_, "truncated: no end record");
    unsigned char op = static_cast<unsigned char>(*p_++);
    if (op == kEnd) {
      std::uint64_t count = varint();
      if (count != record_ - 1)
        fail(record_, fmt::format("end record counts {} events, file has {}", count, record_ - 1));
      need(1);
      if (p_ < end_) fail(record_, "bytes after the end record (concatenated files? convert them to one trace)");
      done_ = true;
      return false;
    }
    if (op >= static_cast<unsigned char>(Op::kCount)) fail(record_, fmt::format("op: unknown op code {}", op));
    ev.op = static_cast<Op>(op);
    std::uint64_t present = varint();
    if (present & ~std::uint64_t{key::kAll}) fail(record_, "corrupt record: unknown key bits");
    ev.present = static_cast<std::uint16_t>(present);
    if (ev.has(key::kId)) ev.id = AllocId(varint());
    if (ev.has(key::kSize)) ev.size = varint();
    if (ev.has(key::kT)) {
      std::uint64_t dt = varint();
      if (dt > UINT64_MAX - last_t_.value()) fail(record_, "t: does not fit in 64 bits");
      ev.t = last_t_ + dt;
      last_t_ = ev.t;
    } else {
      last_t_ = Tick(record_ - 1);  // the default time of this event is its index
    }
    if (ev.has(key::kStream)) {
      std::uint64_t z = varint();
      ev.stream = static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
    }
    if (ev.has(key::kDevice)) {
      std::uint64_t d = varint();
      if (d > UINT32_MAX) fail(record_, "device: does not fit in 32 bits");
      ev.device = static_cast<std::uint32_t>(d);
    }
    if (ev.has(key::kSpace)) {
      unsigned s = byte();
      if (s >= static_cast<unsigned>(Space::kCount)) fail(record_, "space: unknown space code");
      ev.space = static_cast<Space>(s);
    }
    if (ev.has(key::kName)) {
      std::uint64_t n = varint();
      if (n > (16u << 20)) fail(record_, "name: too long");
      need(n);
      if (static_cast<std::uint64_t>(end_ - p_) < n) fail(record_, "truncated record");
      ev.name.assign(p_, n);
      p_ += n;
      if (!valid_utf8(ev.name)) fail(record_, "name: invalid UTF-8");
    }
    if (ev.has(key::kShape)) {
      std::uint64_t r = varint();
      if (r > 64) fail(record_, "shape: rank too large");
      for (std::uint64_t i = 0; i < r; ++i) ev.shape.push_back(varint());
    }
    if (ev.has(key::kDtype)) {
      unsigned d = byte();
      if (d == 0 || d >= static_cast<unsigned>(Dtype::kCount)) fail(record_, "dtype: unknown dtype code");
      ev.dtype = static_cast<Dtype>(d);
    }
    if (ev.has(key::kAddr)) ev.addr = Addr(varint());
    if (ev.has(key::kStack)) ev.stack = varint();
    if (ev.has(key::kBlockSize)) ev.block_size = varint();
    if (ev.has(key::kFrames)) {
      std::uint64_t n = varint();
      if (n > 4096) fail(record_, "frames: more than 4096");
      for (std::uint64_t i = 0; i < n; ++i) {
        need(16);
        std::uint64_t len = varint();
        if (len > (1u << 16)) fail(record_, "frames: a frame longer than 64 KiB");
        need(len);
        if (static_cast<std::uint64_t>(end_ - p_) < len) fail(record_, "truncated record");
        ev.frames.emplace_back(p_, len);
        p_ += len;
        if (!valid_utf8(ev.frames.back())) fail(record_, "frames: invalid UTF-8");
      }
    }
    if ((ev.op == Op::kAlloc || ev.op == Op::kFree) && !ev.has(key::kId)) fail(record_, "id: missing required key");
    if (ev.op == Op::kAlloc && !ev.has(key::kSize)) fail(record_, "size: missing required key");
    return true;
  }

 private:
  void need(std::uint64_t n) {
    if (static_cast<std::uint64_t>(end_ - p_) >= n || eof_) return;
    size_t keep = end_ - p_;
    if (keep + n > cap_) {
      const size_t cap = std::max(kBuffer, keep + n + kWindow);
      std::unique_ptr<char[]> bigger(new char[cap]);  // not cleared: read() fills it
      if (keep) std::memcpy(bigger.get(), p_, keep);
      buf_ = std::move(bigger);
      cap_ = cap;
    } else if (keep) {
      std::memmove(buf_.get(), p_, keep);
    }
    size_t len = keep;
    while (len < cap_) {
      size_t got = src_->read(buf_.get() + len, cap_ - len);
      if (got == 0) {
        eof_ = true;
        break;
      }
      len += got;
    }
    p_ = buf_.get();
    end_ = buf_.get() + len;
  }
  unsigned byte() {
    if (p_ >= end_) fail(record_, "truncated record");
    return static_cast<unsigned char>(*p_++);
  }
  // Small enough to inline at every field: a value of at most 8 bytes with 8 bytes in the buffer
  // (need() keeps a window ahead of each record) is decoded from one load, without a branch per
  // byte; its last byte is the first without the continuation bit. The rest: varint_bytewise().
  [[gnu::always_inline]] std::uint64_t varint() {
    if (end_ - p_ < 8) return varint_bytewise();
    std::uint64_t w;
    std::memcpy(&w, p_, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    if (!(w & 0x80)) {  // most values (time steps, key bits, small ids) fit in one byte
      ++p_;
      return w & 0x7F;
    }
    std::uint64_t last = ~w & 0x8080808080808080ULL;
    if (!last) return varint_bytewise();
    w &= last ^ (last - 1);  // the bytes up to the first stop bit, that bit included
    p_ += __builtin_ctzll(last) / 8 + 1;
    // The 7-bit groups packed in three steps: pairs into 14 bits, those into 28, then 56.
    w = ((w & 0x7F007F007F007F00ULL) >> 1) | (w & 0x007F007F007F007FULL);
    w = ((w & 0x3FFF00003FFF0000ULL) >> 2) | (w & 0x00003FFF00003FFFULL);
    return ((w & 0x0FFFFFFF00000000ULL) >> 4) | (w & 0x000000000FFFFFFFULL);
  }
  [[gnu::noinline]] std::uint64_t varint_bytewise() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) fail(record_, "truncated record");
      unsigned char b = static_cast<unsigned char>(*p_++);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail(record_, "corrupt varint");
  }

  std::unique_ptr<ByteSource> src_;
  std::unique_ptr<char[]> buf_;  // cap_ bytes, the first (end_ - buf_) of them read
  size_t cap_;
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  bool eof_ = false, done_ = false;
  std::uint64_t record_ = 0;
  Tick last_t_;
};

class FstraceWriter : public TraceWriter {
 public:
  FstraceWriter(const std::string& path, const nlohmann::json& header) : file_(path) {
    buf_.append(kMagic, sizeof(kMagic));
    std::string h = header.is_null() ? std::string() : dump_json(header);
    varint(h.size());
    buf_ += h;
  }
  void write(const Event& ev) override {
    buf_.push_back(static_cast<char>(ev.op));
    varint(ev.present);
    if (ev.has(key::kId)) varint(ev.id.value());
    if (ev.has(key::kSize)) varint(ev.size);
    Tick t = ev.has(key::kT) ? ev.t : Tick(count_);
    if (ev.has(key::kT)) varint(t - last_t_);  // readers guarantee non-decreasing time
    last_t_ = t;
    if (ev.has(key::kStream)) {
      std::uint64_t s = static_cast<std::uint64_t>(ev.stream);
      varint((s << 1) ^ static_cast<std::uint64_t>(ev.stream >> 63));
    }
    if (ev.has(key::kDevice)) varint(ev.device);
    if (ev.has(key::kSpace)) buf_.push_back(static_cast<char>(ev.space));
    if (ev.has(key::kName)) {
      varint(ev.name.size());
      buf_ += ev.name;
    }
    if (ev.has(key::kShape)) {
      varint(ev.shape.size());
      for (auto d : ev.shape) varint(d);
    }
    if (ev.has(key::kDtype)) buf_.push_back(static_cast<char>(ev.dtype));
    if (ev.has(key::kAddr)) varint(ev.addr.value());
    if (ev.has(key::kStack)) varint(ev.stack);
    if (ev.has(key::kBlockSize)) varint(ev.block_size);
    if (ev.has(key::kFrames)) {
      varint(ev.frames.size());
      for (const auto& f : ev.frames) {
        varint(f.size());
        buf_ += f;
      }
    }
    ++count_;
    if (buf_.size() > (1 << 20)) flush();
  }
  void finish() override {
    buf_.push_back(static_cast<char>(kEnd));
    varint(count_);
    flush();
    file_.commit();
  }

 private:
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    buf_.push_back(static_cast<char>(v));
  }
  void flush() {
    file_.write(buf_);
    buf_.clear();
  }
  AtomicFile file_;
  std::string buf_;
  std::uint64_t count_ = 0;
  Tick last_t_;
};

}  // namespace

std::unique_ptr<TraceReader> make_fstrace_reader(const std::string& path, const ReaderOptions& opt) {
  return std::make_unique<FstraceReader>(path, opt);
}

std::unique_ptr<TraceWriter> make_fstrace_writer(const std::string& path, const nlohmann::json& header) {
  return std::make_unique<FstraceWriter>(path, header);
}

std::unique_ptr<TraceWriter> open_trace_writer(const std::string& path, const nlohmann::json& header) {
  if (ends_with(path, ".fstrace")) return make_fstrace_writer(path, header);
  if (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.zst")) return make_jsonl_writer(path, header);
  throw InputError(path + ": unknown output format (expected .jsonl, .jsonl.zst or .fstrace)");
}

}  // namespace fragsim

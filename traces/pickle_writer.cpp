#include "traces/pickle_writer.h"

#include <cstring>

namespace fragsim {

namespace {
// Opcodes (CPython Lib/pickle.py, Lib/pickletools.py).
constexpr std::uint8_t kProto = 0x80, kStop = '.', kNone = 'N', kNewTrue = 0x88, kNewFalse = 0x89, kBinInt = 'J',
                       kLong1 = 0x8a, kBinFloat = 'G', kBinUnicode = 'X', kEmptyDict = '}', kEmptyList = ']',
                       kMark = '(', kSetItems = 'u', kAppends = 'e', kBinPut = 'q', kLongBinPut = 'r', kBinGet = 'h',
                       kLongBinGet = 'j';
}  // namespace

PickleWriter::PickleWriter(AtomicFile& out) : out_(out) {
  byte(kProto);
  byte(2);
}

void PickleWriter::le32(std::uint32_t v) {
  for (int i = 0; i < 4; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));
}

void PickleWriter::flush_if_large() {
  if (buf_.size() < (1u << 20)) return;
  out_.write(buf_);
  buf_.clear();
}

// Each value opens with item(): a container's items are closed every kBatch (SETITEMS, APPENDS)
// and a MARK opens the next batch, as Python's pickler batches them, so that a reader's stack
// holds a batch, never a whole list (fragsim's reader refuses a million objects on its stack).
void PickleWriter::item() {
  if (open_.empty()) return;
  Open& o = open_.back();
  if (o.n == o.limit) {
    byte(o.close);
    byte(kMark);
    o.n = 0;
  }
  ++o.n;
}

void PickleWriter::none() {
  item();
  byte(kNone);
}

void PickleWriter::json(const nlohmann::json& v) {
  if (v.is_object()) {
    begin_dict();
    for (auto it = v.begin(); it != v.end(); ++it) {
      key(it.key());
      json(it.value());
    }
    end_dict();
  } else if (v.is_array()) {
    begin_list();
    for (const auto& x : v) json(x);
    end_list();
  } else if (v.is_boolean()) {
    boolean(v.get<bool>());
  } else if (v.is_number_unsigned()) {
    unsigned_integer(v.get<std::uint64_t>());
  } else if (v.is_number_integer()) {
    integer(v.get<std::int64_t>());
  } else if (v.is_number()) {
    real(v.get<double>());
  } else if (v.is_string()) {
    str(v.get<std::string>());
  } else {
    none();
  }
}
void PickleWriter::boolean(bool v) {
  item();
  byte(v ? kNewTrue : kNewFalse);
}

void PickleWriter::integer(std::int64_t v) {
  item();
  integer_raw(v);
}

void PickleWriter::integer_raw(std::int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    byte(kBinInt);
    le32(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
    return;
  }
  // LONG1: n bytes of two's complement, little-endian, the fewest that keep the sign.
  std::uint8_t b[9];
  int n = 0;
  std::uint64_t u = static_cast<std::uint64_t>(v);
  for (; n < 8; ++n) b[n] = static_cast<std::uint8_t>(u >> (8 * n));
  while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80)))) --n;
  byte(kLong1);
  byte(static_cast<std::uint8_t>(n));
  for (int i = 0; i < n; ++i) byte(b[i]);
}

void PickleWriter::unsigned_integer(std::uint64_t v) {
  item();
  if (v <= static_cast<std::uint64_t>(INT64_MAX)) return integer_raw(static_cast<std::int64_t>(v));
  byte(kLong1);  // 8 bytes and a zero byte keep it positive
  byte(9);
  for (int i = 0; i < 8; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));
  byte(0);
}

void PickleWriter::real(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, 8);
  item();
  byte(kBinFloat);
  for (int i = 7; i >= 0; --i) byte(static_cast<std::uint8_t>(bits >> (8 * i)));  // big-endian
}

void PickleWriter::str(std::string_view s) {
  item();
  str_raw(s);
}

void PickleWriter::str_raw(std::string_view s) {
  byte(kBinUnicode);
  le32(static_cast<std::uint32_t>(s.size()));
  buf_.append(s);
  flush_if_large();
}

void PickleWriter::key(std::string_view s) {
  item();
  auto it = keys_.find(std::string(s));
  if (it != keys_.end()) return get_raw(it->second);
  str_raw(s);
  keys_.emplace(std::string(s), put());
}

void PickleWriter::begin_dict() {
  item();
  byte(kEmptyDict);
  byte(kMark);
  open_.push_back({0, 2 * kBatch, kSetItems});  // a key and its value: two items
}
void PickleWriter::end_dict() {
  open_.pop_back();
  byte(kSetItems);
  flush_if_large();
}
void PickleWriter::begin_list() {
  item();
  byte(kEmptyList);
  byte(kMark);
  open_.push_back({0, kBatch, kAppends});
}
void PickleWriter::end_list() {
  open_.pop_back();
  byte(kAppends);
  flush_if_large();
}

std::uint32_t PickleWriter::put() {
  std::uint32_t m = next_memo_++;
  if (m < 256) {
    byte(kBinPut);
    byte(static_cast<std::uint8_t>(m));
  } else {
    byte(kLongBinPut);
    le32(m);
  }
  return m;
}

void PickleWriter::get(std::uint32_t m) {
  item();
  get_raw(m);
}

void PickleWriter::get_raw(std::uint32_t m) {
  if (m < 256) {
    byte(kBinGet);
    byte(static_cast<std::uint8_t>(m));
  } else {
    byte(kLongBinGet);
    le32(m);
  }
}

void PickleWriter::finish() {
  byte(kStop);
  out_.write(buf_);
  buf_.clear();
}

}  // namespace fragsim

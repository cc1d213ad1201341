// A pickle writer (protocol 2) for the data PyTorch memory snapshots hold: dicts, lists, ints,
// floats, strings, bools and None — what `pickle.load` and fragsim's own reader (traces/pickle.h)
// read back, and nothing that names a class. Opcodes as CPython's pickletools documents them:
// PROTO 2, EMPTY_DICT/EMPTY_LIST + MARK … SETITEMS/APPENDS (in batches of 1000 items, as Python's
// pickler writes them), BININT/LONG1, BINFLOAT, BINUNICODE,
// NONE, NEWTRUE/NEWFALSE, BINPUT/LONG_BINPUT and BINGET/LONG_BINGET (the memo), STOP.
// Strings given to key() are memoised: a key written a million times costs a few bytes after the
// first. Output goes to an AtomicFile in pieces, so memory stays O(the memo).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/base/io.h"

namespace fragsim {

class PickleWriter {
 public:
  explicit PickleWriter(AtomicFile& out);
  void none();
  void boolean(bool v);
  void integer(std::int64_t v);
  void unsigned_integer(std::uint64_t v);
  void real(double v);
  void str(std::string_view s);  // written in full each time
  void key(std::string_view s);  // memoised: later occurrences refer to the first
  // A JSON value as the matching pickle objects (objects as dicts with memoised keys, arrays as
  // lists; null as None).
  void json(const nlohmann::json& v);
  // A dict or list is begun, its items written (a dict: key, value, key, value, ...), then ended.
  void begin_dict();
  void end_dict();
  void begin_list();
  void end_list();
  // Memoises the object just completed (str, end_dict, end_list); get() writes a reference to it.
  std::uint32_t put();
  void get(std::uint32_t memo);
  void finish();  // STOP; the caller commits the file

 private:
  static constexpr std::uint32_t kBatch = 1000;  // items between SETITEMS/APPENDS (CPython's _BATCHSIZE)
  struct Open {
    std::uint32_t n, limit;  // items written in the current batch, and the batch's size
    std::uint8_t close;      // SETITEMS or APPENDS
  };
  void item();
  void integer_raw(std::int64_t v);
  void str_raw(std::string_view s);
  void get_raw(std::uint32_t memo);
  void byte(std::uint8_t b) { buf_.push_back(static_cast<char>(b)); }
  void le32(std::uint32_t v);
  void flush_if_large();
  AtomicFile& out_;
  std::string buf_;
  std::uint32_t next_memo_ = 0;
  std::unordered_map<std::string, std::uint32_t> keys_;
  std::vector<Open> open_;  // the dicts and lists begun and not yet ended, innermost last
};

}  // namespace fragsim

#include "traces/pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"

namespace fragsim {

const PyObj* PyObj::get(std::string_view key) const {
  if (kind != kDict) return nullptr;
  if (index) {
    auto it = index->find(key);
    return it == index->end() ? nullptr : kv[it->second].second;
  }
  for (const auto& [k, v] : kv)
    if (k->kind == kStr && k->s == key) return v;
  return nullptr;
}

namespace {

constexpr size_t kMaxStack = 1 << 20;

class Unpickler {
 public:
  Unpickler(ByteSource& src, const std::string& path, PickleDoc& doc, const ListStream* stream)
      : src_(src),
        path_(path),
        doc_(doc),
        stream_(stream),
        objects_(Limit::kObjects, "", input_bytes(path)),  // err() names the file and the offset
        strings_(Limit::kStrings, "", input_bytes(path)) {}

  PyRef run() {
    for (;;) {
      if (!fill(1)) err("truncated: no STOP opcode");
      op_at_ = base_ + pos_;
      unsigned char op = byte();
      switch (op) {
        case 0x80: {  // PROTO: Python writes 2 to 5; what this reads is their common subset
          const unsigned v = byte();
          if (v > 5) err(fmt::format("pickle protocol {} is newer than 5, the highest this reads", v));
          break;
        }
        case 0x95:
          take(8);
          break;   // FRAME
        case '.':  // STOP
          if (stack_.size() != 1 || !marks_.empty())
            err("malformed: STOP with a stack of " + std::to_string(stack_.size()));
          return stack_.back();
        case '}':
          push(make(PyObj::kDict));
          break;  // EMPTY_DICT
        case ']':
          push(make(PyObj::kList));
          break;  // EMPTY_LIST
        case ')':
          push(make(PyObj::kTuple));
          break;  // EMPTY_TUPLE
        case 'N':
          push(&doc_.none);
          break;  // NONE
        case 0x88:
          push(boolean(true));
          break;  // NEWTRUE
        case 0x89:
          push(boolean(false));
          break;  // NEWFALSE
        case 'J':
          push(integer(static_cast<std::int32_t>(le(4))));
          break;  // BININT
        case 'K':
          push(integer(byte()));
          break;  // BININT1
        case 'M':
          push(integer(static_cast<std::int64_t>(le(2))));
          break;  // BININT2
        case 0x8a:
          push(long_int(byte()));
          break;      // LONG1
        case 0x8b: {  // LONG4
          auto n = le(4);
          push(long_int(n));
          break;
        }
        case 'G': {  // BINFLOAT (big-endian double)
          const char* b = take(8);
          std::uint64_t v = 0;
          for (int k = 0; k < 8; ++k) v = (v << 8) | static_cast<unsigned char>(b[k]);
          double f;
          std::memcpy(&f, &v, 8);
          auto o = make(PyObj::kFloat);
          o->f = f;
          push(o);
          break;
        }
        case 0x8c:
          push(str(byte(), PyObj::kStr));
          break;  // SHORT_BINUNICODE
        case 'X':
          push(str(le(4), PyObj::kStr));
          break;  // BINUNICODE
        case 0x8d:
          push(str(le(8), PyObj::kStr));
          break;  // BINUNICODE8
        case 'C':
          push(str(byte(), PyObj::kBytes));
          break;  // SHORT_BINBYTES
        case 'B':
          push(str(le(4), PyObj::kBytes));
          break;  // BINBYTES
        case 0x8e:
          push(str(le(8), PyObj::kBytes));
          break;  // BINBYTES8
        case 0x96:
          push(str(le(8), PyObj::kBytes));
          break;    // BYTEARRAY8 (protocol 5)
        case 0x97:  // NEXT_BUFFER
        case 0x98:  // READONLY_BUFFER
          err("a protocol-5 out-of-band buffer: its bytes are not in the file (it was pickled with a "
              "buffer_callback); pickle the snapshot without one, e.g. pickle.dump(snapshot, f, protocol=5)");
        case 'U':
          push(str(byte(), PyObj::kStr));
          break;  // SHORT_BINSTRING
        case 'T':
          push(str(le(4), PyObj::kStr));
          break;  // BINSTRING
        case 0x94:
          memoise(memo_.size());
          break;  // MEMOIZE
        case 'q':
          put(byte());
          break;  // BINPUT
        case 'r':
          put(le(4));
          break;  // LONG_BINPUT
        case 'h':
          push(get(byte()));
          break;  // BINGET
        case 'j':
          push(get(le(4)));
          break;  // LONG_BINGET
        case '(':
          marks_.push_back(stack_.size());
          break;  // MARK
        case '0':
          pop();
          break;  // POP
        case '1':
          pop_mark();
          break;  // POP_MARK
        case '2':
          top()->shared = true;
          push(top());
          break;  // DUP
        case 0x85:
          tuple(1);
          break;  // TUPLE1
        case 0x86:
          tuple(2);
          break;  // TUPLE2
        case 0x87:
          tuple(3);
          break;     // TUPLE3
        case 't': {  // TUPLE
          auto items = pop_mark();
          auto o = make(PyObj::kTuple);
          for (auto& x : items) adopt(*o, x);
          o->items = std::move(items);
          push(o);
          break;
        }
        case 'l': {  // LIST
          auto items = pop_mark();
          auto o = make(PyObj::kList);
          for (auto& x : items) adopt(*o, x);
          o->items = std::move(items);
          push(o);
          break;
        }
        case 'd': {  // DICT
          auto items = pop_mark();
          auto o = make(PyObj::kDict);
          set_items(*o, items);
          push(o);
          break;
        }
        case 'a': {  // APPEND
          std::vector<PyRef> items{pop()};
          append(list_top(), items);
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_mark();
          append(list_top(), items);
          break;
        }
        case 's': {  // SETITEM
          auto v = pop();
          auto k = pop();
          std::vector<PyRef> kv{k, v};
          set_items(dict_top(), kv);
          break;
        }
        case 'u': {  // SETITEMS
          auto items = pop_mark();
          set_items(dict_top(), items);
          break;
        }
        case 'c':
        case 0x93:
        case 'R':
        case 'b':
        case 'i':
        case 'o':
        case 0x81:
        case 0x92:
        case 0x82:
        case 0x83:
        case 0x84:
        case 'P':
        case 'Q':
          err(
              fmt::format("refused opcode {:#04x}: global/class references and object construction are not allowed "
                          "in a memory snapshot",
                          op));
        default:
          err(fmt::format(
              "unsupported opcode {:#04x}{}", op,
              op_at_ == 0 ? " (not a pickle of protocol 2 to 5: a protocol 0 or 1 pickle, or not a pickle)" : ""));
      }
    }
  }

 private:
  [[noreturn]] void err(const std::string& what) const {
    throw InputError(fmt::format("{}: pickle: {} (offset {})", path_, what, op_at_));
  }
  // Makes at least n bytes (n ≤ the buffer) available from pos_; false at the end of the input.
  bool fill(size_t n) {
    if (end_ - pos_ >= n) return true;
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    base_ += pos_;
    end_ -= pos_;
    pos_ = 0;
    while (end_ < n) {
      const size_t got = src_.read(buf_.data() + end_, buf_.size() - end_);
      if (got == 0) return false;
      count(got);
      end_ += got;
    }
    return true;
  }
  void count(size_t got) {
    read_ += got;
    if (read_ > kMaxPickleBytes)
      throw InputError(fmt::format("{}: larger than the {} MiB this reader accepts", path_, kMaxPickleBytes >> 20));
  }
  unsigned char byte() {
    if (!fill(1)) err("truncated");
    return static_cast<unsigned char>(buf_[pos_++]);
  }
  // The next n bytes, valid until the next read. Longer than the buffer (a long string): gathered
  // into long_ as they arrive, so that a length the file does not hold costs only what it holds.
  const char* take(std::uint64_t n) {
    if (n <= buf_.size()) {
      if (!fill(static_cast<size_t>(n))) err(fmt::format("length {} runs past the end of the file", n));
      const char* r = buf_.data() + pos_;
      pos_ += n;
      return r;
    }
    if (n > kMaxPickleBytes) err(fmt::format("length {} runs past the end of the file", n));
    long_.assign(buf_.data() + pos_, end_ - pos_);
    base_ += end_;
    pos_ = end_ = 0;
    while (long_.size() < n) {
      const size_t want = std::min<std::uint64_t>(n - long_.size(), buf_.size());
      const size_t got = src_.read(buf_.data(), want);
      if (got == 0) err(fmt::format("length {} runs past the end of the file", n));
      count(got);
      long_.append(buf_.data(), got);
      base_ += got;
    }
    return long_.data();
  }
  std::uint64_t le(int n) {
    const char* b = take(n);
    std::uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(b[k]);
    return v;
  }
  // Every object and every string byte counts against its limit (sim/base/limits.h): a file that
  // expands into more than its size allows is refused, naming the limit.
  template <class F>
  void charge(F&& spend) {
    try {
      spend();
    } catch (const InputError& e) {
      err(e.what() + std::string(" (an expanding pickle?)"));
    }
  }
  // The `objects` limit counts the arena's slots: the most objects held at once.
  PyRef make(PyObj::Kind k) {
    PyRef o;
    if (free_.empty()) {
      charge([&] { objects_.spend(1); });
      o = &doc_.arena.emplace_back();
    } else {
      o = free_.back();
      free_.pop_back();
    }
    o->kind = k;
    return o;
  }
  // Returns o to the free list (the conditions: pickle.h), with the children only it holds.
  void recycle(PyRef o) {
    for (PyRef c : o->items)
      if (releasable_child(c)) recycle(c);
    for (auto& [k, v] : o->kv) {
      if (releasable_child(k)) recycle(k);
      if (releasable_child(v)) recycle(v);
    }
    if (o->memoised) memo_[o->memo] = &tombstone_;
    *o = PyObj();
    free_.push_back(o);
  }
  bool singleton(PyRef o) const { return o == &doc_.none || o == &doc_.yes || o == &doc_.no; }
  bool releasable_child(PyRef c) const { return !singleton(c) && !c->shared && !c->memoised; }
  void memoise(std::uint64_t idx) {
    PyRef o = top();
    if (o->memoised) o->shared = true;  // two slots: a tombstone in one would leave the other
    o->memoised = true;
    o->memo = idx;
    if (idx == memo_.size())
      memo_.push_back(o);
    else
      memo_[idx] = o;
  }
  PyRef boolean(bool v) { return v ? &doc_.yes : &doc_.no; }
  PyRef integer(std::int64_t v) {
    auto o = make(PyObj::kInt);
    o->i = v;
    o->u = static_cast<std::uint64_t>(v);
    return o;
  }
  // Little-endian two's complement of n bytes.
  PyRef long_int(std::uint64_t n) {
    const char* b = take(n);
    if (n == 0) return integer(0);
    bool neg = static_cast<unsigned char>(b[n - 1]) & 0x80;
    // Significant bytes: drop sign-extension bytes beyond 8.
    for (std::uint64_t k = 8; k < n; ++k)
      if (static_cast<unsigned char>(b[k]) != (neg ? 0xFF : 0x00)) err("integer does not fit in 64 bits");
    std::uint64_t v = 0;
    std::uint64_t m = n < 8 ? n : 8;
    for (std::uint64_t k = m; k-- > 0;) v = (v << 8) | static_cast<unsigned char>(b[k]);
    if (neg && m < 8) v |= ~0ULL << (8 * m);
    auto o = integer(static_cast<std::int64_t>(v));
    // A 9-byte positive value (e.g. a u64 address ≥ 2^63) keeps its full range in u.
    if (!neg && n > 8) o->big = true;
    if (!neg && n == 9 && (v >> 63)) o->big = true;
    return o;
  }
  PyRef str(std::uint64_t n, PyObj::Kind k) {
    const char* b = take(n);
    auto o = make(k);
    charge([&] { strings_.spend(n); });
    o->s.assign(b, n);
    return o;
  }
  // Python's pickler appends and sets items in batches of 1000, so a real pickle's stack stays
  // shallow; a million entries is a hostile file, refused before it costs memory.
  void push(PyRef o) {
    if (stack_.size() >= kMaxStack) err("more than a million objects on the stack (not a pickle Python writes)");
    stack_.push_back(o);
  }
  PyRef& top() {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) err("stack underflow");
    return stack_.back();
  }
  PyRef pop() {
    PyRef o = top();
    stack_.pop_back();
    return o;
  }
  std::vector<PyRef> pop_mark() {
    if (marks_.empty()) err("malformed: no MARK");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> v(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return v;
  }
  void tuple(int n) {
    if (stack_.size() < static_cast<size_t>(n) ||
        (!marks_.empty() && stack_.size() - marks_.back() < static_cast<size_t>(n)))
      err("stack underflow");
    auto o = make(PyObj::kTuple);
    for (int k = n; k > 0; --k) adopt(*o, stack_[stack_.size() - k]);
    o->items.assign(stack_.end() - n, stack_.end());
    stack_.resize(stack_.size() - n);
    push(o);
  }
  void put(std::uint64_t idx) {
    if (idx > memo_.size() + kMaxStack) err("memo index too large (Python numbers its memo densely)");
    if (memo_.size() <= idx) {
      charge([&] { objects_.spend((idx + 1 - memo_.size() + 15) / 16); });  // a slot is a pointer
      memo_.resize(idx + 1);
    }
    if (memo_[idx] && memo_[idx] != &tombstone_ && memo_[idx]->memo == idx)
      memo_[idx]->shared = true;  // overwritten: its slot no longer says where it is
    memoise(idx);
  }
  PyRef get(std::uint64_t idx) {
    if (idx >= memo_.size() || !memo_[idx]) err(fmt::format("memo index {} not defined", idx));
    if (memo_[idx] == &tombstone_)
      err(
          fmt::format("memo index {} refers to a {} item already read (each is its own object in a pickle Python "
                      "writes)",
                      idx, stream_->key));
    memo_[idx]->shared = true;
    return memo_[idx];
  }
  PyObj& list_top() {
    PyRef& t = top();
    if (t->kind != PyObj::kList) err("APPEND to a non-list");
    return *t;
  }
  PyObj& dict_top() {
    PyRef& t = top();
    if (t->kind != PyObj::kDict) err("SETITEM on a non-dict");
    return *t;
  }
  void adopt(PyObj& parent, const PyRef& child) {
    if (child == &parent) err("a container cannot contain itself");
    if (child->adopted) child->shared = true;
    child->adopted = true;
    if (++adopted_ % 16 == 0) charge([&] { objects_.spend(1); });  // a container's slot is a pointer
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxPickleDepth) err(fmt::format("nesting deeper than {}", kMaxPickleDepth));
  }
  // APPEND(S): into the list, or to the stream's sink when the list is an element of the streamed
  // key's value.
  void append(PyObj& l, std::vector<PyRef>& items) {
    const PyObj* outer = nullptr;
    std::uint64_t index = 0;
    if (!stream_ || !streamed_list(l, &outer, &index)) {
      for (auto& x : items) adopt(l, x);
      l.items.insert(l.items.end(), items.begin(), items.end());
      return;
    }
    for (auto& x : items)
      if (x->depth + 1 > kMaxPickleDepth) err(fmt::format("nesting deeper than {}", kMaxPickleDepth));
    if (!l.items.empty()) {  // held before the stream began (a LIST opcode): first, and kept
      l.streamed += l.items.size();
      for (PyRef x : l.items) x->shared = true;
      stream_->sink(l, *outer, index, l.items);
      l.items.clear();
    }
    l.streamed += items.size();
    stream_->sink(l, *outer, index, items);
    for (PyRef x : items)
      if (!singleton(x) && !x->shared && !x->adopted) recycle(x);
  }
  // The list at the top of the stack is element `index` of a list `outer` whose key is the stream's:
  // the stack holds ..., key, outer, [MARK, earlier elements of this batch,] list.
  bool streamed_list(const PyObj& l, const PyObj** outer, std::uint64_t* index) const {
    const size_t p = stack_.size() - 1;
    auto is_key = [&](size_t at) { return stack_[at]->kind == PyObj::kStr && stack_[at]->s == stream_->key; };
    auto mark = std::upper_bound(marks_.begin(), marks_.end(), p);
    if (mark != marks_.begin()) {
      const size_t m = *(mark - 1);
      if (m >= 2 && m <= p && stack_[m - 1]->kind == PyObj::kList && is_key(m - 2)) {
        *outer = stack_[m - 1];
        *index = stack_[m - 1]->items.size() + (p - m);
        return true;
      }
    }
    if (p >= 2 && stack_[p - 1]->kind == PyObj::kList && is_key(p - 2)) {
      *outer = stack_[p - 1];
      *index = stack_[p - 1]->items.size();
      return true;
    }
    (void)l;
    return false;
  }
  void set_items(PyObj& d, std::vector<PyRef>& items) {
    if (items.size() % 2) err("SETITEMS with an odd number of items");
    for (size_t k = 0; k < items.size(); k += 2) {
      adopt(d, items[k]);
      adopt(d, items[k + 1]);
      if (items[k]->kind != PyObj::kStr) {
        d.kv.emplace_back(items[k], items[k + 1]);
        continue;
      }
      // A repeated string key replaces the value, as Python's dict does.
      if (d.kv.size() < 16) {
        bool replaced = false;
        for (auto& [key, v] : d.kv)
          if (key->kind == PyObj::kStr && key->s == items[k]->s) v = items[k + 1], replaced = true;
        if (!replaced) d.kv.emplace_back(items[k], items[k + 1]);
        continue;
      }
      if (!d.index) {
        d.index = std::make_unique<std::unordered_map<std::string_view, size_t>>();
        for (size_t i = 0; i < d.kv.size(); ++i)
          if (d.kv[i].first->kind == PyObj::kStr) d.index->emplace(d.kv[i].first->s, i);
      }
      if (d.index->size() % 2 == 0) charge([&] { objects_.spend(1); });  // an index entry: a node
      auto [it, fresh] = d.index->emplace(items[k]->s, d.kv.size());
      if (fresh)
        d.kv.emplace_back(items[k], items[k + 1]);
      else
        d.kv[it->second].second = items[k + 1];
    }
  }

  ByteSource& src_;
  const std::string& path_;
  PickleDoc& doc_;
  const ListStream* stream_;
  std::vector<char> buf_ = std::vector<char>(1 << 20);  // buf_[pos_, end_): read, not yet taken
  size_t pos_ = 0, end_ = 0;
  std::uint64_t base_ = 0;  // offset of buf_[0] in the pickle
  std::uint64_t read_ = 0;  // bytes read from the source
  std::uint64_t op_at_ = 0;
  std::string long_;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::vector<PyRef> memo_;
  std::vector<PyRef> free_;  // recycled objects
  PyObj tombstone_;          // the memo slot of an item handed to the stream and recycled
  LimitCounter objects_, strings_;
  std::uint64_t adopted_ = 0;  // children added to containers
};

}  // namespace

namespace {
class StringSource : public ByteSource {
 public:
  explicit StringSource(const std::string& s) : s_(s) {}
  size_t read(char* dst, size_t n) override {
    n = std::min(n, s_.size() - at_);
    std::memcpy(dst, s_.data() + at_, n);
    at_ += n;
    return n;
  }

 private:
  const std::string& s_;
  size_t at_ = 0;
};
}  // namespace

std::unique_ptr<PickleDoc> parse_pickle(const std::string& data, const std::string& path, const ListStream* stream) {
  auto doc = std::make_unique<PickleDoc>();
  StringSource src(data);
  doc->root = Unpickler(src, path, *doc, stream).run();
  return doc;
}

std::unique_ptr<PickleDoc> load_pickle(const std::string& path, const ListStream* stream) {
  auto doc = std::make_unique<PickleDoc>();
  auto src = open_source(path);
  doc->root = Unpickler(*src, path, *doc, stream).run();
  return doc;
}

}  // namespace fragsim

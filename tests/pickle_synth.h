// A minimal pickle writer (protocol 4 opcodes) for PyTorch-snapshot-shaped test inputs, with the
// memo, so that tests can share one object from many places as a hostile file would (tests only).
#pragma once
#include <cstdint>
#include <string>

namespace fragsim::test {

struct PickleWriter {
  std::string out = std::string("\x80\x04", 2);  // PROTO 4
  PickleWriter& raw(const std::string& s) {
    out += s;
    return *this;
  }
  PickleWriter& le(std::uint64_t v, int bytes) {
    for (int b = 0; b < bytes; ++b) out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
    return *this;
  }
  PickleWriter& str(const std::string& v) { return raw("X").le(v.size(), 4).raw(v); }  // BINUNICODE
  PickleWriter& integer(std::uint64_t v) {
    if (v < 0x80000000ULL) return raw("J").le(v, 4);  // BININT
    return raw("\x8a").le(9, 1).le(v, 8).le(0, 1);    // LONG1, 9 bytes (positive)
  }
  PickleWriter& mark() { return raw("("); }
  PickleWriter& dict() { return raw("}"); }
  PickleWriter& list() { return raw("]"); }
  PickleWriter& setitems() { return raw("u"); }
  PickleWriter& appends() { return raw("e"); }
  PickleWriter& append() { return raw("a"); }
  PickleWriter& put(std::uint32_t i) { return raw("r").le(i, 4); }  // LONG_BINPUT
  PickleWriter& get(std::uint32_t i) { return raw("j").le(i, 4); }  // LONG_BINGET
  PickleWriter& pop() { return raw("0"); }
  PickleWriter& stop() { return raw("."); }
  // A trace entry dict {"action": a, "addr": .., "size": .., "stream": 0} left open for more items
  // (the caller adds "frames" and closes it with setitems()).
  PickleWriter& entry_open(const std::string& action, std::uint64_t addr, std::uint64_t size) {
    dict().mark().str("action").str(action).str("addr").integer(addr).str("size").integer(size);
    return str("stream").integer(0);
  }
};

}  // namespace fragsim::test

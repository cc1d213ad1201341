#include "sim/base/array_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "sim/base/checked.h"
#include "sim/base/error.h"

namespace fragsim {

namespace {

// A cursor over the text for error messages with a position.
struct Cursor {
  std::string_view text, what;
  size_t pos = 0;
  [[noreturn]] void fail(const std::string& m) const {
    throw InputError(fmt::format(
        "{}: '{}': {} at column {} (expected e.g. bf16[1000,129] or f32[8,128]{{1,0:T(8,128)}}, tpu_layout.h "
        "lists the layout annotations)",
        what, text, m, pos + 1));
  }
  bool done() const { return pos >= text.size(); }
  char peek() const { return done() ? '\0' : text[pos]; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos;
    return true;
  }
  void expect(char c) {
    if (!eat(c)) fail(fmt::format("expected '{}'", c));
  }
  void spaces() {
    while (peek() == ' ') ++pos;
  }
  std::uint64_t number() {
    spaces();
    size_t start = pos;
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos;
    if (pos == start) fail("expected a number");
    std::uint64_t v = parse_u64(text.substr(start, pos - start), fmt::format("{}: '{}'", what, text));
    spaces();
    return v;
  }
  // "(n)" with n in [lo, hi].
  std::uint64_t paren_number(std::uint64_t lo, std::uint64_t hi, const char* name) {
    expect('(');
    std::uint64_t v = number();
    if (v < lo || v > hi) fail(fmt::format("{} must be in {}..{}", name, lo, hi));
    expect(')');
    return v;
  }
  // Skips a balanced "( ... )".
  void skip_parens() {
    expect('(');
    int depth = 1;
    while (depth > 0) {
      if (done()) fail("unclosed '('");
      char c = text[pos++];
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    }
  }
};

}  // namespace

ArraySpec parse_array_spec(std::string_view text, std::string_view what) {
  Cursor c{text, what};
  ArraySpec a;
  size_t lb = text.find('[');
  if (lb == std::string_view::npos) c.fail("no [dims]");
  std::string_view dt = text.substr(0, lb);
  while (!dt.empty() && dt.back() == ' ') dt.remove_suffix(1);
  if (!parse_dtype(dt, &a.dtype)) c.fail(fmt::format("unknown dtype '{}'", dt));
  c.pos = lb + 1;
  c.spaces();
  while (!c.eat(']')) {
    a.dims.push_back(c.number());
    if (c.peek() != ']') c.expect(',');
  }
  if (c.done()) return a;
  c.expect('{');
  c.spaces();
  while (c.peek() != ':' && c.peek() != '}') {
    a.minor_to_major.push_back(static_cast<int>(std::min<std::uint64_t>(c.number(), 1 << 20)));
    if (c.peek() != ':' && c.peek() != '}') c.expect(',');
  }
  if (!a.minor_to_major.empty() || !a.dims.empty()) {
    std::vector<int> sorted = a.minor_to_major;
    std::sort(sorted.begin(), sorted.end());
    bool perm = sorted.size() == a.dims.size();
    for (size_t i = 0; perm && i < sorted.size(); ++i) perm = sorted[i] == static_cast<int>(i);
    if (!perm) c.fail("minor_to_major must be a permutation of the dims");
  }
  if (c.eat(':')) {
    while (c.peek() != '}') {
      if (c.done()) c.fail("unclosed '{'");
      size_t at = c.pos;
      char k = c.text[c.pos++];
      if (k == 'T') {  // one or more tiles
        if (c.peek() != '(') c.fail("expected '(' after T");
        while (c.eat('(')) {
          std::vector<std::uint64_t> tile;
          while (!c.eat(')')) {
            c.spaces();
            if (c.eat('*'))
              tile.push_back(kCombineTileDim);
            else if (std::uint64_t v = c.number(); v == 0)
              c.fail("tile dims must be > 0");
            else
              tile.push_back(v);
            c.spaces();
            if (c.peek() != ')') c.expect(',');
          }
          if (tile.empty()) c.fail("empty tile");
          a.tiles.push_back(std::move(tile));
        }
      } else if (k == 'L') {
        a.tail_alignment = c.paren_number(1, 1ULL << 40, "L(n)");
      } else if (k == 'E') {
        a.element_bits = static_cast<int>(c.paren_number(1, 1024, "E(n)"));
      } else if (k == 'S' && c.peek() == 'C') {  // split configs
        ++c.pos;
        if (c.peek() != '(') c.fail("expected '(' after SC");
        while (c.eat('(')) {
          std::pair<int, std::vector<std::uint64_t>> sc;
          sc.first = static_cast<int>(std::min<std::uint64_t>(c.number(), 1 << 20));
          if (static_cast<size_t>(sc.first) >= a.dims.size()) c.fail("split config names a dim the shape lacks");
          c.expect(':');
          while (!c.eat(')')) {
            sc.second.push_back(c.number());
            if (c.peek() != ')') c.expect(',');
          }
          a.splits.push_back(std::move(sc));
        }
      } else if (k == 'S') {
        a.memory_space = static_cast<int>(c.paren_number(0, 1 << 20, "S(n)"));
      } else if (k == 'M') {
        (void)c.paren_number(0, UINT64_MAX, "M(n)");
      } else if (k == 'D' || k == '#' || k == '*' || k == 'P') {
        c.skip_parens();
      } else {
        c.pos = at;
        c.fail(fmt::format("unknown layout annotation '{}' (XLA prints D, T, L, #, *, E, S, SC, P, M)", k));
      }
    }
  }
  c.expect('}');
  if (!c.done()) c.fail("text after the layout");
  return a;
}

}  // namespace fragsim

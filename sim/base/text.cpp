#include "sim/base/text.h"

#include <cstdint>
#include <cstring>

namespace fragsim {

bool valid_utf8(std::string_view s) {
  auto p = reinterpret_cast<const unsigned char*>(s.data());
  auto end = p + s.size();
  while (p < end) {
    // Fast path: 8 ASCII bytes at a time.
    if (end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        p += 8;
        continue;
      }
    }
    unsigned c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    unsigned cp;
    if ((c & 0xE0) == 0xC0)
      n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
      n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
      n = 3, cp = c & 0x07;
    else
      return false;
    if (end - p <= n) return false;
    for (int k = 1; k <= n; ++k) {
      if ((p[k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[k] & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    p += n + 1;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  if (valid_utf8(s)) return std::string(s);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    // The longest valid prefix of what is left, one code point at a time.
    size_t n = 1;
    while (n <= 4 && i + n <= s.size() && !valid_utf8(s.substr(i, n))) ++n;
    if (n <= 4 && i + n <= s.size()) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++i;
    }
  }
  return out;
}

}  // namespace fragsim

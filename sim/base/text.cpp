#include "sim/base/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace fragsim {

size_t utf8_error_offset(std::string_view s) {
  auto begin = reinterpret_cast<const unsigned char*>(s.data());
  auto p = begin;
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
      return p - begin;
    if (end - p <= n) return p - begin;
    for (int k = 1; k <= n; ++k) {
      if ((p[k] & 0xC0) != 0x80) return p - begin;
      cp = (cp << 6) | (p[k] & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return p - begin;
    p += n + 1;
  }
  return std::string_view::npos;
}

bool valid_utf8(std::string_view s) { return utf8_error_offset(s) == std::string_view::npos; }

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

namespace {

// Optimal string alignment distance (Damerau–Levenshtein without repeated edits of a substring).
size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string_view>& candidates) {
  if (name.empty() || name.size() > 256) return {};
  const size_t limit = name.size() <= 4 ? 1 : name.size() / 3;
  std::string best;
  size_t best_d = limit + 1;
  for (auto c : candidates) {
    size_t dist = edit_distance(name, c);
    if (dist < best_d) best_d = dist, best = std::string(c);
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string_view>& candidates) {
  std::string c = closest_name(name, candidates);
  return c.empty() ? std::string() : " — did you mean '" + c + "'?";
}

std::string fraction_text(double f) {
  std::string s = fmt::format("{:.2f}", f);
  if (s.rfind("0.", 0) == 0) s = s.substr(1);
  while (s.size() > 2 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

}  // namespace fragsim

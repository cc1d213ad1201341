#include "sim/base/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace fragsim {

namespace {

// The UTF-8 sequence that starts at s[i]: its length (1 for ASCII) and code point, or 0 when
// s[i] does not start a valid one (overlong forms, surrogates and code points beyond U+10FFFF
// are not).
size_t utf8_at(std::string_view s, size_t i, std::uint32_t* cp) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n;
  std::uint32_t v;
  if ((c & 0xE0) == 0xC0)
    n = 1, v = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 2, v = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 3, v = c & 0x07;
  else
    return 0;
  if (s.size() - i <= n) return 0;
  for (size_t k = 1; k <= n; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b & 0x3F);
  }
  if ((n == 1 && v < 0x80) || (n == 2 && v < 0x800) || (n == 3 && v < 0x10000) || v > 0x10FFFF ||
      (v >= 0xD800 && v <= 0xDFFF))
    return 0;
  *cp = v;
  return n + 1;
}

}  // namespace

size_t utf8_error_offset(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // Fast path: 8 ASCII bytes at a time.
    if (s.size() - i >= 8) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    std::uint32_t cp;
    size_t n = utf8_at(s, i, &cp);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

bool valid_utf8(std::string_view s) { return utf8_error_offset(s) == std::string_view::npos; }

std::string sanitize_utf8(std::string_view s) {
  if (valid_utf8(s)) return std::string(s);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    std::uint32_t cp;
    size_t n = utf8_at(s, i, &cp);
    if (n) {
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

// Code points a terminal or a log viewer acts on instead of showing: C0 and C1 controls, DEL,
// line and paragraph separators, and the bidirectional marks, embeddings, overrides and isolates
// (which reorder what follows them on screen).
bool acts_on_display(std::uint32_t cp) {
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0x061C ||
         cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

void append_escape(std::string& out, std::uint32_t cp) {
  switch (cp) {
    case '\n':
      out += "\\n";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\r':
      out += "\\r";
      return;
    case 0x1B:
      out += "\\e";
      return;
    default:
      out += cp < 0x80 ? fmt::format("\\x{:02x}", cp) : fmt::format("\\u{{{:04x}}}", cp);
  }
}

// s with every character that acts on a display escaped (bytes that are not UTF-8 as \xNN);
// special(c, out) writes an ASCII character its own way first when it returns true.
template <class Special>
std::string escape_with(std::string_view s, Special special) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    std::uint32_t cp = 0;
    size_t n = utf8_at(s, i, &cp);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (n == 1 && special(s[i], out)) {
      ++i;
      continue;
    }
    if (acts_on_display(cp))
      append_escape(out, cp);
    else
      out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

std::string escape_terminal(std::string_view s) {
  return escape_with(s, [](char, std::string&) { return false; });
}

namespace {
// <, >, & as entities (Markdown and XML alike); `quotes` adds " and ' (XML attributes).
bool markup_entity(char c, std::string& out, bool quotes) {
  const char* e = c == '<'              ? "&lt;"
                  : c == '>'            ? "&gt;"
                  : c == '&'            ? "&amp;"
                  : quotes && c == '"'  ? "&quot;"
                  : quotes && c == '\'' ? "&apos;"
                                        : nullptr;
  if (e) out += e;
  return e != nullptr;
}
}  // namespace

std::string escape_markdown(std::string_view s) {
  return escape_with(s, [](char c, std::string& out) {
    if (markup_entity(c, out, false)) return true;
    if (c == 0 || std::strchr("\\`*_{}[]()#+!|~", c) == nullptr) return false;
    out += '\\';
    out += c;
    return true;
  });
}

std::string escape_xml(std::string_view s) {
  return escape_with(s, [](char c, std::string& out) { return markup_entity(c, out, true); });
}

namespace {
// GitHub's workflow-command escaping (actions/toolkit, command.ts: escapeData, escapeProperty).
bool github_escape(char c, std::string& out, bool property) {
  const char* e = c == '%'               ? "%25"
                  : c == '\r'            ? "%0D"
                  : c == '\n'            ? "%0A"
                  : property && c == ':' ? "%3A"
                  : property && c == ',' ? "%2C"
                                         : nullptr;
  if (e) out += e;
  return e != nullptr;
}
}  // namespace

std::string escape_github_data(std::string_view s) {
  return escape_with(s, [](char c, std::string& out) { return github_escape(c, out, false); });
}

std::string escape_github_property(std::string_view s) {
  return escape_with(s, [](char c, std::string& out) { return github_escape(c, out, true); });
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

std::string fraction_number(double f) {
  std::string s;
  for (int digits = 2; digits <= 12; ++digits) {
    s = fmt::format("{:.{}f}", f, digits);
    if (std::strtod(s.c_str(), nullptr) == f) break;
  }
  return s;
}

std::string fraction_text(double f) {
  std::string s = fraction_number(f);
  if (s.rfind("0.", 0) == 0) s = s.substr(1);
  while (s.size() > 2 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

}  // namespace fragsim

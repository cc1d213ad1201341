// Text that crosses formats: every name a reader accepts is valid UTF-8 (JSON requires it), so
// importers replace what is not; and every name, label or path that lands in an output is
// escaped for that output's format here, in one place (a trace's names are the input's, and an
// input may be hostile):
//   terminal / text   control characters (C0 with newline and tab, DEL, C1), line and paragraph
//                     separators and bidirectional overrides shown as escapes: \n, \t, \r, \e,
//                     \xNN (also for bytes that are not UTF-8), \u{NNNN};
//   Markdown          the terminal form with Markdown's punctuation backslash-escaped and <, >, &
//                     as entities, so a name stays inside its table cell and renders as text;
//   XML               the terminal form with &, <, >, ", ' as entities (what XML 1.0 cannot hold
//                     at all — most control characters — never reaches it);
//   GitHub workflow   data: %, CR, LF as %25, %0D, %0A (GitHub's own escaping), the other
//   commands          control characters as in the terminal form; properties also : and , as
//                     %3A, %2C. No name can start a line, so none can issue a command.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace fragsim {

// True when s is valid UTF-8 (no overlongs, no surrogates, ≤ U+10FFFF).
[[nodiscard]] bool valid_utf8(std::string_view s);
// The offset of the first byte of s that does not start a valid UTF-8 sequence; npos when valid.
[[nodiscard]] size_t utf8_error_offset(std::string_view s);
// s with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD.
[[nodiscard]] std::string sanitize_utf8(std::string_view s);

// The escapes above (each returns s unchanged when nothing needs escaping).
[[nodiscard]] std::string escape_terminal(std::string_view s);
[[nodiscard]] std::string escape_markdown(std::string_view s);
[[nodiscard]] std::string escape_xml(std::string_view s);
[[nodiscard]] std::string escape_github_data(std::string_view s);
[[nodiscard]] std::string escape_github_property(std::string_view s);

// The candidate closest to `name` by edit distance (insertions, deletions, substitutions and
// swaps of neighbours, case-insensitive), when close enough to be a typo: at most 1 edit for
// names up to 4 characters, else at most a third of the name's length. "" otherwise.
[[nodiscard]] std::string closest_name(std::string_view name, const std::vector<std::string_view>& candidates);
// A fraction as a number: two decimals, or as many more as it needs to read back as the same
// double ("0.83", "1.00", "0.0035"; at most 12). What --set and PyTorch's call take.
[[nodiscard]] std::string fraction_number(double f);
// The same as JAX users write it: ".83" for 0.83, "1.0" for 1.00, ".0035".
[[nodiscard]] std::string fraction_text(double f);

// " — did you mean 'x'?" for closest_name's answer, "" when there is none.
[[nodiscard]] std::string did_you_mean(std::string_view name, const std::vector<std::string_view>& candidates);

}  // namespace fragsim

// Text that crosses formats: every name a reader accepts is valid UTF-8 (JSON requires it), so
// importers replace what is not.
#pragma once
#include <string>
#include <string_view>

namespace fragsim {

// True when s is valid UTF-8 (no overlongs, no surrogates, ≤ U+10FFFF).
[[nodiscard]] bool valid_utf8(std::string_view s);
// s with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD.
[[nodiscard]] std::string sanitize_utf8(std::string_view s);

}  // namespace fragsim

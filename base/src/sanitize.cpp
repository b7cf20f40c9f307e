#include "tec/base/sanitize.hpp"

#include <algorithm>

namespace tec::base {
namespace {

/// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, surrogates or
/// code points past U+10FFFF) starting `s` (whose first byte is >= 0x80), or 0. Hand-written:
/// sanitize_message() must also clip and replace control characters in the same pass, which
/// no library at hand does.
std::size_t utf8_sequence_length(std::string_view s) {
  const auto byte = [&s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  std::size_t n = 0;
  unsigned char low = 0x80;  // The range of the second byte.
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    low = lead == 0xE0 ? 0xA0 : low;    // overlong
    high = lead == 0xED ? 0x9F : high;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    low = lead == 0xF0 ? 0x90 : low;    // overlong
    high = lead == 0xF4 ? 0x8F : high;  // past U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < n; ++i) {
    if ((byte(i) & 0xC0U) != 0x80U) {
      return 0;
    }
  }
  return n;
}

}  // namespace

std::string sanitize_message(std::string_view text, std::size_t max_bytes) {
  static constexpr std::string_view ellipsis = "...";
  static constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 4);
  // Stop one character past the limit: enough to know the text is clipped.
  for (std::size_t i = 0; i < text.size() && out.size() <= max_bytes;) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      out.push_back(lead < 0x20 || lead == 0x7f ? ' ' : text[i]);
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(text.substr(i));
    if (n == 0) {
      out.append(replacement);
      ++i;
    } else if (lead == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      out.push_back(' ');  // A C1 control character (U+0080..U+009F).
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  if (out.size() <= max_bytes) {
    return out;
  }
  const bool room = max_bytes > ellipsis.size();
  std::size_t cut = room ? max_bytes - ellipsis.size() : max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0U) == 0x80U) {
    --cut;  // Back to the first byte of the character that does not fit.
  }
  out.resize(cut);
  if (room) {
    out.append(ellipsis);
  }
  return out;
}

}  // namespace tec::base

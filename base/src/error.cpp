#include "tec/base/error.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace tec::base {
namespace {

class k8s_category final : public std::error_category {
public:
  [[nodiscard]] const char* name() const noexcept override { return "tec.k8s"; }

  [[nodiscard]] std::string message(int value) const override {
    // By errc value (the enum's order).
    static constexpr std::array<const char*, 18> messages{
        "success",
        "invalid client configuration",
        "malformed JSON",
        "JSON of an unexpected shape",
        "watch event line too long",
        "unexpected HTTP status",
        "resource version too old (410 Gone)",
        "unauthorized (401)",
        "forbidden (403)",
        "not found (404)",
        "conflict (409)",
        "too many requests (429)",
        "server error (5xx)",
        "timed out",
        "connection failed",
        "client shutting down",
        "the request was cancelled before it was sent",
        "response too large"};
    static_assert(messages.size() == static_cast<std::size_t>(errc::response_too_large) + 1);
    if (value >= 0 && static_cast<std::size_t>(value) < messages.size()) {
      return messages[static_cast<std::size_t>(value)];
    }
    return "unknown tec.k8s error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const k8s_category category;
  return category;
}

std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

std::string printable(std::string_view text, std::size_t max) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(text.size(), max) + 16);
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    // The length of a valid UTF-8 sequence at i (0 = invalid) and its code point.
    std::size_t len = 0;
    std::uint32_t cp = b0;
    if (b0 < 0x80) {
      len = 1;
    } else {
      std::size_t need = 0;
      unsigned char lo = 0x80;
      unsigned char hi = 0xBF;
      if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
        cp = b0 & 0x1FU;
      } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        cp = b0 & 0x0FU;
        lo = b0 == 0xE0 ? 0xA0 : 0x80;
        hi = b0 == 0xED ? 0x9F : 0xBF;
      } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        cp = b0 & 0x07U;
        lo = b0 == 0xF0 ? 0x90 : 0x80;
        hi = b0 == 0xF4 ? 0x8F : 0xBF;
      }
      if (need != 0 && i + need <= text.size()) {
        len = need;
        for (std::size_t k = 1; k < need; ++k) {
          const auto b = static_cast<unsigned char>(text[i + k]);
          if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
            len = 0;
            break;
          }
          cp = (cp << 6U) | (b & 0x3FU);
        }
      }
    }
    char escaped[8] = {};
    std::string_view piece;
    const auto hex_escape = [&](unsigned char byte) {
      escaped[0] = '\\';
      escaped[1] = 'x';
      escaped[2] = hex[byte >> 4U];
      escaped[3] = hex[byte & 0x0FU];
      return std::string_view(escaped, 4);
    };
    if (len == 0) {
      len = 1;
      piece = hex_escape(b0);
    } else if (cp < 0x20 || cp == 0x7F) {
      piece = cp == '\n'   ? std::string_view("\\n")
              : cp == '\r' ? std::string_view("\\r")
              : cp == '\t' ? std::string_view("\\t")
                           : hex_escape(b0);
    } else if ((cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029) {
      // C1 controls (U+0085 is a line break to some readers) and the Unicode line separators.
      escaped[0] = '\\';
      escaped[1] = 'u';
      escaped[2] = hex[(cp >> 12U) & 0x0FU];
      escaped[3] = hex[(cp >> 8U) & 0x0FU];
      escaped[4] = hex[(cp >> 4U) & 0x0FU];
      escaped[5] = hex[cp & 0x0FU];
      piece = std::string_view(escaped, 6);
    } else {
      piece = text.substr(i, len);
    }
    if (out.size() + piece.size() > max) {
      out += "... [clipped: " + std::to_string(text.size()) + " bytes]";
      return out;
    }
    out += piece;
    i += len;
  }
  return out;
}

}  // namespace tec::base

#pragma once

// A strict, validating, allocation-light JSON reader that drives a SAX handler. Private to
// k8sclient's decoder.
//
// Why not only nlohmann::json::sax_parse: its lexer materialises every string and key of the
// document (managedFields, container specs, status ...) into a std::string before the handler
// can ignore it; for a single watch event that is most of the cost, and the SAX parse was
// measured at only ~1.6x the speed of building a DOM. Here the handler is asked, before each
// value, whether it wants it; unwanted values are validated with a table-driven scan and
// never copied. The grammar accepted is the same as nlohmann's strict mode (RFC 8259, UTF-8
// validated, a leading BOM skipped), which the tests check differentially.
//
// Handler interface (besides nlohmann's): value_wanted(char first), key_name(string_view),
// string_value(string_view), syntax_error(position, what), and null/boolean/number_integer/
// number_unsigned/number_float(double, const std::string&)/start_object/end_object/
// start_array/end_array. Any callback returning false stops the read.

#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace tec::adapters::detail {

template <class Handler>
class json_reader {
public:
  json_reader(std::string_view text, Handler& handler) noexcept
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), h_(handler) {}

  /// Reads the whole text; false on a syntax error (reported through syntax_error) or when
  /// the handler stopped the read.
  bool run() {
    if (end_ - p_ >= 3 && static_cast<unsigned char>(p_[0]) == 0xEF &&
        static_cast<unsigned char>(p_[1]) == 0xBB && static_cast<unsigned char>(p_[2]) == 0xBF) {
      p_ += 3;
    }
    // The container stack: 'o' object, 'a' array. `muted_` > 0: inside a value the handler
    // did not want; everything up to stack depth muted_-1 is validated only.
    std::string stack;
    std::size_t muted = 0;
    const auto quiet = [&] { return muted != 0; };

  value:
    skip_ws();
    if (p_ == end_) {
      return error("unexpected end of input; expected a value");
    }
    if (!quiet() && !h_.value_wanted(*p_)) {
      muted = stack.size() + 1;
    }
    switch (*p_) {
      case '{':
        ++p_;
        if (!quiet() && !h_.start_object(static_cast<std::size_t>(-1))) {
          return false;
        }
        skip_ws();
        if (p_ != end_ && *p_ == '}') {
          ++p_;
          if (!quiet() && !h_.end_object()) {
            return false;
          }
          goto after_value;
        }
        stack.push_back('o');
        goto key;
      case '[':
        ++p_;
        if (!quiet() && !h_.start_array(static_cast<std::size_t>(-1))) {
          return false;
        }
        skip_ws();
        if (p_ != end_ && *p_ == ']') {
          ++p_;
          if (!quiet() && !h_.end_array()) {
            return false;
          }
          goto after_value;
        }
        stack.push_back('a');
        goto value;
      case '"': {
        std::string_view s;
        if (!read_string(s, !quiet())) {
          return false;
        }
        if (!quiet() && !h_.string_value(s)) {
          return false;
        }
        goto after_value;
      }
      case 't':
        if (!literal("true")) {
          return false;
        }
        if (!quiet() && !h_.boolean(true)) {
          return false;
        }
        goto after_value;
      case 'f':
        if (!literal("false")) {
          return false;
        }
        if (!quiet() && !h_.boolean(false)) {
          return false;
        }
        goto after_value;
      case 'n':
        if (!literal("null")) {
          return false;
        }
        if (!quiet() && !h_.null()) {
          return false;
        }
        goto after_value;
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) {
          if (!read_number(!quiet())) {
            return false;
          }
          goto after_value;
        }
        return error("invalid literal");
    }

  key:
    skip_ws();
    if (p_ == end_ || *p_ != '"') {
      return error(p_ == end_ ? "unexpected end of input; expected a key"
                              : "expected a string key");
    }
    {
      std::string_view k;
      if (!read_string(k, !quiet())) {
        return false;
      }
      if (!quiet() && !h_.key_name(k)) {
        return false;
      }
    }
    skip_ws();
    if (p_ == end_ || *p_ != ':') {
      return error("expected ':' after a key");
    }
    ++p_;
    goto value;

  after_value:
    if (muted == stack.size() + 1) {
      muted = 0;  // the unwanted value is complete
    }
    skip_ws();
    if (stack.empty()) {
      if (p_ != end_) {
        return error("unexpected characters after the JSON value");
      }
      return true;
    }
    if (p_ == end_) {
      return error("unexpected end of input");
    }
    if (stack.back() == 'o') {
      if (*p_ == ',') {
        ++p_;
        goto key;
      }
      if (*p_ == '}') {
        ++p_;
        stack.pop_back();
        if (!quiet() && !h_.end_object()) {
          return false;
        }
        goto after_value;
      }
      return error("expected ',' or '}'");
    }
    if (*p_ == ',') {
      ++p_;
      goto value;
    }
    if (*p_ == ']') {
      ++p_;
      stack.pop_back();
      if (!quiet() && !h_.end_array()) {
        return false;
      }
      goto after_value;
    }
    return error("expected ',' or ']'");
  }

private:
  /// Character classes inside strings: 0 plain, 1 quote, 2 backslash, 3 control, 4 non-ASCII.
  static constexpr std::array<std::uint8_t, 256> string_classes = [] {
    std::array<std::uint8_t, 256> t{};
    for (std::size_t c = 0; c < 0x20; ++c) {
      t[c] = 3;
    }
    for (std::size_t c = 0x80; c < 0x100; ++c) {
      t[c] = 4;
    }
    t['"'] = 1;
    t['\\'] = 2;
    return t;
  }();

  bool error(std::string_view what) {
    h_.syntax_error(static_cast<std::size_t>(p_ - begin_), what);
    return false;
  }

  void skip_ws() noexcept {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }

  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::string_view(p_, word.size()) != word) {
      return error("invalid literal");
    }
    p_ += word.size();
    return true;
  }

  static int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    return -1;
  }

  /// Reads \uXXXX's four hex digits at p_ (after "\u").
  bool read_hex4(std::uint32_t& out) {
    if (end_ - p_ < 4) {
      return error("unexpected end of input in a \\u escape");
    }
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = hex_value(p_[i]);
      if (d < 0) {
        return error("invalid \\u escape");
      }
      v = (v << 4U) | static_cast<std::uint32_t>(d);
    }
    p_ += 4;
    out = v;
    return true;
  }

  /// Validates one UTF-8 sequence starting at p_ (a byte >= 0x80) and advances past it.
  bool skip_utf8() {
    const auto b0 = static_cast<unsigned char>(*p_);
    std::size_t len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      lo = b0 == 0xE0 ? 0xA0 : 0x80;
      hi = b0 == 0xED ? 0x9F : 0xBF;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      lo = b0 == 0xF0 ? 0x90 : 0x80;
      hi = b0 == 0xF4 ? 0x8F : 0xBF;
    } else {
      return error("invalid UTF-8 byte in a string");
    }
    if (static_cast<std::size_t>(end_ - p_) < len) {
      return error("truncated UTF-8 sequence in a string");
    }
    for (std::size_t i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(p_[i]);
      if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) {
        return error("invalid UTF-8 sequence in a string");
      }
    }
    p_ += len;
    return true;
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6U));
      out += static_cast<char>(0x80 | (cp & 0x3FU));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12U));
      out += static_cast<char>(0x80 | ((cp >> 6U) & 0x3FU));
      out += static_cast<char>(0x80 | (cp & 0x3FU));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18U));
      out += static_cast<char>(0x80 | ((cp >> 12U) & 0x3FU));
      out += static_cast<char>(0x80 | ((cp >> 6U) & 0x3FU));
      out += static_cast<char>(0x80 | (cp & 0x3FU));
    }
  }

  /// Reads a string at p_ (on the opening quote). With `produce`, `out` views the decoded
  /// text (the input itself when there are no escapes, else scratch_); otherwise the string
  /// is only validated.
  bool read_string(std::string_view& out, bool produce) {
    ++p_;
    const char* start = p_;
    bool escaped = false;
    for (;;) {
      while (p_ != end_ && string_classes[static_cast<unsigned char>(*p_)] == 0) {
        ++p_;
      }
      if (p_ == end_) {
        return error("unterminated string");
      }
      switch (string_classes[static_cast<unsigned char>(*p_)]) {
        case 1:
          if (produce) {
            if (escaped) {
              scratch_.append(start, p_);
              out = scratch_;
            } else {
              out = std::string_view(start, static_cast<std::size_t>(p_ - start));
            }
          }
          ++p_;
          return true;
        case 2:
          if (!escaped) {
            escaped = true;
            scratch_.clear();
          }
          if (produce) {
            scratch_.append(start, p_);
          }
          if (!read_escape(produce)) {
            return false;
          }
          start = p_;
          break;
        case 3:
          return error("control character in a string (must be escaped)");
        default:
          if (!skip_utf8()) {
            return false;
          }
          break;
      }
    }
  }

  /// Reads one escape at p_ (on the backslash), appending its text to scratch_ if `produce`.
  bool read_escape(bool produce) {
    ++p_;
    if (p_ == end_) {
      return error("unterminated string");
    }
    char c = 0;
    switch (*p_) {
      case '"':
      case '\\':
      case '/':
        c = *p_;
        break;
      case 'b':
        c = '\b';
        break;
      case 'f':
        c = '\f';
        break;
      case 'n':
        c = '\n';
        break;
      case 'r':
        c = '\r';
        break;
      case 't':
        c = '\t';
        break;
      case 'u': {
        ++p_;
        std::uint32_t cp = 0;
        if (!read_hex4(cp)) {
          return false;
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return error("lone low surrogate in a \\u escape");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
            return error("high surrogate not followed by a low surrogate");
          }
          p_ += 2;
          std::uint32_t low = 0;
          if (!read_hex4(low)) {
            return false;
          }
          if (low < 0xDC00 || low > 0xDFFF) {
            return error("high surrogate not followed by a low surrogate");
          }
          cp = 0x10000 + ((cp - 0xD800) << 10U) + (low - 0xDC00);
        }
        if (produce) {
          append_utf8(scratch_, cp);
        }
        return true;
      }
      default:
        return error("invalid escape in a string");
    }
    ++p_;
    if (produce) {
      scratch_ += c;
    }
    return true;
  }

  static bool digit(char c) noexcept { return c >= '0' && c <= '9'; }

  bool read_number(bool produce) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) {
      ++p_;
    }
    if (p_ == end_) {
      return error("unexpected end of input in a number");
    }
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ != end_ && digit(*p_)) {
        ++p_;
      }
    } else {
      return error("invalid number");
    }
    bool integral = true;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !digit(*p_)) {
        return error("invalid number: expected a digit after '.'");
      }
      while (p_ != end_ && digit(*p_)) {
        ++p_;
      }
      integral = false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) {
        ++p_;
      }
      if (p_ == end_ || !digit(*p_)) {
        return error("invalid number: expected a digit in the exponent");
      }
      while (p_ != end_ && digit(*p_)) {
        ++p_;
      }
      integral = false;
    }
    const std::string_view text(start, static_cast<std::size_t>(p_ - start));
    if (integral && (produce || text.size() > 19)) {
      std::uint64_t magnitude = 0;
      const char* digits = start + (negative ? 1 : 0);
      const auto [ptr, ec] = std::from_chars(digits, p_, magnitude);
      if (ec == std::errc{} && ptr == p_) {
        if (!produce) {
          return true;
        }
        if (!negative) {
          return h_.number_unsigned(magnitude);
        }
        constexpr std::uint64_t min_magnitude = std::uint64_t{1} << 63U;
        if (magnitude <= min_magnitude) {
          // -(2^63) is representable; computed without signed overflow.
          const std::int64_t value = magnitude == min_magnitude
                                         ? std::numeric_limits<std::int64_t>::min()
                                         : -static_cast<std::int64_t>(magnitude);
          return h_.number_integer(value);
        }
      }
      // Out of 64-bit range: a float, as nlohmann treats it.
    } else if (integral) {
      return true;  // skipped and short: always a valid integer
    }
    // Like nlohmann (strtod, then a finiteness check): a float that overflows a double is an
    // error even where the value is skipped.
    scratch_number_.assign(text);
    const double value = std::strtod(scratch_number_.c_str(), nullptr);
    if (!std::isfinite(value)) {
      return error("number overflow");
    }
    return produce ? h_.number_float(value, scratch_number_) : true;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  Handler& h_;
  std::string scratch_;
  std::string scratch_number_;
};

}  // namespace tec::adapters::detail

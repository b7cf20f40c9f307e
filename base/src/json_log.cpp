#include "tec/base/json_log.hpp"

#include <spdlog/pattern_formatter.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <ctime>
#include <optional>
#include <string_view>
#include <utility>

namespace tec::base {
namespace {

constexpr std::size_t max_key_bytes = 64;
constexpr std::size_t max_embedded_object_bytes = std::size_t{64} * 1024;
constexpr std::array<std::string_view, 6> reserved_keys{"ts",  "level",  "logger",
                                                        "msg", "record", "caller"};

// The length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80), 0 when it is not
// one (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = at(i);
  std::size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3;
    lo = lead == 0xE0 ? 0xA0 : 0x80;
    hi = lead == 0xED ? 0x9F : 0xBF;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4;
    lo = lead == 0xF0 ? 0x90 : 0x80;
    hi = lead == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 0;
  }
  if (i + len > s.size() || at(i + 1) < lo || at(i + 1) > hi) {
    return 0;
  }
  for (std::size_t k = 2; k < len; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) {
      return 0;
    }
  }
  return len;
}

void append(spdlog::memory_buf_t& dest, std::string_view s) {
  dest.append(s.data(), s.data() + s.size());
}

// `s` escaped for the inside of a JSON string. With `decode`, s is the inside of a quoted
// value of the message and its backslash escapes \" \\ \n \t \r stand for their characters
// (any other backslash is itself).
void append_escaped(std::string_view s, bool decode, spdlog::memory_buf_t& dest) {
  static constexpr char hex[] = "0123456789abcdef";
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t plain = i;  // a run of bytes that need nothing
    while (plain < s.size()) {
      const auto u = static_cast<unsigned char>(s[plain]);
      if (u < 0x20 || u >= 0x80 || u == '"' || u == '\\') {
        break;
      }
      ++plain;
    }
    append(dest, s.substr(i, plain - i));
    i = plain;
    if (i == s.size()) {
      break;
    }
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      if (const std::size_t len = utf8_sequence(s, i); len != 0) {
        append(dest, s.substr(i, len));
        i += len;
      } else {
        append(dest, "\\ufffd");
        ++i;
      }
      continue;
    }
    char out = c;
    if (decode && c == '\\' && i + 1 < s.size()) {
      switch (s[i + 1]) {
        case '"':
        case '\\':
          out = s[i + 1];
          ++i;
          break;
        case 'n':
          out = '\n';
          ++i;
          break;
        case 't':
          out = '\t';
          ++i;
          break;
        case 'r':
          out = '\r';
          ++i;
          break;
        default:
          break;
      }
    }
    ++i;
    switch (out) {
      case '"':
        append(dest, "\\\"");
        break;
      case '\\':
        append(dest, "\\\\");
        break;
      case '\n':
        append(dest, "\\n");
        break;
      case '\r':
        append(dest, "\\r");
        break;
      case '\t':
        append(dest, "\\t");
        break;
      default: {
        const auto v = static_cast<unsigned char>(out);
        const char esc[] = {'\\', 'u', '0', '0', hex[v >> 4U], hex[v & 0xFU]};
        dest.append(esc, esc + sizeof esc);
      }
    }
  }
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_key_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_key_char(char c) {
  return is_key_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

// One key=value pair of a message.
struct pair_text {
  std::string_view key;
  std::string_view value;  // as written, without the quotes
  bool quoted = false;
};

// The pair starting at `i` (after a space or at the start), and where it ends; nullopt when
// the word at `i` is not a pair (no key, no `=`, an unterminated quote).
std::optional<std::pair<pair_text, std::size_t>> pair_at(std::string_view s, std::size_t i) {
  std::size_t j = i;
  if (j < s.size() && is_key_start(s[j])) {
    ++j;
    while (j < s.size() && is_key_char(s[j])) {
      ++j;
    }
  }
  if (j == i || j - i > max_key_bytes || j >= s.size() || s[j] != '=') {
    return std::nullopt;
  }
  pair_text p{.key = s.substr(i, j - i), .value = {}, .quoted = false};
  const std::size_t v = j + 1;
  if (v < s.size() && s[v] == '"') {
    std::size_t k = v + 1;
    while (k < s.size() && s[k] != '"') {
      k += s[k] == '\\' ? 2U : 1U;
    }
    if (k >= s.size()) {
      return std::nullopt;
    }
    p.value = s.substr(v + 1, k - v - 1);
    p.quoted = true;
    return std::pair{p, k + 1};
  }
  std::size_t e = v;
  while (e < s.size() && !is_space(s[e])) {
    ++e;
  }
  p.value = s.substr(v, e - v);
  while (!p.value.empty() &&
         std::string_view(":,;.)").find(p.value.back()) != std::string_view::npos) {
    p.value.remove_suffix(1);
  }
  return std::pair{p, e};
}

void append_field(const pair_text& p, spdlog::memory_buf_t& dest) {
  dest.push_back(',');
  dest.push_back('"');
  append_escaped(p.key, false, dest);
  append(dest, "\":\"");
  append_escaped(p.value, p.quoted, dest);
  dest.push_back('"');
}

// NAMESPACE of a `pod` value NAMESPACE/NAME (one slash, both sides non-empty, no space, no
// escape); empty for any other pair.
std::string_view pod_namespace(const pair_text& p) {
  const auto slash = p.value.find('/');
  if (p.key != "pod" || slash == std::string_view::npos || slash == 0 ||
      slash + 1 == p.value.size() || p.value.find('/', slash + 1) != std::string_view::npos ||
      p.value.find('\\') != std::string_view::npos ||
      std::any_of(p.value.begin(), p.value.end(), is_space)) {
    return {};
  }
  return p.value.substr(0, slash);
}

bool is_one_line_json_object(std::string_view payload) {
  if (payload.size() < 2 || payload.size() > max_embedded_object_bytes || payload.front() != '{' ||
      payload.back() != '}') {
    return false;
  }
  if (std::any_of(payload.begin(), payload.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
    return false;  // whitespace between tokens is valid JSON, a line break is not one line
  }
  return nlohmann::json::accept(payload.begin(), payload.end());
}

// %* : the message part of the line (append_json_message).
class json_message_flag final : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    append_json_message(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_message_flag>();
  }
};

}  // namespace

void append_json_message(std::string_view payload, spdlog::memory_buf_t& dest) {
  if (is_one_line_json_object(payload)) {
    append(dest, R"("msg":"record","record":)");
    append(dest, payload);
    return;
  }
  append(dest, R"("msg":")");
  append_escaped(payload, false, dest);
  dest.push_back('"');

  std::array<std::string_view, max_json_log_fields> taken{};
  std::size_t fields = 0;
  std::size_t i = 0;
  while (i < payload.size() && fields < max_json_log_fields) {
    if (is_space(payload[i])) {
      ++i;
      continue;
    }
    auto found = pair_at(payload, i);
    if (!found) {
      while (i < payload.size() && !is_space(payload[i])) {
        ++i;
      }
      continue;
    }
    const auto& [p, end] = *found;
    i = end;
    const auto is_taken = [&](std::string_view key) {
      const auto last = taken.begin() + static_cast<std::ptrdiff_t>(fields);
      return std::find(taken.begin(), last, key) != last;
    };
    if (std::find(reserved_keys.begin(), reserved_keys.end(), p.key) != reserved_keys.end() ||
        is_taken(p.key)) {
      continue;
    }
    taken[fields++] = p.key;
    append_field(p, dest);
    // The pod's namespace as a field of its own, for filtering (unless the message named one).
    if (const auto ns = pod_namespace(p);
        !ns.empty() && fields < max_json_log_fields && !is_taken("namespace")) {
      taken[fields++] = "namespace";
      append_field(pair_text{.key = "namespace", .value = ns, .quoted = false}, dest);
    }
  }
}

std::unique_ptr<spdlog::formatter> make_json_log_formatter() {
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  f->add_flag<json_message_flag>('*').set_pattern(
      R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n",%*})");
  return f;
}

}  // namespace tec::base

// Fuzz target: the kubeconfig's small parsers (tec/k8sclient/config.hpp): parse_server_url and
// decode_base64.
//
// Input: [flags byte][text]. parse_server_url(text): a parsed URL has a host, a port from 1 to
// 65535 and a base path without a trailing slash, and printing it back as a URL parses to the
// same fields; a URL with user info (RFC 3986: "user:password@" before the host) never has
// that user info in an error message. decode_base64(text): what it decodes has the length
// the text implies, and encoding any bytes (the input's) and decoding them gives them back,
// also with CR/LF inserted (Go's decoder ignores them too).

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "support.hpp"
#include "tec/k8sclient/config.hpp"

namespace {

using tec::k8sclient::parse_server_url;
using tec::k8sclient::server_url;

bool valid_port(const std::string& p) {
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const int v = std::stoi(p);
  return v >= 1 && v <= 65535;
}

std::string print(const server_url& u) {
  const std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
  return (u.tls ? "https://" : "http://") + host + ":" + u.port + u.base_path;
}

/// The user info of `text` as RFC 3986 reads it, or "" when there is none.
std::string_view user_info(std::string_view text) {
  if (const auto scheme_end = text.find("://"); scheme_end != std::string_view::npos) {
    text.remove_prefix(scheme_end + 3);
  }
  const std::string_view authority = text.substr(0, text.find_first_of("/?#"));
  const auto at = authority.rfind('@');
  return at == std::string_view::npos ? std::string_view{} : authority.substr(0, at);
}

void check_url(std::string_view text, bool default_tls) {
  const auto url = parse_server_url(text, default_tls);
  const std::string shown(text);
  if (!url) {
    TEC_FUZZ_CHECK(url.error().code == tec::base::make_error_code(tec::base::errc::config_invalid),
                   url.error().message);
    const std::string_view secret = user_info(text);
    // Short user info ("a") may appear in a message by coincidence.
    TEC_FUZZ_CHECK(secret.size() < 4 || url.error().message.find(secret) == std::string::npos,
                   "user info in the message: " + url.error().message);
    return;
  }
  const server_url& u = url.value();
  TEC_FUZZ_CHECK(!u.host.empty(), shown);
  TEC_FUZZ_CHECK(valid_port(u.port), shown + " -> port " + u.port);
  TEC_FUZZ_CHECK(u.base_path.empty() || (u.base_path.front() == '/' && u.base_path.back() != '/'),
                 shown + " -> base path " + u.base_path);
  TEC_FUZZ_CHECK(text.find_first_of("?#") == std::string_view::npos, shown);
  TEC_FUZZ_CHECK(user_info(text).empty(), shown);
  if (text.find("://") == std::string_view::npos) {
    TEC_FUZZ_CHECK(u.tls == default_tls, shown);
  }
  const std::string printed = print(u);
  const auto again = parse_server_url(printed, !default_tls);
  TEC_FUZZ_CHECK(again.has_value(),
                 shown + " -> " + printed + ": " + (again ? std::string() : again.error().message));
  TEC_FUZZ_CHECK(again->tls == u.tls && again->host == u.host && again->port == u.port &&
                     again->base_path == u.base_path,
                 shown + " -> " + printed);
}

std::string encode_base64(std::string_view bytes, std::size_t line_every) {
  static constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t bits = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      bits = (bits << 8U) | (j < n ? static_cast<std::uint8_t>(bytes[i + j]) : 0U);
    }
    out += alphabet[(bits >> 18U) & 63U];
    out += alphabet[(bits >> 12U) & 63U];
    out += n > 1 ? alphabet[(bits >> 6U) & 63U] : '=';
    out += n > 2 ? alphabet[bits & 63U] : '=';
    if (line_every > 0 && (i / 3 + 1) % line_every == 0) {
      out += (i / 3) % 2 == 0 ? "\n" : "\r\n";
    }
  }
  return out;
}

void check_base64(std::string_view text, std::size_t line_every) {
  if (const auto decoded = tec::k8sclient::decode_base64(text)) {
    std::size_t chars = 0;
    std::size_t padding = 0;
    for (const char c : text) {
      chars += c != '\r' && c != '\n' ? 1 : 0;
      padding += c == '=' ? 1 : 0;
    }
    TEC_FUZZ_CHECK(chars % 4 == 0 && padding <= 2, std::string(text));
    TEC_FUZZ_CHECK(decoded->size() == chars / 4 * 3 - padding, std::string(text));
  }
  const std::string encoded = encode_base64(text, line_every);
  const auto round_trip = tec::k8sclient::decode_base64(encoded);
  TEC_FUZZ_CHECK(round_trip.has_value() && *round_trip == text, encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tec::fuzz::input_reader in(tec::fuzz::as_text(data, size));
  const std::uint8_t flags = in.byte();
  const std::string_view text = in.rest();
  check_url(text, (flags & 1U) != 0);
  check_base64(text, flags >> 4U);
  return 0;
}

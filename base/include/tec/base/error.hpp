#pragma once

// Errors as values: every expected failure of the client (configuration, network, HTTP status,
// JSON shape) is a std::error_code in the project's category, plus a message for operators.

#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

namespace tec::base {

enum class errc {
  ok = 0,
  config_invalid = 1,  ///< A kubeconfig or in-cluster file is missing or wrong.
  malformed_json,      ///< The server sent bytes that are not the JSON we expect.
  unexpected_shape,    ///< Valid JSON of the wrong shape (missing field, wrong type).
  line_too_long,       ///< A watch event line exceeded the configured bound.
  http_status,         ///< The server answered with an error status (see the status field).
  gone,                ///< 410 Gone: resourceVersion or continue token too old.
  unauthorized,        ///< 401.
  forbidden,           ///< 403.
  not_found,           ///< 404.
  conflict,            ///< 409.
  too_many_requests,   ///< 429 after all retries.
  server_error,        ///< 5xx after all retries.
  timeout,             ///< A deadline expired (connect, handshake, read, write, idle).
  connection_failed,   ///< Could not connect or the connection broke.
  shutting_down,       ///< The client is stopping.
  cancelled,           ///< The caller withdrew the request (request::cancelled) before it was sent.
  /// A response body (or one LIST page, or one item of it) exceeded its bound. Never retried:
  /// the same request would bring the same body.
  response_too_large,
};

const std::error_category& error_category() noexcept;
std::error_code make_error_code(errc e) noexcept;

/// An error code with a message an operator can act on (never contains secrets).
struct error {
  std::error_code code;
  std::string message;
  int http_status = 0;  ///< The HTTP status, when the error came from one.

  explicit operator bool() const noexcept { return static_cast<bool>(code); }
};

/// Text from the API server (a Status message, a quoted field value) made safe for one log
/// line: control characters (C0, DEL, C1), U+2028/U+2029 and bytes that are not UTF-8 are
/// escaped (\n, \r, \t, \xHH, \uXXXX), so a message cannot forge a log line; the result is
/// clipped to about `max` bytes with a note of the original size ("... [clipped: 200074
/// bytes]"). Printable text up to `max` bytes comes back unchanged.
std::string printable(std::string_view text, std::size_t max = 512);

}  // namespace tec::base

template <>
struct std::is_error_code_enum<tec::base::errc> : std::true_type {};

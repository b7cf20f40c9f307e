#pragma once

// Error values from the API server's answers: the errc of an HTTP status, the error of a
// non-2xx response (with the Status object's message) and a short label for metrics and logs.

#include <string>
#include <string_view>

#include "tec/base/error.hpp"
#include "tec/k8sclient/client.hpp"

namespace tec::k8sclient {

/// The error value for a non-2xx response: errc from the status (401, 403, 404, 409, 410, 429,
/// 5xx, else http_status), http_status set, and a message "<what>: <status> <reason>: <the
/// Status object's message>" (the body, truncated, when it is not a Status). `what` names the
/// request, e.g. "DELETE pod ns/name"; it must not contain secrets.
base::error api_error(std::string_view what, const response& resp);

/// The message of the Status object in `body` (the body itself when it is not one), clipped
/// and escaped for logs and events: a hostile or broken server must not write huge or forged
/// log lines through it.
std::string status_message(std::string_view body);

/// The errc a non-2xx HTTP status maps to.
base::errc errc_for_status(unsigned status) noexcept;

/// A short, stable label for an error (for metrics labels and logs), e.g. "forbidden",
/// "timeout", "http_422".
std::string error_reason(const base::error& err);

}  // namespace tec::k8sclient

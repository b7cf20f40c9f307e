#include "tec/k8sclient/api_error.hpp"

#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>
#include <utility>

namespace tec::k8sclient {

using base::errc;
using base::error;
using base::error_category;
namespace {

using nlohmann::json;
namespace http = boost::beast::http;

constexpr std::size_t max_body_in_message = 200;

}  // namespace

std::string status_message(std::string_view body) {
  const json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object()) {
    const auto it = status.find("message");
    if (it != status.end() && it->is_string()) {
      return base::printable(it->get_ref<const std::string&>());
    }
  }
  return base::printable(body, max_body_in_message);
}

errc errc_for_status(unsigned status) noexcept {
  switch (status) {
    case 401:
      return base::errc::unauthorized;
    case 403:
      return base::errc::forbidden;
    case 404:
      return base::errc::not_found;
    case 409:
      return base::errc::conflict;
    case 410:
      return base::errc::gone;
    case 429:
      return base::errc::too_many_requests;
    default:
      return status >= 500 && status < 600 ? base::errc::server_error : base::errc::http_status;
  }
}

error api_error(std::string_view what, const response& resp) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(resp.status));
  std::string message(what);
  message += ": ";
  message += std::to_string(resp.status);
  if (!reason.empty()) {
    message += ' ';
    message.append(reason.data(), reason.size());
  }
  const std::string server_says = status_message(resp.body);
  if (!server_says.empty()) {
    message += ": ";
    message += server_says;
  }
  return base::make_error(errc_for_status(resp.status), std::move(message),
                          static_cast<int>(resp.status));
}

std::string error_reason(const base::error& err) {
  if (err.code == make_error_code(base::errc::http_status)) {
    return "http_" + std::to_string(err.http_status);
  }
  if (err.code.category() != error_category()) {
    return "other";
  }
  switch (static_cast<errc>(err.code.value())) {
    case base::errc::ok:
      return "ok";
    case base::errc::config_invalid:
      return "config_invalid";
    case base::errc::malformed_json:
      return "malformed_json";
    case base::errc::unexpected_shape:
      return "unexpected_shape";
    case base::errc::line_too_long:
      return "line_too_long";
    case base::errc::http_status:
      return "http_status";
    case base::errc::gone:
      return "gone";
    case base::errc::unauthorized:
      return "unauthorized";
    case base::errc::forbidden:
      return "forbidden";
    case base::errc::not_found:
      return "not_found";
    case base::errc::conflict:
      return "conflict";
    case base::errc::too_many_requests:
      return "too_many_requests";
    case base::errc::server_error:
      return "server_error";
    case base::errc::timeout:
      return "timeout";
    case base::errc::connection_failed:
      return "connection_failed";
    case base::errc::shutting_down:
      return "shutting_down";
    case base::errc::cancelled:
      return "cancelled";
    case base::errc::response_too_large:
      return "response_too_large";
  }
  return "other";
}

}  // namespace tec::k8sclient

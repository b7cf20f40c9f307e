#include "tec/k8sclient/api_error.hpp"

#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>
#include <utility>

namespace tec::k8sclient {
namespace {

using nlohmann::json;
namespace http = boost::beast::http;

constexpr std::size_t max_body_in_message = 200;

/// The Status object of an error response, or a discarded json when the body is not one.
json parse_status(std::string_view body) {
  json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!status.is_object()) {
    return json(json::value_t::discarded);
  }
  return status;
}

}  // namespace

std::string status_message(std::string_view body) {
  const json status = parse_status(body);
  if (!status.is_discarded()) {
    const auto it = status.find("message");
    if (it != status.end() && it->is_string()) {
      return printable(it->get_ref<const std::string&>());
    }
  }
  return printable(body, max_body_in_message);
}

errc errc_for_status(unsigned status) noexcept {
  switch (status) {
    case 401:
      return errc::unauthorized;
    case 403:
      return errc::forbidden;
    case 404:
      return errc::not_found;
    case 409:
      return errc::conflict;
    case 410:
      return errc::gone;
    case 429:
      return errc::too_many_requests;
    default:
      return status >= 500 && status < 600 ? errc::server_error : errc::http_status;
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
  return make_error(errc_for_status(resp.status), std::move(message),
                    static_cast<int>(resp.status));
}

std::string error_reason(const error& err) {
  if (err.code == make_error_code(errc::http_status)) {
    return "http_" + std::to_string(err.http_status);
  }
  if (err.code.category() != error_category()) {
    return "other";
  }
  switch (static_cast<errc>(err.code.value())) {
    case errc::ok:
      return "ok";
    case errc::config_invalid:
      return "config_invalid";
    case errc::malformed_json:
      return "malformed_json";
    case errc::unexpected_shape:
      return "unexpected_shape";
    case errc::line_too_long:
      return "line_too_long";
    case errc::http_status:
      return "http_status";
    case errc::gone:
      return "gone";
    case errc::unauthorized:
      return "unauthorized";
    case errc::forbidden:
      return "forbidden";
    case errc::not_found:
      return "not_found";
    case errc::conflict:
      return "conflict";
    case errc::too_many_requests:
      return "too_many_requests";
    case errc::server_error:
      return "server_error";
    case errc::timeout:
      return "timeout";
    case errc::connection_failed:
      return "connection_failed";
    case errc::shutting_down:
      return "shutting_down";
    case errc::cancelled:
      return "cancelled";
    case errc::response_too_large:
      return "response_too_large";
  }
  return "other";
}

}  // namespace tec::k8sclient

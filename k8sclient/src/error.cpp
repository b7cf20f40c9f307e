#include "tec/k8s/error.hpp"

#include <string>

namespace tec::k8s {
namespace {

class k8s_category final : public std::error_category {
public:
  [[nodiscard]] const char* name() const noexcept override { return "tec.k8s"; }

  [[nodiscard]] std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::ok:
        return "success";
      case errc::config_invalid:
        return "invalid client configuration";
      case errc::malformed_json:
        return "malformed JSON";
      case errc::unexpected_shape:
        return "JSON of an unexpected shape";
      case errc::line_too_long:
        return "watch event line too long";
      case errc::http_status:
        return "unexpected HTTP status";
      case errc::gone:
        return "resource version too old (410 Gone)";
      case errc::unauthorized:
        return "unauthorized (401)";
      case errc::forbidden:
        return "forbidden (403)";
      case errc::not_found:
        return "not found (404)";
      case errc::conflict:
        return "conflict (409)";
      case errc::too_many_requests:
        return "too many requests (429)";
      case errc::server_error:
        return "server error (5xx)";
      case errc::timeout:
        return "timed out";
      case errc::connection_failed:
        return "connection failed";
      case errc::cancelled:
        return "the request was cancelled before it was sent";
      case errc::shutting_down:
        return "client shutting down";
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

}  // namespace tec::k8s

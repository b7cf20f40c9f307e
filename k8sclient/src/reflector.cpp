// The non-template parts of the reflector (reflector_impl.hpp has the rest).

#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "tec/base/logger.hpp"
#include "tec/k8sclient/reflector_impl.hpp"

namespace tec::k8sclient::detail {

const std::shared_ptr<spdlog::logger>& watch_log() {
  static const std::shared_ptr<spdlog::logger> logger = base::named_logger("watch");
  return logger;
}

std::string describe_status(const response& res, const base::result<api_status>& status) {
  std::string text = "HTTP " + std::to_string(res.status);
  if (status && !status->message.empty()) {
    text += ": " + base::printable(status->message);
  }
  return text;
}

bool too_large_resource_version(const response& res, const base::result<api_status>& status) {
  if (res.status != 504 || !status) {
    return false;
  }
  std::string message = status->message;
  std::transform(message.begin(), message.end(), message.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return message.find("too large resource version") != std::string::npos;
}

}  // namespace tec::k8sclient::detail

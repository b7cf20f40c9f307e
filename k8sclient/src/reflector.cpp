// The non-template parts of the reflector (reflector_impl.hpp has the rest).

#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

#include <boost/algorithm/string/predicate.hpp>
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

bool too_large_resource_version(const base::result<api_status>& status) {
  return status && boost::algorithm::icontains(status->message, "too large resource version");
}

}  // namespace tec::k8sclient::detail

#pragma once

// Per-component loggers: the daemon registers one spdlog logger per component name
// (cmd/logging.cpp); library code fetches its component's logger here.

#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace tec::k8sclient {

/// The logger registered under `name`, else a clone of the default logger named `name` (a
/// test or a tool that registered none still gets the component in its lines). The clone is
/// not registered, so a logger registered later by the daemon or a test is not refused.
/// Callers that log often keep the result (a function-local static); the lookup takes
/// spdlog's registry mutex.
inline std::shared_ptr<spdlog::logger> named_logger(const std::string& name) {
  if (auto registered = spdlog::get(name)) {
    return registered;
  }
  return spdlog::default_logger()->clone(name);
}

namespace detail {

/// The "client" logger of the HTTP client (client.cpp), looked up once and kept. Tests add a
/// sink to it to read what the client logged.
const std::shared_ptr<spdlog::logger>& client_log();

}  // namespace detail

}  // namespace tec::k8sclient

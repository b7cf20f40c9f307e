#pragma once

// Per-component loggers: the daemon registers one spdlog logger per component name
// (cmd/logging.cpp); every room fetches its component's logger here, the one lookup.

#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace tec::base {

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

}  // namespace tec::base

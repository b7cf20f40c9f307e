#pragma once

// Logging setup: the process's spdlog loggers, their level and their format (text or JSON).

#include "options.hpp"

namespace tec::cmd {

/// Configures spdlog: the default logger and the per-component loggers the libraries use
/// (client, watch, controller, timedqueue, evict, events, leader, http, daemon), with the
/// level and format of `opts`. Call once, before constructing a daemon.
void setup_logging(const options& opts);

}  // namespace tec::cmd

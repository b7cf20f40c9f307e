#include "logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "tec/base/json_log.hpp"

namespace tec::cmd {
namespace {

constexpr const char* component_loggers[] = {
    "client", "watch", "controller", "timedqueue", "evict", "events", "leader", "http", "history"};

}  // namespace

void setup_logging(const options& opts) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  if (opts.format == log_format::json) {
    sink->set_formatter(base::make_json_log_formatter());
  } else {
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%eZ %-5l %-10n %v", spdlog::pattern_time_type::utc));
  }
  const auto level = spdlog::level::from_str(opts.log_level == "warning" ? "warn" : opts.log_level);
  auto main_logger = std::make_shared<spdlog::logger>("daemon", sink);
  main_logger->set_level(level);
  spdlog::drop("daemon");
  spdlog::set_default_logger(main_logger);
  for (const char* name : component_loggers) {
    spdlog::drop(name);
    auto l = std::make_shared<spdlog::logger>(name, sink);
    l->set_level(level);
    spdlog::register_logger(l);
  }
}

}  // namespace tec::cmd

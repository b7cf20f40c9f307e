#include "logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <memory>
#include <string_view>

namespace tec::cmd {
namespace {

constexpr const char* component_loggers[] = {
    "client", "watch", "controller", "timedqueue", "evict", "events", "leader", "http", "history"};

// %* : the message payload escaped for a JSON string.
class json_payload_flag final : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    static constexpr char hex[] = "0123456789abcdef";
    for (const char c : msg.payload) {
      switch (c) {
        case '"':
          dest.append(std::string_view("\\\""));
          break;
        case '\\':
          dest.append(std::string_view("\\\\"));
          break;
        case '\n':
          dest.append(std::string_view("\\n"));
          break;
        case '\r':
          dest.append(std::string_view("\\r"));
          break;
        case '\t':
          dest.append(std::string_view("\\t"));
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            const auto u = static_cast<unsigned char>(c);
            const char esc[] = {'\\', 'u', '0', '0', hex[u >> 4U], hex[u & 0xFU]};
            dest.append(esc, esc + sizeof esc);
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_payload_flag>();
  }
};

}  // namespace

void setup_logging(const options& opts) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  if (opts.format == log_format::json) {
    auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    f->add_flag<json_payload_flag>('*').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":"%*"})");
    sink->set_formatter(std::move(f));
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

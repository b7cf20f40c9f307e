#pragma once

// Reads what a kept logger (k8sclient::detail::client_log(), base::named_logger("controller"))
// writes while a captured_log lives: a ring-buffer sink is added to the logger and removed again.
// For tests of log volume and wording; "<level> <message>" lines. Thread: the test's (spdlog's sink
// list is not guarded: nothing may log on another thread while one is added or removed).

#include <spdlog/logger.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tec::test {

class captured_log {
public:
  explicit captured_log(std::shared_ptr<spdlog::logger> logger, std::size_t capacity = 4096)
      : logger_(std::move(logger)),
        sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(capacity)),
        level_(logger_->level()) {
    sink_->set_pattern("%l %v");
    sink_->set_level(spdlog::level::info);
    logger_->sinks().push_back(sink_);
    logger_->set_level(spdlog::level::info);
  }
  /// The logger registered under `name`; when none is, one is registered for the capture's
  /// lifetime (base::named_logger() finds it): make the capture before the code under test
  /// looks its logger up.
  explicit captured_log(const std::string& name, std::size_t capacity = 4096)
      : captured_log(registered_or_new(name), capacity) {
    registered_here_ = spdlog::get(name) == nullptr;
    if (registered_here_) {
      spdlog::register_logger(logger_);
    }
  }
  ~captured_log() {
    auto& sinks = logger_->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger_->set_level(level_);
    if (registered_here_) {
      spdlog::drop(logger_->name());
    }
  }
  captured_log(const captured_log&) = delete;
  captured_log& operator=(const captured_log&) = delete;

  /// The lines at info level and above, oldest first.
  [[nodiscard]] std::vector<std::string> lines() const {
    auto out = sink_->last_formatted();
    for (auto& line : out) {
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
        line.pop_back();
      }
    }
    return out;
  }

  /// How many lines start with `level` ("warning", "info") and contain `text`.
  [[nodiscard]] std::size_t count(const std::string& level, const std::string& text = {}) const {
    const auto all = lines();
    return static_cast<std::size_t>(std::count_if(all.begin(), all.end(), [&](const auto& l) {
      return l.rfind(level + " ", 0) == 0 && l.find(text) != std::string::npos;
    }));
  }

private:
  static std::shared_ptr<spdlog::logger> registered_or_new(const std::string& name) {
    auto found = spdlog::get(name);
    return found ? found : std::make_shared<spdlog::logger>(name);
  }

  bool registered_here_ = false;
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

}  // namespace tec::test

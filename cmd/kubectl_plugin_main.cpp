// kubectl-taint_eviction: the kubectl plugin (`kubectl taint-eviction preview|pending|explain`).
// This file only hands the arguments and the environment to kubectl_plugin::run().
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tec/kubectl_plugin/plugin.hpp"

int main(int argc, char** argv) {
  // What the libraries log (the client's warnings, what an exec credential plugin wrote on its
  // standard error) goes to stderr, warnings and worse only: stdout is the command's output.
  auto log = std::make_shared<spdlog::logger>("kubectl-taint_eviction",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
  log->set_pattern("%l: %v");
  log->set_level(spdlog::level::warn);
  spdlog::set_default_logger(std::move(log));
  const std::vector<std::string> args(argv + 1, argv + argc);
  return tec::kubectl_plugin::run(
      args, std::cout, std::cerr, [](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
        return v == nullptr ? std::nullopt : std::optional<std::string>(v);
      });
}

// kubectl-taint_eviction: the kubectl plugin (`kubectl taint-eviction preview|pending|explain`).
// This file only hands the arguments and the environment to kubectl_plugin::run().
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "tec/kubectl_plugin/plugin.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return tec::kubectl_plugin::run(
      args, std::cout, std::cerr, [](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
        return v == nullptr ? std::nullopt : std::optional<std::string>(v);
      });
}

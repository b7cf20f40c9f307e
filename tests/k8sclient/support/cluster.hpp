#pragma once

// For the integration tests against the local kube-apiserver (ctest's cluster fixture sets
// KUBECONFIG to its admin kubeconfig).

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/rest_config.hpp"

namespace tec::k8sclient::testing {

/// The admin config from KUBECONFIG; nullopt when it is not set (the test should skip). A
/// kubeconfig that does not load is a test failure (and nullopt).
inline std::optional<rest_config> cluster_config() {
  const char* path = std::getenv("KUBECONFIG");
  if (path == nullptr || *path == '\0') {
    return std::nullopt;
  }
  auto cfg = load_kubeconfig(path);
  if (!cfg) {
    ADD_FAILURE() << "cannot load " << path << ": " << cfg.error().message;
    return std::nullopt;
  }
  return cfg.value();
}

/// `prefix` and 8 random hex digits: a name no earlier run left behind.
inline std::string unique_name(std::string_view prefix) {
  char suffix[9];
  std::snprintf(suffix, sizeof suffix, "%08x", std::random_device{}());
  return std::string(prefix) + suffix;
}

}  // namespace tec::k8sclient::testing

#pragma once

// Client settings shared by the tests that talk to fake_http_server.

#include <chrono>

#include "k8sclient/support/fake_http_server.hpp"
#include "tec/k8s/client.hpp"
#include "tec/k8s/rest_config.hpp"

namespace tec::k8s::testing {

/// Plain HTTP to `server` on 127.0.0.1.
inline rest_config plain_config(const fake_http_server& server) {
  rest_config cfg;
  cfg.host = "127.0.0.1";
  cfg.port = server.port();
  cfg.tls = false;
  return cfg;
}

/// No client-side rate limit, a 5 s request timeout, `max_retries` retries, and no waiting
/// between them (Retry-After is honoured in count, not in time).
inline client_options quick_options(int max_retries) {
  client_options opts;
  opts.qps = 0;
  opts.request_timeout = std::chrono::seconds{5};
  opts.max_retries = max_retries;
  opts.delay = [](wait_reason why, std::chrono::nanoseconds wanted) {
    return why == wait_reason::retry_after ? std::chrono::nanoseconds::zero() : wanted;
  };
  return opts;
}

}  // namespace tec::k8s::testing

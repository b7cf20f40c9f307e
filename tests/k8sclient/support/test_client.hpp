#pragma once

// Client settings shared by the tests that talk to fake_http_server.

#include <chrono>

#include "k8sclient/support/fake_http_server.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/rest_config.hpp"

namespace tec::k8sclient::testing {

/// Plain HTTP to `server` on 127.0.0.1.
inline rest_config plain_config(const fake_http_server& server) {
  rest_config cfg;
  cfg.host = "127.0.0.1";
  cfg.port = server.port();
  cfg.tls = false;
  return cfg;
}

/// No client-side rate limit, `max_retries` retries, and no waiting between them (Retry-After
/// and the network-error backoff are honoured in count, not in time). The request timeout
/// (60 s) is far beyond what a test waits for when things work, however loaded the machine.
inline client_options quick_options(int max_retries) {
  client_options opts;
  opts.qps = 0;
  opts.request_timeout = std::chrono::seconds{60};
  opts.max_retries = max_retries;
  opts.delay = [](wait_reason why, std::chrono::nanoseconds wanted) {
    return why == wait_reason::rate_limit ? wanted : std::chrono::nanoseconds::zero();
  };
  return opts;
}

}  // namespace tec::k8sclient::testing

#pragma once

// The client's QPS limit (client-go's flowcontrol.NewTokenBucketRateLimiter: `qps` tokens per
// second, at most `burst` saved up): a token_bucket read through an injected clock, so tests
// advance time by hand; the HTTP client turns the returned delay into a timer wait.
//
// Thread-safety: none; the owner (the client, on its executor) serialises calls. The clock
// must outlive the limiter.

#include <chrono>

#include "tec/base/clock.hpp"
#include "tec/base/token_bucket.hpp"

namespace tec::k8sclient {

class rate_limiter {
public:
  /// `qps` <= 0 disables limiting (reserve() always returns 0). `burst` < 1 counts as 1.
  /// The bucket starts full.
  rate_limiter(double qps, int burst, base::clock& clock);

  /// Takes one token, borrowing from the future when the bucket is empty, and returns how
  /// long the caller must wait before acting (zero when a token was available). Callers that
  /// reserve must then wait: the token is spent either way.
  std::chrono::nanoseconds reserve();

  /// Takes one token only if one is available now.
  bool try_take();

  /// Tokens available now (negative while reservations are outstanding).
  [[nodiscard]] double tokens();

private:
  bool limited_;
  base::clock& clock_;
  base::token_bucket bucket_;
};

}  // namespace tec::k8sclient

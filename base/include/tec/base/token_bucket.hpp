#pragma once

// The project's one token bucket (golang.org/x/time/rate's, which client-go uses for both the
// client's QPS limit and the event recorder's per-object spam filter): `rate` tokens per
// second, at most `burst` saved up, full when created. Time is passed in by the caller, so it
// needs no clock of its own and tests use plain time points.
//
// Thread-safety: none; a plain value type, serialised by its owner.

#include <algorithm>
#include <chrono>

namespace tec::base {

class token_bucket {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// `rate` tokens per second (0 never refills); `burst` < 1 counts as 1. Starts full at `now`.
  token_bucket(double rate, double burst, time_point now)
      : rate_(rate), burst_(std::max(burst, 1.0)), tokens_(burst_), last_(now) {}

  /// Takes one token, borrowing from the future when the bucket is empty, and returns how
  /// long the caller must wait before acting (zero when a token was available). The token is
  /// spent either way. `rate` must be positive.
  std::chrono::nanoseconds reserve(time_point now) {
    refill(now);
    tokens_ -= 1.0;
    if (tokens_ >= 0) {
      return std::chrono::nanoseconds::zero();
    }
    const std::chrono::duration<double> wait(-tokens_ / rate_);
    return std::chrono::ceil<std::chrono::nanoseconds>(wait);
  }

  /// Takes one token only if one is available at `now`.
  bool try_take(time_point now) {
    refill(now);
    if (tokens_ < 1.0) {
      return false;
    }
    tokens_ -= 1.0;
    return true;
  }

  /// Tokens available at `now` (negative while reservations are outstanding).
  [[nodiscard]] double tokens(time_point now) {
    refill(now);
    return tokens_;
  }

private:
  /// A time point before the last one (a clock stepping back) adds nothing.
  void refill(time_point now) {
    if (now > last_) {
      const std::chrono::duration<double> elapsed = now - last_;
      tokens_ = std::min(burst_, tokens_ + elapsed.count() * rate_);
      last_ = now;
    }
  }

  double rate_;
  double burst_;
  double tokens_;
  time_point last_;
};

}  // namespace tec::base

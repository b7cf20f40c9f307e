#pragma once

// Jittered exponential backoff for re-watching and relisting (client-go's
// NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)) and for the HTTP client's resends
// after a network error (client_options::network_retry_backoff). The base delay starts at
// `initial` and doubles after each use up to `cap`; each returned delay is the base stretched
// by a random factor in [1, 1 + jitter), never above `cap`. After `reset_after` with no call
// to next() (a healthy stretch) the base returns to `initial`.
//
// Deviation from client-go, on purpose: client-go resets 2 minutes after the *first* backoff
// of a series, even if failures never stopped; we reset after 2 minutes without failures, as
// the spec says ("reset after 2 minutes healthy"), and we do not let jitter exceed the cap.
//
// Thread-safety: none; one owner (an informer session, one request). The clock (which must
// outlive the backoff) and randomness are injected.

#include <chrono>
#include <cstdint>
#include <random>

#include "tec/base/clock.hpp"

namespace tec::base {

/// client-go's wait.Jitter: `d` stretched by a random factor in [1, 1 + max_factor). The one
/// jitter: backoff::next and the leader elector's retry period use it.
std::chrono::milliseconds jitter(std::chrono::milliseconds d, double max_factor,
                                 std::mt19937_64& rng);

struct backoff_policy {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds cap{30'000};
  std::chrono::milliseconds reset_after{120'000};
  double factor = 2.0;
  double jitter = 1.0;
};

class backoff {
public:
  backoff(backoff_policy policy, clock& clock, std::uint64_t seed = 0);

  /// The delay to wait before the next attempt; advances the series.
  std::chrono::milliseconds next();

  /// Forgets the series (the next delay is based on `initial` again).
  void reset();

private:
  backoff_policy policy_;
  clock& clock_;
  std::mt19937_64 rng_;
  std::chrono::milliseconds base_;
  clock::time_point last_{};
  bool used_ = false;
};

}  // namespace tec::base

#pragma once

// The queue's retry delays (private to timedqueue/src).

#include "tec/timedqueue/timed_queue.hpp"

#include <cstdint>
#include <random>

namespace tec::timedqueue::detail {

/// The delay before each retry: initial * multiplier^(attempts-1), at most max, scaled by a
/// random factor in [1 - jitter, 1 + jitter] and kept within (0, max].
///
/// Not tec::base::backoff or base::jitter: those stretch by a factor in [1, 1 + jitter) and
/// count whole milliseconds, and base::backoff is one series with a reset clock, where this is
/// a function of each entry's attempt count; using them would change every retry time.
class retry_delays {
public:
  /// Throws std::invalid_argument for a nonsensical policy (see timed_queue's constructor).
  explicit retry_delays(const retry_policy& p);

  /// The delay after `attempts` failed runs.
  duration after(std::uint32_t attempts);

private:
  retry_policy policy_;
  std::mt19937_64 rng_;
};

}  // namespace tec::timedqueue::detail

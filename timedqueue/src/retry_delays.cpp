#include "retry_delays.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tec::timedqueue::detail {

retry_delays::retry_delays(const retry_policy& p) : policy_(p) {
  if (p.initial <= duration::zero()) {
    throw std::invalid_argument("retry_policy.initial must be positive");
  }
  if (p.max < p.initial) {
    throw std::invalid_argument("retry_policy.max must not be less than retry_policy.initial");
  }
  if (!std::isfinite(p.multiplier) || p.multiplier < 1.0) {
    throw std::invalid_argument("retry_policy.multiplier must be a finite number >= 1");
  }
  if (!std::isfinite(p.jitter) || p.jitter < 0.0 || p.jitter > 1.0) {
    throw std::invalid_argument("retry_policy.jitter must be within [0, 1]");
  }
  std::uint64_t seed = p.seed;
  if (seed == 0) {
    std::random_device rd;
    seed = (std::uint64_t{rd()} << 32U) ^ std::uint64_t{rd()};
  }
  rng_.seed(seed);
}

duration retry_delays::after(std::uint32_t attempts) {
  const double initial = static_cast<double>(policy_.initial.count());
  const double cap = static_cast<double>(policy_.max.count());
  double delay = initial * std::pow(policy_.multiplier, static_cast<double>(attempts - 1));
  if (!std::isfinite(delay) || delay > cap) {
    delay = cap;
  }
  if (policy_.jitter > 0.0) {
    std::uniform_real_distribution<double> factor(1.0 - policy_.jitter, 1.0 + policy_.jitter);
    delay *= factor(rng_);
  }
  delay = std::clamp(delay, 1.0, cap);
  return duration(static_cast<duration::rep>(delay));
}

}  // namespace tec::timedqueue::detail

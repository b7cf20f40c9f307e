#include "tec/base/backoff.hpp"

#include <algorithm>

namespace tec::base {

std::chrono::milliseconds jitter(std::chrono::milliseconds d, double max_factor,
                                 std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double stretched = static_cast<double>(d.count()) * (1.0 + max_factor * unit(rng));
  return std::chrono::milliseconds(static_cast<std::int64_t>(stretched));
}

backoff::backoff(backoff_policy policy, clock& clock, std::uint64_t seed)
    : policy_(policy),
      clock_(clock),
      rng_(seed != 0 ? seed : std::random_device{}()),
      base_(policy.initial) {}

std::chrono::milliseconds backoff::next() {
  const auto now = clock_.now();
  if (used_ && now - last_ > policy_.reset_after) {
    base_ = policy_.initial;
  }
  used_ = true;
  last_ = now;
  const auto base = base_;
  const double grown = static_cast<double>(base_.count()) * policy_.factor;
  base_ = std::min(policy_.cap, std::chrono::milliseconds(static_cast<std::int64_t>(grown)));
  return std::min(policy_.cap, jitter(base, policy_.jitter, rng_));
}

void backoff::reset() {
  base_ = policy_.initial;
  used_ = false;
}

}  // namespace tec::base

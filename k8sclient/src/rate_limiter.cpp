#include "tec/k8sclient/rate_limiter.hpp"

namespace tec::k8sclient {

rate_limiter::rate_limiter(double qps, int burst, base::clock& clock)
    : limited_(qps > 0), clock_(clock), bucket_(qps, static_cast<double>(burst), clock_.now()) {}

std::chrono::nanoseconds rate_limiter::reserve() {
  if (!limited_) {
    return std::chrono::nanoseconds::zero();
  }
  return bucket_.reserve(clock_.now());
}

bool rate_limiter::try_take() {
  return !limited_ || bucket_.try_take(clock_.now());
}

double rate_limiter::tokens() {
  return bucket_.tokens(clock_.now());
}

}  // namespace tec::k8sclient

#include "tec/kube/rate_limiter.hpp"

#include <algorithm>

namespace tec::kube {

rate_limiter::rate_limiter(double qps, int burst, now_fn now)
    : qps_(qps),
      burst_(static_cast<double>(std::max(burst, 1))),
      now_(now ? std::move(now) : now_fn([] { return clock::now(); })),
      tokens_(burst_),
      last_(now_()) {}

void rate_limiter::refill() {
  const auto now = now_();
  if (now > last_) {
    const std::chrono::duration<double> elapsed = now - last_;
    tokens_ = std::min(burst_, tokens_ + elapsed.count() * qps_);
    last_ = now;
  }
}

std::chrono::nanoseconds rate_limiter::reserve() {
  if (qps_ <= 0) {
    return std::chrono::nanoseconds::zero();
  }
  refill();
  tokens_ -= 1.0;
  if (tokens_ >= 0) {
    return std::chrono::nanoseconds::zero();
  }
  const std::chrono::duration<double> wait(-tokens_ / qps_);
  return std::chrono::ceil<std::chrono::nanoseconds>(wait);
}

bool rate_limiter::try_take() {
  if (qps_ <= 0) {
    return true;
  }
  refill();
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  return false;
}

double rate_limiter::tokens() {
  refill();
  return tokens_;
}

}  // namespace tec::kube

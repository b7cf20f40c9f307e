#include "tec/k8sclient/rate_limiter.hpp"

#include <utility>

namespace tec::k8sclient {

rate_limiter::rate_limiter(double qps, int burst, now_fn now)
    : limited_(qps > 0),
      now_(now ? std::move(now) : now_fn([] { return clock::now(); })),
      bucket_(qps, static_cast<double>(burst), now_()) {}

std::chrono::nanoseconds rate_limiter::reserve() {
  if (!limited_) {
    return std::chrono::nanoseconds::zero();
  }
  return bucket_.reserve(now_());
}

bool rate_limiter::try_take() {
  return !limited_ || bucket_.try_take(now_());
}

double rate_limiter::tokens() {
  return bucket_.tokens(now_());
}

}  // namespace tec::k8sclient

#pragma once

// A steady time point the test moves by hand, handed to what takes a `now` function (the
// client's rate limiter, base::backoff).

#include <chrono>

namespace tec::test {

struct hand_clock {
  std::chrono::steady_clock::time_point now{std::chrono::steady_clock::time_point{} +
                                            std::chrono::hours(1)};
  auto fn() {
    return [this] { return now; };
  }
};

}  // namespace tec::test

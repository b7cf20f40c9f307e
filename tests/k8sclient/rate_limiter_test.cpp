#include "tec/k8sclient/rate_limiter.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "support/manual_clock.hpp"

namespace tec::k8sclient {
namespace {

using namespace std::chrono_literals;

TEST(rate_limiter, burst_then_qps) {
  test::manual_clock clock;
  rate_limiter limiter(10.0, 3, clock);
  EXPECT_EQ(limiter.reserve(), 0ns);
  EXPECT_EQ(limiter.reserve(), 0ns);
  EXPECT_EQ(limiter.reserve(), 0ns);
  EXPECT_EQ(limiter.reserve(), 100ms);
  EXPECT_EQ(limiter.reserve(), 200ms);  // reservations queue up behind each other
  clock.advance(200ms);
  EXPECT_EQ(limiter.reserve(), 100ms);
}

TEST(rate_limiter, refill_is_capped_at_burst) {
  test::manual_clock clock;
  rate_limiter limiter(20.0, 30, clock);
  for (int i = 0; i < 30; ++i) {
    EXPECT_TRUE(limiter.try_take());
  }
  EXPECT_FALSE(limiter.try_take());
  clock.advance(1h);
  EXPECT_DOUBLE_EQ(limiter.tokens(), 30.0);
  clock.advance(50ms);
  EXPECT_TRUE(limiter.try_take());
  EXPECT_NEAR(limiter.tokens(), 29.0, 1e-9);
}

TEST(rate_limiter, non_positive_qps_disables_limiting) {
  test::manual_clock clock;
  rate_limiter limiter(0.0, 1, clock);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(limiter.reserve(), 0ns);
  }
}

TEST(rate_limiter, try_take_does_not_borrow) {
  test::manual_clock clock;
  rate_limiter limiter(1.0, 1, clock);
  EXPECT_TRUE(limiter.try_take());
  EXPECT_FALSE(limiter.try_take());
  clock.advance(999ms);
  EXPECT_FALSE(limiter.try_take());
  clock.advance(1ms);
  EXPECT_TRUE(limiter.try_take());
}

}  // namespace
}  // namespace tec::k8sclient

#include "tec/k8sclient/rate_limiter.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "tec/k8sclient/backoff.hpp"
#include "tec/k8sclient/token_bucket.hpp"

namespace tec::k8sclient {
namespace {

using namespace std::chrono_literals;

struct limiter_clock {
  std::chrono::steady_clock::time_point now{std::chrono::steady_clock::time_point{} + 1h};
  auto fn() {
    return [this] { return now; };
  }
};

TEST(rate_limiter, burst_then_qps) {
  limiter_clock clock;
  rate_limiter limiter(10.0, 3, clock.fn());
  EXPECT_EQ(limiter.reserve(), 0ns);
  EXPECT_EQ(limiter.reserve(), 0ns);
  EXPECT_EQ(limiter.reserve(), 0ns);
  EXPECT_EQ(limiter.reserve(), 100ms);
  EXPECT_EQ(limiter.reserve(), 200ms);  // reservations queue up behind each other
  clock.now += 200ms;
  EXPECT_EQ(limiter.reserve(), 100ms);
}

TEST(rate_limiter, refill_is_capped_at_burst) {
  limiter_clock clock;
  rate_limiter limiter(20.0, 30, clock.fn());
  for (int i = 0; i < 30; ++i) {
    EXPECT_TRUE(limiter.try_take());
  }
  EXPECT_FALSE(limiter.try_take());
  clock.now += 1h;
  EXPECT_DOUBLE_EQ(limiter.tokens(), 30.0);
  clock.now += 50ms;
  EXPECT_TRUE(limiter.try_take());
  EXPECT_NEAR(limiter.tokens(), 29.0, 1e-9);
}

TEST(rate_limiter, non_positive_qps_disables_limiting) {
  limiter_clock clock;
  rate_limiter limiter(0.0, 1, clock.fn());
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(limiter.reserve(), 0ns);
  }
}

TEST(rate_limiter, try_take_does_not_borrow) {
  limiter_clock clock;
  rate_limiter limiter(1.0, 1, clock.fn());
  EXPECT_TRUE(limiter.try_take());
  EXPECT_FALSE(limiter.try_take());
  clock.now += 999ms;
  EXPECT_FALSE(limiter.try_take());
  clock.now += 1ms;
  EXPECT_TRUE(limiter.try_take());
}

TEST(token_bucket, refills_from_the_time_points_it_is_given) {
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  token_bucket bucket(0.5, 2, t0);  // one token per 2 s, two saved up
  EXPECT_TRUE(bucket.try_take(t0));
  EXPECT_TRUE(bucket.try_take(t0));
  EXPECT_FALSE(bucket.try_take(t0));
  EXPECT_FALSE(bucket.try_take(t0 + 1999ms));
  EXPECT_TRUE(bucket.try_take(t0 + 2s));
  // A time point before the last one (a clock stepping back) adds nothing and takes nothing.
  EXPECT_FALSE(bucket.try_take(t0));
  EXPECT_DOUBLE_EQ(bucket.tokens(t0 + 2s), 0.0);
  // Reserving borrows: the second reservation waits one more refill period.
  EXPECT_EQ(bucket.reserve(t0 + 2s), 2s);
  EXPECT_EQ(bucket.reserve(t0 + 2s), 4s);
  EXPECT_DOUBLE_EQ(bucket.tokens(t0 + 10s), 2.0);  // capped at burst
}

TEST(token_bucket, zero_rate_never_refills) {
  const auto t0 = std::chrono::steady_clock::time_point{};
  token_bucket bucket(0, 1, t0);
  EXPECT_TRUE(bucket.try_take(t0));
  EXPECT_FALSE(bucket.try_take(t0 + 24h));
}

TEST(jitter, stretches_by_up_to_the_factor) {
  std::mt19937_64 rng(3);
  bool above = false;
  for (int i = 0; i < 100; ++i) {
    const auto d = jitter(2s, 1.2, rng);
    EXPECT_GE(d, 2s);
    EXPECT_LT(d, 4400ms);
    above = above || d > 3s;
  }
  EXPECT_TRUE(above);
  EXPECT_EQ(jitter(2s, 0.0, rng), 2s);
}

TEST(backoff, doubles_with_jitter_up_to_the_cap) {
  limiter_clock clock;
  backoff b({}, clock.fn(), 42);
  auto base = 800ms;
  for (int i = 0; i < 12; ++i) {
    const auto d = b.next();
    EXPECT_GE(d, std::min<std::chrono::milliseconds>(base, 30s)) << i;
    EXPECT_LT(d, std::min<std::chrono::milliseconds>(2 * base, 30s + 1ms)) << i;
    EXPECT_LE(d, 30s);
    base = std::min<std::chrono::milliseconds>(2 * base, 30s);
    clock.now += d;
  }
}

TEST(backoff, resets_after_a_healthy_stretch) {
  limiter_clock clock;
  backoff b({}, clock.fn(), 7);
  for (int i = 0; i < 6; ++i) {
    clock.now += 1s;
    (void)b.next();
  }
  clock.now += 119s;         // less than 2 minutes since the last failure
  EXPECT_GE(b.next(), 25s);  // still in the series
  clock.now += 121s;
  const auto d = b.next();
  EXPECT_GE(d, 800ms);
  EXPECT_LT(d, 1600ms);
}

TEST(backoff, no_jitter_is_exact) {
  limiter_clock clock;
  backoff_policy p;
  p.jitter = 0;
  backoff b(p, clock.fn(), 1);
  EXPECT_EQ(b.next(), 800ms);
  EXPECT_EQ(b.next(), 1600ms);
  EXPECT_EQ(b.next(), 3200ms);
  b.reset();
  EXPECT_EQ(b.next(), 800ms);
}

}  // namespace
}  // namespace tec::k8sclient

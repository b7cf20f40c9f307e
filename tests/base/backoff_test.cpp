// The bottom library's token bucket (the client's QPS, the event spam filter) and its backoff
// with jitter (re-watch and relist, the client's resends, the leader election's retry period).

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "support/manual_clock.hpp"
#include "tec/base/backoff.hpp"
#include "tec/base/token_bucket.hpp"

namespace tec::base {
namespace {

using namespace std::chrono_literals;

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
  test::manual_clock clock;
  backoff b({}, clock, 42);
  auto base = 800ms;
  for (int i = 0; i < 12; ++i) {
    const auto d = b.next();
    EXPECT_GE(d, std::min<std::chrono::milliseconds>(base, 30s)) << i;
    EXPECT_LT(d, std::min<std::chrono::milliseconds>(2 * base, 30s + 1ms)) << i;
    EXPECT_LE(d, 30s);
    base = std::min<std::chrono::milliseconds>(2 * base, 30s);
    clock.advance(d);
  }
}

TEST(backoff, resets_after_a_healthy_stretch) {
  test::manual_clock clock;
  backoff b({}, clock, 7);
  for (int i = 0; i < 6; ++i) {
    clock.advance(1s);
    (void)b.next();
  }
  clock.advance(119s);       // less than 2 minutes since the last failure
  EXPECT_GE(b.next(), 25s);  // still in the series
  clock.advance(121s);
  const auto d = b.next();
  EXPECT_GE(d, 800ms);
  EXPECT_LT(d, 1600ms);
}

TEST(backoff, no_jitter_is_exact) {
  test::manual_clock clock;
  backoff_policy p;
  p.jitter = 0;
  backoff b(p, clock, 1);
  EXPECT_EQ(b.next(), 800ms);
  EXPECT_EQ(b.next(), 1600ms);
  EXPECT_EQ(b.next(), 3200ms);
  b.reset();
  EXPECT_EQ(b.next(), 800ms);
}

}  // namespace
}  // namespace tec::base

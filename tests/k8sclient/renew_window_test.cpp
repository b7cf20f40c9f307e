#include "renew_window.hpp"
#include <gtest/gtest.h>
#include <chrono>

namespace tec::k8sclient {
namespace {

using namespace std::chrono_literals;
using time_point = renew_window::time_point;

// client-go's defaults: retry period 2 s, renew deadline 10 s.
TEST(renew_window, a_renewal_gets_the_retry_period_plus_the_deadline_after_a_success) {
  renew_window w(2s, 10s);
  const time_point t0{};
  w.succeeded(t0);
  EXPECT_FALSE(w.expired(t0 + 10s)) << "the deadline counted from the last success";
  EXPECT_FALSE(w.expired(t0 + 11999ms));
  EXPECT_TRUE(w.expired(t0 + 12s));
}

TEST(renew_window, a_cycle_gets_the_whole_deadline_from_its_own_beginning) {
  renew_window w(2s, 10s);
  const time_point t0{};
  w.succeeded(t0);
  // The retry timer fired late (a busy machine): the cycle begins at 3.5 s, not 2 s.
  w.cycle_began(t0 + 3500ms);
  EXPECT_EQ(w.renew_by(), t0 + 13500ms);
  EXPECT_FALSE(w.expired(t0 + 13499ms));
  EXPECT_TRUE(w.expired(t0 + 13500ms));
}

TEST(renew_window, a_success_late_in_a_cycle_moves_the_deadline_past_the_next_wait) {
  renew_window w(2s, 10s);
  const time_point t0{};
  w.cycle_began(t0);
  w.succeeded(t0 + 9s);  // after several failed attempts
  // Waiting for the next cycle (until 11 s) must not count against the old cycle's 10 s.
  EXPECT_FALSE(w.expired(t0 + 11s));
  EXPECT_TRUE(w.expired(t0 + 21s));
}

}  // namespace
}  // namespace tec::k8sclient

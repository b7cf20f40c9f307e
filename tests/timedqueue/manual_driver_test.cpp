#include "support/manual_driver.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

TEST(manual_driver, clock_moves_only_when_told) {
  const time_point start = time_point{} + 5h;
  manual_driver drv(start);
  EXPECT_EQ(drv.now(), start);
  drv.advance(3s);
  EXPECT_EQ(drv.now(), start + 3s);
  drv.advance(duration::max());
  EXPECT_EQ(drv.now(), time_point::max()) << "saturates instead of overflowing";
}

TEST(manual_driver, post_never_runs_on_the_callers_stack) {
  manual_driver drv;
  int ran = 0;
  drv.post([&] { ++ran; });
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(drv.posted(), 1U);
  EXPECT_EQ(drv.run_pending(), 1U);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(drv.posted(), 0U);
}

TEST(manual_driver, run_pending_runs_work_posted_while_running) {
  manual_driver drv;
  std::vector<int> order;
  drv.post([&] {
    order.push_back(1);
    drv.post([&] { order.push_back(3); });
  });
  drv.post([&] { order.push_back(2); });
  EXPECT_EQ(drv.run_pending(), 3U);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(manual_driver, timer_fires_at_its_deadline_during_advance) {
  manual_driver drv;
  const time_point t0 = drv.now();
  std::vector<time_point> fired;
  drv.arm(t0 + 2s, [&] {
    fired.push_back(drv.now());
    drv.arm(t0 + 3s, [&] { fired.push_back(drv.now()); });
  });
  EXPECT_EQ(drv.armed_deadline(), t0 + 2s);
  drv.advance(2s - 1ns);
  EXPECT_TRUE(fired.empty());
  drv.advance(10s);
  EXPECT_EQ(fired, (std::vector<time_point>{t0 + 2s, t0 + 3s}));
  EXPECT_EQ(drv.now(), t0 + 12s - 1ns);
  EXPECT_FALSE(drv.armed_deadline());
}

TEST(manual_driver, rearm_replaces_and_disarm_clears) {
  manual_driver drv;
  const time_point t0 = drv.now();
  int first = 0;
  int second = 0;
  drv.arm(t0 + 1s, [&] { ++first; });
  drv.arm(t0 + 2s, [&] { ++second; });
  drv.advance(1500ms);
  EXPECT_EQ(first + second, 0);
  drv.advance(1s);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  drv.arm(t0 + 5s, [&] { ++first; });
  drv.disarm();
  drv.advance(1h);
  EXPECT_EQ(first, 0);
}

TEST(manual_driver, a_deadline_already_passed_fires_on_run_pending) {
  manual_driver drv;
  int fired = 0;
  drv.arm(drv.now() - 1s, [&] { ++fired; });
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(drv.run_pending(), 1U);
  EXPECT_EQ(fired, 1);
}

TEST(manual_driver, without_inline_running_posted_work_waits_for_run_pending) {
  manual_driver drv(time_point{} + 1h, false);
  int ran = 0;
  int fired = 0;
  drv.post([&] { ++ran; });
  drv.arm(drv.now() + 1s, [&] { ++fired; });
  drv.advance(2s);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(drv.posted(), 2U);
  EXPECT_EQ(drv.run_pending(), 2U);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(fired, 1);
}

}  // namespace
}  // namespace tec::timedqueue

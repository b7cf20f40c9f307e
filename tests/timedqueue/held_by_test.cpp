// run_info::held_by: why admission control held a run before it started (the eviction
// history's "waited 2.1s: rate_limit"). Manual driver.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include "support/manual_driver.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

class held_by_test : public ::testing::Test {
protected:
  ~held_by_test() override {
    kept.clear();
    queue.shutdown();
  }

  struct seen {
    hold_reason held_by = hold_reason::none;
    std::uint8_t group = 0;
    duration waited{};
    bool held = false;
    time_point deferral_ended_at{};
    std::uint8_t deferral_tag = 0;
  };

  manual_driver drv;
  std::map<std::string, seen> runs;
  std::map<std::string, completion> kept;
  bool keep = false;
  timed_queue queue{drv, [this](const run_info& info, completion done) {
                      runs[std::string(info.key)] = {
                          info.held_by, info.held_group,        info.admitted_at - info.due_at,
                          info.held,    info.deferral_ended_at, info.deferral_tag};
                      if (keep) {
                        kept.emplace(std::string(info.key), std::move(done));
                      } else {
                        done.complete(outcome::success());
                      }
                    }};
};

TEST_F(held_by_test, NoneWhenItStartsWhenDue) {
  queue.schedule("a", drv.now(), drv.now() + 1s);
  drv.advance(1s);
  ASSERT_EQ(runs.count("a"), 1U);
  EXPECT_EQ(runs["a"].held_by, hold_reason::none);
}

TEST_F(held_by_test, TheRateLimit) {
  queue.set_admission({.starts_per_second = 1, .burst = 1, .max_running_per_group = {}});
  queue.schedule("a", drv.now(), drv.now());
  queue.schedule("b", drv.now(), drv.now());
  drv.advance(1s);
  EXPECT_EQ(runs["a"].held_by, hold_reason::none);
  EXPECT_EQ(runs["b"].held_by, hold_reason::rate_limit);
  EXPECT_EQ(runs["b"].waited, 1s);
}

TEST_F(held_by_test, AFullGroupAndItsClass) {
  keep = true;
  queue.set_admission({.starts_per_second = 0, .burst = 0, .max_running_per_group = {0, 1}});
  queue.schedule("a", drv.now(), drv.now(), {}, {"n", "ns"});
  queue.schedule("b", drv.now(), drv.now(), {}, {"n", "ns"});
  drv.run_pending();
  EXPECT_EQ(runs.count("b"), 0U);
  kept.at("a").complete(outcome::success());
  drv.run_pending();
  ASSERT_EQ(runs.count("b"), 1U);
  EXPECT_EQ(runs["b"].held_by, hold_reason::group_limit);
  EXPECT_EQ(runs["b"].group, 1U);
}

TEST_F(held_by_test, APauseMarksWhatItHolds) {
  queue.set_admission({.starts_per_second = 0.1, .burst = 1, .max_running_per_group = {}});
  queue.schedule("a", drv.now(), drv.now());
  queue.schedule("b", drv.now(), drv.now());  // held by the rate
  queue.set_paused(true);
  queue.schedule("c", drv.now(), drv.now());  // held while paused
  drv.advance(30s);
  queue.set_paused(false);
  drv.advance(30s);
  EXPECT_EQ(runs["a"].held_by, hold_reason::none);
  EXPECT_EQ(runs["b"].held_by, hold_reason::paused);
  EXPECT_EQ(runs["c"].held_by, hold_reason::paused);
}

// A deferral's wait: when it ended and its tag; admission's after it is held_by's.
TEST_F(held_by_test, ADeferralSaysWhenItsWaitEndedAndItsTag) {
  const time_point t0 = drv.now();
  queue.set_admission({.starts_per_second = 1, .burst = 1, .max_running_per_group = {}});
  queue.schedule("a", t0, t0, {}, {}, deferral{t0 + 5s, 3});
  queue.schedule("b", t0, t0, {}, {}, deferral{t0 + 5s, 3});
  drv.advance(4s);
  EXPECT_TRUE(runs.empty());
  drv.advance(1s);
  ASSERT_EQ(runs.count("a"), 1U);
  EXPECT_TRUE(runs["a"].held);
  EXPECT_EQ(runs["a"].held_by, hold_reason::none);
  EXPECT_EQ(runs["a"].deferral_ended_at, t0 + 5s);
  EXPECT_EQ(runs["a"].deferral_tag, 3U);
  EXPECT_EQ(runs["a"].waited, 5s);
  drv.advance(1s);
  ASSERT_EQ(runs.count("b"), 1U);
  EXPECT_EQ(runs["b"].held_by, hold_reason::rate_limit);
  EXPECT_EQ(runs["b"].deferral_ended_at, t0 + 5s);
  EXPECT_EQ(runs["b"].deferral_tag, 3U);
  EXPECT_EQ(runs["b"].waited, 6s);
}

// A deferral removed while the entry waits for it still names the wait it had.
TEST_F(held_by_test, ADeferralRemovedWhileItWaitsKeepsItsTag) {
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0, {}, {}, deferral{t0 + 60s, 2});
  drv.advance(10s);
  ASSERT_TRUE(queue.defer("a", queue.lookup("a")->generation, {}));
  drv.run_pending();
  ASSERT_EQ(runs.count("a"), 1U);
  EXPECT_EQ(runs["a"].deferral_ended_at, t0 + 10s);
  EXPECT_EQ(runs["a"].deferral_tag, 2U);
}

TEST_F(held_by_test, NoDeferralNoDeferralWait) {
  queue.schedule("a", drv.now(), drv.now() + 1s);
  drv.advance(1s);
  ASSERT_EQ(runs.count("a"), 1U);
  EXPECT_FALSE(runs["a"].held);
  EXPECT_EQ(runs["a"].deferral_ended_at, time_point{});
}

}  // namespace
}  // namespace tec::timedqueue

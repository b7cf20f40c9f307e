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
  };

  manual_driver drv;
  std::map<std::string, seen> runs;
  std::map<std::string, completion> kept;
  bool keep = false;
  timed_queue queue{drv, [this](const run_info& info, completion done) {
                      runs[std::string(info.key)] = {info.held_by, info.held_group,
                                                     info.admitted_at - info.due_at};
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

}  // namespace
}  // namespace tec::timedqueue

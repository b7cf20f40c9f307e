// The timed queue's deferrals: an entry that comes due before its deferral ends waits (held,
// hold_reason::deferred), then goes to admission as due at its original time. On the manual
// driver: time moves only when the test says so.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/manual_driver.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

class deferral_test : public ::testing::Test {
protected:
  ~deferral_test() override { queue.shutdown(); }

  work_fn work() {
    return [this](const run_info& info, completion done) {
      runs.emplace_back(info.key);
      due.push_back(info.due_at);
      done.complete(outcome::success());
    };
  }

  manual_driver drv;
  std::vector<std::string> runs;
  std::vector<time_point> due;
  timed_queue queue{drv, work()};
};

TEST_F(deferral_test, an_entry_due_now_waits_for_its_deferral) {
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0, "uid", {}, deferral{t0 + 10s, 1});
  drv.run_pending();
  EXPECT_TRUE(runs.empty());
  const auto info = queue.lookup("a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, entry_state::held);
  EXPECT_EQ(info->hold, hold_reason::deferred);
  EXPECT_EQ(info->deferred.tag, 1);
  EXPECT_EQ(info->deferred.until, t0 + 10s);
  EXPECT_EQ(queue.stats().deferred[1], 1U);
  EXPECT_EQ(queue.stats().held, 0U) << "admission holds nothing";

  drv.advance(9999ms);
  EXPECT_TRUE(runs.empty());
  drv.advance(1ms);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(due[0], t0) << "it came due at its own time";
  EXPECT_EQ(queue.stats().deferred[1], 0U);
}

TEST_F(deferral_test, a_deferral_that_ends_before_the_fire_time_changes_nothing) {
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0 + 5s, "uid", {}, deferral{t0 + 3s, 1});
  drv.advance(5s);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(queue.stats().deferred[1], 0U);
}

TEST_F(deferral_test, a_pending_entry_keeps_its_deferral_for_when_it_comes_due) {
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0 + 5s, "uid");
  const std::uint64_t gen = queue.lookup("a")->generation;
  EXPECT_TRUE(queue.defer("a", gen, deferral{t0 + 8s, 2}));
  EXPECT_FALSE(queue.defer("a", gen + 1, deferral{t0 + 9s, 2})) << "another generation";
  EXPECT_FALSE(queue.defer("b", gen, deferral{t0 + 9s, 2})) << "no such key";
  drv.advance(5s);
  EXPECT_TRUE(runs.empty());
  EXPECT_EQ(queue.lookup("a")->hold, hold_reason::deferred);
  EXPECT_EQ(queue.stats().deferred[2], 1U);
  drv.advance(3s);
  EXPECT_EQ(runs.size(), 1U);
}

TEST_F(deferral_test, a_deferral_moved_earlier_or_removed_releases_the_entry) {
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0, "uid", {}, deferral{t0 + 60s, 1});
  const std::uint64_t gen = queue.lookup("a")->generation;
  drv.run_pending();
  ASSERT_TRUE(runs.empty());
  // Moved later, then earlier: the entry waits for the new time.
  EXPECT_TRUE(queue.defer("a", gen, deferral{t0 + 120s, 1}));
  EXPECT_TRUE(queue.defer("a", gen, deferral{t0 + 20s, 2}));
  EXPECT_EQ(queue.stats().deferred[1], 0U);
  EXPECT_EQ(queue.stats().deferred[2], 1U);
  drv.advance(10s);
  EXPECT_TRUE(runs.empty());
  // Removed: it starts at once.
  EXPECT_TRUE(queue.defer("a", gen, deferral{}));
  drv.run_pending();
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(due[0], t0);
  EXPECT_EQ(queue.stats().deferred[2], 0U);
}

TEST_F(deferral_test, an_entry_held_by_admission_moves_to_its_deferral) {
  queue.set_paused(true);
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0, "uid");
  drv.run_pending();
  EXPECT_EQ(queue.lookup("a")->hold, hold_reason::paused);
  const std::uint64_t gen = queue.lookup("a")->generation;
  EXPECT_TRUE(queue.defer("a", gen, deferral{t0 + 10s, 1}));
  EXPECT_EQ(queue.lookup("a")->hold, hold_reason::deferred);
  EXPECT_EQ(queue.stats().held, 0U);
  drv.advance(10s);
  // Its deferral is over; admission (paused) holds it again.
  EXPECT_TRUE(runs.empty());
  EXPECT_EQ(queue.lookup("a")->hold, hold_reason::paused);
  EXPECT_EQ(queue.stats().held, 1U);
  queue.set_paused(false);
  drv.run_pending();
  EXPECT_EQ(runs.size(), 1U);
}

TEST_F(deferral_test, a_deferred_entry_starts_in_due_order_behind_the_rate_limit) {
  queue.set_admission({.starts_per_second = 1, .burst = 1});
  const time_point t0 = drv.now();
  queue.schedule("early", t0, t0, "u1", {}, deferral{t0 + 5s, 1});
  queue.schedule("later", t0 + 1s, t0 + 1s, "u2");
  drv.run_pending();
  ASSERT_EQ(runs, std::vector<std::string>{"later"});
  drv.advance(5s);
  // "early" was due first: it goes first once its deferral ends.
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(runs[1], "early");
}

TEST_F(deferral_test, cancelling_a_deferred_entry_counts_as_cancelling_a_pending_one) {
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0, "uid", {}, deferral{t0 + 10s, 3});
  drv.run_pending();
  EXPECT_TRUE(queue.cancel("a"));
  EXPECT_EQ(queue.stats().deferred[3], 0U);
  EXPECT_EQ(queue.size(), 0U);
  drv.advance(20s);
  EXPECT_TRUE(runs.empty());
}

TEST_F(deferral_test, shutdown_frees_deferred_entries) {
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0, "uid", {}, deferral{t0 + 10s, 1});
  drv.run_pending();
  queue.shutdown();
  EXPECT_EQ(queue.stats().deferred[1], 0U);
  EXPECT_EQ(queue.size(), 0U);
}

}  // namespace
}  // namespace tec::timedqueue

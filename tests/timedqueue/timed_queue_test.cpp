#include "tec/timedqueue/timed_queue.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tec/timedqueue/manual_driver.hpp"

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

/// Records every run; completes it at once with `next_outcome` unless `hold` is set, in which
/// case the completion is kept for the test to complete.
struct recorder {
  struct run {
    std::string key;
    std::string payload;
    std::uint32_t attempt = 0;
    std::uint64_t generation = 0;
    time_point at;
  };

  work_fn fn(manual_driver& drv) {
    return [this, &drv](const run_info& info, completion done) {
      runs.push_back({std::string(info.key), std::string(info.payload), info.attempt,
                      info.generation, drv.now()});
      if (hold) {
        held.push_back(std::move(done));
        return;
      }
      done.complete(fail ? outcome::failure("boom") : outcome::success());
    };
  }

  [[nodiscard]] std::size_t count(const std::string& key) const {
    std::size_t n = 0;
    for (const auto& r : runs) {
      n += r.key == key ? 1U : 0U;
    }
    return n;
  }

  std::vector<run> runs;
  std::vector<completion> held;
  bool hold = false;
  bool fail = false;
};

retry_policy no_jitter() {
  retry_policy p;
  p.jitter = 0.0;
  return p;
}

class timed_queue_test : public ::testing::Test {
protected:
  ~timed_queue_test() override {
    rec.held.clear();
    queue.shutdown();
  }

  std::string key(int i) const { return "ns/pod-" + std::to_string(i); }

  manual_driver drv;
  recorder rec;
  timed_queue queue{drv, rec.fn(drv), no_jitter()};
};

// --- upstream's TimedWorkerQueue tests ---------------------------------------------------------

TEST_F(timed_queue_test, five_immediate_works_run) {
  const time_point now = drv.now();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(queue.schedule(key(i), now, now), schedule_result::scheduled);
  }
  EXPECT_TRUE(rec.runs.empty()) << "work must be posted, not run on schedule()'s stack";
  drv.run_pending();
  EXPECT_EQ(rec.runs.size(), 5U);
  EXPECT_EQ(queue.size(), 0U);
}

TEST_F(timed_queue_test, five_delayed_works_run_after_their_delay_and_readds_are_skipped) {
  const time_point now = drv.now();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(queue.schedule(key(i), now, now + 10s), schedule_result::scheduled);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(queue.schedule(key(i), now, now + 1s), schedule_result::already_pending);
  }
  drv.advance(9s);
  EXPECT_TRUE(rec.runs.empty());
  drv.advance(2s);
  EXPECT_EQ(rec.runs.size(), 5U);
  for (const auto& r : rec.runs) {
    EXPECT_EQ(r.at, now + 10s) << "fires at its own deadline, not at the re-add's";
  }
}

TEST_F(timed_queue_test, cancelled_works_do_not_run) {
  const time_point now = drv.now();
  for (int i = 0; i < 5; ++i) {
    queue.schedule(key(i), now, now + 10s);
  }
  EXPECT_TRUE(queue.cancel(key(0)));
  EXPECT_TRUE(queue.cancel(key(4)));
  EXPECT_FALSE(queue.cancel(key(4)));
  drv.advance(11s);
  EXPECT_EQ(rec.runs.size(), 3U);
  EXPECT_EQ(rec.count(key(0)) + rec.count(key(4)), 0U);
}

TEST_F(timed_queue_test, cancel_two_and_readd_one_runs_four) {
  const time_point now = drv.now();
  for (int i = 0; i < 5; ++i) {
    queue.schedule(key(i), now, now + 10s);
  }
  EXPECT_TRUE(queue.cancel(key(0)));
  EXPECT_TRUE(queue.cancel(key(4)));
  EXPECT_EQ(queue.schedule(key(2), now, now + 10s), schedule_result::already_pending);
  EXPECT_EQ(queue.schedule(key(4), now, now + 10s), schedule_result::scheduled);
  drv.advance(11s);
  EXPECT_EQ(rec.runs.size(), 4U);
  EXPECT_EQ(rec.count(key(4)), 1U);
}

// --- the stale-key bugs -------------------------------------------------------------------------

TEST_F(timed_queue_test, cancel_while_running_frees_the_key_for_new_work) {
  rec.hold = true;
  const time_point now = drv.now();
  queue.schedule("ns/a", now, now, "uid-1");
  drv.run_pending();
  ASSERT_EQ(rec.held.size(), 1U);
  EXPECT_EQ(queue.lookup("ns/a")->state, entry_state::running);
  EXPECT_EQ(queue.schedule("ns/a", now, now), schedule_result::already_running);

  EXPECT_FALSE(queue.cancel("ns/a")) << "only a pending entry reports a cancel";
  EXPECT_TRUE(rec.held[0].cancelled());
  EXPECT_FALSE(queue.contains("ns/a"));
  rec.held[0].complete(outcome::success());

  EXPECT_EQ(queue.schedule("ns/a", drv.now(), drv.now(), "uid-2"), schedule_result::scheduled);
  drv.run_pending();
  ASSERT_EQ(rec.runs.size(), 2U);
  EXPECT_EQ(rec.runs[1].payload, "uid-2");
  EXPECT_NE(rec.runs[0].generation, rec.runs[1].generation);
}

TEST_F(timed_queue_test, old_run_completing_leaves_its_replacement_pending_and_cancellable) {
  rec.hold = true;
  const time_point now = drv.now();
  queue.schedule("ns/a", now, now, "uid-1");
  drv.run_pending();
  ASSERT_EQ(rec.held.size(), 1U);
  queue.cancel("ns/a");
  EXPECT_EQ(queue.schedule("ns/a", now, now + 30s, "uid-2"), schedule_result::scheduled);

  rec.held[0].complete(outcome::success());
  auto info = queue.lookup("ns/a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, entry_state::pending);
  EXPECT_EQ(info->fire_at, now + 30s);
  EXPECT_EQ(info->payload, "uid-2");
  EXPECT_TRUE(queue.cancel("ns/a"));
  drv.advance(60s);
  EXPECT_EQ(rec.runs.size(), 1U);
}

TEST_F(timed_queue_test, old_run_failing_does_not_touch_its_replacement) {
  rec.hold = true;
  const time_point now = drv.now();
  queue.schedule("ns/a", now, now, "uid-1");
  drv.run_pending();
  queue.cancel("ns/a");
  queue.schedule("ns/a", now, now + 30s, "uid-2");
  rec.held[0].complete(outcome::failure("gone"));
  auto info = queue.lookup("ns/a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, entry_state::pending);
  EXPECT_EQ(info->attempts, 0U);
  EXPECT_TRUE(info->last_error.empty());
  EXPECT_EQ(queue.stats().failed, 0U) << "a cancelled run's result is ignored";
}

// --- inspection ---------------------------------------------------------------------------------

TEST_F(timed_queue_test, lookup_reports_the_entry) {
  const time_point now = drv.now();
  EXPECT_FALSE(queue.lookup("ns/a"));
  queue.schedule("ns/a", now - 1s, now + 5s, "0b9c-uid");
  auto info = queue.lookup("ns/a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, entry_state::pending);
  EXPECT_EQ(info->created_at, now - 1s);
  EXPECT_EQ(info->fire_at, now + 5s);
  EXPECT_EQ(info->next_attempt_at, now + 5s);
  EXPECT_EQ(info->payload, "0b9c-uid");
  EXPECT_EQ(info->attempts, 0U);
  EXPECT_GT(info->generation, 0U);
  EXPECT_TRUE(queue.contains("ns/a"));
  EXPECT_FALSE(queue.contains("ns/b"));
  EXPECT_EQ(queue.size(), 1U);
  EXPECT_EQ(queue.stats().pending, 1U);
}

}  // namespace
}  // namespace tec::timedqueue

#include "tec/timedqueue/timed_queue.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/manual_driver.hpp"

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
  EXPECT_FALSE(queue.lookup("ns/a").has_value());
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
  EXPECT_TRUE(queue.lookup("ns/a").has_value());
  EXPECT_FALSE(queue.lookup("ns/b").has_value());
  EXPECT_EQ(queue.size(), 1U);
  EXPECT_EQ(queue.stats().pending, 1U);
}

TEST_F(timed_queue_test, stats_count_what_happened) {
  const time_point now = drv.now();
  queue.schedule("a", now, now);
  queue.schedule("b", now, now + 1s);
  queue.schedule("c", now, now + 1s);
  queue.cancel("c");
  drv.advance(2s);
  const queue_stats s = queue.stats();
  EXPECT_EQ(s.scheduled, 3U);
  EXPECT_EQ(s.cancelled, 1U);
  EXPECT_EQ(s.started, 2U);
  EXPECT_EQ(s.succeeded, 2U);
  EXPECT_EQ(s.failed, 0U);
  EXPECT_EQ(s.retries, 0U);
  EXPECT_EQ(s.pending + s.running + s.backing_off, 0U);
}

// --- fire order and exactness -------------------------------------------------------------------

TEST_F(timed_queue_test, fires_exactly_at_its_deadline_not_before) {
  const time_point now = drv.now();
  queue.schedule("a", now, now + 5s);
  drv.advance(5s - 1ns);
  EXPECT_TRUE(rec.runs.empty());
  EXPECT_EQ(queue.lookup("a")->state, entry_state::pending);
  drv.advance(1ns);
  ASSERT_EQ(rec.runs.size(), 1U);
  EXPECT_EQ(rec.runs[0].at, now + 5s);
}

TEST_F(timed_queue_test, equal_deadlines_all_fire) {
  const time_point now = drv.now();
  // More than one timer callback takes at once: the rest still fire at the same instant.
  for (int i = 0; i < 3000; ++i) {
    queue.schedule(key(i), now, now + 3s);
  }
  drv.advance(3s);
  ASSERT_EQ(rec.runs.size(), 3000U);
  EXPECT_EQ(queue.size(), 0U);
  for (const auto& r : rec.runs) {
    EXPECT_EQ(r.at, now + 3s);
  }
  EXPECT_EQ(rec.runs.front().key, key(0)) << "ties fire in scheduling order";
  EXPECT_EQ(rec.runs.back().key, key(2999));
}

TEST(timed_queue_burst, what_a_start_posts_runs_before_the_next_start) {
  // Issue 30's burst: 500 pods due at the same instant. The controller's work posts the
  // eviction's request to the executor the starts run on; that request must not wait for the
  // other 499 starts, or the first DELETE leaves only after all of them.
  manual_driver drv;
  std::vector<std::string> order;
  std::vector<completion> held;
  timed_queue q(drv, [&](const run_info& info, completion done) {
    const std::string key(info.key);
    order.push_back("start " + key);
    drv.post([&order, key] { order.push_back("request " + key); });
    held.push_back(std::move(done));
  });
  const time_point now = drv.now();
  for (const char* key : {"ns/a", "ns/b", "ns/c"}) {
    q.schedule(key, now, now + 5s);
  }
  drv.advance(5s);
  EXPECT_EQ(order, (std::vector<std::string>{"start ns/a", "request ns/a", "start ns/b",
                                             "request ns/b", "start ns/c", "request ns/c"}));
  for (auto& c : held) {
    c.complete(outcome::success());
  }
  q.shutdown();
}

TEST_F(timed_queue_test, entries_fire_in_deadline_order_with_one_timer) {
  const time_point now = drv.now();
  // A fixed permutation of 0..96 (37 is coprime with 97).
  for (int i = 0; i < 97; ++i) {
    const int d = (i * 37) % 97;
    queue.schedule(key(d), now, now + std::chrono::milliseconds(10 * (d + 1)));
  }
  EXPECT_EQ(drv.armed_deadline(), now + 10ms) << "the one timer is armed to the earliest entry";
  EXPECT_TRUE(queue.cancel(key(0)));
  drv.advance(2s);
  ASSERT_EQ(rec.runs.size(), 96U);
  for (std::size_t i = 0; i < rec.runs.size(); ++i) {
    EXPECT_EQ(rec.runs[i].key, key(static_cast<int>(i) + 1));
    EXPECT_EQ(rec.runs[i].at, now + std::chrono::milliseconds(10 * (i + 2)));
  }
}

TEST_F(timed_queue_test, past_fire_time_starts_at_once) {
  const time_point now = drv.now();
  queue.schedule("past", now - 10s, now - 1s);
  queue.schedule("equal", now + 5s, now + 5s);
  drv.run_pending();
  EXPECT_EQ(rec.runs.size(), 2U);
}

// --- bad input ----------------------------------------------------------------------------------

TEST_F(timed_queue_test, empty_key_is_an_ordinary_key) {
  const time_point now = drv.now();
  EXPECT_EQ(queue.schedule("", now, now + 1s, "uid"), schedule_result::scheduled);
  EXPECT_EQ(queue.schedule("", now, now + 1s), schedule_result::already_pending);
  EXPECT_TRUE(queue.lookup("").has_value());
  EXPECT_EQ(queue.lookup("")->payload, "uid");
  drv.advance(1s);
  ASSERT_EQ(rec.runs.size(), 1U);
  EXPECT_EQ(rec.runs[0].key, "");
}

TEST_F(timed_queue_test, far_future_fire_time_never_fires_and_does_not_overflow) {
  const time_point now = drv.now();
  queue.schedule("never", time_point::min(), time_point::max());
  queue.schedule("soon", now, now + 1s);
  drv.advance(1s);
  drv.advance(duration::max());
  EXPECT_EQ(rec.runs.size(), 1U);
  EXPECT_EQ(queue.lookup("never")->state, entry_state::pending);
  EXPECT_TRUE(queue.cancel("never"));
}

TEST_F(timed_queue_test, backoff_near_the_end_of_time_saturates) {
  rec.fail = true;
  queue.schedule("a", time_point::min(), time_point::max() - 1ns);
  drv.advance(duration::max());
  ASSERT_EQ(rec.runs.size(), 1U);
  auto info = queue.lookup("a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, entry_state::backoff);
  EXPECT_EQ(info->next_attempt_at, time_point::max());
}

TEST(timed_queue_policy, nonsensical_retry_policies_are_rejected) {
  manual_driver drv;
  const auto make = [&](retry_policy p) {
    timed_queue q(
        drv, [](const run_info&, completion) {}, p);
  };
  retry_policy p;
  p.initial = 0s;
  EXPECT_THROW(make(p), std::invalid_argument);
  p = {};
  p.max = 1ms;
  EXPECT_THROW(make(p), std::invalid_argument);
  p = {};
  p.multiplier = 0.5;
  EXPECT_THROW(make(p), std::invalid_argument);
  p = {};
  p.jitter = -0.1;
  EXPECT_THROW(make(p), std::invalid_argument);
  p = {};
  p.jitter = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(make(p), std::invalid_argument);
  EXPECT_NO_THROW(make(retry_policy{}));
}

// --- durable retry ------------------------------------------------------------------------------

TEST(timed_queue_retry, failures_back_off_exponentially_up_to_the_cap) {
  manual_driver drv;
  recorder rec;
  rec.fail = true;
  retry_policy p;
  p.initial = 100ms;
  p.max = 1s;
  p.jitter = 0.0;
  timed_queue queue(drv, rec.fn(drv), p);
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0, "uid");
  drv.run_pending();
  ASSERT_EQ(rec.runs.size(), 1U);

  auto info = queue.lookup("a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, entry_state::backoff);
  EXPECT_EQ(info->attempts, 1U);
  EXPECT_EQ(info->last_error, "boom");
  EXPECT_EQ(info->fire_at, t0);
  EXPECT_EQ(info->next_attempt_at, t0 + 100ms);
  EXPECT_EQ(queue.schedule("a", t0, t0), schedule_result::already_pending);

  const std::vector<duration> delays = {100ms, 200ms, 400ms, 800ms, 1s, 1s};
  time_point at = t0;
  for (std::size_t i = 0; i < delays.size(); ++i) {
    drv.advance(delays[i] - 1ns);
    EXPECT_EQ(rec.runs.size(), i + 1) << "retry " << i + 1 << " ran early";
    drv.advance(1ns);
    at += delays[i];
    ASSERT_EQ(rec.runs.size(), i + 2);
    EXPECT_EQ(rec.runs.back().at, at);
    EXPECT_EQ(rec.runs.back().attempt, i + 2);
    EXPECT_EQ(rec.runs.back().payload, "uid");
  }
  rec.fail = false;
  drv.advance(1s);
  EXPECT_FALSE(queue.lookup("a").has_value());
  const queue_stats s = queue.stats();
  EXPECT_EQ(s.failed, 7U);
  EXPECT_EQ(s.retries, 7U);
  EXPECT_EQ(s.succeeded, 1U);
  queue.shutdown();
}

TEST(timed_queue_retry, a_failure_may_ask_for_its_retry_sooner_never_later) {
  manual_driver drv;
  retry_policy p;
  p.initial = 10s;
  p.max = 10s;
  p.jitter = 0.0;
  std::vector<time_point> runs;
  std::vector<std::optional<time_point>> retry_by;  // per run, in order
  timed_queue queue(
      drv,
      [&](const run_info&, completion done) {
        const std::size_t i = runs.size();
        runs.push_back(drv.now());
        if (i < retry_by.size()) {
          done.complete(retry_by[i] ? outcome::failure("later", *retry_by[i])
                                    : outcome::failure("later"));
        } else {
          done.complete(outcome::success());
        }
      },
      p);
  const time_point t0 = drv.now();
  retry_by = {t0 + 3s, t0 + 60s, t0 - 1s, std::nullopt};
  queue.schedule("a", t0, t0, "uid");
  drv.run_pending();
  drv.advance(3s);   // sooner than the backoff's 10 s
  drv.advance(10s);  // 60 s is later than the backoff: the backoff wins
  drv.advance(0s);   // a time already past: at once
  drv.advance(10s);
  ASSERT_EQ(runs.size(), 5U);
  EXPECT_EQ(runs[1], t0 + 3s);
  EXPECT_EQ(runs[2], t0 + 13s);
  EXPECT_EQ(runs[3], t0 + 13s);
  EXPECT_EQ(runs[4], t0 + 23s);
  EXPECT_FALSE(queue.lookup("a").has_value());
  queue.shutdown();
}

TEST(timed_queue_retry, jitter_stays_in_range_and_a_seed_makes_it_repeatable) {
  const auto delays = [](std::uint64_t seed) {
    manual_driver drv;
    recorder rec;
    rec.fail = true;
    retry_policy p;
    p.initial = 1s;
    p.max = 1000s;
    p.multiplier = 1.0;
    p.jitter = 0.2;
    p.seed = seed;
    timed_queue queue(drv, rec.fn(drv), p);
    queue.schedule("a", drv.now(), drv.now());
    std::vector<duration> out;
    for (int i = 0; i < 50; ++i) {
      drv.run_pending();
      out.push_back(queue.lookup("a")->next_attempt_at - drv.now());
      drv.advance(out.back());
    }
    queue.shutdown();
    return out;
  };
  const auto a = delays(42);
  EXPECT_EQ(a, delays(42));
  EXPECT_NE(a, delays(43));
  bool varied = false;
  for (const auto d : a) {
    EXPECT_GE(d, 800ms);
    EXPECT_LE(d, 1200ms);
    varied = varied || d != a.front();
  }
  EXPECT_TRUE(varied);
}

TEST_F(timed_queue_test, cancel_during_backoff_stops_retries) {
  rec.fail = true;
  const time_point now = drv.now();
  queue.schedule("a", now, now);
  drv.run_pending();
  ASSERT_EQ(queue.lookup("a")->state, entry_state::backoff);
  EXPECT_FALSE(queue.cancel("a")) << "a backing-off entry already fired";
  EXPECT_FALSE(queue.lookup("a").has_value());
  drv.advance(1min);
  EXPECT_EQ(rec.runs.size(), 1U);
  EXPECT_EQ(queue.stats().backing_off, 0U);
  EXPECT_EQ(queue.schedule("a", drv.now(), drv.now() + 1s), schedule_result::scheduled);
}

TEST_F(timed_queue_test, a_dropped_completion_counts_as_a_failure_and_is_retried) {
  rec.hold = true;
  const time_point now = drv.now();
  queue.schedule("a", now, now);
  drv.run_pending();
  ASSERT_EQ(rec.held.size(), 1U);
  rec.held.clear();
  auto info = queue.lookup("a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, entry_state::backoff);
  EXPECT_EQ(info->last_error, "abandoned");
  drv.advance(100ms);
  EXPECT_EQ(rec.runs.size(), 2U);
  EXPECT_EQ(rec.runs[1].attempt, 2U);
}

TEST_F(timed_queue_test, completing_twice_is_harmless) {
  rec.hold = true;
  const time_point now = drv.now();
  queue.schedule("a", now, now);
  drv.run_pending();
  ASSERT_EQ(rec.held.size(), 1U);
  completion c = std::move(rec.held[0]);
  EXPECT_FALSE(c.cancelled());
  c.complete(outcome::success());
  c.complete(outcome::failure("late"));
  EXPECT_FALSE(queue.lookup("a").has_value());
  EXPECT_EQ(queue.stats().failed, 0U);
  completion moved_from = std::move(c);
  moved_from.complete(outcome::failure("again"));
  EXPECT_EQ(queue.stats().succeeded, 1U);
}

TEST(timed_queue_work, work_may_call_back_into_the_queue) {
  manual_driver drv;
  timed_queue* self = nullptr;
  int runs = 0;
  timed_queue queue(drv, [&](const run_info& info, completion done) {
    ++runs;
    EXPECT_EQ(self->schedule(info.key, drv.now(), drv.now()), schedule_result::already_running);
    EXPECT_FALSE(self->cancel("other-running-or-missing"));
    EXPECT_TRUE(self->lookup(info.key).has_value());
    done.complete(outcome::success());
    EXPECT_FALSE(self->lookup(info.key).has_value());
  });
  self = &queue;
  queue.schedule("a", drv.now(), drv.now());
  drv.run_pending();
  EXPECT_EQ(runs, 1);
  queue.shutdown();
}

TEST(timed_queue_work, throwing_work_is_retried) {
  manual_driver drv;
  int runs = 0;
  retry_policy p;
  p.jitter = 0.0;
  timed_queue queue(
      drv,
      [&](const run_info&, completion done) {
        if (++runs == 1) {
          throw std::runtime_error("kaput");
        }
        done.complete(outcome::success());
      },
      p);
  queue.schedule("a", drv.now(), drv.now());
  drv.run_pending();
  EXPECT_EQ(queue.lookup("a")->state, entry_state::backoff);
  drv.advance(100ms);
  EXPECT_EQ(runs, 2);
  EXPECT_FALSE(queue.lookup("a").has_value());
  queue.shutdown();
}

/// A driver that throws away whatever is posted to it (as an io_context being torn down does).
class dropping_driver final : public driver {
public:
  [[nodiscard]] time_point now() const override { return time_point{} + 1h; }
  void arm(time_point deadline, std::function<void()>) override { armed = deadline; }
  void disarm() override { armed.reset(); }
  void post(std::function<void()>) override {}
  std::optional<time_point> armed;
};

TEST(timed_queue_work, work_dropped_by_the_driver_goes_to_backoff) {
  dropping_driver drv;
  int runs = 0;
  timed_queue queue(drv, [&](const run_info&, completion) { ++runs; });
  queue.schedule("a", drv.now(), drv.now());
  queue.schedule("b", drv.now(), drv.now());
  EXPECT_FALSE(queue.cancel("b"));
  auto info = queue.lookup("a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, entry_state::backoff);
  EXPECT_NE(info->last_error.find("dropped"), std::string::npos);
  EXPECT_TRUE(drv.armed);
  EXPECT_EQ(runs, 0);
  queue.shutdown();
}

// --- shutdown -----------------------------------------------------------------------------------

TEST(timed_queue_shutdown, cancels_pending_and_backoff_and_waits_for_running_work) {
  manual_driver drv;
  recorder rec;
  timed_queue queue(drv, rec.fn(drv));
  const time_point now = drv.now();
  rec.fail = true;
  queue.schedule("backoff", now, now);
  drv.run_pending();
  ASSERT_EQ(queue.lookup("backoff")->state, entry_state::backoff);
  rec.fail = false;
  rec.hold = true;
  queue.schedule("running", now, now);
  queue.schedule("cancelled-running", now, now);
  drv.run_pending();
  ASSERT_EQ(rec.held.size(), 2U);
  queue.cancel("cancelled-running");
  queue.schedule("pending", now, now + 1s);

  bool idle = false;
  queue.shutdown_async([&] { idle = true; });
  EXPECT_FALSE(idle);
  EXPECT_EQ(queue.size(), 0U);
  EXPECT_EQ(queue.schedule("new", now, now), schedule_result::shut_down);
  EXPECT_TRUE(rec.held[0].cancelled());
  EXPECT_TRUE(rec.held[1].cancelled());
  EXPECT_FALSE(drv.armed_deadline());

  rec.held[0].complete(outcome::success());
  EXPECT_FALSE(idle);
  std::thread other([&] { rec.held[1].complete(outcome::failure("late")); });
  queue.shutdown();  // Blocks until the other thread has delivered the last completion.
  other.join();
  EXPECT_TRUE(idle);
  drv.advance(1h);
  EXPECT_EQ(rec.runs.size(), 3U);
  queue.shutdown();  // Idempotent.
}

TEST(timed_queue_shutdown, work_posted_but_not_started_is_dropped) {
  manual_driver drv(time_point{} + 1h, false);
  recorder rec;
  timed_queue queue(drv, rec.fn(drv));
  queue.schedule("a", drv.now(), drv.now());
  EXPECT_EQ(drv.posted(), 1U);
  queue.shutdown();  // Does not wait for the posted start.
  drv.run_pending();
  EXPECT_TRUE(rec.runs.empty());
}

TEST(timed_queue_shutdown, destroying_the_queue_with_work_in_flight_is_safe) {
  manual_driver drv;
  recorder rec;
  rec.hold = true;
  {
    timed_queue queue(drv, rec.fn(drv));
    queue.schedule("a", drv.now(), drv.now());
    queue.schedule("b", drv.now(), drv.now() + 1s);
    drv.run_pending();
  }
  ASSERT_EQ(rec.held.size(), 1U);
  EXPECT_TRUE(rec.held[0].cancelled());
  rec.held[0].complete(outcome::failure("after the queue is gone"));
  drv.advance(1h);
  EXPECT_EQ(rec.runs.size(), 1U);
}

TEST(timed_queue_shutdown, blocking_shutdown_from_inside_the_work_throws_instead_of_hanging) {
  manual_driver drv;
  timed_queue* self = nullptr;
  bool threw = false;
  timed_queue queue(drv, [&](const run_info&, completion done) {
    try {
      self->shutdown();
    } catch (const std::logic_error&) {
      threw = true;
    }
    EXPECT_TRUE(done.cancelled());
    done.complete(outcome::success());
  });
  self = &queue;
  queue.schedule("a", drv.now(), drv.now());
  drv.run_pending();
  EXPECT_TRUE(threw);
  EXPECT_EQ(queue.schedule("b", drv.now(), drv.now()), schedule_result::shut_down);
  queue.shutdown();
}

TEST(timed_queue_policy, empty_work_is_rejected) {
  manual_driver drv;
  EXPECT_THROW(timed_queue(drv, work_fn{}), std::invalid_argument);
}

TEST_F(timed_queue_test, many_entries_in_and_out_keep_working) {
  const time_point now = drv.now();
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20000; ++i) {
      queue.schedule(key(i), now, now + std::chrono::seconds(1 + (i * 7919) % 1000));
    }
    for (int i = 0; i < 20000; i += 2) {
      EXPECT_TRUE(queue.cancel(key(i)));
    }
    EXPECT_EQ(queue.size(), 10000U);
    for (int i = 1; i < 20000; i += 2) {
      EXPECT_TRUE(queue.cancel(key(i)));
    }
    EXPECT_EQ(queue.size(), 0U);
  }
  queue.schedule("last", now, now + 1s);
  drv.advance(1h);
  ASSERT_EQ(rec.runs.size(), 1U);
  EXPECT_EQ(rec.runs[0].key, "last");
}

}  // namespace
}  // namespace tec::timedqueue

// Admission control of the timed queue: a start rate with a burst, caps on the runs per group,
// and a pause switch. Everything on the manual driver: time moves only when the test says so.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/manual_driver.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

class admission_test : public ::testing::Test {
protected:
  ~admission_test() override {
    held_runs.clear();
    queue.shutdown();
  }

  struct run {
    std::string key;
    time_point due_at;
    time_point admitted_at;
  };

  work_fn work() {
    return [this](const run_info& info, completion done) {
      runs.push_back({std::string(info.key), info.due_at, info.admitted_at});
      if (keep) {
        held_runs.emplace(std::string(info.key), std::move(done));
      } else {
        done.complete(fail_next > 0 ? (--fail_next, outcome::failure("boom")) : outcome::success());
      }
    };
  }

  [[nodiscard]] std::vector<std::string> started() const {
    std::vector<std::string> keys;
    for (const auto& r : runs) {
      keys.push_back(r.key);
    }
    return keys;
  }

  void complete(const std::string& key) {
    auto it = held_runs.find(key);
    ASSERT_NE(it, held_runs.end()) << key;
    completion c = std::move(it->second);
    held_runs.erase(it);
    c.complete(outcome::success());
    drv.run_pending();
  }

  static retry_policy fixed_retry() {
    retry_policy p;
    p.jitter = 0;
    p.initial = 1s;
    p.max = 1s;
    return p;
  }

  manual_driver drv;
  std::vector<run> runs;
  std::map<std::string, completion> held_runs;
  bool keep = false;
  int fail_next = 0;
  timed_queue queue{drv, work(), fixed_retry()};
};

TEST_F(admission_test, without_limits_everything_due_starts_at_once) {
  const time_point now = drv.now();
  for (int i = 0; i < 50; ++i) {
    queue.schedule("k" + std::to_string(i), now, now, {}, {"node", "ns"});
  }
  drv.run_pending();
  EXPECT_EQ(runs.size(), 50U);
  EXPECT_EQ(queue.stats().held, 0U);
}

TEST_F(admission_test, the_rate_holds_and_the_order_is_the_due_order) {
  queue.set_admission({.starts_per_second = 2, .burst = 2});
  const time_point t0 = drv.now();
  // Due in reverse order of scheduling: k9 is due first.
  for (int i = 0; i < 10; ++i) {
    queue.schedule("k" + std::to_string(i), t0 - std::chrono::seconds(i), t0 - 1ms * i);
  }
  drv.run_pending();
  // The burst goes to the first two scheduled (each was due at once, with a token left);
  // the other eight are held.
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(queue.stats().held, 8U);
  EXPECT_EQ(queue.lookup("k5")->state, entry_state::held);
  EXPECT_EQ(queue.lookup("k5")->hold, hold_reason::rate_limit);

  drv.advance(499ms);
  EXPECT_EQ(runs.size(), 2U) << "no token before 500 ms";
  drv.advance(1ms);
  ASSERT_EQ(runs.size(), 3U);
  // Held entries start in due order: k9 is due earliest.
  EXPECT_EQ(runs[2].key, "k9");
  drv.advance(3500ms);
  ASSERT_EQ(runs.size(), 10U);
  const std::vector<std::string> all = started();
  const std::vector<std::string> rest(all.begin() + 2, all.end());
  EXPECT_EQ(rest, (std::vector<std::string>{"k9", "k8", "k7", "k6", "k5", "k4", "k3", "k2"}));
  EXPECT_EQ(runs.back().admitted_at, t0 + 4s);
  EXPECT_EQ(runs.back().due_at, t0 - 2ms);
}

TEST_F(admission_test, the_rate_over_a_long_run_is_the_configured_one) {
  queue.set_admission({.starts_per_second = 200, .burst = 1});
  const time_point t0 = drv.now();
  for (int i = 0; i < 2000; ++i) {
    queue.schedule("k" + std::to_string(i), t0, t0);
  }
  drv.run_pending();
  EXPECT_EQ(runs.size(), 1U);
  drv.advance(5s);
  EXPECT_EQ(runs.size(), 1001U);
  drv.advance(5s);
  EXPECT_EQ(runs.size(), 2000U);
  EXPECT_EQ(queue.size(), 0U);
}

TEST_F(admission_test, late_wake_ups_do_not_lower_the_rate) {
  // A busy machine wakes the queue 3 ms after each token wake-up it asked for (with burst 1 a
  // token bucket would lose the tokens due in the meantime: 200/s would become ~150/s).
  queue.set_admission({.starts_per_second = 200, .burst = 1});
  drv.set_lateness(3ms);
  const time_point t0 = drv.now();
  for (int i = 0; i < 2000; ++i) {
    queue.schedule("k" + std::to_string(i), t0, t0);
  }
  drv.run_pending();
  drv.advance(5s);
  // 1 at once, then 200/s: 1001 by 5 s, give or take the last late wake-up's 2-3 tokens.
  EXPECT_GE(runs.size(), 995U);
  EXPECT_LE(runs.size(), 1001U);
  drv.advance(5s + 100ms);
  EXPECT_EQ(runs.size(), 2000U);
}

TEST_F(admission_test, a_high_rate_wakes_the_queue_at_most_every_10ms) {
  queue.set_admission({.starts_per_second = 1000, .burst = 1});
  const time_point t0 = drv.now();
  for (int i = 0; i < 100; ++i) {
    queue.schedule("k" + std::to_string(i), t0, t0);
  }
  drv.run_pending();
  ASSERT_EQ(runs.size(), 1U);
  ASSERT_TRUE(drv.armed_deadline().has_value());
  EXPECT_EQ(*drv.armed_deadline(), t0 + 10ms) << "not one wake-up per 1 ms token";
  drv.advance(10ms);
  // The 10 tokens due by then start together: the rate is kept.
  EXPECT_EQ(runs.size(), 11U);
  drv.advance(90ms);
  EXPECT_EQ(runs.size(), 100U);
}

TEST_F(admission_test, after_a_quiet_spell_the_burst_is_the_configured_one) {
  // Catching up is for entries that waited: an idle bucket still holds `burst` tokens only.
  queue.set_admission({.starts_per_second = 200, .burst = 1});
  drv.set_lateness(3ms);
  drv.advance(10s);
  const time_point t0 = drv.now();
  for (int i = 0; i < 10; ++i) {
    queue.schedule("k" + std::to_string(i), t0, t0);
  }
  drv.run_pending();
  EXPECT_EQ(runs.size(), 1U);
}

TEST_F(admission_test, a_cancelled_held_entry_never_runs_and_counts_as_cancelled) {
  queue.set_admission({.starts_per_second = 1, .burst = 1});
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0);
  queue.schedule("b", t0, t0);
  queue.schedule("c", t0, t0);
  drv.run_pending();
  ASSERT_EQ(started(), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(queue.cancel("b")) << "a held entry has not started: cancelling it counts";
  EXPECT_FALSE(queue.lookup("b").has_value());
  EXPECT_EQ(queue.stats().held, 1U);
  EXPECT_EQ(queue.stats().cancelled, 1U);
  drv.advance(10s);
  EXPECT_EQ(started(), (std::vector<std::string>{"a", "c"}));
  // The key is free for a new entry.
  EXPECT_EQ(queue.schedule("b", drv.now(), drv.now()), schedule_result::scheduled);
}

TEST_F(admission_test, a_full_group_holds_its_entries_but_not_the_others) {
  keep = true;
  queue.set_admission({.max_running_per_group = {1, 0}});
  const time_point t0 = drv.now();
  queue.schedule("a1", t0, t0 - 3ms, {}, {"node-a", "ns"});
  queue.schedule("a2", t0, t0 - 2ms, {}, {"node-a", "ns"});
  queue.schedule("a3", t0, t0 - 1ms, {}, {"node-a", "ns"});
  queue.schedule("b1", t0, t0, {}, {"node-b", "ns"});
  drv.run_pending();
  EXPECT_EQ(started(), (std::vector<std::string>{"a1", "b1"}));
  const auto a2 = queue.lookup("a2");
  ASSERT_TRUE(a2);
  EXPECT_EQ(a2->state, entry_state::held);
  EXPECT_EQ(a2->hold, hold_reason::group_limit);
  EXPECT_EQ(a2->hold_group, 0U);
  EXPECT_EQ(a2->groups[0], "node-a");

  complete("b1");
  EXPECT_EQ(runs.size(), 2U) << "node-b's slot admits nothing of node-a";
  complete("a1");
  EXPECT_EQ(started(), (std::vector<std::string>{"a1", "b1", "a2"}));
  complete("a2");
  EXPECT_EQ(started().back(), "a3");
  complete("a3");
  EXPECT_EQ(queue.size(), 0U);
}

TEST_F(admission_test, both_group_classes_are_capped) {
  keep = true;
  queue.set_admission({.max_running_per_group = {2, 1}});
  const time_point t0 = drv.now();
  queue.schedule("x", t0, t0 - 2ms, {}, {"n1", "ns-x"});
  queue.schedule("y", t0, t0 - 1ms, {}, {"n2", "ns-x"});
  queue.schedule("z", t0, t0, {}, {"n1", "ns-z"});
  drv.run_pending();
  EXPECT_EQ(started(), (std::vector<std::string>{"x", "z"}));
  EXPECT_EQ(queue.lookup("y")->hold, hold_reason::group_limit);
  EXPECT_EQ(queue.lookup("y")->hold_group, 1U);
  complete("z");
  EXPECT_EQ(runs.size(), 2U);
  complete("x");
  EXPECT_EQ(started().back(), "y");
  complete("y");
}

TEST_F(admission_test, paused_holds_everything_due_until_resumed) {
  const time_point t0 = drv.now();
  queue.set_paused(true);
  EXPECT_TRUE(queue.paused());
  queue.schedule("late", t0, t0 + 2s);
  queue.schedule("now", t0, t0);
  drv.advance(10s);
  EXPECT_TRUE(runs.empty());
  EXPECT_EQ(queue.lookup("late")->hold, hold_reason::paused);
  EXPECT_EQ(queue.stats().held, 2U);
  queue.set_paused(false);
  drv.run_pending();
  EXPECT_EQ(started(), (std::vector<std::string>{"now", "late"}));
}

TEST_F(admission_test, new_limits_apply_to_what_is_held) {
  keep = true;
  queue.set_admission({.starts_per_second = 0.001, .burst = 1, .max_running_per_group = {1, 0}});
  const time_point t0 = drv.now();
  for (int i = 0; i < 4; ++i) {
    queue.schedule("k" + std::to_string(i), t0, t0 + 1ms * i, {}, {"n", ""});
  }
  drv.advance(10ms);
  EXPECT_EQ(runs.size(), 1U);
  queue.set_admission({.max_running_per_group = {3, 0}});
  drv.run_pending();
  EXPECT_EQ(runs.size(), 3U) << "a higher cap and no rate limit admit two more at once";
  queue.set_admission({});
  drv.run_pending();
  EXPECT_EQ(runs.size(), 4U);
  for (int i = 0; i < 4; ++i) {
    complete("k" + std::to_string(i));
  }
}

TEST_F(admission_test, retries_go_through_admission_too) {
  queue.set_admission({.starts_per_second = 1, .burst = 1});
  fail_next = 1;
  const time_point t0 = drv.now();
  queue.schedule("a", t0, t0);
  drv.run_pending();
  ASSERT_EQ(runs.size(), 1U);
  queue.schedule("b", t0, t0);  // held: no token left
  drv.advance(1s);              // the token goes to b (due first); a's retry is due now too
  ASSERT_EQ(started(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(queue.lookup("a")->state, entry_state::held);
  drv.advance(1s);
  EXPECT_EQ(started(), (std::vector<std::string>{"a", "b", "a"}));
  EXPECT_EQ(queue.size(), 0U);
}

TEST_F(admission_test, an_entry_cancelled_between_admission_and_start_frees_its_slot) {
  manual_driver lazy(time_point{} + 1h, /*run_posted_inline=*/false);
  std::vector<std::string> ran;
  timed_queue q(lazy, [&](const run_info& info, completion done) {
    ran.emplace_back(info.key);
    done.complete(outcome::success());
  });
  q.set_admission({.max_running_per_group = {1, 0}});
  const time_point t0 = lazy.now();
  q.schedule("first", t0, t0, {}, {"n", ""});
  q.schedule("second", t0, t0, {}, {"n", ""});
  EXPECT_EQ(q.lookup("second")->state, entry_state::held);
  EXPECT_FALSE(q.cancel("first")) << "admitted (its start is posted): running, not pending";
  lazy.run_pending();
  EXPECT_EQ(ran, (std::vector<std::string>{"second"}));
  q.shutdown();
}

TEST_F(admission_test, shutdown_drops_held_entries) {
  queue.set_paused(true);
  queue.schedule("a", drv.now(), drv.now(), "payload", {"node", "ns"});
  queue.shutdown();
  EXPECT_EQ(queue.size(), 0U);
  EXPECT_EQ(queue.stats().held, 0U);
  EXPECT_TRUE(runs.empty());
}

/// Random schedules, cancels, completions, limit changes and pauses: the caps are never
/// exceeded, no more starts than burst + rate * time, and every entry either ran to success
/// or was cancelled.
TEST(admission_property, caps_rate_and_accounting_hold_over_random_operations) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    manual_driver drv;
    std::map<std::string, completion> running;
    std::map<std::string, int> running_per_node;
    int max_seen_per_node = 0;
    std::size_t starts = 0;
    timed_queue queue(drv, [&](const run_info& info, completion done) {
      const std::string key(info.key);
      const std::string node = key.substr(0, key.find('/'));
      max_seen_per_node = std::max(max_seen_per_node, ++running_per_node[node]);
      ++starts;
      running.emplace(key, std::move(done));
    });
    constexpr std::uint32_t cap = 2;
    const double rate = 50;
    queue.set_admission({.starts_per_second = rate, .burst = 5, .max_running_per_group = {cap, 0}});
    const time_point t0 = drv.now();
    std::size_t cancelled = 0;          // held or pending entries cancelled
    std::size_t cancelled_running = 0;  // running entries dropped (their result is ignored)
    std::size_t scheduled = 0;
    for (int step = 0; step < 2000; ++step) {
      const int op = std::uniform_int_distribution<int>(0, 9)(rng);
      const std::string node = "n" + std::to_string(std::uniform_int_distribution<int>(0, 4)(rng));
      const std::string key =
          node + "/p" + std::to_string(std::uniform_int_distribution<int>(0, 30)(rng));
      if (op < 4) {
        const auto delay =
            std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 50)(rng));
        if (queue.schedule(key, drv.now(), drv.now() + delay, {}, {node, ""}) ==
            schedule_result::scheduled) {
          ++scheduled;
        }
      } else if (op < 5) {
        const auto before = queue.lookup(key);
        if (queue.cancel(key)) {
          ++cancelled;
        } else if (before) {
          ASSERT_EQ(before->state, entry_state::running);
          ++cancelled_running;
        }
      } else if (op < 8 && !running.empty()) {
        auto it = running.begin();
        std::advance(it, std::uniform_int_distribution<std::size_t>(0, running.size() - 1)(rng));
        --running_per_node[it->first.substr(0, it->first.find('/'))];
        completion c = std::move(it->second);
        running.erase(it);
        c.complete(outcome::success());
      } else {
        drv.advance(std::chrono::milliseconds(std::uniform_int_distribution<int>(1, 20)(rng)));
      }
      drv.run_pending();
      ASSERT_LE(max_seen_per_node, static_cast<int>(cap)) << "seed " << seed;
      const double elapsed = std::chrono::duration<double>(drv.now() - t0).count();
      ASSERT_LE(static_cast<double>(starts), 5 + rate * elapsed + 1e-9) << "seed " << seed;
    }
    // Drain: complete everything and let time pass until nothing is left.
    for (int round = 0; round < 1000 && (queue.size() > 0 || !running.empty()); ++round) {
      for (auto& [key, c] : running) {
        --running_per_node[key.substr(0, key.find('/'))];
        c.complete(outcome::success());
      }
      running.clear();
      drv.advance(100ms);
    }
    EXPECT_EQ(queue.size(), 0U) << "seed " << seed;
    const auto st = queue.stats();
    EXPECT_EQ(st.succeeded + cancelled + cancelled_running, scheduled) << "seed " << seed;
    EXPECT_EQ(st.cancelled, cancelled);
    EXPECT_EQ(st.held, 0U);
    queue.shutdown();
  }
}

}  // namespace
}  // namespace tec::timedqueue

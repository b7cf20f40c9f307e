// admission_control on its own, without a queue: the token bucket and its catch-up for late
// wake-ups, the per-group caps, the pause switch and the order of held entries. Time is plain
// time points handed in; nothing sleeps.

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "tec/timedqueue/admission.hpp"

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

/// What the queue's entry is to admission: a ticket, with a name and groups for the test.
struct item : admission_ticket {
  std::string name;
  group_names groups{};
};

class admission_control_test : public ::testing::Test {
protected:
  /// A new item (generations increase in creation order, as the queue's do).
  item& make(std::string name, group_names groups = {}) {
    item& it = items.emplace_back();
    it.name = std::move(name);
    it.groups = groups;
    it.generation = ++generation;
    return it;
  }

  bool due(item& it, time_point at, time_point now) {
    return admission.on_due(it, it.groups, at, now);
  }
  bool due_now(item& it) { return due(it, t0, t0); }

  /// The names pump() admits at `now`.
  std::vector<std::string> pump(time_point now, std::size_t max = 1024) {
    std::vector<admission_ticket*> admitted;
    last_pump = admission.pump(now, max, admitted);
    std::vector<std::string> names;
    for (admission_ticket* t : admitted) {
      names.push_back(static_cast<item*>(t)->name);
    }
    return names;
  }

  std::vector<std::string> hold_all(int n, const std::string& prefix) {
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) {
      item& it = make(prefix + std::to_string(i));
      EXPECT_FALSE(due_now(it));
      names.push_back(it.name);
    }
    return names;
  }

  /// A bucket of `burst` at `rate`, emptied at t0 by one start, `held` entries h0.. held
  /// behind it, and the pump at t0 that finds no token and asks for a wake-up.
  void wait_for_a_token(double rate, std::uint32_t burst, int held) {
    ASSERT_TRUE(admission.set_limits({.starts_per_second = rate, .burst = burst}, t0));
    for (std::uint32_t i = 0; i < burst; ++i) {
      EXPECT_TRUE(due_now(make("first" + std::to_string(i))));
    }
    hold_all(held, "h");
    EXPECT_TRUE(pump(t0).empty());
    ASSERT_TRUE(admission.token_wake());
  }

  const time_point t0 = time_point{} + 1h;
  admission_control admission;
  std::deque<item> items;  // stable addresses
  std::uint64_t generation = 0;
  admission_control::pump_result last_pump = admission_control::pump_result::idle;
};

TEST_F(admission_control_test, default_admits_everything_at_once) {
  EXPECT_FALSE(admission.set_limits(admission_limits{}, t0));  // the default limits are these
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(due_now(make("k" + std::to_string(i), {"node", "ns"})));
  }
  EXPECT_EQ(admission.held(), 0U);
  EXPECT_TRUE(pump(t0).empty());
  EXPECT_FALSE(admission.token_wake());
}

TEST_F(admission_control_test, bucket_starts_full_and_refills_at_the_rate) {
  ASSERT_TRUE(admission.set_limits({.starts_per_second = 2, .burst = 2}, t0));
  EXPECT_TRUE(due_now(make("a")));
  EXPECT_TRUE(due_now(make("b")));
  item& c = make("c");
  EXPECT_FALSE(due_now(c));
  EXPECT_EQ(c.hold, hold_reason::rate_limit);
  EXPECT_EQ(admission.hold_of(c), hold_reason::rate_limit);
  EXPECT_EQ(admission.held(), 1U);

  EXPECT_TRUE(pump(t0).empty());
  ASSERT_TRUE(admission.token_wake());
  EXPECT_EQ(*admission.token_wake(), t0 + 500ms);  // one token per 500 ms
  EXPECT_TRUE(pump(t0 + 499ms).empty());
  EXPECT_EQ(pump(t0 + 500ms), std::vector<std::string>{"c"});
  EXPECT_EQ(admission.held(), 0U);
  EXPECT_EQ(c.hold, hold_reason::none);
  EXPECT_FALSE(admission.token_wake());
}

TEST_F(admission_control_test, same_limits_change_nothing_and_a_new_rate_starts_full) {
  EXPECT_FALSE(admission.set_limits({}, t0));
  ASSERT_TRUE(admission.set_limits({.starts_per_second = 1, .burst = 3}, t0));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(due_now(make("a" + std::to_string(i))));
  }
  EXPECT_FALSE(admission.set_limits({.starts_per_second = 1, .burst = 3}, t0));
  EXPECT_FALSE(due_now(make("held")));
  ASSERT_TRUE(admission.set_limits({.starts_per_second = 1, .burst = 4}, t0));
  EXPECT_EQ(pump(t0), std::vector<std::string>{"held"});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(due_now(make("b" + std::to_string(i))));
  }
  EXPECT_FALSE(due_now(make("c")));
}

TEST_F(admission_control_test, wakes_at_most_every_10ms_and_starts_the_tokens_due_since) {
  wait_for_a_token(1000, 1, 30);
  EXPECT_EQ(*admission.token_wake(), t0 + 10ms);  // the token is due in 1 ms; woken at 10 ms
  // On time: the bucket (size 1) is full at the token's time, and the 9 ms since add 9.
  EXPECT_EQ(pump(t0 + 10ms).size(), 10U);
  EXPECT_EQ(*admission.token_wake(), t0 + 20ms);
}

TEST_F(admission_control_test, late_wake_up_makes_up_the_tokens_due_since) {
  wait_for_a_token(100, 1, 30);
  ASSERT_EQ(*admission.token_wake(), t0 + 10ms);
  // 50 ms late: the token due at 10 ms, and 5 more for the 50 ms since (a plain bucket of
  // size 1 would start one).
  const auto started = pump(t0 + 60ms);
  ASSERT_EQ(started.size(), 6U);
  EXPECT_EQ(started.front(), "h0");
  EXPECT_EQ(started.back(), "h5");
  EXPECT_EQ(admission.held(), 24U);
}

TEST_F(admission_control_test, catch_up_is_capped_at_100ms) {
  wait_for_a_token(100, 1, 30);
  ASSERT_EQ(*admission.token_wake(), t0 + 10ms);
  // 300 ms late: the token due at 10 ms and 100 ms worth (10), not 30.
  EXPECT_EQ(pump(t0 + 310ms).size(), 11U);
}

TEST_F(admission_control_test, no_catch_up_without_a_token_wait) {
  ASSERT_TRUE(admission.set_limits({.starts_per_second = 100, .burst = 1}, t0));
  EXPECT_TRUE(due_now(make("a")));
  // Nothing waited for a token: a later pump only finds the bucket (size 1) full.
  hold_all(5, "h");
  ASSERT_TRUE(admission.set_paused(true));
  EXPECT_FALSE(admission.token_wake());
  ASSERT_TRUE(admission.set_paused(false));
  EXPECT_EQ(pump(t0 + 1s).size(), 1U);
}

TEST_F(admission_control_test, full_group_steps_aside_for_later_entries_of_free_groups) {
  ASSERT_TRUE(admission.set_limits({.max_running_per_group = {1, 0}}, t0));
  item& x = make("x", {"node-1", "ns"});
  EXPECT_TRUE(due_now(x));
  item& y = make("y", {"node-1", "ns"});
  EXPECT_FALSE(due_now(y));
  item& z = make("z", {"node-2", "ns"});
  EXPECT_FALSE(due_now(z));  // y is held before it
  EXPECT_EQ(pump(t0), std::vector<std::string>{"z"});
  EXPECT_EQ(y.hold, hold_reason::group_limit);
  EXPECT_EQ(y.hold_group, 0);
  EXPECT_EQ(admission.hold_of(y), hold_reason::group_limit);
  EXPECT_EQ(admission.held(), 1U);

  // Another entry of node-1 behind y; x's end lets the earliest of them, y, back in.
  item& w = make("w", {"node-1", "other"});
  EXPECT_FALSE(due(w, t0 + 1s, t0 + 1s));
  EXPECT_EQ(pump(t0 + 1s), std::vector<std::string>{});
  admission.release(x.groups);
  EXPECT_EQ(y.hold, hold_reason::rate_limit);
  EXPECT_EQ(pump(t0 + 1s), std::vector<std::string>{"y"});
  EXPECT_EQ(w.hold, hold_reason::group_limit);
  admission.release(y.groups);
  EXPECT_EQ(pump(t0 + 1s), std::vector<std::string>{"w"});
  EXPECT_EQ(admission.held(), 0U);
}

TEST_F(admission_control_test, second_group_class_caps_too) {
  ASSERT_TRUE(admission.set_limits({.max_running_per_group = {0, 2}}, t0));
  EXPECT_TRUE(due_now(make("a", {"n1", "ns"})));
  EXPECT_TRUE(due_now(make("b", {"n2", "ns"})));
  item& c = make("c", {"n3", "ns"});
  EXPECT_FALSE(due_now(c));
  EXPECT_TRUE(pump(t0).empty());
  EXPECT_EQ(c.hold, hold_reason::group_limit);
  EXPECT_EQ(c.hold_group, 1);
  EXPECT_TRUE(due_now(make("d", {"n1", ""})));  // no group of class 1: not capped
}

TEST_F(admission_control_test, new_caps_put_blocked_entries_back_in_order) {
  ASSERT_TRUE(admission.set_limits({.max_running_per_group = {1, 0}}, t0));
  EXPECT_TRUE(due_now(make("x", {"n", ""})));
  EXPECT_FALSE(due(make("y", {"n", ""}), t0 + 2s, t0 + 2s));
  EXPECT_FALSE(due(make("z", {"n", ""}), t0 + 1s, t0 + 2s));
  EXPECT_TRUE(pump(t0 + 2s).empty());
  ASSERT_TRUE(admission.set_limits({.max_running_per_group = {3, 0}}, t0 + 2s));
  EXPECT_EQ(pump(t0 + 2s), (std::vector<std::string>{"z", "y"}));
}

TEST_F(admission_control_test, paused_holds_everything_and_resumes_in_due_order) {
  ASSERT_TRUE(admission.set_paused(true));
  EXPECT_FALSE(admission.set_paused(true));
  EXPECT_TRUE(admission.paused());
  item& a = make("a");
  item& c = make("c");
  item& d = make("d");
  item& b = make("b");
  const time_point now = t0 + 5s;
  EXPECT_FALSE(due(a, t0 + 3s, now));
  EXPECT_FALSE(due(b, t0 + 1s, now));
  EXPECT_FALSE(due(c, t0 + 2s, now));
  EXPECT_FALSE(due(d, t0 + 1s, now));  // ties with b; d was made (generation) first
  EXPECT_EQ(admission.hold_of(a), hold_reason::paused);
  EXPECT_TRUE(pump(now).empty());
  EXPECT_FALSE(admission.token_wake());
  ASSERT_TRUE(admission.set_paused(false));
  EXPECT_EQ(admission.hold_of(a), hold_reason::rate_limit);
  EXPECT_EQ(pump(now), (std::vector<std::string>{"d", "b", "c", "a"}));
}

TEST_F(admission_control_test, pausing_forgets_the_token_wake_up) {
  wait_for_a_token(1, 1, 1);
  ASSERT_TRUE(admission.set_paused(true));
  EXPECT_FALSE(admission.token_wake());
}

TEST_F(admission_control_test, pump_stops_after_max_admitted) {
  ASSERT_TRUE(admission.set_paused(true));
  hold_all(5, "h");
  ASSERT_TRUE(admission.set_paused(false));
  EXPECT_EQ(pump(t0, 2), (std::vector<std::string>{"h0", "h1"}));
  EXPECT_EQ(last_pump, admission_control::pump_result::more_now);
  EXPECT_EQ(pump(t0, 3), (std::vector<std::string>{"h2", "h3", "h4"}));
  EXPECT_EQ(last_pump, admission_control::pump_result::idle);
}

TEST_F(admission_control_test, unhold_removes_a_held_or_blocked_entry) {
  ASSERT_TRUE(admission.set_limits({.max_running_per_group = {1, 0}}, t0));
  item& x = make("x", {"n", ""});
  EXPECT_TRUE(due_now(x));
  item& blocked = make("blocked", {"n", ""});
  EXPECT_FALSE(due_now(blocked));
  EXPECT_TRUE(pump(t0).empty());
  ASSERT_EQ(blocked.hold, hold_reason::group_limit);
  ASSERT_TRUE(admission.set_paused(true));
  item& ready = make("ready", {"m", ""});
  EXPECT_FALSE(due_now(ready));
  EXPECT_EQ(admission.held(), 2U);
  admission.unhold(blocked, blocked.groups);
  admission.unhold(ready, ready.groups);
  EXPECT_EQ(admission.held(), 0U);
  ASSERT_TRUE(admission.set_paused(false));
  admission.release(x.groups);
  EXPECT_TRUE(pump(t0).empty());
}

TEST_F(admission_control_test, drop_held_keeps_the_slots_of_running_entries) {
  ASSERT_TRUE(admission.set_limits({.starts_per_second = 1, .max_running_per_group = {1, 0}}, t0));
  item& x = make("x", {"n", ""});
  EXPECT_TRUE(due_now(x));
  hold_all(3, "h");
  EXPECT_TRUE(pump(t0).empty());
  ASSERT_TRUE(admission.token_wake());
  admission.drop_held();
  EXPECT_EQ(admission.held(), 0U);
  EXPECT_FALSE(admission.token_wake());
  EXPECT_FALSE(due(make("y", {"n", ""}), t0 + 1h, t0 + 1h));  // x still holds n's slot
  admission.drop_held();
  admission.release(x.groups);
  EXPECT_TRUE(due(make("z", {"n", ""}), t0 + 1h, t0 + 1h));
}

}  // namespace
}  // namespace tec::timedqueue

// timed_queue::snapshot(): every entry with its state, in due order, bounded by a limit, on
// the manual driver.

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/manual_driver.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

class snapshot_test : public ::testing::Test {
protected:
  ~snapshot_test() override {
    kept.clear();
    queue.shutdown();
  }

  // Keys starting with "run" stay running (their completion is kept), keys starting with
  // "fail" fail, the others succeed.
  work_fn work() {
    return [this](const run_info& info, completion done) {
      const std::string key(info.key);
      if (key.starts_with("run")) {
        kept.emplace(key, std::move(done));
      } else {
        done.complete(key.starts_with("fail") ? outcome::failure("boom") : outcome::success());
      }
    };
  }

  [[nodiscard]] std::vector<std::string> keys(const queue_snapshot& s) const {
    std::vector<std::string> out;
    for (const auto& [key, info] : s.entries) {
      out.push_back(key);
    }
    return out;
  }

  [[nodiscard]] static const entry_info& find(const queue_snapshot& s, const std::string& key) {
    for (const auto& [k, info] : s.entries) {
      if (k == key) {
        return info;
      }
    }
    throw std::out_of_range("no entry " + key);
  }

  manual_driver drv;
  std::map<std::string, completion> kept;
  timed_queue queue{drv, work(), retry_policy{.initial = 1s, .max = 1s, .jitter = 0}};
};

TEST_F(snapshot_test, an_empty_queue_lists_nothing) {
  const auto s = queue.snapshot(100);
  EXPECT_EQ(s.total, 0U);
  EXPECT_TRUE(s.entries.empty());
}

TEST_F(snapshot_test, entries_come_in_due_order_ties_by_key_up_to_the_limit) {
  const time_point t0 = drv.now();
  queue.schedule("c", t0, t0 + 3s, "uid-c", {"n1", "ns1"});
  queue.schedule("b2", t0, t0 + 2s, "uid-b2");
  queue.schedule("a", t0, t0 + 1s, "uid-a", {"n2", "ns2"});
  queue.schedule("b1", t0 - 5s, t0 + 2s, "uid-b1");

  const auto all = queue.snapshot(10);
  EXPECT_EQ(all.total, 4U);
  EXPECT_EQ(keys(all), (std::vector<std::string>{"a", "b1", "b2", "c"}));
  const entry_info& a = find(all, "a");
  EXPECT_EQ(a.state, entry_state::pending);
  EXPECT_EQ(a.fire_at, t0 + 1s);
  EXPECT_EQ(a.payload, "uid-a");
  EXPECT_EQ(a.groups[0], "n2");
  EXPECT_EQ(a.groups[1], "ns2");
  EXPECT_EQ(find(all, "b1").created_at, t0 - 5s);

  const auto two = queue.snapshot(2);
  EXPECT_EQ(two.total, 4U) << "the total counts the entries left out too";
  EXPECT_EQ(keys(two), (std::vector<std::string>{"a", "b1"}));
  const auto none = queue.snapshot(0);
  EXPECT_EQ(none.total, 4U);
  EXPECT_TRUE(none.entries.empty());

  // A cancelled entry is gone; one that ran and succeeded too.
  queue.cancel("b2");
  drv.advance(1s);
  EXPECT_EQ(keys(queue.snapshot(10)), (std::vector<std::string>{"b1", "c"}));
}

TEST_F(snapshot_test, running_backoff_and_group_limited_entries_are_listed_with_their_state) {
  queue.set_admission({.max_running_per_group = {1, 1}});
  const time_point t0 = drv.now();
  queue.schedule("run", t0, t0, "u1", {"n1", "a"});
  queue.schedule("waits-node", t0, t0 + 1ms, "u2", {"n1", "b"});  // n1 is full
  queue.schedule("waits-ns", t0, t0 + 2ms, "u3", {"n2", "a"});    // namespace a is full
  queue.schedule("fail", t0, t0 + 3ms, "u4", {"n3", "c"});
  queue.schedule("later", t0, t0 + 10s, "u5", {"n4", "d"});
  drv.advance(5ms);
  ASSERT_EQ(kept.size(), 1U);

  const auto s = queue.snapshot(100);
  ASSERT_EQ(s.total, 5U);
  EXPECT_EQ(keys(s), (std::vector<std::string>{"run", "waits-node", "waits-ns", "fail", "later"}));
  EXPECT_EQ(find(s, "run").state, entry_state::running);
  EXPECT_EQ(find(s, "run").attempts, 1U);
  const entry_info& node = find(s, "waits-node");
  EXPECT_EQ(node.state, entry_state::held);
  EXPECT_EQ(node.hold, hold_reason::group_limit);
  EXPECT_EQ(node.hold_group, 0U);
  const entry_info& ns = find(s, "waits-ns");
  EXPECT_EQ(ns.state, entry_state::held);
  EXPECT_EQ(ns.hold, hold_reason::group_limit);
  EXPECT_EQ(ns.hold_group, 1U);
  const entry_info& fail = find(s, "fail");
  EXPECT_EQ(fail.state, entry_state::backoff);
  EXPECT_EQ(fail.attempts, 1U);
  EXPECT_EQ(fail.last_error, "boom");
  EXPECT_EQ(fail.next_attempt_at, t0 + 3ms + 1s);
  EXPECT_EQ(find(s, "later").state, entry_state::pending);
  EXPECT_EQ(find(s, "later").hold, hold_reason::none);

  // The running one completes: the held ones start and succeed, and leave the list.
  kept.at("run").complete(outcome::success());
  kept.erase("run");
  drv.run_pending();
  EXPECT_EQ(keys(queue.snapshot(100)), (std::vector<std::string>{"fail", "later"}));
}

TEST_F(snapshot_test, rate_limited_and_paused_entries_say_why_they_wait) {
  queue.set_admission({.starts_per_second = 1, .burst = 1});
  const time_point t0 = drv.now();
  queue.schedule("first", t0, t0, "u1");
  queue.schedule("second", t0, t0 + 1ms, "u2");
  drv.advance(1ms);
  auto s = queue.snapshot(10);
  ASSERT_EQ(keys(s), (std::vector<std::string>{"second"}));
  EXPECT_EQ(s.entries[0].second.state, entry_state::held);
  EXPECT_EQ(s.entries[0].second.hold, hold_reason::rate_limit);

  queue.set_paused(true);
  s = queue.snapshot(10);
  ASSERT_EQ(s.entries.size(), 1U);
  EXPECT_EQ(s.entries[0].second.hold, hold_reason::paused);
}

}  // namespace
}  // namespace tec::timedqueue

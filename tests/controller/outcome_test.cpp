// The outcome observer (controller_options::on_outcome) that feeds the eviction history: one
// record per queue entry that ends, for each result kind, with what the record carries
// (taints, the toleration used, times, attempts, the policy's effects, the last error).
// Manual clock.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controller/support/harness.hpp"
#include "tec/base/rfc3339.hpp"

namespace tec::controller {
namespace {

using namespace std::chrono_literals;
using testing::counted;
using testing::harness;
using testing::make_node;
using testing::make_pod;
using testing::make_taint;
using testing::make_toleration;
using testing::manual_options;

struct outcomes {
  std::mutex mu;
  std::vector<eviction_outcome> all;
  std::vector<eviction_outcome> take() {
    const std::lock_guard lock(mu);
    return std::exchange(all, {});
  }
};

controller_options observing(const std::shared_ptr<outcomes>& o,
                             controller_options base = manual_options()) {
  base.on_outcome = [o](const eviction_outcome& out) {
    const std::lock_guard lock(o->mu);
    o->all.push_back(out);
  };
  return base;
}

controller_options observing(const std::shared_ptr<outcomes>& o, const eviction_policy& p) {
  controller_options base = manual_options();
  base.policy = p;
  return observing(o, std::move(base));
}

TEST(Outcomes, DeletedAfterTolerationSeconds) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.add_node(make_node("n1"));
  const pod_view pod = make_pod("p1", "n1", {make_toleration(1, 10)});
  h.add_pod(pod);
  const auto t0 = h.drv.now();
  h.update_node(make_node("n1", {make_taint(1)}));
  EXPECT_TRUE(o->take().empty()) << "nothing has ended yet";
  h.advance(10s);
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  const eviction_outcome& r = got[0];
  EXPECT_EQ(r.result, outcome_result::deleted);
  EXPECT_EQ(r.pod, (pod_ref{"default", "p1", pod.uid}));
  EXPECT_EQ(r.node, "n1");
  EXPECT_EQ(r.taints, std::vector<taint>{make_taint(1)});
  ASSERT_TRUE(r.used.has_value());
  EXPECT_EQ(*r.used, make_toleration(1, 10));
  ASSERT_TRUE(r.matched.has_value());
  EXPECT_EQ(*r.matched, make_taint(1));
  EXPECT_EQ(r.scheduled_at, t0);
  EXPECT_EQ(r.due, t0 + 10s);
  EXPECT_EQ(r.done, t0 + 10s);
  EXPECT_EQ(r.attempts, 1U);
  EXPECT_FALSE(r.rule.has_value());
  EXPECT_EQ(r.waited, 0ns);
  EXPECT_EQ(r.refusals, 0U);
  EXPECT_EQ(r.last_error, "");
  EXPECT_EQ(to_string(r.result), "deleted");
}

// The toleration that set the time is named for every tolerationSeconds: negative (read as 0,
// evicted at once), zero and positive, with another taint tolerated forever before it (a node
// tainted [k1, k2] with k2 added last; the history named k1's "forever" toleration).
TEST(Outcomes, TheTolerationThatSetTheTimeIsNamedWhateverItsSeconds) {
  for (const std::int64_t seconds : {std::int64_t{-5}, std::int64_t{0}, std::int64_t{7}}) {
    auto o = std::make_shared<outcomes>();
    harness h(observing(o));
    h.add_node(make_node("n1", {make_taint(1)}));
    toleration second = make_toleration(2, 0);
    second.seconds = seconds;
    h.add_pod(make_pod("p1", "n1", {make_toleration(1, -1), second}));
    EXPECT_TRUE(o->take().empty());
    h.update_node(make_node("n1", {make_taint(1), make_taint(2)}));
    h.advance(std::chrono::seconds(std::max<std::int64_t>(seconds, 0)));
    const auto got = o->take();
    ASSERT_EQ(got.size(), 1U) << seconds;
    EXPECT_EQ(got[0].result, outcome_result::deleted) << seconds;
    ASSERT_TRUE(got[0].used.has_value()) << seconds;
    EXPECT_EQ(*got[0].used, second) << seconds;
    ASSERT_TRUE(got[0].matched.has_value()) << seconds;
    EXPECT_EQ(*got[0].matched, make_taint(2)) << seconds;
  }
}

TEST(Outcomes, UntoleratedIsDeletedAtOnceWithoutAToleration) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.add_node(make_node("n1", {make_taint(1), make_taint(2)}));
  const auto t0 = h.drv.now();
  h.add_pod(make_pod("p1", "n1", {make_toleration(2, 60)}));
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::deleted);
  EXPECT_FALSE(got[0].used.has_value());
  EXPECT_FALSE(got[0].matched.has_value());
  EXPECT_EQ(got[0].taints.size(), 2U);
  EXPECT_EQ(got[0].due, t0);
  EXPECT_EQ(got[0].done, t0);
}

TEST(Outcomes, CancelledUntainted) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.add_node(make_node("n1"));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  const auto t0 = h.drv.now();
  h.update_node(make_node("n1", {make_taint(1)}));
  h.advance(2s);
  h.update_node(make_node("n1"));
  auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::cancelled_untainted);
  EXPECT_EQ(got[0].done, t0 + 2s);
  EXPECT_EQ(got[0].due, t0 + 10s);
  EXPECT_EQ(got[0].attempts, 0U);
  h.advance(testing::ten_days);
  EXPECT_TRUE(o->take().empty());
  EXPECT_FALSE(h.evicted("p1"));
}

TEST(Outcomes, PodGoneBeforeItsTime) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  h.delete_pod("p1");
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::pod_gone);
}

TEST(Outcomes, PodGoneFoundWhenItFires) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  h.index.erase("default", "p1");  // the informer has not told the controller yet
  h.advance(10s);
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::pod_gone);
  EXPECT_EQ(got[0].attempts, 1U);
}

TEST(Outcomes, Replaced) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  const std::string old_uid = h.index.get_pod("default", "p1")->uid;
  h.update_pod(make_pod("p1", "n1", {make_toleration(1, 3600)}));  // a new UID
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::replaced);
  EXPECT_EQ(got[0].pod.uid, old_uid);
}

TEST(Outcomes, WouldDeleteInDryRun) {
  auto o = std::make_shared<outcomes>();
  eviction_policy p;
  p.dry_run = true;
  harness h(observing(o, p));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::would_delete);
  EXPECT_TRUE(h.sink.calls().empty());
}

TEST(Outcomes, FailuresThenDeletedKeepTheAttemptsAndTheLastError) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.sink.set_failure_message("etcdserver: request timed out");
  h.sink.script({eviction_status::failed, eviction_status::failed});
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  EXPECT_TRUE(o->take().empty());
  h.advance(testing::ten_days);
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::deleted);
  EXPECT_EQ(got[0].attempts, 3U);
  EXPECT_EQ(got[0].last_error, "etcdserver: request timed out");
}

TEST(Outcomes, GoneAtTheApiIsPodGone) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.sink.script({eviction_status::gone});
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::pod_gone);
}

TEST(Outcomes, EvictedInEvictMode) {
  auto o = std::make_shared<outcomes>();
  eviction_policy p;
  p.mode = eviction_mode::evict;
  harness h(observing(o, p));
  h.sink.script({eviction_status::blocked});
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  h.advance(testing::ten_days);
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::evicted);
  EXPECT_EQ(got[0].refusals, 1U);
  EXPECT_EQ(got[0].attempts, 2U);
}

TEST(Outcomes, DeletedAfterFallbackInEvictMode) {
  auto o = std::make_shared<outcomes>();
  eviction_policy p;
  p.mode = eviction_mode::evict;
  p.fallback_after = 20s;
  harness h(observing(o, p));
  h.sink.set_failure_message("Cannot evict pod as it would violate the pod's disruption budget.");
  h.sink.script(std::vector<eviction_status>(100, eviction_status::blocked));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  h.advance(testing::ten_days);
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::deleted_after_fallback);
  EXPECT_GE(got[0].refusals, 1U);
  EXPECT_EQ(got[0].fallback_after, 20s);
  EXPECT_EQ(got[0].last_error, "Cannot evict pod as it would violate the pod's disruption budget.");
}

TEST(Outcomes, TaintRuleFloorIsRecorded) {
  auto o = std::make_shared<outcomes>();
  eviction_policy p;
  taint_rule floor;
  floor.key = "testTaint";
  floor.prefix = true;
  floor.min_toleration_seconds = 60;
  p.taints.push_back(floor);
  harness h(observing(o, p));
  h.add_node(make_node("n1"));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 5)}));
  h.add_pod(make_pod("p2", "n1"));
  const auto t0 = h.drv.now();
  h.update_node(make_node("n1", {make_taint(1)}));
  h.advance(60s);
  auto got = o->take();
  ASSERT_EQ(got.size(), 2U);
  std::sort(got.begin(), got.end(),
            [](const auto& a, const auto& b) { return a.pod.name < b.pod.name; });
  for (const auto& r : got) {
    EXPECT_EQ(r.due, t0 + 60s);
    ASSERT_TRUE(r.rule.has_value()) << r.pod.name;
    EXPECT_EQ(r.rule->rule, "testTaint*");
    EXPECT_EQ(r.rule->seconds, 60);
  }
  EXPECT_EQ(got[0].rule->own_seconds, 5);
  ASSERT_TRUE(got[0].used.has_value());
  EXPECT_EQ(got[1].rule->own_seconds, std::nullopt) << "untolerated";
  EXPECT_FALSE(got[1].used.has_value());
}

TEST(Outcomes, WaitForTheRateLimitIsRecorded) {
  auto o = std::make_shared<outcomes>();
  eviction_policy p;
  p.rate_limit.evictions_per_second = 1;
  p.rate_limit.burst = 1;
  harness h(observing(o, p));
  h.add_pod(make_pod("p1", "n1"));
  h.add_pod(make_pod("p2", "n1"));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.advance(5s);
  const auto got = o->take();
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[0].waited, 0ns);
  EXPECT_GT(got[1].waited, 0ns);
  EXPECT_LE(got[1].waited, 1s);
  EXPECT_EQ(got[1].waited_why, "rate_limit");
  EXPECT_EQ(got[0].waited_why, "");
}

TEST(Outcomes, WaitForTheStormBreakerIsRecorded) {
  auto o = std::make_shared<outcomes>();
  eviction_policy p;
  p.storm_breaker.max_tainted_nodes_percent = 50;
  p.storm_breaker.min_tainted_nodes = 2;
  harness h(observing(o, p));
  h.add_node(make_node("n1"));
  h.add_node(make_node("n2"));
  h.add_node(make_node("n3"));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  h.update_node(make_node("n1", {make_taint(1)}));
  h.update_node(make_node("n2", {make_taint(1)}));  // 2 of 3 nodes: the breaker opens
  h.advance(20s);
  EXPECT_TRUE(o->take().empty()) << "held";
  h.update_node(make_node("n2"));  // 1 of 3: it closes
  h.settle();
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::deleted);
  EXPECT_EQ(got[0].waited, 10s);
  EXPECT_EQ(got[0].waited_why, "storm_breaker");
}

// A hold's and the settling time's waits are the deferral's part of the record's wait, named by
// its tag; what admission control adds after it is the other part.
TEST(Outcomes, AWaitForAHoldIsRecordedAsTheHolds) {
  auto o = std::make_shared<outcomes>();
  testing::wall_harness w(observing(o));
  node_view held = make_node("n1");
  held.hold = parse_hold(base::format_rfc3339(w.wall_now() + 30s));
  w.h.add_pod(make_pod("p1", "n1"));
  w.h.add_node(held);
  held.taints = {make_taint(1)};
  w.h.update_node(held);
  w.h.advance(29s);
  EXPECT_TRUE(o->take().empty()) << "held";
  w.h.advance(1s);
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::deleted);
  EXPECT_EQ(got[0].deferred, 30s);
  EXPECT_EQ(got[0].deferred_why, "hold");
  EXPECT_EQ(got[0].waited, 0ns);
  EXPECT_EQ(got[0].waited_why, "");
}

TEST(Outcomes, SettlingThenTheRateLimitAreTwoWaits) {
  auto o = std::make_shared<outcomes>();
  eviction_policy p;
  p.storm_breaker.max_tainted_nodes_percent = 50;
  p.storm_breaker.settle_seconds = 10;
  p.rate_limit.evictions_per_second = 1;
  p.rate_limit.burst = 1;
  testing::wall_harness w(observing(o, p));
  for (const char* n : {"n1", "n2", "n3", "n4"}) {
    w.h.add_node(make_node(n));
  }
  w.h.add_pod(make_pod("p1", "n1"));
  w.h.add_pod(make_pod("p2", "n1"));
  w.h.update_node(make_node("n1", {make_taint(1)}));  // 1 of 4: the breaker stays closed
  w.h.advance(9s);
  EXPECT_TRUE(o->take().empty()) << "settling";
  w.h.advance(1s);
  w.h.advance(1s);
  auto got = o->take();
  ASSERT_EQ(got.size(), 2U);
  std::sort(got.begin(), got.end(),
            [](const eviction_outcome& a, const eviction_outcome& b) { return a.done < b.done; });
  EXPECT_EQ(got[0].deferred, 10s);
  EXPECT_EQ(got[0].deferred_why, "settling");
  EXPECT_EQ(got[0].waited, 0ns);
  EXPECT_EQ(got[1].deferred, 10s);
  EXPECT_EQ(got[1].deferred_why, "settling");
  EXPECT_EQ(got[1].waited, 1s);
  EXPECT_EQ(got[1].waited_why, "rate_limit");
}

// A cancel that finds an attempt in flight leaves the record to it: the pod went (deleted)
// or did not (the cancel's result). Exactly one record either way.
TEST(Outcomes, CancelDuringAnAttemptThatDeletes) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.sink.set_hold(true);
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  ASSERT_EQ(h.sink.held(), 1U);
  h.update_node(make_node("n1"));
  EXPECT_TRUE(o->take().empty()) << "the attempt in flight ends it";
  h.sink.release_oldest(eviction_status::deleted);
  h.settle();
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::deleted);
}

TEST(Outcomes, CancelDuringAnAttemptThatFails) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.sink.set_hold(true);
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  h.update_node(make_node("n1"));
  h.sink.release_oldest(eviction_status::failed);
  h.settle();
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::cancelled_untainted);
  EXPECT_EQ(got[0].last_error, "injected failure");
  h.advance(testing::ten_days);
  EXPECT_TRUE(o->take().empty());
}

TEST(Outcomes, CancelWhileRetrying) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.sink.script({eviction_status::failed});
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  EXPECT_TRUE(o->take().empty()) << "backing off";
  h.update_node(make_node("n1"));
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::cancelled_untainted);
  EXPECT_EQ(got[0].attempts, 1U);
  EXPECT_EQ(got[0].last_error, "injected failure");
}

TEST(Outcomes, RescheduledAtOnceMakesOneRecord) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 600)}));
  const auto t0 = h.drv.now();
  // A second taint it does not tolerate: evicted now, not at t0 + 600 s.
  h.update_node(make_node("n1", {make_taint(1), make_taint(2)}));
  const auto got = o->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].result, outcome_result::deleted);
  EXPECT_EQ(got[0].due, t0);
  EXPECT_EQ(got[0].taints.size(), 2U);
}

TEST(Outcomes, EveryEntryEndsOnceUnderChurn) {
  auto o = std::make_shared<outcomes>();
  harness h(observing(o));
  h.sink.script({eviction_status::failed, eviction_status::failed, eviction_status::gone});
  h.add_node(make_node("n1"));
  for (int i = 0; i < 20; ++i) {
    h.add_pod(make_pod("p" + std::to_string(i), "n1", {make_toleration(1, i % 4)}));
  }
  h.update_node(make_node("n1", {make_taint(1)}));
  h.advance(1s);
  h.update_node(make_node("n1"));
  h.update_node(make_node("n1", {make_taint(1)}));
  h.advance(testing::ten_days);
  const auto got = o->take();
  EXPECT_EQ(got.size(), counted(h.ctl, "scheduled_evictions_total"));
  // Each pod's last record says it went (a 404 leaves the pod in the fake cache, so its name
  // may be evicted again when the node is tainted again).
  std::map<std::string, outcome_result> last;
  for (const auto& r : got) {
    last[r.pod.name] = r.result;
  }
  ASSERT_EQ(last.size(), 20U);
  for (const auto& [name, result] : last) {
    EXPECT_TRUE(result == outcome_result::deleted || result == outcome_result::pod_gone)
        << name << ": " << to_string(result);
  }
}

}  // namespace
}  // namespace tec::controller

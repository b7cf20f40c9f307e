// Deadlines that survive a restart or a leader failover (controller_options::
// deadlines_from_taint_time): countdown_since() alone, then the controller's replay, which
// counts a pod's toleration from the taint's timeAdded (or the pod's bind time) while updates
// the informers deliver later keep counting from now.

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "controller/support/harness.hpp"
#include "support/manual_driver.hpp"
#include "tec/controller/matching.hpp"

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
using testing::wall_harness;

constexpr std::int64_t wall_t0 = testing::wall_start_unix;  // the wall clock when a test starts

taint added_at(int i, std::int64_t unix_seconds) {
  taint t = make_taint(i);
  t.time_added_unix = unix_seconds;
  return t;
}

// --- countdown_since ---

TEST(CountdownSince, OneTaintCountsFromItsTimeAdded) {
  const std::vector<taint> taints{added_at(1, wall_t0 - 100)};
  const std::vector<toleration> tols{make_toleration(1, 300)};
  const auto c = countdown_since(taints, tols, 0, wall_t0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_unix, wall_t0 - 100);
  EXPECT_EQ(c->time, toleration_time::after_seconds(300));
  ASSERT_NE(c->started_by, nullptr);
  EXPECT_EQ(c->started_by->key, "testTaint1");
}

TEST(CountdownSince, WithoutTimeAddedItCountsFromNow) {
  const std::vector<taint> taints{make_taint(1)};
  const std::vector<toleration> tols{make_toleration(1, 300)};
  const auto c = countdown_since(taints, tols, wall_t0 - 1000, wall_t0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_unix, wall_t0);
}

TEST(CountdownSince, APodBoundAfterTheTaintCountsFromItsBindTime) {
  const std::vector<taint> taints{added_at(1, wall_t0 - 100)};
  const std::vector<toleration> tols{make_toleration(1, 300)};
  const auto c = countdown_since(taints, tols, wall_t0 - 30, wall_t0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_unix, wall_t0 - 30);
}

TEST(CountdownSince, TimesInTheFutureAreClampedToNow) {
  const std::vector<taint> taints{added_at(1, wall_t0 + 500)};
  const std::vector<toleration> tols{make_toleration(1, 300)};
  auto c = countdown_since(taints, tols, 0, wall_t0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_unix, wall_t0);
  const std::vector<taint> past{added_at(1, wall_t0 - 100)};
  c = countdown_since(past, tols, wall_t0 + 500, wall_t0);  // a bind time from a skewed clock
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_unix, wall_t0);
}

TEST(CountdownSince, ATaintToleratedForeverStartsNothing) {
  // testTaint1 (forever) since wall_t0-200; testTaint2 (60 s) since wall_t0-50: the countdown
  // started when testTaint2 came, and lasts 60 s.
  const std::vector<taint> taints{added_at(1, wall_t0 - 200), added_at(2, wall_t0 - 50)};
  const std::vector<toleration> tols{make_toleration(1, -1), make_toleration(2, 60)};
  const auto c = countdown_since(taints, tols, 0, wall_t0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_unix, wall_t0 - 50);
  EXPECT_EQ(c->time, toleration_time::after_seconds(60));
  EXPECT_EQ(c->started_by->key, "testTaint2");
}

TEST(CountdownSince, ALaterTaintDoesNotMoveAStartedCountdown) {
  // testTaint1 (300 s) since wall_t0-200, then testTaint2 (60 s) since wall_t0-50: an uninterrupted
  // controller kept the eviction it scheduled at wall_t0-200 for wall_t0+100.
  const std::vector<taint> taints{added_at(2, wall_t0 - 50), added_at(1, wall_t0 - 200)};
  const std::vector<toleration> tols{make_toleration(1, 300), make_toleration(2, 60)};
  const auto c = countdown_since(taints, tols, 0, wall_t0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_unix, wall_t0 - 200);
  EXPECT_EQ(c->time, toleration_time::after_seconds(300));
}

TEST(CountdownSince, TaintsPresentAtTheSameTimeCountTogether) {
  const std::vector<taint> taints{added_at(1, wall_t0 - 100), added_at(2, wall_t0 - 100)};
  const std::vector<toleration> tols{make_toleration(1, 300), make_toleration(2, 60)};
  const auto c = countdown_since(taints, tols, 0, wall_t0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_unix, wall_t0 - 100);
  EXPECT_EQ(c->time, toleration_time::after_seconds(60));
}

TEST(CountdownSince, ForeverEverywhereIsNullopt) {
  const std::vector<taint> taints{added_at(1, wall_t0 - 100)};
  const std::vector<toleration> tols{make_toleration(1, -1)};
  EXPECT_FALSE(countdown_since(taints, tols, 0, wall_t0).has_value());
}

// --- the controller ---

/// `pod` is still there one second before `after` from now, and evicted at `after`.
void expect_evicted_after(harness& h, std::chrono::seconds after, const std::string& pod) {
  h.advance(after - 1s);
  EXPECT_FALSE(h.evicted(pod));
  h.advance(1s);
  EXPECT_TRUE(h.evicted(pod));
}

TEST(DeadlinesFromTaintTime, TheReplayCountsFromTimeAdded) {
  wall_harness w;
  // Tainted 30 s ago; the pod tolerates it for 40 s: 10 s are left.
  w.replay(make_node("node1", {added_at(1, wall_t0 - 30)}),
           {make_pod("pod1", "node1", {make_toleration(1, 40)})});
  EXPECT_TRUE(w.h.scheduled("pod1"));
  expect_evicted_after(w.h, 10s, "pod1");
  EXPECT_EQ(counted(w.h.ctl, "deadlines_from_taint_time_total"), 1U);
}

TEST(DeadlinesFromTaintTime, ACountdownAlreadyOverEvictsAtOnce) {
  wall_harness w;
  w.replay(make_node("node1", {added_at(1, wall_t0 - 600)}),
           {make_pod("pod1", "node1", {make_toleration(1, 40)})});
  EXPECT_TRUE(w.h.evicted("pod1"));
}

TEST(DeadlinesFromTaintTime, APodBoundAfterTheTaintKeepsItsFullTolerationFromBinding) {
  wall_harness w;
  pod_view p = make_pod("pod1", "node1", {make_toleration(1, 40)});
  p.bound_unix = wall_t0 - 5;
  w.replay(make_node("node1", {added_at(1, wall_t0 - 30)}), {p});
  expect_evicted_after(w.h, 35s, "pod1");
}

TEST(DeadlinesFromTaintTime, ATaintWithoutTimeAddedCountsFromNow) {
  wall_harness w;
  w.replay(make_node("node1", {make_taint(1)}),
           {make_pod("pod1", "node1", {make_toleration(1, 40)})});
  expect_evicted_after(w.h, 40s, "pod1");
  EXPECT_EQ(counted(w.h.ctl, "deadlines_from_taint_time_total"), 0U);
}

TEST(DeadlinesFromTaintTime, TurnedOffTheReplayCountsFromNow) {
  controller_options o = manual_options();
  o.deadlines_from_taint_time = false;
  wall_harness w(o);
  w.replay(make_node("node1", {added_at(1, wall_t0 - 30)}),
           {make_pod("pod1", "node1", {make_toleration(1, 40)})});
  expect_evicted_after(w.h, 40s, "pod1");
  EXPECT_EQ(counted(w.h.ctl, "deadlines_from_taint_time_total"), 0U);
}

TEST(DeadlinesFromTaintTime, InSteadyStateATaintCountsFromWhenItIsSeen) {
  // A watch update (not the replay) with a timeAdded in the past: upstream's behaviour, the
  // full toleration from now (a late watch delivery must not shorten it).
  wall_harness w;
  w.h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 40)}));
  w.h.add_node(make_node("node1", {added_at(1, wall_t0 - 30)}));
  expect_evicted_after(w.h, 40s, "pod1");
}

TEST(DeadlinesFromTaintTime, AWatchUpdateMergedIntoTheReplayKeepsItAReplay) {
  wall_harness w;
  const node_view n = make_node("node1", {added_at(1, wall_t0 - 30)});
  const pod_view p = make_pod("pod1", "node1", {make_toleration(1, 40)});
  w.h.index.put(p);
  w.h.ctl.node_updated(nullptr, &n, update_origin::replay);
  // Before the worker ran: a second taint arrives and is merged into the waiting update.
  const node_view n2 = make_node("node1", {added_at(1, wall_t0 - 30), added_at(2, wall_t0)});
  w.h.ctl.node_updated(&n, &n2);
  w.h.settle();
  // testTaint2 is not tolerated: evicted at once either way; with a tolerated second taint
  // the countdown still starts at testTaint1's timeAdded.
  EXPECT_TRUE(w.h.evicted("pod1"));

  wall_harness w2;
  const node_view m = make_node("node2", {added_at(1, wall_t0 - 30)});
  const pod_view q = make_pod("pod2", "node2", {make_toleration(1, 40), make_toleration(2, 100)});
  w2.h.index.put(q);
  w2.h.ctl.node_updated(nullptr, &m, update_origin::replay);
  const node_view m2 = make_node("node2", {added_at(1, wall_t0 - 30), added_at(2, wall_t0)});
  w2.h.ctl.node_updated(&m, &m2);
  w2.h.settle();
  expect_evicted_after(w2.h, 10s, "pod2");
}

}  // namespace
}  // namespace tec::controller

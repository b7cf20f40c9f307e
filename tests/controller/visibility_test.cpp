// Pending evictions you can see (issue 15 item 5): the TaintEvictionScheduled event of a
// delayed eviction, and controller::evictions(), what /debug/evictions lists. Manual clock,
// fake sink.

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "controller/support/harness.hpp"

namespace tec::controller {
namespace {

using namespace std::chrono_literals;
using testing::harness;
using testing::make_node;
using testing::make_pod;
using testing::make_taint;
using testing::make_toleration;
using testing::manual_options;
using testing::wall_harness;
using testing::with_policy;

// wall_start_unix (1'700'000'000) is 2023-11-14T22:13:20Z.

/// The messages of the TaintEvictionScheduled events recorded, in order.
std::vector<std::string> scheduled_messages(const harness& h) {
  const auto events = h.sink.events();
  const auto details = h.sink.event_details();
  std::vector<std::string> out;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].second == event_kind::eviction_scheduled) {
      out.push_back(event_message(events[i].first, events[i].second, details[i]));
    }
  }
  return out;
}

TEST(ScheduledEvent, ExactFields) {
  const pod_ref ref{"ns", "web-0", "u1"};
  EXPECT_EQ(event_type_of(event_kind::eviction_scheduled), "Normal");
  EXPECT_EQ(event_reason_of(event_kind::eviction_scheduled), "TaintEvictionScheduled");
  const auto due = std::chrono::system_clock::time_point(std::chrono::seconds(1'795'448'400));
  const taint unreachable{"node.kubernetes.io/unreachable", "", taint_effect::no_execute, 0};
  EXPECT_EQ(event_message(ref, event_kind::eviction_scheduled,
                          scheduled_event_detail(due + 999ms, unreachable, 300)),
            "Pod ns/web-0 will be evicted at 2026-11-23T15:40:00Z: taint "
            "node.kubernetes.io/unreachable:NoExecute, tolerationSeconds 300");
  // The other kinds keep their type, reason and message.
  EXPECT_EQ(event_reason_of(event_kind::marking_for_deletion), "TaintManagerEviction");
  EXPECT_EQ(event_reason_of(event_kind::cancelling_deletion), "TaintManagerEviction");
  EXPECT_EQ(event_reason_of(event_kind::eviction_failed), "TaintEvictionFailed");
  EXPECT_EQ(event_type_of(event_kind::eviction_failed), "Warning");
  EXPECT_EQ(event_message(ref, event_kind::eviction_failed, "no"),
            "Cannot delete Pod ns/web-0: no");
}

TEST(ScheduledEvent, ADelayedEvictionGetsOneEventNamingTaintSecondsAndDueTime) {
  wall_harness w;
  const pod_view p = make_pod("pod1", "node1", {make_toleration(1, 300)});
  w.h.add_pod(p);
  w.h.advance(10s);
  w.h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_EQ(scheduled_messages(w.h),
            std::vector<std::string>{"Pod default/pod1 will be evicted at 2023-11-14T22:18:30Z: "
                                     "taint testTaint1=test1:NoExecute, tolerationSeconds 300"});
  EXPECT_EQ(w.h.sink.events()[0].first, (pod_ref{"default", "pod1", p.uid}));
  // Decided again (a pod update, another tolerated taint): the entry exists, no new event.
  pod_view changed = p;
  changed.tolerations = {make_toleration(1, 100), make_toleration(2, -1)};
  w.h.update_pod(changed);
  w.h.update_node(make_node("node1", {make_taint(1), make_taint(2)}));
  EXPECT_EQ(w.h.sink.events().size(), 1U);
  // Fired: marking only.
  w.h.advance(300s);
  EXPECT_TRUE(w.h.evicted("pod1"));
  EXPECT_EQ(w.h.sink.events_of("pod1", event_kind::eviction_scheduled), 1U);
  EXPECT_EQ(w.h.sink.events_of("pod1", event_kind::marking_for_deletion), 1U);
}

TEST(ScheduledEvent, TheTaintNamedIsTheOneWithTheSmallestTolerationSeconds) {
  wall_harness w;
  taint plain = make_taint(3);
  plain.value.clear();
  w.h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 600), make_toleration(2, 60)}));
  w.h.add_node(make_node("node1", {make_taint(1), make_taint(2)}));
  w.h.add_pod(make_pod(
      "pod2", "node2",
      {toleration{"testTaint3", toleration_operator::exists, "", taint_effect::no_execute, 20}}));
  w.h.add_node(make_node("node2", {plain}));
  EXPECT_EQ(
      scheduled_messages(w.h),
      (std::vector<std::string>{"Pod default/pod1 will be evicted at 2023-11-14T22:14:20Z: taint "
                                "testTaint2=test2:NoExecute, tolerationSeconds 60",
                                "Pod default/pod2 will be evicted at 2023-11-14T22:13:40Z: taint "
                                "testTaint3:NoExecute, tolerationSeconds 20"}));
}

TEST(ScheduledEvent, NoneForImmediateOrNeverEndingStays) {
  wall_harness w;
  w.h.add_pod(make_pod("untolerated", "node1"));
  w.h.add_pod(make_pod("zero", "node1", {make_toleration(1, 0)}));
  w.h.add_pod(make_pod("forever", "node1", {make_toleration(1, -1)}));
  w.h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_TRUE(w.h.evicted("untolerated"));
  EXPECT_TRUE(w.h.evicted("zero"));
  EXPECT_FALSE(w.h.scheduled("forever"));
  EXPECT_TRUE(scheduled_messages(w.h).empty());
}

TEST(ScheduledEvent, AReplayedCountdownAnnouncesWhatIsLeftButNotOneAlreadyOver) {
  wall_harness w;
  taint old = make_taint(1);
  old.time_added_unix = testing::wall_start_unix - 30;
  w.replay(make_node("node1", {old}), {make_pod("left", "node1", {make_toleration(1, 40)}),
                                       make_pod("over", "node1", {make_toleration(1, 20)})});
  EXPECT_TRUE(w.h.evicted("over"));
  EXPECT_EQ(scheduled_messages(w.h),
            std::vector<std::string>{"Pod default/left will be evicted at 2023-11-14T22:13:30Z: "
                                     "taint testTaint1=test1:NoExecute, tolerationSeconds 40"});
}

TEST(ScheduledEvent, OnePerEntryAgainAfterACancel) {
  wall_harness w;
  w.h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 100)}));
  w.h.add_node(make_node("node1", {make_taint(1)}));
  w.h.update_node(make_node("node1"));
  w.h.advance(5s);
  w.h.update_node(make_node("node1", {make_taint(1)}));
  const auto messages = scheduled_messages(w.h);
  ASSERT_EQ(messages.size(), 2U);
  EXPECT_NE(messages[1].find("at 2023-11-14T22:15:05Z"), std::string::npos) << messages[1];
}

TEST(ScheduledEvent, OffByOptionAndInDryRun) {
  controller_options off = manual_options();
  off.scheduled_events = false;
  harness h(off);
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 100)}));
  h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_TRUE(h.scheduled("pod1"));
  EXPECT_TRUE(h.sink.events().empty());

  eviction_policy dry;
  dry.dry_run = true;
  harness d(with_policy(dry));
  d.add_pod(make_pod("pod1", "node1", {make_toleration(1, 100)}));
  d.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_TRUE(d.scheduled("pod1"));
  EXPECT_TRUE(d.sink.events().empty());
}

// --- evictions() ---

TEST(Evictions, PendingOnesInDueOrderWithTheirNodesTaints) {
  harness h;
  const pod_view a = make_pod("a", "node1", {make_toleration(1, 300)});
  const pod_view b = make_pod("b", "node2", {make_toleration(1, 100)});
  const pod_view c = make_pod("c", "node1", {make_toleration(1, 200)});
  h.add_pod(a);
  h.add_pod(b);
  h.add_pod(c);
  const timedqueue::time_point t0 = h.drv.now();
  taint other = make_taint(9);
  other.effect = taint_effect::no_schedule;
  h.add_node(make_node("node1", {make_taint(1), other}));
  h.add_node(make_node("node2", {make_taint(1)}));

  const eviction_list all = h.ctl.evictions(100);
  EXPECT_EQ(all.total, 3U);
  ASSERT_EQ(all.evictions.size(), 3U);
  EXPECT_EQ(all.evictions[0].pod, (pod_ref{"default", "b", b.uid}));
  EXPECT_EQ(all.evictions[1].pod, (pod_ref{"default", "c", c.uid}));
  EXPECT_EQ(all.evictions[2].pod, (pod_ref{"default", "a", a.uid}));
  const eviction_view& v = all.evictions[1];
  EXPECT_EQ(v.node, "node1");
  EXPECT_EQ(v.taints, std::vector<taint>{make_taint(1)}) << "the NoExecute ones only";
  EXPECT_EQ(v.due, t0 + 200s);
  EXPECT_EQ(v.state, "pending");
  EXPECT_EQ(v.why, "");
  EXPECT_EQ(v.attempts, 0U);
  EXPECT_EQ(v.last_error, "");

  const eviction_list one = h.ctl.evictions(1);
  EXPECT_EQ(one.total, 3U);
  ASSERT_EQ(one.evictions.size(), 1U);
  EXPECT_EQ(one.evictions[0].pod.name, "b");
}

TEST(Evictions, ADeletedNodeLeavesItsEvictionsWithoutTaints) {
  harness h;
  h.add_pod(make_pod("a", "node1", {make_toleration(1, 300)}));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.delete_node("node1");  // Upstream keeps the evictions of a deleted node's pods.
  const eviction_list l = h.ctl.evictions(10);
  ASSERT_EQ(l.evictions.size(), 1U);
  EXPECT_EQ(l.evictions[0].node, "node1");
  EXPECT_TRUE(l.evictions[0].taints.empty());
}

TEST(Evictions, RunningAndRetryingOnesSayHowFarTheyGot) {
  harness h;
  h.sink.set_hold(true);
  h.add_pod(make_pod("a", "node1"));
  h.add_pod(make_pod("b", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.sink.held(), 2U);
  h.sink.set_failure_message("admission webhook denied the request");
  h.sink.release(1, eviction_status::failed);  // b
  h.settle();
  const eviction_list l = h.ctl.evictions(10);
  ASSERT_EQ(l.evictions.size(), 2U);
  const eviction_view& a = l.evictions[0].pod.name == "a" ? l.evictions[0] : l.evictions[1];
  const eviction_view& b = l.evictions[0].pod.name == "b" ? l.evictions[0] : l.evictions[1];
  EXPECT_EQ(a.state, "running");
  EXPECT_EQ(a.why, "");
  EXPECT_EQ(a.attempts, 1U);
  EXPECT_EQ(b.state, "retrying");
  EXPECT_EQ(b.why, "backoff");
  EXPECT_EQ(b.attempts, 1U);
  EXPECT_EQ(b.last_error, "admission webhook denied the request");
}

TEST(Evictions, WaitingOnesSayWhichLimitHoldsThem) {
  eviction_policy p;
  p.rate_limit.max_in_flight_per_node = 1;
  p.rate_limit.max_in_flight_per_namespace = 1;
  harness h(with_policy(p));
  h.sink.set_hold(true);
  h.add_pod(make_pod("a", "node1"));
  pod_view same_node = make_pod("b", "node1");
  same_node.namespace_ = "other";
  h.add_pod(same_node);
  h.add_pod(make_pod("c", "node2"));  // namespace "default", as a
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_node(make_node("node2", {make_taint(1)}));
  ASSERT_EQ(h.sink.held(), 1U);
  std::map<std::string, std::pair<std::string, std::string>> seen;
  for (const eviction_view& v : h.ctl.evictions(10).evictions) {
    seen[v.pod.name] = {std::string(v.state), std::string(v.why)};
  }
  EXPECT_EQ(seen["a"], std::make_pair(std::string("running"), std::string()));
  EXPECT_EQ(seen["b"], std::make_pair(std::string("waiting"), std::string("in_flight_limit_node")));
  EXPECT_EQ(seen["c"],
            std::make_pair(std::string("waiting"), std::string("in_flight_limit_namespace")));
}

TEST(Evictions, TheRateLimitAndTheStormBreakerAreNamed) {
  eviction_policy p;
  p.rate_limit.evictions_per_second = 1;
  p.rate_limit.burst = 1;
  harness h(with_policy(p));
  h.add_pod(make_pod("a", "node1"));
  h.add_pod(make_pod("b", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.sink.calls().size(), 1U);
  eviction_list l = h.ctl.evictions(10);
  ASSERT_EQ(l.evictions.size(), 1U);
  EXPECT_EQ(l.evictions[0].state, "waiting");
  EXPECT_EQ(l.evictions[0].why, "rate_limit");

  eviction_policy breaker;
  breaker.storm_breaker.max_tainted_nodes_percent = 50;
  harness hb(with_policy(breaker));
  hb.add_pod(make_pod("a", "node1", {make_toleration(1, 10)}));
  hb.add_node(make_node("node1", {make_taint(1)}));
  hb.advance(10s);
  EXPECT_FALSE(hb.evicted("a"));
  l = hb.ctl.evictions(10);
  ASSERT_EQ(l.evictions.size(), 1U);
  EXPECT_EQ(l.evictions[0].state, "waiting");
  EXPECT_EQ(l.evictions[0].why, "storm_breaker");
}

TEST(Evictions, AnEmptyQueueListsNothing) {
  harness h;
  const eviction_list l = h.ctl.evictions(10'000);
  EXPECT_EQ(l.total, 0U);
  EXPECT_TRUE(l.evictions.empty());
}

}  // namespace
}  // namespace tec::controller

// The controller beyond upstream's tests: input filters (docs/behaviour.md §1), sharding and
// coalescing (docs/behaviour.md §2), UID handling and the stale-key races (docs/behaviour.md §9),
// durable retry, saturation, and a seeded property test over random interleavings.

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <set>
#include <stdexcept>

#include "controller/support/harness.hpp"
#include "support/manual_driver.hpp"

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

using testing::ten_days;

// --- docs/behaviour.md §1: filters ---

TEST(Filters, NodeUpdateWithUnchangedNoExecuteTaintsIsIgnored) {
  harness h;
  const node_view a = make_node("node1", {make_taint(1)});
  node_view b = a;
  taint ns = make_taint(2);
  ns.effect = taint_effect::no_schedule;
  b.taints.push_back(ns);  // Only a NoSchedule taint added.
  EXPECT_FALSE(h.ctl.node_updated(&a, &b));
  EXPECT_FALSE(h.ctl.node_updated(nullptr, nullptr));
  node_view c = a;
  c.taints[0].time_added_unix = 42;  // DeepEqual upstream: timeAdded counts.
  EXPECT_TRUE(h.ctl.node_updated(&a, &c));
  // Add and delete always count, even without taints.
  const node_view empty = make_node("node2");
  EXPECT_TRUE(h.ctl.node_updated(nullptr, &empty));
  EXPECT_TRUE(h.ctl.node_updated(&empty, nullptr));
  EXPECT_EQ(counted(h.ctl, "updates_ignored_total"), 1U);
}

TEST(Filters, PodUpdateWithUnchangedTolerationsAndNodeIsIgnored) {
  harness h;
  const pod_view a = make_pod("pod1", "node1", {make_toleration(1, 5)});
  pod_view b = a;
  b.phase = pod_phase::succeeded;
  b.terminating = true;  // Gets a deletionTimestamp: status-only for us.
  EXPECT_FALSE(h.ctl.pod_updated(&a, &b));
  pod_view c = a;
  c.tolerations.push_back(make_toleration(2, -1));
  EXPECT_TRUE(h.ctl.pod_updated(&a, &c));
  pod_view d = a;
  d.uid = "another";  // Same name, another pod: always counts.
  EXPECT_TRUE(h.ctl.pod_updated(&a, &d));
}

TEST(Filters, UnscheduledPodsAreIgnored) {
  harness h;
  const pod_view a = make_pod("pod1", "");
  EXPECT_FALSE(h.ctl.pod_updated(nullptr, &a));
  EXPECT_FALSE(h.ctl.pod_updated(&a, nullptr));
  pod_view b = a;
  b.tolerations.push_back(make_toleration(1, 1));
  EXPECT_FALSE(h.ctl.pod_updated(&a, &b));
  // Scheduling it counts.
  pod_view c = a;
  c.node_name = "node1";
  EXPECT_TRUE(h.ctl.pod_updated(&a, &c));
}

TEST(Filters, BadInputIsRejectedNotFatal) {
  harness h;
  node_view nameless;
  EXPECT_FALSE(h.ctl.node_updated(nullptr, &nameless));
  pod_view p;
  p.node_name = "node1";
  EXPECT_FALSE(h.ctl.pod_updated(nullptr, &p));
  h.settle();
  EXPECT_EQ(counted(h.ctl, "updates_ignored_total"), 2U);
}

TEST(Filters, PodUpdateForUntaintedNodeDoesNotCancel) {
  // Section 5.3: a pod update on a node that is not tainted does nothing, not even a cancel
  // (here: the node was deleted, which keeps its pods' evictions).
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  pod_view p = make_pod("pod1", "node1", {make_toleration(1, 50)});
  h.add_pod(p);
  h.delete_node("node1");
  p.tolerations = {make_toleration(1, 60)};
  h.update_pod(p);
  EXPECT_TRUE(h.scheduled("pod1"));
}

// --- docs/behaviour.md §2: sharding, ordering, coalescing ---

TEST(Sharding, Fnv1aKnownVectors) {
  EXPECT_EQ(fnv1a_32(""), 0x811c9dc5U);
  EXPECT_EQ(fnv1a_32("a"), 0xe40c292cU);
  EXPECT_EQ(fnv1a_32("foobar"), 0xbf9cf968U);
  EXPECT_EQ(shard_of("foobar", 8), 0xbf9cf968U % 8);
  EXPECT_EQ(shard_of("x", 1), 0U);
}

TEST(Sharding, PodsQueueOnTheirNodesWorker) {
  harness h;
  const pod_view p = make_pod("pod1", "node-a");
  h.ctl.pod_updated(nullptr, &p);
  const auto depth = h.ctl.stats().worker_queue_depth;
  ASSERT_EQ(depth.size(), 8U);
  for (std::size_t i = 0; i < depth.size(); ++i) {
    EXPECT_EQ(depth[i], i == shard_of("node-a", 8) ? 1U : 0U) << i;
  }
}

TEST(Coalescing, RepeatedUpdatesForOneKeyAreMerged) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  pod_view p = make_pod("pod1", "node1", {make_toleration(1, -1)});
  h.index.put(p);
  for (int i = 0; i < 100; ++i) {
    pod_view next = p;
    next.tolerations = {make_toleration(1, i % 2 == 0 ? 100 : -1)};
    h.ctl.pod_updated(&p, &next);
    p = next;
  }
  h.index.put(p);  // Latest: tolerates forever.
  EXPECT_EQ(h.ctl.run_until_idle_for_test(), 1U);
  EXPECT_EQ(counted(h.ctl, "updates_coalesced_total"), 99U);
  EXPECT_FALSE(h.scheduled("pod1"));
  // Node updates coalesce to the latest taints too.
  node_view n = make_node("node1", {make_taint(1)});
  for (int i = 0; i < 10; ++i) {
    node_view next =
        make_node("node1", i % 2 == 0 ? std::vector<taint>{} : std::vector<taint>{make_taint(2)});
    h.ctl.node_updated(&n, &next);
    n = next;
  }
  EXPECT_EQ(h.ctl.run_until_idle_for_test(), 1U);
  ASSERT_TRUE(h.ctl.tainted_taints("node1").has_value());
  EXPECT_EQ(*h.ctl.tainted_taints("node1"), std::vector<taint>{make_taint(2)});
  h.settle();
  EXPECT_TRUE(h.evicted("pod1"));  // Latest state: taint2, not tolerated.
}

TEST(Ordering, NodeUpdatesBeforePodUpdatesOnAWorker) {
  // The pod update is enqueued first, but the worker handles the node's taint first, so the
  // pod update already sees the node as tainted.
  harness h(manual_options(1));
  const pod_view p = make_pod("pod1", "node1");
  h.index.put(p);
  h.ctl.pod_updated(nullptr, &p);
  const node_view n = make_node("node1", {make_taint(1)});
  h.ctl.node_updated(nullptr, &n);
  h.settle();
  EXPECT_EQ(h.sink.evictions_of("pod1"), 1U);
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 1U);
}

// --- UID handling and stale keys ---

TEST(Uid, EvictionCarriesPodUid) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  const pod_view p = make_pod("pod1", "node1");
  h.add_pod(p);
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].pod, (pod_ref{"default", "pod1", p.uid}));
  EXPECT_TRUE(calls[0].pod_current);
  const auto entry_gone = h.ctl.queue_for_test().lookup("default/pod1");
  EXPECT_FALSE(entry_gone.has_value());
}

TEST(Uid, RecreatedPodWithDeletionUnseenGetsItsOwnDecision) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  const pod_view old_pod = make_pod("pod1", "node1", {make_toleration(1, 100)});
  h.add_pod(old_pod);
  h.advance(50s);
  // Deleted and re-created; the informer only reports the new pod (as an add).
  const pod_view new_pod = make_pod("pod1", "node1", {make_toleration(1, 300)});
  h.index.put(new_pod);
  h.ctl.pod_updated(nullptr, &new_pod);
  h.settle();
  const auto entry = h.ctl.queue_for_test().lookup("default/pod1");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->payload, new_pod.uid);
  EXPECT_EQ(entry->fire_at, h.drv.now() + 300s);  // Its own window, not the old one.
  EXPECT_EQ(counted(h.ctl, "stale_evictions_dropped_total"), 1U);
  // No cancel event for the vanished pod; each pod got its own TaintEvictionScheduled.
  const auto events = h.sink.events();
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0], std::make_pair(pod_ref{"default", "pod1", old_pod.uid},
                                      event_kind::eviction_scheduled));
  EXPECT_EQ(events[1], std::make_pair(pod_ref{"default", "pod1", new_pod.uid},
                                      event_kind::eviction_scheduled));
  h.advance(299s);
  EXPECT_FALSE(h.evicted("pod1"));
  h.advance(1s);
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].pod.uid, new_pod.uid);
}

TEST(Uid, RecreatedUntoleratedPodIsEvictedAtOnceWithItsUid) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 100)}));
  const pod_view new_pod = make_pod("pod1", "node1");
  h.index.put(new_pod);
  h.ctl.pod_updated(nullptr, &new_pod);
  h.settle();
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].pod.uid, new_pod.uid);
}

TEST(Uid, RecreatedOnAnotherNodeDropsTheOldEviction) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_node(make_node("node2"));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 100)}));
  const pod_view new_pod = make_pod("pod1", "node2");
  h.index.put(new_pod);
  h.ctl.pod_updated(nullptr, &new_pod);
  h.settle();
  EXPECT_FALSE(h.scheduled("pod1"));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
}

TEST(Uid, ReplacedByUnscheduledPodDropsTheOldEviction) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  const pod_view old_pod = make_pod("pod1", "node1", {make_toleration(1, 100)});
  h.add_pod(old_pod);
  const pod_view new_pod = make_pod("pod1", "");
  h.index.put(new_pod);
  EXPECT_TRUE(h.ctl.pod_updated(&old_pod, &new_pod));  // Relist replaced it in one update.
  h.settle();
  EXPECT_FALSE(h.scheduled("pod1"));
}

TEST(Uid, DeletedPodCancelsWithEventNamingItsUid) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  const pod_view p = make_pod("pod1", "node1", {make_toleration(1, 100)});
  h.add_pod(p);
  h.delete_pod("pod1");
  EXPECT_FALSE(h.scheduled("pod1"));
  const auto events = h.sink.events();
  ASSERT_EQ(events.size(), 2U);  // TaintEvictionScheduled, then the cancel.
  EXPECT_EQ(events[1],
            std::make_pair(pod_ref{"default", "pod1", p.uid}, event_kind::cancelling_deletion));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
}

TEST(Uid, FiringForReplacedPodMakesNoApiCall) {
  // The cache changed but no update reached the controller before the timer fired.
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 10)}));
  h.index.put(make_pod("pod1", "node1", {make_toleration(1, -1)}));
  h.advance(10s);
  EXPECT_FALSE(h.evicted("pod1"));
  EXPECT_EQ(counted(h.ctl, "evictions_skipped_total"), 1U);
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 0U);
  EXPECT_EQ(h.sink.events().size(), 1U);  // Only when it was scheduled.
}

// Taint removed while an immediate eviction is in flight, pod re-created with a new UID, node
// tainted again: the new pod is evicted with its own UID and the old work never touches it.
TEST(Races, InFlightEvictionThenRecreateThenRetaint) {
  harness h;
  h.sink.set_hold(true);
  h.add_node(make_node("node1"));
  const pod_view old_pod = make_pod("pod1", "node1");
  h.add_pod(old_pod);
  h.update_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.sink.held(), 1U);
  h.update_node(make_node("node1"));  // Cancels the running eviction (no pending: no event).
  EXPECT_FALSE(h.scheduled("pod1"));
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 0U);
  h.delete_pod("pod1");
  const pod_view new_pod = make_pod("pod1", "node1");
  h.add_pod(new_pod);
  h.update_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.sink.held(), 2U);
  // The old attempt finishes late: 409 on the UID precondition, reported as done.
  const auto released = h.sink.release_oldest(eviction_status::deleted);
  ASSERT_TRUE(released);
  EXPECT_EQ(released->uid, old_pod.uid);
  h.settle();
  ASSERT_TRUE(h.index.get_pod("default", "pod1"));  // The new pod survived the old DELETE.
  const auto entry = h.ctl.queue_for_test().lookup("default/pod1");
  ASSERT_TRUE(entry.has_value());  // Its own eviction was not removed by the old completion.
  EXPECT_EQ(entry->payload, new_pod.uid);
  EXPECT_EQ(entry->state, timedqueue::entry_state::running);
  h.sink.release_oldest(eviction_status::deleted);
  h.settle();
  EXPECT_FALSE(h.index.get_pod("default", "pod1"));
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 2U);
  EXPECT_EQ(calls[0].pod.uid, old_pod.uid);
  EXPECT_EQ(calls[1].pod.uid, new_pod.uid);
  EXPECT_FALSE(h.scheduled("pod1"));
}

TEST(Races, RapidTaintAddRemoveAddNeverGoesStale) {
  // Upstream issues #100607/#107543/#110401/#125332: after add/remove/add the key was stuck.
  harness h;
  h.sink.set_hold(true);
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1"));
  for (int round = 0; round < 5; ++round) {
    h.update_node(make_node("node1", {make_taint(1)}));
    EXPECT_TRUE(h.scheduled("pod1"));
    h.update_node(make_node("node1"));
    EXPECT_FALSE(h.scheduled("pod1"));
    h.sink.release_oldest(eviction_status::failed);  // Late failure of a cancelled run.
    h.settle();
    EXPECT_FALSE(h.scheduled("pod1"));
  }
  h.update_node(make_node("node1", {make_taint(1)}));
  EXPECT_TRUE(h.scheduled("pod1"));
  EXPECT_EQ(h.sink.evictions_of("pod1"), 6U);
}

TEST(Races, UntoleratedUpdateWhileRunningDoesNotDuplicate) {
  harness h;
  h.sink.set_hold(true);
  h.add_node(make_node("node1", {make_taint(1)}));
  pod_view p = make_pod("pod1", "node1");
  h.add_pod(p);
  ASSERT_EQ(h.sink.held(), 1U);
  h.update_node(make_node("node1", {make_taint(1), make_taint(2)}));
  p.tolerations = {make_toleration(3, -1)};
  h.update_pod(p);
  EXPECT_EQ(h.sink.held(), 1U);
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 1U);
}

TEST(Races, UntoleratedTaintCancelsPendingAndEvictsNow) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 100)}));
  h.update_node(make_node("node1", {make_taint(1), make_taint(2)}));
  EXPECT_TRUE(h.evicted("pod1"));
  const auto events = h.sink.events();
  ASSERT_EQ(events.size(), 3U);  // Scheduled; then, as upstream: cancel event, then marking.
  EXPECT_EQ(events[0].second, event_kind::eviction_scheduled);
  EXPECT_EQ(events[1].second, event_kind::cancelling_deletion);
  EXPECT_EQ(events[2].second, event_kind::marking_for_deletion);
}

// --- durable retry ---

TEST(Retry, FailedEvictionsAreRetriedPastFiveAttempts) {
  harness h;
  h.sink.script(std::vector<eviction_status>(9, eviction_status::failed));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  for (int i = 0; i < 20 && h.scheduled("pod1"); ++i) {
    h.advance(10s);
  }
  EXPECT_FALSE(h.scheduled("pod1"));
  EXPECT_EQ(h.sink.evictions_of("pod1"), 10U);
  EXPECT_FALSE(h.index.get_pod("default", "pod1"));
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 1U);
  EXPECT_EQ(counted(h.ctl, "evictions_started_total"), 1U);
  EXPECT_EQ(
      counted(h.ctl, "evictions_started_total") + counted(h.ctl, "pod_deletion_retries_total"),
      10U);
  EXPECT_EQ(counted(h.ctl, "eviction_attempt_failures_total"), 9U);
  EXPECT_EQ(counted(h.ctl, "evictions_succeeded_total"), 1U);
}

TEST(Retry, TaintRemovedDuringBackoffStopsRetries) {
  harness h;
  h.sink.script({eviction_status::failed});
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  const auto entry = h.ctl.queue_for_test().lookup("default/pod1");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->state, timedqueue::entry_state::backoff);
  h.update_node(make_node("node1"));
  EXPECT_FALSE(h.scheduled("pod1"));
  // Not pending, but announced ("Marking for deletion") and the pod stays: it says so
  // (issue 47; before, a kept pod carried only the Marking event).
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 1U);
  h.advance(ten_days);
  EXPECT_EQ(h.sink.evictions_of("pod1"), 1U);
}

TEST(Retry, DroppedDoneCallbackIsRetried) {
  harness h;
  h.sink.set_hold(true);
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  h.sink.drop_held();  // The sink lost the request: the completion reports "abandoned".
  h.sink.set_hold(false);
  h.advance(10s);
  EXPECT_EQ(h.sink.evictions_of("pod1"), 2U);
  EXPECT_FALSE(h.scheduled("pod1"));
}

// --- stuck evictions (issue 11, item 5) ---

// With manual_options' backoff (1 s doubling to 8 s, no jitter) the attempts of an eviction
// due at t=0 run at t = 0, 1, 3, 7, 15, 23, 31, ...: the 5th one fails at t=15.
constexpr auto fifth_attempt = 15s;

std::size_t stuck_events(const testing::harness& h, std::string_view name) {
  return h.sink.events_of(name, event_kind::eviction_failed);
}

// The next `failures` attempts fail; pod1 (no tolerations) starts evicting from node1, tainted.
void evict_failing(harness& h, std::size_t failures = 1000) {
  h.sink.script(std::vector<eviction_status>(failures, eviction_status::failed));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
}

TEST(Stuck, FiveFailuresInARowMakeAWarningEventAndCountAsStuck) {
  harness h;
  h.sink.set_failure_message("DELETE pod default/pod1: 403 Forbidden: denied by webhook");
  evict_failing(h);
  h.advance(fifth_attempt - 1s);
  EXPECT_EQ(h.sink.evictions_of("pod1"), 4U);
  EXPECT_EQ(stuck_events(h, "pod1"), 0U);
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 0U);
  EXPECT_EQ(counted(h.ctl, "stuck_reports_total"), 0U);
  for (const auto& c : h.sink.calls()) {
    EXPECT_FALSE(c.stuck);
  }

  h.advance(1s);
  EXPECT_EQ(h.sink.evictions_of("pod1"), 5U);
  ASSERT_EQ(stuck_events(h, "pod1"), 1U);
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 1U);
  EXPECT_EQ(counted(h.ctl, "stuck_reports_total"), 1U);
  const auto events = h.sink.events();
  const auto details = h.sink.event_details();
  ASSERT_EQ(events.back().second, event_kind::eviction_failed);
  EXPECT_EQ(events.back().first.uid, h.sink.calls().front().pod.uid);
  EXPECT_EQ(details.back(), "DELETE pod default/pod1: 403 Forbidden: denied by webhook");
  EXPECT_EQ(event_message(events.back().first, event_kind::eviction_failed, details.back()),
            "Cannot delete Pod default/pod1: DELETE pod default/pod1: 403 Forbidden: denied by "
            "webhook");

  // Still retried (every 8 s), quietly: the next attempts carry `stuck`.
  h.advance(8s);
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 6U);
  EXPECT_FALSE(calls[4].stuck);
  EXPECT_TRUE(calls[5].stuck);
  EXPECT_EQ(stuck_events(h, "pod1"), 1U);
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 1U);
  EXPECT_EQ(counted(h.ctl, "stuck_reports_total"), 1U) << "a report, not a retry";
}

TEST(Stuck, TheWarningEventRepeatsAtMostEveryTenMinutes) {
  harness h;
  evict_failing(h);
  h.advance(fifth_attempt);
  ASSERT_EQ(stuck_events(h, "pod1"), 1U);
  const std::size_t attempts_at_first_report = h.sink.evictions_of("pod1");
  // 9 min 59 s later: about 75 more attempts, no second event.
  for (int i = 0; i < 599; ++i) {
    h.advance(1s);
  }
  EXPECT_EQ(stuck_events(h, "pod1"), 1U);
  EXPECT_GE(h.sink.evictions_of("pod1"), attempts_at_first_report + 70);
  // The first failure 10 minutes (or more) after the first report reports again.
  h.advance(8s);
  EXPECT_EQ(stuck_events(h, "pod1"), 2U);
  for (int i = 0; i < 590; ++i) {
    h.advance(1s);
  }
  EXPECT_EQ(stuck_events(h, "pod1"), 2U);
  h.advance(20s);
  EXPECT_EQ(stuck_events(h, "pod1"), 3U);
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 1U);
  EXPECT_TRUE(h.scheduled("pod1"));
}

TEST(Stuck, ASucceedingAttemptLeavesTheStuckCountAtOnce) {
  harness h;
  evict_failing(h, 6);
  h.advance(fifth_attempt);
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 1U);
  h.advance(8s);  // the 6th attempt fails
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 1U);
  h.advance(8s);  // the 7th succeeds
  EXPECT_FALSE(h.scheduled("pod1"));
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 0U);
  EXPECT_EQ(stuck_events(h, "pod1"), 1U);
}

TEST(Stuck, ACancelledStuckEvictionLeavesTheStuckCountAtOnce) {
  harness h;
  evict_failing(h);
  h.add_pod(make_pod("pod2", "node1"));
  h.advance(fifth_attempt);
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 2U);
  h.delete_pod("pod2");  // pod gone: its eviction is cancelled
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 1U);
  h.update_node(make_node("node1"));  // taint removed: cancelled
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 0U);
  const std::size_t attempts = h.sink.calls().size();
  h.advance(ten_days);
  EXPECT_EQ(h.sink.calls().size(), attempts);
  EXPECT_EQ(stuck_events(h, "pod1"), 1U);
}

TEST(Stuck, ANewEvictionOfTheSameKeyStartsItsCountAfresh) {
  harness h;
  evict_failing(h);
  h.advance(fifth_attempt);
  ASSERT_EQ(stuck_events(h, "pod1"), 1U);
  h.update_node(make_node("node1"));
  h.update_node(make_node("node1", {make_taint(1)}));  // a new eviction, attempt 1 at once
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 0U);
  h.advance(fifth_attempt - 1s);
  EXPECT_EQ(stuck_events(h, "pod1"), 1U);
  h.advance(1s);
  EXPECT_EQ(stuck_events(h, "pod1"), 2U);  // its own 5th failure
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 1U);
}

TEST(Stuck, TheEventCarriesTheMessageCleanedAndClipped) {
  harness h;
  std::string message = "denied\r\nforged log line\x1b[31m";
  message += std::string(5000, 'x');
  h.sink.set_failure_message(message);
  evict_failing(h);
  h.advance(fifth_attempt);
  const auto details = h.sink.event_details();
  ASSERT_FALSE(details.empty());
  EXPECT_EQ(details.back(), event_detail(message));
  EXPECT_LE(details.back().size(), max_event_detail);
  EXPECT_EQ(details.back().rfind("denied  forged log line [31mxxx", 0), 0U) << details.back();
}

TEST(EventDetail, ControlCharactersBecomeSpacesAndLongTextIsClippedOnACharacter) {
  EXPECT_EQ(event_detail("a\nb\tc\x7f"
                         "d"),
            "a b c d");
  EXPECT_EQ(event_detail(""), "");
  const std::string exact(max_event_detail, 'y');
  EXPECT_EQ(event_detail(exact), exact);
  const std::string longer(max_event_detail + 1, 'y');
  const std::string clipped = event_detail(longer);
  EXPECT_EQ(clipped.size(), max_event_detail);
  EXPECT_EQ(clipped.substr(clipped.size() - 3), "...");
  // A 2-byte character (U+00E9) straddling the cut is not split.
  std::string accents(max_event_detail - 4, 'z');
  accents += "\xc3\xa9\xc3\xa9\xc3\xa9";
  const std::string cut = event_detail(accents);
  EXPECT_LE(cut.size(), max_event_detail);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  const std::string body = cut.substr(0, cut.size() - 3);
  EXPECT_NE(static_cast<unsigned char>(body.back()), 0xC3U);
}

// --- cancellation reaches the sink (issue 11, item 6) ---

TEST(Cancel, CancellingARunningEvictionMakesItsRequestCancelled) {
  harness h;
  h.sink.set_hold(true);
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  h.add_pod(make_pod("pod2", "node1"));
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 2U);
  ASSERT_TRUE(calls[0].cancelled);
  ASSERT_TRUE(calls[1].cancelled);
  EXPECT_FALSE(calls[0].cancelled());
  EXPECT_FALSE(calls[1].cancelled());
  h.delete_pod(calls[0].pod.name);  // the pod is gone: its running eviction is cancelled
  EXPECT_TRUE(calls[0].cancelled());
  EXPECT_FALSE(calls[1].cancelled());
  h.update_node(make_node("node1"));  // taint removed: the other one too
  EXPECT_TRUE(calls[1].cancelled());
  // A withdrawn attempt reported as failed is neither counted nor retried.
  h.sink.set_hold(false);
  h.sink.release_oldest(eviction_status::failed);
  h.sink.release_oldest(eviction_status::failed);
  h.advance(ten_days);
  EXPECT_EQ(h.sink.calls().size(), 2U);
  EXPECT_EQ(counted(h.ctl, "eviction_attempt_failures_total"), 0U);
}

TEST(Cancel, AnAttemptThatIsOverReadsAsCancelled) {
  harness h;
  h.sink.set_hold(true);
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_FALSE(calls[0].cancelled());
  h.sink.release_oldest(eviction_status::failed);
  // A sink must not send more for an attempt it has reported on; the retry is a new request.
  EXPECT_TRUE(calls[0].cancelled());
}

// --- a pod that stays never says only "Marking for deletion" (issue 47, defect 2) ---
// Once an eviction announced itself, a cancel says so too unless the pod is deleted: when the
// attempt was backing off, at the cancel; when it was running, once it ends without a deletion.

TEST(KeptPod, CancelledWhileItsAttemptRunsAndNothingIsDeleted) {
  harness h;
  h.sink.set_hold(true);
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  ASSERT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 1U);
  h.update_node(make_node("node1"));  // untainted while the DELETE waits
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 0U)
      << "the request may still be accepted: not yet";
  h.sink.release_oldest(eviction_status::failed);  // withdrawn: nothing sent
  h.settle();
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 1U);
  ASSERT_EQ(h.sink.withdrawn().size(), 1U) << "the sink withdraws what it wrote (the condition)";
  EXPECT_EQ(h.sink.withdrawn()[0].name, "pod1");
  h.advance(ten_days);
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 1U);
  EXPECT_EQ(h.sink.calls().size(), 1U);
}

TEST(KeptPod, CancelledWhileItsAttemptRunsAndThePodIsDeleted) {
  harness h;
  h.sink.set_hold(true);
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  h.update_node(make_node("node1"));
  h.sink.release_oldest(eviction_status::deleted);  // the DELETE was already on its way
  h.settle();
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 0U)
      << "deleted: it did not stay";
  EXPECT_TRUE(h.sink.withdrawn().empty());
}

TEST(KeptPod, CancelledWhileBackingOffAfterAFailure) {
  harness h;
  h.sink.script({eviction_status::failed});
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  ASSERT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 1U);
  h.update_node(make_node("node1"));
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 1U);
  ASSERT_EQ(h.sink.withdrawn().size(), 1U);
  EXPECT_EQ(h.sink.withdrawn()[0].uid, h.index.get_pod("default", "pod1")->uid);
  h.advance(ten_days);
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 1U);
  EXPECT_EQ(h.sink.withdrawn().size(), 1U);
  EXPECT_TRUE(h.index.get_pod("default", "pod1").has_value());
}

TEST(KeptPod, CancelledAfterAStaleAnswer) {
  // The defect as met: the fresh read of the node no longer showed the taint (stale), then the
  // untaint's watch event cancelled the retry.
  harness h;
  h.sink.script({eviction_status::stale});
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  ASSERT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 1U);
  h.update_node(make_node("node1"));
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 1U);
  EXPECT_EQ(counted(h.ctl, "cancelled_evictions_total"), 1U);
}

TEST(KeptPod, ARetryRunningWhenCancelledIsAnnouncedOnce) {
  harness h;
  h.sink.script({eviction_status::failed});
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  h.sink.set_hold(true);
  h.advance(ten_days);  // the retry starts and waits
  ASSERT_EQ(h.sink.calls().size(), 2U);
  h.update_node(make_node("node1"));
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 0U);
  h.sink.release_oldest(eviction_status::failed);
  h.settle();
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 1U);
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 1U);
}

TEST(KeptPod, APodThatGoesIsNotAnnouncedNorWithdrawn) {
  harness h;
  h.sink.script({eviction_status::failed});
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  h.delete_pod("pod1");  // someone else deleted it while ours backed off
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 0U);
  EXPECT_TRUE(h.sink.withdrawn().empty());
}

TEST(KeptPod, RetaintedAfterACancelMarksAndCancelsAgain) {
  harness h;
  h.sink.script({eviction_status::failed, eviction_status::failed});
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  h.update_node(make_node("node1"));
  h.update_node(make_node("node1", {make_taint(1)}));
  h.update_node(make_node("node1"));
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::marking_for_deletion), 2U);
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 2U);
}

TEST(Metrics, DeletionLatencyIsMeasuredFromFireTime) {
  std::vector<std::chrono::nanoseconds> seen;
  auto options = manual_options();
  options.on_deleted = [&](std::chrono::nanoseconds d) { seen.push_back(d); };
  harness h(options);
  h.sink.set_hold(true);
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 5)}));
  h.advance(5s);
  h.advance(2s);
  h.sink.release_oldest(eviction_status::deleted);
  ASSERT_EQ(seen.size(), 1U);
  EXPECT_EQ(seen[0], std::chrono::seconds(2));
}

TEST(Metrics, OnlyAnAcceptedDeleteReachesTheDeletionHistogram) {
  std::vector<std::chrono::nanoseconds> seen;
  auto options = manual_options();
  options.on_deleted = [&](std::chrono::nanoseconds d) { seen.push_back(d); };
  harness h(options);
  h.sink.script({eviction_status::gone, eviction_status::deleted});
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));  // 404 or UID mismatch: done, but no deletion of ours
  EXPECT_FALSE(h.scheduled("pod1"));
  EXPECT_TRUE(seen.empty());
  h.add_pod(make_pod("pod2", "node1"));
  EXPECT_EQ(seen.size(), 1U);
  EXPECT_EQ(counted(h.ctl, "evictions_succeeded_total"), 2U);
}

TEST(Metrics, CountersAndDepths) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_node(make_node("node2", {make_taint(2)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 10)}));
  h.add_pod(make_pod("pod2", "node1"));
  h.update_node(make_node("node1"));
  const auto s = h.ctl.stats();
  EXPECT_EQ(s.tainted_nodes, 1U);
  EXPECT_EQ(counted(h.ctl, "scheduled_evictions_total"), 2U);
  EXPECT_EQ(counted(h.ctl, "evictions_started_total"), 1U);
  EXPECT_EQ(counted(h.ctl, "cancelled_evictions_total"), 1U);
  EXPECT_EQ(s.queue.pending, 0U);
  for (const auto d : s.worker_queue_depth) {
    EXPECT_EQ(d, 0U);
  }
}

// --- saturation and zero/negative seconds, end to end ---

TEST(Seconds, ZeroNegativeOneAndMax) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  toleration zero = make_toleration(1, 0);
  toleration negative = make_toleration(1, 0);
  negative.seconds = -5;
  toleration huge = make_toleration(1, 0);
  huge.seconds = std::numeric_limits<std::int64_t>::max();
  h.add_pod(make_pod("zero", "node1", {zero}));
  h.add_pod(make_pod("negative", "node1", {negative}));
  h.add_pod(make_pod("one", "node1", {make_toleration(1, 1)}));
  h.add_pod(make_pod("huge", "node1", {huge}));
  EXPECT_TRUE(h.evicted("zero"));
  EXPECT_TRUE(h.evicted("negative"));
  EXPECT_FALSE(h.evicted("one"));
  h.advance(1s);
  EXPECT_TRUE(h.evicted("one"));
  ASSERT_TRUE(h.scheduled("huge"));  // Never turned into "now".
  h.advance(std::chrono::hours(24 * 365 * 10));
  EXPECT_FALSE(h.evicted("huge"));
}

TEST(Seconds, FirstMatchingTolerationDecides) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 10), make_toleration(1, -1)}));
  h.advance(9s);
  EXPECT_FALSE(h.evicted("pod1"));
  h.advance(1s);
  EXPECT_TRUE(h.evicted("pod1"));
}

// --- robustness ---

class throwing_sink final : public eviction_sink {
public:
  throwing_sink(eviction_sink& inner, int throws) : inner_(inner), throws_(throws) {}
  void evict(eviction_request request, std::function<void(eviction_result)> done) override {
    if (throws_-- > 0) {
      throw std::runtime_error("sink exploded");
    }
    inner_.evict(std::move(request), std::move(done));
  }
  void record_event(const pod_ref& pod, event_kind kind, std::string_view detail) override {
    inner_.record_event(pod, kind, detail);
  }

private:
  eviction_sink& inner_;
  int throws_;
};

TEST(Robustness, ThrowingSinkAttemptIsRetried) {
  timedqueue::manual_driver drv;
  testing::fake_index index;
  testing::recording_sink rec(&index);
  throwing_sink sink(rec, 2);
  controller ctl(index, sink, drv, manual_options());
  const auto settle = [&] {
    while (ctl.run_until_idle_for_test() + drv.run_pending() > 0) {
    }
  };
  const pod_view p = make_pod("pod1", "node1");
  index.put(p);
  const node_view n = make_node("node1", {make_taint(1)});
  ctl.node_updated(nullptr, &n);
  settle();
  EXPECT_EQ(rec.evictions_of("pod1"), 0U);
  drv.advance(10s);
  settle();
  EXPECT_EQ(rec.evictions_of("pod1"), 1U);
  EXPECT_FALSE(ctl.queue_for_test().lookup("default/pod1").has_value());
  EXPECT_EQ(rec.events_of("pod1", event_kind::marking_for_deletion), 1U);
  ctl.shutdown();
}

TEST(Robustness, ThrowingIndexDoesNotStopTheWorker) {
  harness h(manual_options(1));
  h.index.on_pods_on_node = [](std::string_view node) {
    if (node == "bad") {
      throw std::runtime_error("cache exploded");
    }
  };
  h.index.put(make_pod("pod-bad", "bad"));
  h.index.put(make_pod("pod-good", "good"));
  h.add_node(make_node("bad", {make_taint(1)}));
  h.add_node(make_node("good", {make_taint(1)}));
  EXPECT_FALSE(h.evicted("pod-bad"));
  EXPECT_TRUE(h.evicted("pod-good"));
  // The next update for the bad node decides again from the latest state.
  h.index.on_pods_on_node = nullptr;
  h.update_node(make_node("bad", {make_taint(1), make_taint(2)}));
  EXPECT_TRUE(h.evicted("pod-bad"));
}

// --- property test ---

// Random interleavings of taint add/remove, pod delete/re-create (seen or not), sink
// completions and clock movement. After every step: every pod on a node with an untolerated
// (or finitely tolerated) taint has its own eviction pending, running or backing off (or is
// already deleted), and no other key has one; every DELETE carries the UID of the pod that
// existed under that name when it was sent.
TEST(Property, NoKeyGoesStaleOverRandomInterleavings) {
  const std::vector<std::string> nodes{"n0", "n1", "n2"};
  const std::vector<std::string> names{"p0", "p1", "p2", "p3"};
  const std::vector<std::vector<toleration>> toleration_sets{
      {},
      {make_toleration(1, -1)},
      {make_toleration(1, 30)},
      {make_toleration(1, -1), make_toleration(2, 60)},
      {make_toleration(1, 0)},
  };
  std::size_t steps = 0;
  std::size_t evictions = 0;
  for (std::uint32_t seed = 1; seed <= 1000; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const auto pick = [&](std::size_t n) {
      return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    };
    harness h(manual_options(1 + pick(4)));
    h.sink.set_hold(true);
    // The informer delivers the deletion of a pod the API deleted.
    h.sink.on_deleted = [&](const pod_view& p) { h.ctl.pod_updated(&p, nullptr); };
    for (const auto& n : nodes) {
      h.add_node(make_node(n));
    }
    for (int step = 0; step < 40; ++step) {
      ++steps;
      switch (pick(8)) {
        case 0: {  // Toggle a taint on a node.
          const std::string& n = nodes[pick(nodes.size())];
          node_view next = h.nodes().at(n);
          const taint t = make_taint(1 + static_cast<int>(pick(2)));
          const auto it = std::find(next.taints.begin(), next.taints.end(), t);
          if (it == next.taints.end()) {
            next.taints.push_back(t);
          } else {
            next.taints.erase(it);
          }
          h.update_node(next);
          break;
        }
        case 1: {  // Delete a pod (seen).
          h.delete_pod(names[pick(names.size())]);
          break;
        }
        case 2: {  // (Re-)create a pod; a replaced pod's deletion is never seen.
          const pod_view p = make_pod(names[pick(names.size())], nodes[pick(nodes.size())],
                                      toleration_sets[pick(toleration_sets.size())]);
          h.index.put(p);
          h.ctl.pod_updated(nullptr, &p);
          h.settle();
          break;
        }
        case 7: {  // Deleted (seen) and re-created before any worker ran: coalesced.
          const std::string& name = names[pick(names.size())];
          const auto old = h.index.erase("default", name);
          if (old) {
            h.ctl.pod_updated(&*old, nullptr);
          }
          const pod_view p =
              make_pod(name, old && pick(2) == 0 ? old->node_name : nodes[pick(nodes.size())],
                       toleration_sets[pick(toleration_sets.size())]);
          h.index.put(p);
          h.ctl.pod_updated(nullptr, &p);
          h.settle();
          break;
        }
        case 3: {  // Change a pod's tolerations.
          auto p = h.index.get_pod("default", names[pick(names.size())]);
          if (p) {
            p->tolerations = toleration_sets[pick(toleration_sets.size())];
            h.update_pod(*p);
          }
          break;
        }
        case 4:
        case 5: {  // A sink call finishes.
          if (h.sink.held() > 0) {
            h.sink.release(pick(h.sink.held()),
                           pick(3) == 0 ? eviction_status::failed : eviction_status::deleted);
            h.settle();
          }
          break;
        }
        default:
          h.advance(std::chrono::seconds(pick(45)));
          break;
      }
      // Check the invariant.
      for (const auto& name : names) {
        const auto pod = h.index.get_pod("default", name);
        const auto entry = h.ctl.queue_for_test().lookup("default/" + name);
        bool needs = false;
        if (pod) {
          const auto& taints = h.nodes().at(pod->node_name).taints;
          if (!taints.empty()) {
            const pod_decision d = decide(taints, pod->tolerations, {}).decision;
            needs = d.untolerated || !d.time.is_forever();
          }
        }
        if (needs) {
          ASSERT_TRUE(entry.has_value()) << name << " step " << step;
          EXPECT_EQ(entry->payload, pod->uid) << name << " step " << step;
        } else {
          ASSERT_FALSE(entry.has_value())
              << name << " step " << step << " payload " << entry->payload;
        }
      }
    }
    for (const auto& c : h.sink.calls()) {
      ASSERT_TRUE(c.pod_current) << c.pod.name << " " << c.pod.uid;
      ++evictions;
    }
    if (HasFailure()) {
      return;
    }
  }
  EXPECT_EQ(steps, 40'000U);
  EXPECT_GT(evictions, 1000U);
}

}  // namespace
}  // namespace tec::controller

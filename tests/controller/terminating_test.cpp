// Pods already terminating (metadata.deletionTimestamp set) are never deleted again (issue 29,
// item 5): after a restart the replay finds every pod our last run deleted still terminating
// on its tainted node, and upstream deletes each again, with a second "Marking for deletion"
// event and, in ours, a rate-limit token each. Here: no eviction, no token, no event; a
// waiting eviction of a pod that becomes terminating is dropped before it takes a token; a
// firing that finds the pod terminating sends nothing; an attempt already running is left
// alone (its own DELETE is why the pod is terminating). Counted in terminating_skipped.
// Manual clock: retries 1 s doubling to 8 s, no jitter.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "controller/support/harness.hpp"

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
using testing::with_policy;

pod_view terminating(pod_view p) {
  p.terminating = true;
  return p;
}

/// The informer sees `name` get its deletionTimestamp (an update of the same pod).
void mark_terminating(harness& h, const std::string& name) {
  const auto p = h.index.get_pod("default", name);
  ASSERT_TRUE(p.has_value()) << name;
  h.update_pod(terminating(*p));
}

eviction_policy rate_limited(double per_second, std::uint32_t burst) {
  eviction_policy p;
  p.rate_limit.evictions_per_second = per_second;
  p.rate_limit.burst = burst;
  return p;
}

TEST(Terminating, APodOnATaintedNodeGetsNoEvictionNoEventAndIsCounted) {
  harness h;
  h.add_pod(terminating(make_pod("p", "node1")));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.advance(10min);
  EXPECT_TRUE(h.sink.calls().empty()) << "no DELETE for a pod already terminating";
  EXPECT_TRUE(h.sink.events().empty()) << "no Marking for deletion, no other event";
  EXPECT_FALSE(h.scheduled("p"));
  EXPECT_EQ(counted(h.ctl, "scheduled_evictions_total"), 0U);
  EXPECT_EQ(counted(h.ctl, "evictions_started_total"), 0U);
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 1U);
  EXPECT_EQ(counted(h.ctl, "pod_decisions_total"), 1U)
      << "it is decided as usual; only the eviction is left out";
}

TEST(Terminating, ATolerationWithSecondsSchedulesNothingEither) {
  harness h;
  h.add_pod(terminating(make_pod("p", "node1", {make_toleration(1, 30)})));
  h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_FALSE(h.scheduled("p"));
  h.advance(31s);
  EXPECT_TRUE(h.sink.calls().empty());
  EXPECT_TRUE(h.sink.events().empty()) << "no TaintEvictionScheduled either";
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 1U);
}

// The restart: the pods our last run deleted are terminating (a grace period), the
// new run replays them. Only the live pod is evicted, and it does not wait behind them for
// rate-limit tokens.
TEST(Terminating, TheReplayAfterARestartDeletesOnlyTheLivePodsAndTakesNoTokenForTheOthers) {
  wall_harness w(with_policy(rate_limited(1, 1)));
  std::vector<pod_view> pods;
  for (int i = 0; i < 5; ++i) {
    pods.push_back(terminating(make_pod("a-" + std::to_string(i), "node1")));
  }
  pods.push_back(make_pod("z-live", "node1"));  // decided last (the index is ordered by name)
  w.replay(make_node("node1", {make_taint(1)}), pods);
  ASSERT_EQ(w.h.sink.calls().size(), 1U) << "the one token of the burst";
  EXPECT_EQ(w.h.sink.calls()[0].pod.name, "z-live");
  EXPECT_EQ(w.h.ctl.stats().queue.held, 0U) << "nothing waits for a token";
  w.h.advance(1min);
  EXPECT_EQ(w.h.sink.calls().size(), 1U);
  EXPECT_EQ(w.h.sink.events_of("a-0", event_kind::marking_for_deletion), 0U);
  EXPECT_EQ(w.h.sink.events_of("z-live", event_kind::marking_for_deletion), 1U);
  // Each terminating pod counts once per decision: the node's replay and its own.
  EXPECT_EQ(counted(w.h.ctl, "terminating_pods_skipped_total"), 10U);
}

TEST(Terminating, APendingEvictionIsCancelledWhenThePodBecomesTerminating) {
  std::vector<decision_note> notes;
  auto o = manual_options();
  o.on_decision = [&](const decision_note& n) { notes.push_back(n); };
  harness h(o);
  h.add_pod(make_pod("p", "node1", {make_toleration(1, 100)}));
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_TRUE(h.scheduled("p"));
  h.advance(10s);
  mark_terminating(h, "p");
  EXPECT_FALSE(h.scheduled("p")) << "the status-only update is decided when an eviction waits";
  // Upstream's event for a pod deleted before its eviction fired (docs/behaviour.md §5.1).
  EXPECT_EQ(h.sink.events_of("p", event_kind::cancelling_deletion), 1U);
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes.back().kind, decision_kind::cancelled);
  EXPECT_EQ(notes.back().reason, cancel_reason::pod_gone);
  h.advance(200s);
  EXPECT_TRUE(h.sink.calls().empty());
  EXPECT_EQ(h.sink.events_of("p", event_kind::marking_for_deletion), 0U);
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 1U);
  EXPECT_EQ(counted(h.ctl, "cancelled_evictions_total"), 1U);
}

TEST(Terminating, AHeldEvictionIsDroppedBeforeItTakesAToken) {
  harness h(with_policy(rate_limited(1, 1)));
  for (const char* name : {"p0", "p1", "p2"}) {
    h.add_pod(make_pod(name, "node1"));
  }
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.sink.calls().size(), 1U);
  ASSERT_EQ(h.ctl.stats().queue.held, 2U);
  mark_terminating(h, "p1");  // deleted by someone else while it waits for its token
  EXPECT_EQ(h.ctl.stats().queue.held, 1U);
  h.advance(1s);
  ASSERT_EQ(h.sink.calls().size(), 2U) << "p1's token went to p2";
  EXPECT_EQ(h.sink.calls()[1].pod.name, "p2");
  h.advance(1min);
  EXPECT_EQ(h.sink.evictions_of("p1"), 0U);
  EXPECT_EQ(h.sink.events_of("p1", event_kind::marking_for_deletion), 0U);
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 1U);
}

// The update that made the pod terminating came before its eviction was scheduled (so it was
// ignored) or was not delivered yet: the firing reads the cache and stops.
TEST(Terminating, AFiringThatFindsThePodTerminatingSendsNothing) {
  harness h;
  const pod_view p = make_pod("p", "node1", {make_toleration(1, 30)});
  h.add_pod(p);
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_TRUE(h.scheduled("p"));
  h.index.put(terminating(p));  // the cache has it; the controller was not told
  h.advance(31s);
  EXPECT_TRUE(h.sink.calls().empty());
  EXPECT_EQ(h.sink.events_of("p", event_kind::marking_for_deletion), 0U);
  EXPECT_FALSE(h.scheduled("p")) << "done, not retried";
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 1U);
  EXPECT_EQ(counted(h.ctl, "evictions_started_total"), 0U);
}

// A DELETE of ours that was accepted although the attempt reported a failure (a timeout on the
// answer): the pod is terminating, the retry is dropped without an event.
TEST(Terminating, ARetryIsDroppedWhenThePodTurnsOutTerminating) {
  harness h;
  h.sink.script({eviction_status::failed});
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.sink.calls().size(), 1U);
  ASSERT_TRUE(h.scheduled("p")) << "backing off";
  mark_terminating(h, "p");
  EXPECT_FALSE(h.scheduled("p"));
  h.advance(1min);
  EXPECT_EQ(h.sink.calls().size(), 1U) << "no retry";
  EXPECT_EQ(h.sink.events_of("p", event_kind::marking_for_deletion), 1U) << "the first only";
  EXPECT_EQ(h.sink.events_of("p", event_kind::cancelling_deletion), 0U)
      << "it had started: nothing was pending to cancel";
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 1U);
}

TEST(Terminating, AnAttemptRunningIsLeftToFinishAndOurOwnDeletionIsNotCounted) {
  harness h;
  h.sink.set_hold(true);
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.sink.held(), 1U);
  // Our DELETE was accepted: the watch shows the deletionTimestamp before the answer arrives.
  mark_terminating(h, "p");
  ASSERT_EQ(h.sink.calls().size(), 1U);
  EXPECT_FALSE(h.sink.calls()[0].cancelled()) << "its request goes on";
  h.sink.release_oldest(eviction_status::deleted);
  h.settle();
  EXPECT_EQ(counted(h.ctl, "evictions_succeeded_total"), 1U);
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 0U);
  EXPECT_EQ(h.sink.events_of("p", event_kind::cancelling_deletion), 0U);

  // Once the eviction is over, the deletionTimestamp appearing is a status-only update again.
  h.sink.set_hold(false);
  const pod_view q = make_pod("q", "node1", {make_toleration(1, 5)});
  h.add_pod(q);
  h.advance(5s);
  ASSERT_EQ(h.sink.evictions_of("q"), 1U);
  const auto ignored = counted(h.ctl, "updates_ignored_total");
  h.index.put(q);  // the fake API removed it; the informer still reports the update
  h.update_pod(terminating(q));
  EXPECT_EQ(counted(h.ctl, "updates_ignored_total"), ignored + 1);
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 0U);
}

// Evict mode: the Eviction API ignores disruption budgets for a terminating pod and deletes
// it again. A blocked eviction whose pod someone else deletes is cancelled, as a pending one.
TEST(Terminating, EvictModeABlockedEvictionEndsWhenThePodBecomesTerminating) {
  eviction_policy policy;
  policy.mode = eviction_mode::evict;
  harness h(with_policy(policy));
  h.sink.script(std::vector<eviction_status>(3, eviction_status::blocked));
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.ctl.stats().blocked_evictions, 1U);
  mark_terminating(h, "p");
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 0U);
  EXPECT_FALSE(h.scheduled("p"));
  EXPECT_EQ(h.sink.events_of("p", event_kind::cancelling_deletion), 1U);
  h.advance(1min);
  EXPECT_EQ(h.sink.calls().size(), 1U) << "no eviction request for a terminating pod";
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 1U);
}

TEST(Terminating, DryRunDecidesItAsUpstreamDoes) {
  // A dry run deletes nothing: a terminating pod was deleted by someone else (in shadow mode,
  // the built-in taint manager, usually before us), and the dry run reports what we would do
  // alone, which is what the shadow comparison needs.
  eviction_policy policy;
  policy.dry_run = true;
  harness h(with_policy(policy));
  h.add_pod(terminating(make_pod("p", "node1")));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.advance(1min);
  EXPECT_EQ(counted(h.ctl, "dry_run_pod_deletions_total"), 1U);
  EXPECT_EQ(counted(h.ctl, "terminating_pods_skipped_total"), 0U);
}

}  // namespace
}  // namespace tec::controller

// Upstream's taint manager unit tests (docs/behaviour.md §12), ported to the manual clock. Every
// "not evicted" check holds over simulated time far past the toleration window.

#include <gtest/gtest.h>

#include "controller/support/harness.hpp"

namespace tec::controller {
namespace {

using namespace std::chrono_literals;
using testing::harness;
using testing::make_node;
using testing::make_pod;
using testing::make_taint;
using testing::make_toleration;

using testing::ten_days;

// --- Create pod ---

TEST(UpstreamCreatePod, Unscheduled) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", ""));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
  EXPECT_FALSE(h.scheduled("pod1"));
}

TEST(UpstreamCreatePod, OnUntaintedNode) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1"));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
}

TEST(UpstreamCreatePod, OnTaintedNodeIsEvicted) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1"));
  EXPECT_TRUE(h.evicted("pod1"));  // At once: no clock movement.
}

TEST(UpstreamCreatePod, ToleratingFor100sIsNotEvictedYet) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 100)}));
  EXPECT_TRUE(h.scheduled("pod1"));
  h.advance(99s);
  EXPECT_FALSE(h.evicted("pod1"));
  h.advance(1s);
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamCreatePod, ToleratingForeverIsNeverEvicted) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, -1)}));
  EXPECT_FALSE(h.scheduled("pod1"));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
}

TEST(UpstreamCreatePod, ToleratingOtherTaintIsEvicted) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(2, -1)}));
  EXPECT_TRUE(h.evicted("pod1"));
}

// --- Update pod ---

TEST(UpstreamUpdatePod, ScheduledOntoTaintedNodeIsEvicted) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  pod_view p = make_pod("pod1", "");
  h.add_pod(p);
  EXPECT_FALSE(h.evicted("pod1"));
  p.node_name = "node1";
  h.update_pod(p);
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamUpdatePod, ScheduledOntoTaintedNodeToleratingForever) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  pod_view p = make_pod("pod1", "", {make_toleration(1, -1)});
  h.add_pod(p);
  p.node_name = "node1";
  h.update_pod(p);
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
}

TEST(UpstreamUpdatePod, TolerationsRemovedEvictsNow) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  pod_view p = make_pod("pod1", "node1", {make_toleration(1, 100)});
  h.add_pod(p);
  EXPECT_TRUE(h.scheduled("pod1"));
  h.advance(10s);
  EXPECT_FALSE(h.evicted("pod1"));
  p.tolerations.clear();
  h.update_pod(p);
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamUpdatePod, LengtheningTolerationKeepsFireTime) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  pod_view p = make_pod("pod1", "node1", {make_toleration(1, 1)});
  h.add_pod(p);
  p.tolerations = {make_toleration(1, 100)};
  h.update_pod(p);
  h.advance(999ms);
  EXPECT_FALSE(h.evicted("pod1"));
  h.advance(1ms);
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamUpdatePod, ShorteningTolerationKeepsFireTime) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  pod_view p = make_pod("pod1", "node1", {make_toleration(1, 100)});
  h.add_pod(p);
  p.tolerations = {make_toleration(1, 1)};
  h.update_pod(p);
  h.advance(99s);
  EXPECT_FALSE(h.evicted("pod1"));
  h.advance(1s);
  EXPECT_TRUE(h.evicted("pod1"));
}

// --- Create node ---

TEST(UpstreamCreateNode, Untainted) {
  harness h;
  h.index.put(make_pod("pod1", "node1"));
  h.add_node(make_node("node1"));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
}

TEST(UpstreamCreateNode, TaintedEvicts) {
  harness h;
  h.index.put(make_pod("pod1", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamCreateNode, TaintedWithPodToleratingForever) {
  harness h;
  h.index.put(make_pod("pod1", "node1", {make_toleration(1, -1)}));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
}

// --- Delete node ---

TEST(UpstreamDeleteNode, RemovedFromTaintedTable) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_TRUE(h.ctl.tainted_taints("node1").has_value());
  EXPECT_EQ(h.ctl.stats().tainted_nodes, 1U);
  h.delete_node("node1");
  EXPECT_FALSE(h.ctl.tainted_taints("node1").has_value());
  EXPECT_EQ(h.ctl.stats().tainted_nodes, 0U);
}

TEST(UpstreamDeleteNode, DoesNotCancelScheduledEvictions) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 30)}));
  h.delete_node("node1");
  EXPECT_TRUE(h.scheduled("pod1"));
  h.advance(30s);
  EXPECT_TRUE(h.evicted("pod1"));
}

// --- Update node ---

TEST(UpstreamUpdateNode, TaintAddedEvicts) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1"));
  h.update_node(make_node("node1", {make_taint(1)}));
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamUpdateNode, Tolerated100sNotYet) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 100)}));
  h.update_node(make_node("node1", {make_taint(1)}));
  h.advance(99s);
  EXPECT_FALSE(h.evicted("pod1"));
  h.advance(1s);
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamUpdateNode, SecondTaintNotToleratedEvicts) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, -1)}));
  h.update_node(make_node("node1", {make_taint(1), make_taint(2)}));
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamUpdateNode, TaintRemovedCancels) {
  harness h;
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 1)}));
  EXPECT_TRUE(h.scheduled("pod1"));
  h.update_node(make_node("node1"));
  EXPECT_FALSE(h.scheduled("pod1"));
  h.advance(1500ms);
  EXPECT_FALSE(h.evicted("pod1"));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::cancelling_deletion), 1U);
}

TEST(UpstreamUpdateNode, MinOfUsedTolerations) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, 1), make_toleration(2, 100)}));
  h.update_node(make_node("node1", {make_taint(1), make_taint(2)}));
  h.advance(999ms);
  EXPECT_FALSE(h.evicted("pod1"));
  h.advance(1ms);
  EXPECT_TRUE(h.evicted("pod1"));
}

TEST(UpstreamUpdateNode, NoScheduleTaintsAreIgnored) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1"));
  taint ns = make_taint(1);
  ns.effect = taint_effect::no_schedule;
  h.update_node(make_node("node1", {ns}));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
  EXPECT_FALSE(h.ctl.tainted_taints("node1").has_value());
}

// --- Multiple taints ---

TEST(UpstreamMultipleTaints, ScheduledWorkFollowsTaints) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1", {make_toleration(1, -1), make_toleration(2, 60)}));
  EXPECT_FALSE(h.scheduled("pod1"));
  h.update_node(make_node("node1", {make_taint(1)}));
  EXPECT_FALSE(h.scheduled("pod1"));
  h.update_node(make_node("node1", {make_taint(1), make_taint(2)}));
  EXPECT_TRUE(h.scheduled("pod1"));
  h.advance(30s);
  h.update_node(make_node("node1", {make_taint(1)}));
  EXPECT_FALSE(h.scheduled("pod1"));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod1"));
}

// --- Multiple pods ---

TEST(UpstreamMultiplePods, OneTaint) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1"));
  h.add_pod(make_pod("pod2", "node1", {make_toleration(1, 1)}));
  h.add_pod(make_pod("pod3", "node1", {make_toleration(1, -1)}));
  h.update_node(make_node("node1", {make_taint(1)}));
  h.advance(500ms);
  EXPECT_TRUE(h.evicted("pod1"));
  EXPECT_FALSE(h.evicted("pod2"));
  h.advance(1s);
  EXPECT_TRUE(h.evicted("pod2"));
  h.advance(ten_days);
  EXPECT_FALSE(h.evicted("pod3"));
}

TEST(UpstreamMultiplePods, TwoTaintsEvictAllAtOnce) {
  harness h;
  h.add_node(make_node("node1"));
  h.add_pod(make_pod("pod1", "node1"));
  h.add_pod(make_pod("pod2", "node1", {make_toleration(1, 1)}));
  h.add_pod(make_pod("pod3", "node1", {make_toleration(1, -1)}));
  h.update_node(make_node("node1", {make_taint(1), make_taint(2)}));
  EXPECT_TRUE(h.evicted("pod1"));
  EXPECT_TRUE(h.evicted("pod2"));
  EXPECT_TRUE(h.evicted("pod3"));
}

// --- Events ---

TEST(UpstreamEvents, ExactFields) {
  const pod_ref ref{"test", "test", "u1"};
  EXPECT_EQ(event_type, "Normal");
  EXPECT_EQ(event_reason, "TaintManagerEviction");
  EXPECT_EQ(event_message(ref, event_kind::marking_for_deletion),
            "Marking for deletion Pod test/test");
  EXPECT_EQ(event_message(ref, event_kind::cancelling_deletion),
            "Cancelling deletion of Pod test/test");
}

TEST(UpstreamEvents, MarkingOncePerFiringCancelOnlyWhenPending) {
  harness h;
  h.add_node(make_node("node1"));
  pod_view p = make_pod("pod1", "node1", {make_toleration(1, 10)});
  h.add_pod(p);
  h.update_node(make_node("node1", {make_taint(1)}));
  // Upstream writes nothing here; ours says when the eviction is due (TaintEvictionScheduled).
  auto events = h.sink.events();
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].second, event_kind::eviction_scheduled);
  // Cancel of a pending eviction: one cancel event, carrying the UID.
  h.update_node(make_node("node1"));
  events = h.sink.events();
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[1].second, event_kind::cancelling_deletion);
  EXPECT_EQ(events[1].first, (pod_ref{"default", "pod1", p.uid}));
  // Cancel with nothing pending: no event.
  h.update_node(make_node("node1", {make_taint(2)}));  // Untolerated: evicted now.
  events = h.sink.events();
  ASSERT_EQ(events.size(), 3U);
  EXPECT_EQ(events[2].second, event_kind::marking_for_deletion);
  EXPECT_EQ(events[2].first, (pod_ref{"default", "pod1", p.uid}));
  h.update_node(make_node("node1"));
  EXPECT_EQ(h.sink.events().size(), 3U);
}

}  // namespace
}  // namespace tec::controller

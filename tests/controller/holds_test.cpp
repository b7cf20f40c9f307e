// Time-boxed holds (issue 32 item 3) and the storm breaker's settling time (item 4): the
// hold-until annotation on a node or a pod keeps due evictions waiting (state waiting, why
// hold), at most maxHold past their due time; malformed and past values are ignored with a
// Warning event; a taint younger than settleSeconds keeps the evictions it causes waiting.
// Manual clock, fake sink.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "controller/support/harness.hpp"
#include "tec/base/rfc3339.hpp"

namespace tec::controller {
namespace {

using namespace std::chrono_literals;
using testing::counted;
using testing::make_node;
using testing::make_pod;
using testing::make_taint;
using testing::make_toleration;
using testing::manual_options;
using testing::wall_harness;
using testing::wall_start_unix;
using testing::with_policy;

// wall_start_unix (1'700'000'000) is 2023-11-14T22:13:20Z.

/// An RFC 3339 time `s` seconds after the wall harness started.
std::string wall_plus(std::int64_t s) {
  return base::format_rfc3339(
      std::chrono::system_clock::time_point(std::chrono::seconds(wall_start_unix + s)));
}

node_view held_node(const std::string& name, const std::string& hold, std::vector<taint> taints) {
  node_view n = make_node(name, std::move(taints));
  n.hold = parse_hold(hold);
  return n;
}

/// The (state, why) of the eviction of default/`name`, as evictions() lists it.
std::pair<std::string, std::string> state_of(const testing::harness& h, const std::string& name) {
  for (const eviction_view& v : h.ctl.evictions(100).evictions) {
    if (v.pod.name == name) {
      return {std::string(v.state), std::string(v.why)};
    }
  }
  return {"none", ""};
}

/// The details of the events of `kind` about the object named `name`.
std::vector<std::string> details_of(const testing::harness& h, const std::string& name,
                                    event_kind kind) {
  const auto events = h.sink.events();
  const auto details = h.sink.event_details();
  std::vector<std::string> out;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].first.name == name && events[i].second == kind) {
      out.push_back(details[i]);
    }
  }
  return out;
}

TEST(HoldAnnotation, ParsesAnRfc3339TimeAndFlagsAnythingElse) {
  EXPECT_EQ(parse_hold("2023-11-14T22:14:20Z").until_unix, wall_start_unix + 60);
  EXPECT_EQ(parse_hold("2023-11-14T23:14:20+01:00").until_unix, wall_start_unix + 60);
  EXPECT_TRUE(parse_hold("tomorrow").malformed());
  EXPECT_TRUE(parse_hold("").malformed());
  const hold_mark long_value = parse_hold(std::string(1000, '9'));
  EXPECT_TRUE(long_value.malformed());
  EXPECT_EQ(long_value.value, std::string(max_hold_value, '9') + "...");
}

TEST(Holds, ANodeHoldKeepsAnUntoleratedEvictionWaitingUntilItEnds) {
  wall_harness w;
  w.h.add_pod(make_pod("p1", "n1"));
  w.h.add_node(held_node("n1", wall_plus(60), {}));
  w.h.update_node(held_node("n1", wall_plus(60), {make_taint(1)}));
  EXPECT_FALSE(w.h.evicted("p1"));
  EXPECT_EQ(state_of(w.h, "p1"), (std::pair<std::string, std::string>{"waiting", "hold"}));
  EXPECT_EQ(w.h.ctl.stats().held_evictions, 1U);
  EXPECT_EQ(details_of(w.h, "p1", event_kind::eviction_held),
            std::vector<std::string>{"due at 2023-11-14T22:13:20Z, waits until "
                                     "2023-11-14T22:14:20Z for the hold-until annotation of node "
                                     "n1 (2023-11-14T22:14:20Z)"});
  // Decided again (another taint): no second Held event.
  w.h.update_node(held_node("n1", wall_plus(60), {make_taint(1), make_taint(2)}));
  w.h.advance(59s);
  EXPECT_FALSE(w.h.evicted("p1"));
  w.h.advance(1s);
  EXPECT_TRUE(w.h.evicted("p1"));
  EXPECT_EQ(w.h.ctl.stats().held_evictions, 0U);
  EXPECT_EQ(details_of(w.h, "p1", event_kind::eviction_held).size(), 1U);
}

TEST(Holds, AHoldAddedWhileTheCountdownRunsHoldsItAtItsDueTime) {
  wall_harness w;
  w.h.add_pod(make_pod("p1", "n1", {make_toleration(1, 30)}));
  w.h.add_node(make_node("n1", {make_taint(1)}));
  w.h.advance(10s);
  w.h.update_node(held_node("n1", wall_plus(100), {make_taint(1)}));
  w.h.advance(20s);  // due now
  EXPECT_FALSE(w.h.evicted("p1"));
  EXPECT_EQ(state_of(w.h, "p1"), (std::pair<std::string, std::string>{"waiting", "hold"}));
  w.h.advance(69s);
  EXPECT_FALSE(w.h.evicted("p1"));
  w.h.advance(1s);
  EXPECT_TRUE(w.h.evicted("p1"));
}

TEST(Holds, AHoldThatEndsBeforeTheDueTimeChangesNothing) {
  wall_harness w;
  w.h.add_pod(make_pod("p1", "n1", {make_toleration(1, 30)}));
  w.h.add_node(held_node("n1", wall_plus(20), {make_taint(1)}));
  w.h.advance(30s);
  EXPECT_TRUE(w.h.evicted("p1"));
  EXPECT_TRUE(details_of(w.h, "p1", event_kind::eviction_held).empty());
}

TEST(Holds, RemovingTheAnnotationReleasesTheEvictionAtOnce) {
  wall_harness w;
  w.h.add_pod(make_pod("p1", "n1"));
  w.h.add_node(held_node("n1", wall_plus(600), {make_taint(1)}));
  w.h.advance(5s);
  EXPECT_FALSE(w.h.evicted("p1"));
  w.h.update_node(make_node("n1", {make_taint(1)}));
  EXPECT_TRUE(w.h.evicted("p1"));
}

TEST(Holds, MaxHoldCapsAFarHold) {
  eviction_policy p;
  p.max_hold = 20s;
  wall_harness w(with_policy(p));
  w.h.add_pod(make_pod("p1", "n1"));
  w.h.add_node(held_node("n1", wall_plus(86400), {make_taint(1)}));
  EXPECT_EQ(details_of(w.h, "p1", event_kind::eviction_held),
            std::vector<std::string>{"due at 2023-11-14T22:13:20Z, waits until "
                                     "2023-11-14T22:13:40Z for the hold-until annotation of node "
                                     "n1 (2023-11-15T22:13:20Z, cut at maxHold 20s)"});
  w.h.advance(19s);
  EXPECT_FALSE(w.h.evicted("p1"));
  w.h.advance(1s);
  EXPECT_TRUE(w.h.evicted("p1"));
}

TEST(Holds, APodHoldHoldsThatPodOnly) {
  wall_harness w;
  pod_view held = make_pod("held", "n1");
  held.hold = parse_hold(wall_plus(60));
  w.h.add_pod(held);
  w.h.add_pod(make_pod("free", "n1"));
  w.h.add_node(make_node("n1", {make_taint(1)}));
  EXPECT_TRUE(w.h.evicted("free"));
  EXPECT_FALSE(w.h.evicted("held"));
  EXPECT_EQ(details_of(w.h, "held", event_kind::eviction_held).size(), 1U);
  // The annotation moved later while it waits: it waits for the new time.
  held.hold = parse_hold(wall_plus(90));
  w.h.update_pod(held);
  w.h.advance(60s);
  EXPECT_FALSE(w.h.evicted("held"));
  w.h.advance(30s);
  EXPECT_TRUE(w.h.evicted("held"));
  EXPECT_EQ(details_of(w.h, "held", event_kind::eviction_held).size(), 1U);
}

TEST(Holds, AHoldPastTheLatestRepresentableTimeIsRefusedNotMovedToAnother) {
  wall_harness w;
  w.h.add_pod(make_pod("p1", "n1"));
  w.h.add_node(held_node("n1", "9999-12-31T23:59:59Z", {}));
  w.h.update_node(held_node("n1", "9999-12-31T23:59:59Z", {make_taint(1)}));
  EXPECT_TRUE(w.h.evicted("p1"));
  EXPECT_EQ(details_of(w.h, "n1", event_kind::hold_ignored),
            std::vector<std::string>{"\"9999-12-31T23:59:59Z\" is later than 2200-01-01T00:00:00Z, "
                                     "the latest time a hold may name; evictions go as scheduled"});
  const auto mark = parse_hold("9999-12-31T23:59:59Z");
  EXPECT_TRUE(mark.too_late);
  EXPECT_TRUE(mark.malformed());
  EXPECT_FALSE(parse_hold("2199-12-31T23:59:59Z").too_late);
}

TEST(Holds, AMalformedValueIsIgnoredWithOneWarningPerDistinctValue) {
  wall_harness w;
  w.h.add_pod(make_pod("p1", "n1"));
  w.h.add_node(held_node("n1", "tomorrow", {}));
  w.h.update_node(held_node("n1", "tomorrow", {make_taint(1)}));
  EXPECT_TRUE(w.h.evicted("p1"));
  EXPECT_EQ(
      details_of(w.h, "n1", event_kind::hold_ignored),
      std::vector<std::string>{"\"tomorrow\" is not an RFC 3339 time; evictions go as scheduled"});
  EXPECT_EQ(event_type_of(event_kind::hold_ignored), "Warning");
  EXPECT_EQ(event_reason_of(event_kind::hold_ignored), "TaintEvictionHoldIgnored");
  EXPECT_EQ(event_message(pod_ref{"", "n1", ""}, event_kind::hold_ignored, "x"),
            "Ignoring the hold-until annotation of n1: x");
  // Another value: another warning; the same again: none.
  w.h.update_node(held_node("n1", "later", {make_taint(1)}));
  w.h.update_node(held_node("n1", "later", {make_taint(2)}));
  EXPECT_EQ(details_of(w.h, "n1", event_kind::hold_ignored).size(), 2U);
  // On a pod: the warning is about the pod.
  pod_view p2 = make_pod("p2", "n2");
  p2.hold = parse_hold("2023-13-01T00:00:00Z");
  w.h.add_pod(p2);
  EXPECT_EQ(details_of(w.h, "p2", event_kind::hold_ignored).size(), 1U);
}

TEST(Holds, AValueAlreadyPastWhenFirstSeenIsIgnoredWithAWarning) {
  wall_harness w;
  w.h.add_pod(make_pod("p1", "n1"));
  w.h.add_node(held_node("n1", wall_plus(-1), {make_taint(1)}));
  EXPECT_TRUE(w.h.evicted("p1"));
  EXPECT_EQ(details_of(w.h, "n1", event_kind::hold_ignored),
            std::vector<std::string>{"\"2023-11-14T22:13:19Z\" is already past when first seen; "
                                     "evictions go as scheduled"});
}

TEST(Holds, OnlyTheAnnotationChangingOnATaintedNodeReachesTheController) {
  wall_harness w;
  w.h.add_pod(make_pod("p1", "n1", {make_toleration(1, 30)}));
  w.h.add_node(make_node("n1", {make_taint(1)}));
  const auto before = counted(w.h.ctl, "node_updates_total");
  w.h.update_node(held_node("n1", wall_plus(100), {make_taint(1)}));
  EXPECT_EQ(counted(w.h.ctl, "node_updates_total"), before + 1);
  // On an untainted node it is recorded, but no pod is decided.
  w.h.add_node(make_node("n2"));
  const auto ignored = counted(w.h.ctl, "updates_ignored_total");
  w.h.update_node(held_node("n2", wall_plus(100), {}));
  EXPECT_EQ(counted(w.h.ctl, "updates_ignored_total"), ignored + 1);
  // Its hold is in force once it is tainted.
  w.h.add_pod(make_pod("p2", "n2"));
  w.h.update_node(held_node("n2", wall_plus(100), {make_taint(1)}));
  EXPECT_FALSE(w.h.evicted("p2"));
  EXPECT_EQ(state_of(w.h, "p2"), (std::pair<std::string, std::string>{"waiting", "hold"}));
}

// --- settling ------------------------------------------------------------------------------

eviction_policy settling_breaker(std::uint32_t settle) {
  eviction_policy p;
  p.storm_breaker.max_tainted_nodes_percent = 50;
  p.storm_breaker.settle_seconds = settle;
  return p;
}

TEST(Settling, TaintsOneAfterAnotherAreCountedWholeBeforeAnythingGoes) {
  wall_harness w(with_policy(settling_breaker(10)));
  for (int i = 0; i < 10; ++i) {
    const std::string node = "n" + std::to_string(i);
    w.h.add_node(make_node(node));
    w.h.add_pod(make_pod("p" + std::to_string(i), node));
  }
  // Six of ten nodes tainted one after another, a second apart (kubectl taint sets no
  // timeAdded).
  for (int i = 0; i < 6; ++i) {
    w.h.update_node(make_node("n" + std::to_string(i), {make_taint(1)}));
    if (i == 0) {
      EXPECT_EQ(state_of(w.h, "p0"), (std::pair<std::string, std::string>{"waiting", "settling"}));
      EXPECT_EQ(w.h.ctl.stats().settling_evictions, 1U);
    }
    w.h.advance(1s);
  }
  EXPECT_TRUE(w.h.ctl.stats().breaker_open);
  w.h.advance(60s);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(w.h.evicted("p" + std::to_string(i))) << i;
  }
  EXPECT_EQ(state_of(w.h, "p0"), (std::pair<std::string, std::string>{"waiting", "storm_breaker"}));
  EXPECT_EQ(w.h.ctl.stats().settling_evictions, 0U);
}

TEST(Settling, AnOldTaintByItsTimeAddedDoesNotWait) {
  wall_harness w(with_policy(settling_breaker(10)));
  for (const char* n : {"a", "b", "c", "d"}) {
    w.h.add_node(make_node(n));
  }
  w.h.add_pod(make_pod("old", "a"));
  w.h.add_pod(make_pod("young", "b"));
  taint old_taint = make_taint(1);
  old_taint.time_added_unix = wall_start_unix - 60;
  taint young_taint = make_taint(1);
  young_taint.time_added_unix = wall_start_unix - 4;
  w.h.update_node(make_node("a", {old_taint}));
  EXPECT_TRUE(w.h.evicted("old"));
  w.h.update_node(make_node("b", {young_taint}));
  EXPECT_FALSE(w.h.evicted("young"));
  w.h.advance(5s);
  EXPECT_FALSE(w.h.evicted("young"));
  w.h.advance(1s);
  EXPECT_TRUE(w.h.evicted("young"));
}

TEST(Settling, ATaintThePodToleratesForeverDoesNotMakeItWait) {
  wall_harness w(with_policy(settling_breaker(10)));
  for (const char* n : {"a", "b", "c", "d"}) {
    w.h.add_node(make_node(n));
  }
  w.h.add_pod(make_pod("p", "a", {make_toleration(2, -1)}));
  taint old_taint = make_taint(1);
  old_taint.time_added_unix = wall_start_unix - 60;
  // The young taint 2 is tolerated forever: only the old taint 1 causes the eviction.
  w.h.update_node(make_node("a", {old_taint, make_taint(2)}));
  EXPECT_TRUE(w.h.evicted("p"));
}

TEST(Settling, OffWithoutTheBreakerOrAtZero) {
  eviction_policy p = settling_breaker(0);
  wall_harness w(with_policy(p));
  for (const char* n : {"a", "b", "c", "d"}) {
    w.h.add_node(make_node(n));
  }
  w.h.add_pod(make_pod("p", "a"));
  w.h.update_node(make_node("a", {make_taint(1)}));
  EXPECT_TRUE(w.h.evicted("p"));
}

}  // namespace
}  // namespace tec::controller

// Evict mode (eviction_policy::mode = evict): the sink is asked to use the Eviction API; a
// refusal (a disruption budget) is retried, counted, shown in evictions() and announced by a
// Warning event, never reported as stuck; after fallbackAfter the pod is deleted as upstream
// would, with a Warning event. Manual clock: retries 1 s doubling to 8 s, no jitter.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "controller/support/harness.hpp"
#include "support/captured_log.hpp"
#include "tec/base/rfc3339.hpp"
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
using testing::recording_sink;
using testing::with_policy;

eviction_policy evict_policy(std::chrono::milliseconds fallback = 0ms) {
  eviction_policy p;
  p.mode = eviction_mode::evict;
  p.fallback_after = fallback;
  return p;
}

taint_rule fallback_rule(std::string key, std::optional<std::chrono::milliseconds> fallback) {
  taint_rule r;
  r.key = std::move(key);
  r.fallback_after = fallback;
  return r;
}

std::vector<eviction_method> methods(const recording_sink& sink) {
  std::vector<eviction_method> out;
  for (const auto& c : sink.calls()) {
    out.push_back(c.method);
  }
  return out;
}

std::vector<std::string> details_of(const recording_sink& sink, event_kind kind) {
  std::vector<std::string> out;
  const auto events = sink.events();
  const auto details = sink.event_details();
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].second == kind) {
      out.push_back(details[i]);
    }
  }
  return out;
}

std::vector<eviction_status> blocked_times(std::size_t n) {
  return std::vector<eviction_status>(n, eviction_status::blocked);
}

TEST(EvictMode, WithoutAPolicyEveryAttemptIsADelete) {
  harness h;
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_EQ(methods(h.sink), std::vector<eviction_method>{eviction_method::delete_pod});
}

TEST(EvictMode, EvictsThroughTheEvictionApi) {
  harness h(with_policy(evict_policy()));
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_EQ(methods(h.sink), std::vector<eviction_method>{eviction_method::evict});
  EXPECT_EQ(h.sink.events_of("p", event_kind::marking_for_deletion), 1U);
  EXPECT_FALSE(h.scheduled("p"));
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 0U);
}

TEST(EvictMode, ARefusalIsRetriedCountedShownAndNeverStuck) {
  harness h(with_policy(evict_policy()));
  h.sink.set_failure_message("Cannot evict pod as it would violate the pod's disruption budget.");
  h.sink.script(blocked_times(11));
  const pod_view p = make_pod("p", "node1");
  h.add_pod(p);
  h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 1U);
  EXPECT_EQ(counted(h.ctl, "eviction_refusals_total"), 1U);

  const eviction_list list = h.ctl.evictions(10);
  ASSERT_EQ(list.evictions.size(), 1U);
  EXPECT_EQ(list.evictions[0].state, "blocked");
  EXPECT_EQ(list.evictions[0].why, "pdb");
  EXPECT_EQ(list.evictions[0].blocked_since, h.drv.now());
  EXPECT_FALSE(list.evictions[0].fallback_at.has_value()) << "fallbackAfter 0s: never";
  EXPECT_EQ(list.evictions[0].last_error,
            "Cannot evict pod as it would violate the pod's disruption budget.");

  // Retries 1, 2, 4 and then 8 s apart: ten more refusals, far past stuck_after (5).
  h.advance(1s);
  h.advance(2s);
  h.advance(4s);
  for (int i = 0; i < 7; ++i) {
    h.advance(8s);
  }
  EXPECT_EQ(counted(h.ctl, "eviction_refusals_total"), 11U);
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 1U);
  EXPECT_EQ(h.ctl.stats().stuck_evictions, 0U) << "a budget's refusal is an answer, not a failure";
  EXPECT_EQ(counted(h.ctl, "eviction_attempt_failures_total"), 0U);
  EXPECT_EQ(h.sink.events_of("p", event_kind::eviction_failed), 0U);
  const auto blocked = details_of(h.sink, event_kind::eviction_blocked);
  ASSERT_EQ(blocked.size(), 11U) << "one occurrence per refusal (the recorder makes it one Event)";
  EXPECT_EQ(blocked.front(),
            "Cannot evict pod as it would violate the pod's disruption budget. Retrying until it "
            "is allowed (no fallbackAfter).");
  EXPECT_EQ(blocked.back(), blocked.front()) << "the same message, so the Event's count grows";
  for (const auto m : methods(h.sink)) {
    EXPECT_EQ(m, eviction_method::evict) << "never a DELETE without a fallbackAfter";
  }

  // The budget allows it now: done, no longer blocked.
  h.advance(8s);
  EXPECT_FALSE(h.scheduled("p"));
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 0U);
  EXPECT_EQ(counted(h.ctl, "evictions_succeeded_total"), 1U);
}

// README: "the first refusal is logged at info (the next ones at debug)": the retries of a
// blocked eviction are not logged at info either (issue 33 found "retrying deletion" lines).
TEST(EvictMode, ABlockedEvictionsRetriesAreNotLoggedAtInfo) {
  const test::captured_log log("controller");  // before the controller looks it up
  harness h(with_policy(evict_policy()));
  h.sink.script(blocked_times(4));
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.advance(1s);
  h.advance(2s);
  h.advance(4s);
  h.advance(8s);
  EXPECT_FALSE(h.scheduled("p")) << "the fifth attempt went through";
  EXPECT_EQ(log.count("info", "evicting pod"), 1U);
  EXPECT_EQ(log.count("info", "retrying deletion"), 0U);
}

TEST(EvictMode, TheFallbackDeletesAtTheConfiguredTimeWithAWarning) {
  testing::wall_harness w(with_policy(evict_policy(20s)));
  harness& h = w.h;
  h.sink.script(blocked_times(100));
  const pod_view p = make_pod("p", "node1");
  h.add_pod(p);
  const timedqueue::time_point t0 = h.drv.now();
  const auto wall0 = w.wall_now();
  h.add_node(make_node("node1", {make_taint(1)}));
  ASSERT_EQ(h.sink.calls().size(), 1U);
  const auto first = details_of(h.sink, event_kind::eviction_blocked);
  ASSERT_EQ(first.size(), 1U);
  EXPECT_NE(first[0].find(" Retrying; deleting it anyway at " + base::format_rfc3339(wall0 + 20s) +
                          " (fallbackAfter 20s)."),
            std::string::npos)
      << first[0];
  const eviction_list list = h.ctl.evictions(10);
  ASSERT_EQ(list.evictions.size(), 1U);
  EXPECT_EQ(list.evictions[0].fallback_at, t0 + 20s);

  // Retries at 1, 3, 7 and 15 s; the next would be at 23 s, the fallback makes it 20 s.
  h.advance(19'999ms);
  EXPECT_EQ(h.sink.calls().size(), 5U);
  EXPECT_EQ(h.sink.events_of("p", event_kind::eviction_fallback), 0U);
  h.advance(1ms);
  ASSERT_EQ(h.sink.calls().size(), 6U);
  EXPECT_EQ(h.sink.calls().back().method, eviction_method::delete_pod);
  EXPECT_EQ(details_of(h.sink, event_kind::eviction_fallback),
            std::vector<std::string>{"after its eviction was refused for 20s (fallbackAfter 20s)"});
  EXPECT_EQ(counted(h.ctl, "eviction_fallbacks_total"), 1U);
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 0U) << "the DELETE went through";
  EXPECT_FALSE(h.scheduled("p"));
}

TEST(EvictMode, ATaintRulesFallbackAppliesToItsTaintAndTheShortestWins) {
  eviction_policy policy = evict_policy(0ms);
  policy.taints = {fallback_rule("testTaint2", 5s)};
  harness h(with_policy(policy));
  h.sink.script(blocked_times(100), [](const pod_ref& pod) { return pod.name != "free"; });
  h.add_pod(make_pod("only1", "node1"));
  h.add_pod(make_pod("both", "node2"));
  // Tolerates testTaint2 forever: that taint does not evict it, its fallback does not count.
  h.add_pod(make_pod("tolerant", "node2", {make_toleration(2, -1)}));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.add_node(make_node("node2", {make_taint(1), make_taint(2)}));
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 3U);
  for (int i = 0; i < 20; ++i) {
    h.advance(1s);
  }
  EXPECT_EQ(h.sink.events_of("both", event_kind::eviction_fallback), 1U);
  EXPECT_EQ(h.sink.events_of("only1", event_kind::eviction_fallback), 0U);
  EXPECT_EQ(h.sink.events_of("tolerant", event_kind::eviction_fallback), 0U);
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 2U);
}

TEST(EvictMode, RemovingTheTaintCancelsABlockedEviction) {
  harness h(with_policy(evict_policy(60s)));
  h.sink.script(blocked_times(100));
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.advance(1s);
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 1U);
  h.update_node(make_node("node1"));
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 0U);
  EXPECT_FALSE(h.scheduled("p"));
  EXPECT_EQ(h.sink.events_of("p", event_kind::cancelling_deletion), 1U);
  h.advance(120s);
  EXPECT_EQ(h.sink.events_of("p", event_kind::eviction_fallback), 0U);
}

TEST(EvictMode, AReloadToDeleteModeDeletesABlockedEvictionAtItsNextRetry) {
  harness h(with_policy(evict_policy()));
  h.sink.script(blocked_times(2));
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.advance(1s);
  EXPECT_EQ(counted(h.ctl, "eviction_refusals_total"), 2U);
  h.ctl.set_policy(eviction_policy{});
  h.advance(2s);
  EXPECT_EQ(methods(h.sink),
            (std::vector<eviction_method>{eviction_method::evict, eviction_method::evict,
                                          eviction_method::delete_pod}));
  EXPECT_FALSE(h.scheduled("p"));
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 0U);
}

TEST(EvictMode, OtherFailuresStillCountAsStuck) {
  harness h(with_policy(evict_policy()));
  h.sink.script(std::vector<eviction_status>(6, eviction_status::failed));
  h.add_pod(make_pod("p", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  for (int i = 0; i < 6; ++i) {
    h.advance(8s);
  }
  EXPECT_EQ(h.sink.events_of("p", event_kind::eviction_failed), 1U);
  EXPECT_EQ(h.ctl.stats().blocked_evictions, 0U);
}

// --- fallback_after() ---

TEST(FallbackAfter, TheShortestNonZeroOverTheTaintsThatEvict) {
  const std::vector<taint> taints = {make_taint(1), make_taint(2), make_taint(3)};
  std::vector<taint_rule> rules = {fallback_rule("testTaint2", 30s),
                                   fallback_rule("testTaint3", 0ms)};
  EXPECT_EQ(fallback_after(taints, {}, rules, 0ms), 30s) << "3 says never, 1 takes the global";
  EXPECT_EQ(fallback_after(taints, {}, rules, 10s), 10s);
  EXPECT_EQ(fallback_after(taints, {}, rules, 60s), 30s);
  // Tolerated forever: taint 2 does not evict, its rule does not count.
  EXPECT_EQ(fallback_after(taints, std::vector<toleration>{make_toleration(2, -1)}, rules, 0ms),
            0ms);
  // Tolerated for a while: it still evicts (later), its rule counts.
  EXPECT_EQ(fallback_after(taints, std::vector<toleration>{make_toleration(2, 100)}, rules, 0ms),
            30s);
  // An ignored taint does not count.
  taint_rule ignore = fallback_rule("testTaint2", std::nullopt);
  ignore.action = taint_action::ignore;
  EXPECT_EQ(fallback_after(taints, {}, std::vector<taint_rule>{ignore}, 0ms), 0ms);
  EXPECT_EQ(fallback_after(taints, {}, std::vector<taint_rule>{ignore}, 5s), 5s);
  EXPECT_EQ(fallback_after({}, {}, rules, 5s), 0ms) << "no taint: nothing to fall back for";
}

}  // namespace
}  // namespace tec::controller

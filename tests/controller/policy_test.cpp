// The eviction policy in the controller: rate limits and in-flight caps (through the timed
// queue's admission control), the storm breaker, dry-run, and reloading. Manual clock.

#include <gtest/gtest.h>

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
using testing::with_policy;

/// `nodes` nodes n0.., each with `pods_per_node` pods n<i>-p<j> tolerating taint 1 for
/// `seconds` (-1: no toleration).
void populate(harness& h, int nodes, int pods_per_node, std::int64_t seconds) {
  for (int i = 0; i < nodes; ++i) {
    const std::string node = "n" + std::to_string(i);
    h.add_node(make_node(node));
    for (int j = 0; j < pods_per_node; ++j) {
      std::vector<toleration> tols;
      if (seconds >= 0) {
        tols.push_back(make_toleration(1, seconds));
      }
      h.add_pod(make_pod(node + "-p" + std::to_string(j), node, tols));
    }
  }
}

void taint_node(harness& h, int node) {
  h.update_node(make_node("n" + std::to_string(node), {make_taint(1)}));
}

void untaint_node(harness& h, int node) {
  h.update_node(make_node("n" + std::to_string(node)));
}

TEST(Policy, NoPolicyIsUpstream) {
  harness h;
  populate(h, 3, 4, -1);
  for (int i = 0; i < 3; ++i) {
    taint_node(h, i);
  }
  EXPECT_EQ(h.sink.calls().size(), 12U) << "every untolerating pod evicted at once";
  EXPECT_EQ(h.ctl.stats().queue.held, 0U);
}

TEST(Policy, TheRateLimitSpacesEvictionsAndLosesNone) {
  eviction_policy p;
  p.rate_limit.evictions_per_second = 10;
  p.rate_limit.burst = 5;
  std::vector<std::chrono::nanoseconds> waits;
  auto o = with_policy(p);
  o.on_waited = [&](std::chrono::nanoseconds w) { waits.push_back(w); };
  harness h(o);
  populate(h, 4, 10, -1);
  for (int i = 0; i < 4; ++i) {
    taint_node(h, i);
  }
  EXPECT_EQ(h.sink.calls().size(), 5U) << "the burst";
  EXPECT_EQ(h.ctl.stats().queue.held, 35U);
  h.advance(1s);
  EXPECT_EQ(h.sink.calls().size(), 15U);
  h.advance(3s);
  EXPECT_EQ(h.sink.calls().size(), 40U);
  EXPECT_EQ(h.ctl.stats().queue.held, 0U);
  EXPECT_EQ(waits.size(), 35U) << "each held eviction reports its wait";
  EXPECT_EQ(waits.back(), 3500ms);
}

// eviction_wait_duration_seconds is for the held ones: an eviction admission control let go at
// once reports no wait, even when its timer fired late (issue 33: every eviction landed in the
// histogram at about 0 s once a policy was loaded).
TEST(Policy, OnlyHeldEvictionsReportAWait) {
  eviction_policy p;
  p.rate_limit.evictions_per_second = 1000;
  std::vector<std::chrono::nanoseconds> waits;
  auto o = with_policy(p);
  o.on_waited = [&](std::chrono::nanoseconds w) { waits.push_back(w); };
  harness h(o);
  h.drv.set_lateness(250ms);  // the timer runs after the due time, as a real one does
  populate(h, 1, 3, 10);      // tolerate 10 s
  taint_node(h, 0);
  h.advance(11s);
  EXPECT_EQ(h.sink.calls().size(), 3U);
  EXPECT_TRUE(waits.empty()) << waits.size() << " waits, the first " << waits.front().count();
}

TEST(Policy, UntaintingCancelsHeldEvictionsWithTheUpstreamEvent) {
  eviction_policy p;
  p.rate_limit.evictions_per_second = 1;
  p.rate_limit.burst = 1;
  harness h(with_policy(p));
  populate(h, 2, 5, 100);  // tolerate 100 s
  taint_node(h, 0);
  taint_node(h, 1);
  h.advance(100s);
  // All ten are due at once; the one token goes to the first scheduled (n0-p0).
  ASSERT_EQ(h.sink.calls().size(), 1U);
  EXPECT_EQ(h.sink.calls()[0].pod.name, "n0-p0");
  EXPECT_EQ(h.ctl.stats().queue.held, 9U);
  untaint_node(h, 1);  // its five held evictions are cancelled, each with upstream's event
  EXPECT_EQ(h.ctl.stats().queue.held, 4U);
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(h.sink.events_of("n1-p" + std::to_string(j), event_kind::cancelling_deletion), 1U);
  }
  h.advance(10s);
  ASSERT_EQ(h.sink.calls().size(), 5U);
  for (const auto& c : h.sink.calls()) {
    EXPECT_EQ(c.pod.name.rfind("n0-", 0), 0U) << c.pod.name;
  }
}

TEST(Policy, InFlightCapsPerNodeAndNamespace) {
  eviction_policy p;
  p.rate_limit.max_in_flight_per_node = 2;
  harness h(with_policy(p));
  h.sink.set_hold(true);
  populate(h, 2, 5, -1);
  taint_node(h, 0);
  taint_node(h, 1);
  EXPECT_EQ(h.sink.held(), 4U) << "two per node in flight";
  h.sink.release_oldest(eviction_status::deleted);
  h.settle();
  EXPECT_EQ(h.sink.held(), 4U) << "a finished eviction lets the next of its node start";
  EXPECT_EQ(h.sink.calls().size(), 5U);
  while (h.sink.held() > 0) {
    h.sink.release_oldest(eviction_status::deleted);
    h.settle();
  }
  EXPECT_EQ(h.sink.calls().size(), 10U);
}

eviction_policy breaker_policy() {
  eviction_policy p;
  p.storm_breaker.max_tainted_nodes_percent = 50;
  p.storm_breaker.min_tainted_nodes = 3;
  p.storm_breaker.hysteresis_percent = 20;
  return p;
}

TEST(Policy, TheBreakerHoldsEveryDueEvictionAndClosesBelowTheHysteresis) {
  std::vector<bool> transitions;
  auto o = with_policy(breaker_policy());
  o.on_breaker = [&](bool open, std::size_t, std::size_t) { transitions.push_back(open); };
  harness h(o);
  populate(h, 20, 2, 30);  // pods tolerate 30 s
  for (int i = 0; i < 12; ++i) {
    taint_node(h, i);
  }
  auto st = h.ctl.stats();
  EXPECT_TRUE(st.breaker_open);
  EXPECT_EQ(st.breaker_tainted_nodes, 12U);
  EXPECT_EQ(st.nodes, 20U);
  EXPECT_EQ(transitions, std::vector<bool>{true});
  h.advance(60s);
  EXPECT_TRUE(h.sink.calls().empty()) << "nothing deleted while the breaker is open";
  EXPECT_EQ(h.ctl.stats().queue.held, 24U) << "nothing forgotten: every due eviction waits";

  // Down to 30%: still open (it closes below 50 - 20 = 30%); the untainted nodes' held
  // evictions are cancelled.
  for (int i = 4; i < 10; ++i) {
    untaint_node(h, i);
  }
  EXPECT_TRUE(h.ctl.stats().breaker_open);
  EXPECT_EQ(h.ctl.stats().queue.held, 12U);
  // Down to 25%: closed; the five nodes still tainted lose their pods.
  untaint_node(h, 10);
  EXPECT_FALSE(h.ctl.stats().breaker_open);
  EXPECT_EQ(transitions, (std::vector<bool>{true, false}));
  EXPECT_EQ(h.sink.calls().size(), 10U);
  for (const auto& c : h.sink.calls()) {
    const int node = std::stoi(c.pod.name.substr(1, c.pod.name.find('-') - 1));
    EXPECT_TRUE(node < 4 || node == 11) << c.pod.name;
  }
}

TEST(Policy, TheBreakerNeedsTheMinimumCountAndCountsOnlyItsKeys) {
  eviction_policy p = breaker_policy();
  p.storm_breaker.min_tainted_nodes = 5;
  p.storm_breaker.taint_keys = {"testTaint2"};
  harness h(with_policy(p));
  populate(h, 4, 1, -1);
  // Every node tainted with testTaint1: not a key the breaker counts.
  for (int i = 0; i < 4; ++i) {
    taint_node(h, i);
  }
  EXPECT_FALSE(h.ctl.stats().breaker_open);
  EXPECT_EQ(h.sink.calls().size(), 4U);
  EXPECT_EQ(h.ctl.stats().breaker_tainted_nodes, 0U);
  // 4 of 4 with the counted key, but fewer than the minimum of 5.
  for (int i = 0; i < 4; ++i) {
    h.update_node(make_node("n" + std::to_string(i), {make_taint(2)}));
  }
  EXPECT_EQ(h.ctl.stats().breaker_tainted_nodes, 4U);
  EXPECT_FALSE(h.ctl.stats().breaker_open);
}

TEST(Policy, AReloadReleasesTheBreaker) {
  harness h(with_policy(breaker_policy()));
  populate(h, 10, 1, -1);
  for (int i = 0; i < 6; ++i) {
    taint_node(h, i);
  }
  EXPECT_TRUE(h.ctl.stats().breaker_open);
  const auto evicted_before = h.sink.calls().size();
  EXPECT_EQ(h.ctl.stats().queue.held, 6U - evicted_before);
  eviction_policy raised = breaker_policy();
  raised.storm_breaker.max_tainted_nodes_percent = 80;
  h.ctl.set_policy(raised);
  h.settle();
  EXPECT_FALSE(h.ctl.stats().breaker_open);
  EXPECT_EQ(h.sink.calls().size(), 6U);
  EXPECT_EQ(h.ctl.policy(), raised);
}

TEST(Policy, DryRunDecidesEverythingAndWritesNothing) {
  eviction_policy p;
  p.dry_run = true;
  harness h(with_policy(p));
  populate(h, 2, 3, 10);
  taint_node(h, 0);
  untaint_node(h, 0);  // three cancels
  taint_node(h, 1);
  h.advance(11s);
  EXPECT_TRUE(h.sink.calls().empty());
  EXPECT_TRUE(h.sink.events().empty()) << "no TaintManagerEviction event in dry-run";
  EXPECT_EQ(counted(h.ctl, "dry_run_pod_deletions_total"), 3U);
  EXPECT_EQ(counted(h.ctl, "cancelled_evictions_total"), 3U)
      << "the decisions are counted as usual";
  EXPECT_EQ(h.ctl.queue_for_test().size(), 0U);
  // Turning dry-run off applies to the next eviction.
  h.ctl.set_policy({});
  taint_node(h, 0);
  h.advance(11s);
  EXPECT_EQ(h.sink.calls().size(), 3U);
}

}  // namespace
}  // namespace tec::controller

// What the controller hands the sink for --fresh-node-check (eviction_request::node and
// causes), and how it treats the sink's `stale` answer (issue 33 item 4).

#include <gtest/gtest.h>

#include <chrono>

#include "support/fakes.hpp"
#include "support/harness.hpp"
#include "tec/controller/matching.hpp"

namespace tec::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;  // the harness and the fixtures' makers

TEST(FreshNodeCauses, TheRequestNamesTheNodeAndTheTaintsThatEvict) {
  harness h;
  // Taint 1 untolerated, taint 2 tolerated forever, taint 3 for 10 s: 1 and 3 make the
  // eviction right, 2 does not.
  h.index.put(make_pod("pod1", "node1", {make_toleration(2, -1), make_toleration(3, 10)}));
  h.add_node(make_node("node1", {make_taint(1), make_taint(2), make_taint(3)}));
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].node, "node1");
  EXPECT_EQ(calls[0].causes, (std::vector<taint>{make_taint(1), make_taint(3)}));
}

TEST(FreshNodeCauses, ATolerationThatExpiredNamesItsTaint) {
  harness h;
  h.index.put(make_pod("pod1", "node1", {make_toleration(1, 5)}));
  h.add_node(make_node("node1", {make_taint(1)}));
  h.advance(5s);
  const auto calls = h.sink.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].causes, (std::vector<taint>{make_taint(1)}));
}

TEST(FreshNodeCauses, EvictingTaintsLeavesOutIgnoredAndForeverTolerated) {
  const std::vector<taint> taints{make_taint(1), make_taint(2), make_taint(3)};
  const std::vector<toleration> tols{make_toleration(2, -1), make_toleration(3, 0)};
  taint_rule ignore3;
  ignore3.key = make_taint(3).key;
  ignore3.action = taint_action::ignore;
  EXPECT_EQ(evicting_taints(taints, tols, {}), (std::vector<taint>{make_taint(1), make_taint(3)}));
  EXPECT_EQ(evicting_taints(taints, tols, std::vector<taint_rule>{ignore3}),
            (std::vector<taint>{make_taint(1)}));
}

TEST(StaleAnswer, IsRetriedWithinASecondAndIsNeverAFailure) {
  harness h;  // retries back off from 1 s doubling: a stale answer is retried sooner
  h.sink.script({eviction_status::stale, eviction_status::stale, eviction_status::stale,
                 eviction_status::stale, eviction_status::stale, eviction_status::stale});
  h.index.put(make_pod("pod1", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_EQ(h.sink.evictions_of("pod1"), 1U);
  for (std::size_t i = 2; i <= 7; ++i) {
    h.advance(1s);
    EXPECT_EQ(h.sink.evictions_of("pod1"), i) << "retried within 1 s";
  }
  EXPECT_FALSE(h.index.get_pod("default", "pod1").has_value()) << "the 7th attempt deleted it";
  const auto st = h.ctl.stats();
  EXPECT_EQ(counted(h.ctl, "eviction_attempt_failures_total"), 0U);
  EXPECT_EQ(st.stuck_evictions, 0U);
  EXPECT_EQ(h.sink.events_of("pod1", event_kind::eviction_failed), 0U) << "never reported stuck";
}

TEST(StaleAnswer, TheUntaintThatFollowsCancelsTheRetry) {
  harness h;
  h.sink.script({eviction_status::stale});
  h.index.put(make_pod("pod1", "node1"));
  h.add_node(make_node("node1", {make_taint(1)}));
  EXPECT_EQ(h.sink.evictions_of("pod1"), 1U);
  h.update_node(make_node("node1"));  // the watch event the fresh read was ahead of
  h.advance(10s);
  EXPECT_EQ(h.sink.evictions_of("pod1"), 1U);
  EXPECT_TRUE(h.index.get_pod("default", "pod1").has_value());
}

}  // namespace
}  // namespace tec::controller

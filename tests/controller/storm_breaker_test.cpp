// The storm breaker on its own (controller/src/storm_breaker.hpp): when it opens and closes,
// the queue it pauses, and the recount when its taint keys change. Manual clock.

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

// The controller's parts are internal to tec_controller (controller/src/).
#include "storm_breaker.hpp"
#include "support/manual_driver.hpp"
#include "tec/base/logger.hpp"

namespace tec::controller::detail {
namespace {

struct breaker_fixture : ::testing::Test {
  timedqueue::manual_driver drv;
  timedqueue::timed_queue queue{drv, [](const timedqueue::run_info&, timedqueue::completion) {}};
  std::vector<std::tuple<bool, std::size_t, std::size_t>> changes;
  storm_breaker breaker{
      queue, [this](bool open, std::size_t t, std::size_t n) { changes.emplace_back(open, t, n); },
      base::named_logger("controller")};
  tainted_nodes tainted{2};

  void add(const std::string& name, std::vector<taint> taints = {}) {
    const node_view n{name, std::move(taints), std::nullopt};
    breaker.node_updated(nullptr, &n);
  }
  void taint_node(const std::string& name, const std::string& key) {
    const node_view old_node{name, {}, std::nullopt};
    const node_view n{name, {taint{key, "", taint_effect::no_execute, 0}}, std::nullopt};
    breaker.node_updated(&old_node, &n);
  }
};

storm_breaker_policy half_with_hysteresis() {
  storm_breaker_policy p;
  p.max_tainted_nodes_percent = 50;
  p.min_tainted_nodes = 2;
  p.hysteresis_percent = 20;
  return p;
}

TEST_F(breaker_fixture, OpensAboveTheShareAndClosesBelowItMinusTheHysteresis) {
  breaker.configure(half_with_hysteresis(), tainted);
  for (const char* n : {"a", "b", "c", "d"}) {
    add(n);
  }
  taint_node("a", "k");
  taint_node("b", "k");  // 50%: not above
  EXPECT_FALSE(breaker.current().open);
  taint_node("c", "k");  // 75%, 3 nodes
  EXPECT_TRUE(breaker.current().open);
  EXPECT_TRUE(queue.paused());
  const node_view c{"c", {}, std::nullopt};
  breaker.node_updated(&c, &c);  // 50%: still >= 30%
  EXPECT_TRUE(breaker.current().open);
  const node_view b{"b", {}, std::nullopt};
  breaker.node_updated(&b, &b);  // 25%: below 30%
  EXPECT_FALSE(breaker.current().open);
  EXPECT_FALSE(queue.paused());
  EXPECT_EQ(changes,
            (std::vector<std::tuple<bool, std::size_t, std::size_t>>{{true, 3, 4}, {false, 1, 4}}));
}

TEST_F(breaker_fixture, NewKeysAreCountedAgainFromTheTaintedTable) {
  add("a");
  add("b");
  taint_node("a", "other");
  tainted.set("a", std::vector<taint>{taint{"other", "", taint_effect::no_execute, 0}});
  storm_breaker_policy p = half_with_hysteresis();
  p.min_tainted_nodes = 1;
  p.taint_keys = {"only"};
  breaker.configure(p, tainted);  // "other" does not count
  EXPECT_EQ(breaker.current().tainted_nodes, 0U);
  EXPECT_FALSE(breaker.current().open);
  p.taint_keys = {"other"};
  breaker.configure(p, tainted);  // 1 of 2 is not above 50%
  EXPECT_EQ(breaker.current().tainted_nodes, 1U);
  p.max_tainted_nodes_percent = 40;
  breaker.configure(p, tainted);
  EXPECT_TRUE(breaker.current().open);
  EXPECT_TRUE(queue.paused());
}

}  // namespace
}  // namespace tec::controller::detail

// The intake and workers on their own (controller/src/worker_pool.hpp): coalescing, node
// updates before pod updates, stop, and a throwing handler. Manual mode, one thread.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

// The controller's parts are internal to tec_controller (controller/src/).
#include "tec/base/logger.hpp"
#include "worker_pool.hpp"

namespace tec::controller::detail {
namespace {

// Records what the workers hand it, in order; throws for the node "bad".
class recording_handler final : public update_handler {
public:
  void node_changed(const std::string& node, std::optional<std::vector<taint>> taints,
                    bool replay) override {
    if (node == "bad") {
      throw std::runtime_error("boom");
    }
    calls.push_back(
        "node " + node +
        (taints ? " taints=" + std::to_string(taints->size()) : std::string(" deleted")) +
        (replay ? " replay" : ""));
  }
  void pod_changed(std::string_view node, std::string_view key) override {
    calls.push_back("pod " + std::string(node) + " " + std::string(key));
  }
  std::vector<std::string> calls;
};

struct pool_fixture : ::testing::Test {
  recording_handler handler;
  counters ctr;
  worker_pool pool{1, /*threaded=*/false, handler, ctr, base::named_logger("controller")};
};

TEST_F(pool_fixture, NodeUpdatesGoBeforePodUpdatesAndCoalesce) {
  const std::vector<taint> one{taint{"k", "v", taint_effect::no_execute, 0}};
  EXPECT_TRUE(pool.enqueue_pod("n1", "ns", "a"));
  EXPECT_TRUE(pool.enqueue_pod("n1", "ns", "a"));  // merged into the one waiting
  EXPECT_TRUE(pool.enqueue_node("n1", std::vector<taint>{}, /*replay=*/true));
  EXPECT_TRUE(pool.enqueue_node("n1", one, /*replay=*/false));  // latest taints, replay kept
  EXPECT_EQ(pool.depths(), std::vector<std::size_t>{2});
  EXPECT_EQ(pool.run_until_idle(), 2U);
  EXPECT_EQ(handler.calls, (std::vector<std::string>{"node n1 taints=1 replay", "pod n1 ns/a"}));
  EXPECT_EQ(ctr.node_updates.value(), 2U);
  EXPECT_EQ(ctr.pod_updates.value(), 2U);
  EXPECT_EQ(ctr.coalesced.value(), 2U);
  EXPECT_TRUE(pool.wait_idle(std::chrono::milliseconds(0)));
}

TEST_F(pool_fixture, RequeueLeavesAWaitingNodeUpdateAlone) {
  EXPECT_TRUE(pool.enqueue_node("n1", std::nullopt, false));
  EXPECT_TRUE(pool.requeue_node("n1", {taint{"k", "", taint_effect::no_execute, 0}}));
  EXPECT_TRUE(pool.requeue_node("n2", {taint{"k", "", taint_effect::no_execute, 0}}));
  pool.run_until_idle();
  EXPECT_EQ(handler.calls, (std::vector<std::string>{"node n1 deleted", "node n2 taints=1"}));
}

TEST_F(pool_fixture, AThrowingHandlerLosesOnlyItsUpdate) {
  EXPECT_TRUE(pool.enqueue_node("bad", std::nullopt, false));
  EXPECT_TRUE(pool.enqueue_node("good", std::nullopt, false));
  EXPECT_EQ(pool.run_until_idle(), 2U);
  EXPECT_EQ(handler.calls, std::vector<std::string>{"node good deleted"});
}

TEST_F(pool_fixture, NothingIsTakenAfterStop) {
  pool.stop();
  EXPECT_TRUE(pool.stopping());
  EXPECT_FALSE(pool.enqueue_node("n1", std::nullopt, false));
  EXPECT_FALSE(pool.enqueue_pod("n1", "ns", "a"));
  EXPECT_FALSE(pool.requeue_node("n1", {}));
  EXPECT_EQ(pool.run_until_idle(), 0U);
}

}  // namespace
}  // namespace tec::controller::detail

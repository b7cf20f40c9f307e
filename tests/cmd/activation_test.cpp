// The daemon's activation gate: activation happens in the call that delivers the last of the
// four events (pods, nodes and namespaces synced, may lead), in any order, with no clock or timer
// involved (the daemon polled every 50 ms before).
#include "activation.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tec::cmd {
namespace {

struct recorded_gate {
  std::vector<std::string> calls;
  activation_gate gate{[this] { calls.emplace_back("synced"); },
                       [this] { calls.emplace_back("activate"); }};
};

TEST(activation_gate, activates_in_the_call_that_delivers_the_last_event) {
  recorded_gate r;
  r.gate.may_lead();
  r.gate.pods_synced();
  r.gate.namespaces_synced();
  EXPECT_TRUE(r.calls.empty());
  EXPECT_FALSE(r.gate.activated());
  r.gate.nodes_synced();
  EXPECT_EQ(r.calls, (std::vector<std::string>{"synced", "activate"}));
  EXPECT_TRUE(r.gate.activated());
}

// A pod in a namespace that opts out must not be evicted because the namespaces were not
// listed yet: pods and nodes synced and the lease held are not enough.
TEST(activation_gate, waits_for_the_namespaces) {
  recorded_gate r;
  r.gate.may_lead();
  r.gate.pods_synced();
  r.gate.nodes_synced();
  EXPECT_TRUE(r.calls.empty());
  EXPECT_FALSE(r.gate.caches_synced());
  r.gate.namespaces_synced();
  EXPECT_EQ(r.calls, (std::vector<std::string>{"synced", "activate"}));
}

TEST(activation_gate, a_follower_reports_the_sync_and_activates_when_it_gains_the_lease) {
  recorded_gate r;
  r.gate.nodes_synced();
  r.gate.namespaces_synced();
  r.gate.pods_synced();
  EXPECT_EQ(r.calls, (std::vector<std::string>{"synced"}));
  EXPECT_TRUE(r.gate.caches_synced());
  r.gate.may_lead();
  EXPECT_EQ(r.calls, (std::vector<std::string>{"synced", "activate"}));
}

TEST(activation_gate, each_callback_runs_once) {
  recorded_gate r;
  r.gate.pods_synced();
  r.gate.nodes_synced();
  r.gate.namespaces_synced();
  r.gate.may_lead();
  r.gate.pods_synced();
  r.gate.nodes_synced();
  r.gate.namespaces_synced();
  r.gate.may_lead();
  EXPECT_EQ(r.calls, (std::vector<std::string>{"synced", "activate"}));
}

TEST(activation_gate, never_activates_after_close) {
  recorded_gate r;
  r.gate.pods_synced();
  r.gate.namespaces_synced();
  r.gate.close();  // leadership lost or shutdown began before the node cache synced
  r.gate.may_lead();
  r.gate.nodes_synced();
  EXPECT_EQ(r.calls, (std::vector<std::string>{"synced"}));
  EXPECT_FALSE(r.gate.activated());
}

}  // namespace
}  // namespace tec::cmd

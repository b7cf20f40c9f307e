// The informers' feed into the controller: nothing before activate(), then activate() replays
// the caches (every node, and the pods on nodes with a NoExecute taint) and the handlers
// forward every change. A controller in manual mode on a manual clock, on a real pod_store.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "controller/support/fakes.hpp"
#include "support/manual_driver.hpp"
#include "tec/controller/controller.hpp"
#include "tec/informers/controller_feed.hpp"
#include "tec/informers/store.hpp"

namespace tec::informers {
namespace {

using controller::testing::counted;
using controller::testing::make_node;
using controller::testing::make_pod;
using controller::testing::make_taint;

controller::controller_options manual() {
  controller::controller_options o;
  o.workers = 4;
  o.threaded = false;
  return o;
}

class controller_feed_test : public ::testing::Test {
protected:
  controller_feed_test() : ctl_(pods_, sink_, drv_, manual()), feed_(ctl_) { ctl_.start(); }
  ~controller_feed_test() override { ctl_.shutdown(); }

  void add_node(const controller::node_view& n) {
    node_record r;
    r.node = n;
    r.resource_version = "1";
    nodes_.upsert(r);
  }
  void add_pod(const controller::pod_view& p) {
    pod_record r;
    r.pod = p;
    r.resource_version = "1";
    pods_.upsert(r);
  }
  void settle() {
    for (int i = 0; i < 100 && ctl_.run_until_idle_for_test() + drv_.run_pending() > 0; ++i) {
    }
  }
  std::vector<std::string> evicted() const {
    std::vector<std::string> out;
    for (const auto& c : sink_.calls()) {
      out.push_back(c.pod.name);
    }
    return out;
  }

  timedqueue::manual_driver drv_;
  pod_store pods_;
  node_store nodes_;
  controller::testing::recording_sink sink_;
  controller::controller ctl_;
  controller_feed feed_;
};

TEST_F(controller_feed_test, activate_replays_every_node_and_only_the_pods_on_tainted_nodes) {
  add_node(make_node("tainted", {make_taint(1)}));
  add_node(make_node("clean"));
  add_node(make_node("no-schedule", {{"k", "v", controller::taint_effect::no_schedule, 0}}));
  for (int i = 0; i < 3; ++i) {
    add_pod(make_pod("t-" + std::to_string(i), "tainted"));
  }
  for (int i = 0; i < 50; ++i) {
    add_pod(make_pod("c-" + std::to_string(i), "clean"));
    add_pod(make_pod("s-" + std::to_string(i), "no-schedule"));
  }
  add_pod(make_pod("unscheduled", ""));

  const auto replayed = feed_.activate(nodes_, pods_);
  EXPECT_EQ(replayed.nodes, 3U);
  EXPECT_EQ(replayed.tainted_nodes, 1U);
  EXPECT_EQ(replayed.pods, 3U);
  EXPECT_EQ(counted(ctl_, "pod_updates_total"), 3U);  // none queued for the 101 other pods
  settle();
  auto names = evicted();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"t-0", "t-1", "t-2"}));
}

TEST_F(controller_feed_test, forwards_changes_only_once_active) {
  add_node(make_node("n"));
  const auto pod = make_pod("p", "n");
  add_pod(pod);
  const auto on_pod = feed_.pod_handler();
  const auto on_node = feed_.node_handler();
  node_record before;
  before.node = make_node("n");
  node_record tainted;
  tainted.node = make_node("n", {make_taint(1)});

  on_node(&before, &tainted);  // not active yet: dropped
  settle();
  EXPECT_EQ(counted(ctl_, "node_updates_total"), 0U);

  EXPECT_EQ(feed_.activate(nodes_, pods_).pods, 0U);  // the cache still has "n" untainted
  nodes_.upsert(tainted);
  on_node(&before, &tainted);
  settle();
  EXPECT_EQ(evicted(), (std::vector<std::string>{"p"}));

  feed_.deactivate();
  pod_record other;
  other.pod = make_pod("q", "n");
  pods_.upsert(other);
  on_pod(nullptr, &other);
  settle();
  EXPECT_EQ(evicted(), (std::vector<std::string>{"p"}));
}

}  // namespace
}  // namespace tec::informers

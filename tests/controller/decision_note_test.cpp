// The decision observer (controller_options::on_decision) that shadow mode compares with the
// built-in taint manager: scheduled, would-delete (dry-run) and cancelled with a reason.
// Manual clock.

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controller/support/harness.hpp"

namespace tec::controller {
namespace {

using namespace std::chrono_literals;
using testing::harness;
using testing::make_node;
using testing::make_pod;
using testing::make_taint;
using testing::make_toleration;
using testing::manual_options;

struct notes {
  std::mutex mu;
  std::vector<decision_note> all;
  std::vector<decision_note> take() {
    const std::lock_guard lock(mu);
    return std::exchange(all, {});
  }
};

controller_options observed(const std::shared_ptr<notes>& n, bool dry_run = true) {
  auto o = manual_options();
  o.policy.dry_run = dry_run;
  o.on_decision = [n](const decision_note& note) {
    const std::lock_guard lock(n->mu);
    n->all.push_back(note);
  };
  return o;
}

TEST(DecisionNotes, ScheduledThenWouldDeleteInDryRun) {
  auto n = std::make_shared<notes>();
  harness h(observed(n));
  h.add_node(make_node("n1"));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  const auto t0 = h.drv.now();
  h.update_node(make_node("n1", {make_taint(1)}));
  auto got = n->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].kind, decision_kind::scheduled);
  EXPECT_EQ(got[0].pod.name, "p1");
  EXPECT_EQ(got[0].pod.uid, h.index.get_pod("default", "p1")->uid);
  EXPECT_EQ(got[0].node, "n1");
  ASSERT_EQ(got[0].taints.size(), 1U);
  EXPECT_EQ(got[0].taints[0], make_taint(1));
  EXPECT_EQ(got[0].at, t0);
  EXPECT_EQ(got[0].due, t0 + 10s);
  h.advance(10s);
  got = n->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].kind, decision_kind::would_delete);
  EXPECT_EQ(got[0].at, t0 + 10s);
  EXPECT_EQ(got[0].due, t0 + 10s);
  EXPECT_TRUE(h.sink.calls().empty());
}

TEST(DecisionNotes, NoWouldDeleteWhenWriting) {
  auto n = std::make_shared<notes>();
  harness h(observed(n, false));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1"));
  const auto got = n->take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].kind, decision_kind::scheduled);
  EXPECT_EQ(h.sink.calls().size(), 1U);
}

TEST(DecisionNotes, CancelledUntainted) {
  auto n = std::make_shared<notes>();
  harness h(observed(n));
  h.add_node(make_node("n1"));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  const auto t0 = h.drv.now();
  h.update_node(make_node("n1", {make_taint(1)}));
  h.advance(2s);
  h.update_node(make_node("n1"));
  const auto got = n->take();
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[1].kind, decision_kind::cancelled);
  EXPECT_EQ(got[1].reason, cancel_reason::untainted);
  EXPECT_EQ(got[1].at, t0 + 2s);
  EXPECT_EQ(got[1].due, t0 + 10s);
  EXPECT_EQ(got[1].pod.name, "p1");
}

TEST(DecisionNotes, CancelledPodGone) {
  auto n = std::make_shared<notes>();
  harness h(observed(n));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  const std::string uid = h.index.get_pod("default", "p1")->uid;
  h.delete_pod("p1");
  const auto got = n->take();
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[1].kind, decision_kind::cancelled);
  EXPECT_EQ(got[1].reason, cancel_reason::pod_gone);
  EXPECT_EQ(got[1].pod.uid, uid);
}

TEST(DecisionNotes, CancelledReplaced) {
  auto n = std::make_shared<notes>();
  harness h(observed(n));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  const std::string old_uid = h.index.get_pod("default", "p1")->uid;
  const auto replacement = make_pod("p1", "n1", {make_toleration(1, 3600)});  // a new UID
  h.update_pod(replacement);
  const auto got = n->take();
  ASSERT_EQ(got.size(), 3U);
  EXPECT_EQ(got[1].kind, decision_kind::cancelled);
  EXPECT_EQ(got[1].reason, cancel_reason::replaced);
  EXPECT_EQ(got[1].pod.uid, old_uid);
  EXPECT_EQ(got[2].kind, decision_kind::scheduled);
  EXPECT_EQ(got[2].pod.uid, replacement.uid);
}

TEST(DecisionNotes, GoneAtFiringIsPodGone) {
  auto n = std::make_shared<notes>();
  harness h(observed(n));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  h.index.erase("default", "p1");  // the cache lost it; the controller was not told yet
  h.advance(10s);
  const auto got = n->take();
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[1].kind, decision_kind::cancelled);
  EXPECT_EQ(got[1].reason, cancel_reason::pod_gone);
}

TEST(DecisionNotes, UntoleratedWhileWaitingIsOneNewSchedule) {
  auto n = std::make_shared<notes>();
  harness h(observed(n));
  h.add_node(make_node("n1", {make_taint(1)}));
  h.add_pod(make_pod("p1", "n1", {make_toleration(1, 10)}));
  const auto t0 = h.drv.now();
  auto untolerating = make_pod("p1", "n1");
  untolerating.uid = h.index.get_pod("default", "p1")->uid;
  h.update_pod(untolerating);
  const auto got = n->take();
  ASSERT_EQ(got.size(), 3U);
  EXPECT_EQ(got[1].kind, decision_kind::scheduled) << "no cancelled note for a reschedule";
  EXPECT_EQ(got[1].due, t0);
  EXPECT_EQ(got[2].kind, decision_kind::would_delete);
}

TEST(DecisionNotes, Names) {
  EXPECT_EQ(to_string(decision_kind::would_delete), "would_delete");
  EXPECT_EQ(to_string(cancel_reason::pod_gone), "pod_gone");
  EXPECT_EQ(to_string(cancel_reason::untainted), "untainted");
  EXPECT_EQ(to_string(cancel_reason::replaced), "replaced");
}

}  // namespace
}  // namespace tec::controller

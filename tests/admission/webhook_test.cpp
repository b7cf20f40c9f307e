#include "tec/admission/webhook.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tec::admission {
namespace {

using controller::taint;
using controller::taint_effect;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

/// The caches, as the test sets them.
struct fake_cluster final : cluster_reader {
  std::optional<std::string> waiting;
  std::vector<controller::pod_view> pods;
  std::vector<controller::node_view> all_nodes;
  std::vector<std::string> opted_out;
  controller::eviction_policy in_force;

  [[nodiscard]] std::optional<std::string> not_ready() const override { return waiting; }
  [[nodiscard]] std::vector<controller::pod_view> pods_on_node(
      std::string_view node) const override {
    ++pods_read;
    std::vector<controller::pod_view> out;
    for (const auto& p : pods) {
      if (p.node_name == node) {
        out.push_back(p);
      }
    }
    return out;
  }
  [[nodiscard]] std::vector<controller::node_view> nodes() const override { return all_nodes; }
  [[nodiscard]] std::vector<std::string> opted_out_namespaces() const override { return opted_out; }
  [[nodiscard]] controller::eviction_policy policy() const override { return in_force; }
  [[nodiscard]] std::int64_t now_unix() const override { return now; }

  std::int64_t now = 1'800'000'000;   // 2027-01-15T08:00:00Z
  mutable std::size_t pods_read = 0;  // calls of pods_on_node
};

controller::pod_view pod(std::string ns, std::string name, std::string node,
                         std::vector<controller::toleration> tolerations = {}) {
  controller::pod_view p;
  p.namespace_ = std::move(ns);
  p.name = std::move(name);
  p.uid = p.namespace_ + "/" + p.name;
  p.node_name = std::move(node);
  p.tolerations = std::move(tolerations);
  p.phase = controller::pod_phase::running;
  return p;
}

taint no_execute(std::string key, std::string value = "") {
  return {.key = std::move(key),
          .value = std::move(value),
          .effect = taint_effect::no_execute,
          .time_added_unix = 0};
}

/// Ten nodes n0..n9, pods a/p1, b/p2 (no toleration) and c/p3 (300 s) on n1.
fake_cluster ten_nodes() {
  fake_cluster c;
  for (int i = 0; i < 10; ++i) {
    c.all_nodes.push_back({.name = "n" + std::to_string(i), .taints = {}, .hold = {}});
  }
  c.pods = {pod("a", "p1", "n1"), pod("b", "p2", "n1"),
            pod("c", "p3", "n1",
                {{.key = "k",
                  .op = controller::toleration_operator::exists,
                  .value = {},
                  .effect = std::nullopt,
                  .seconds = 300}}),
            pod("d", "p4", "n2")};
  return c;
}

review_request update(std::vector<taint> before, std::vector<taint> after, bool ack = false) {
  return {.api_version = std::string(api_version_v1),
          .uid = "u-7",
          .op = operation::update,
          .user = "alice",
          .object = node_object{.node = {.name = "n1", .taints = std::move(after), .hold = {}},
                                .acknowledged = ack},
          .old_object = node_object{.node = {.name = "n1", .taints = std::move(before), .hold = {}},
                                    .acknowledged = ack}};
}

TEST(admission_webhook, added_taints) {
  const controller::node_view before{
      .name = "n", .taints = {no_execute("a", "1"), no_execute("b", "1")}, .hold = {}};
  taint soft = no_execute("s");
  soft.effect = taint_effect::no_schedule;
  const controller::node_view after{
      .name = "n",
      .taints = {no_execute("a", "1"), no_execute("b", "2"), no_execute("c"), soft},
      .hold = {}};
  EXPECT_THAT(added_no_execute_taints(&before, after),
              ElementsAre(no_execute("b", "2"), no_execute("c")));
  EXPECT_THAT(added_no_execute_taints(nullptr, after), SizeIs(3));
  const controller::node_view fewer{.name = "n", .taints = {no_execute("a", "1")}, .hold = {}};
  EXPECT_THAT(added_no_execute_taints(&before, fewer), IsEmpty());  // a removal
}

TEST(admission_webhook, warns_with_the_preview) {
  const auto c = ten_nodes();
  const auto r = decide(update({}, {no_execute("k", "x")}), c).response;
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.uid, "u-7");
  ASSERT_THAT(r.warnings, SizeIs(1));
  EXPECT_THAT(r.warnings[0], StartsWith("tainting n1 with k=x:NoExecute evicts 2 pods now (2 "
                                        "namespaces), 1 more within 300s"));
  EXPECT_THAT(r.warnings[0], HasSubstr("10% of nodes would carry NoExecute taints"));
  EXPECT_LE(r.warnings[0].size(), max_warning_bytes);
}

TEST(admission_webhook, knows_the_holds) {
  // The node's hold-until annotation as the request leaves it (put on with the taint) holds
  // p1 and p2 for 30 minutes; p3's own hold (10 minutes) is shorter than the node's.
  auto c = ten_nodes();
  c.pods[2].hold = controller::parse_hold("2027-01-15T08:10:00Z");
  auto req = update({}, {no_execute("k", "x")});
  req.object->node.hold = controller::parse_hold("2027-01-15T08:30:00Z");
  const auto held = decide(req, c).response;
  ASSERT_THAT(held.warnings, SizeIs(1));
  EXPECT_THAT(held.warnings[0],
              StartsWith("tainting n1 with k=x:NoExecute evicts 0 pods now, 3 more within 1800s"));
  EXPECT_THAT(held.warnings[0], HasSubstr("; 3 held by hold-until"));

  // A hold past its time, or malformed, holds nothing (the controller ignores it too).
  req.object->node.hold = controller::parse_hold("2027-01-15T07:00:00Z");
  c.pods[2].hold = controller::parse_hold("tomorrow");
  const auto gone = decide(req, c).response;
  ASSERT_THAT(gone.warnings, SizeIs(1));
  EXPECT_THAT(gone.warnings[0], StartsWith("tainting n1 with k=x:NoExecute evicts 2 pods now"));
  EXPECT_THAT(gone.warnings[0], Not(HasSubstr("held")));
}

TEST(admission_webhook, nothing_added_nothing_said) {
  auto c = ten_nodes();
  c.all_nodes[1].taints = {no_execute("k")};
  // A removal, an unchanged taint, a NoSchedule taint, a DELETE.
  EXPECT_THAT(decide(update({no_execute("k")}, {}), c).response.warnings, IsEmpty());
  EXPECT_THAT(decide(update({no_execute("k")}, {no_execute("k")}), c).response.warnings, IsEmpty());
  taint soft = no_execute("k");
  soft.effect = taint_effect::no_schedule;
  EXPECT_THAT(decide(update({}, {soft}), c).response.warnings, IsEmpty());
  review_request del;
  del.uid = "u";
  del.op = operation::delete_;
  EXPECT_TRUE(decide(del, c).response.allowed);
}

TEST(admission_webhook, one_warning_per_added_taint_bounded) {
  const auto c = ten_nodes();
  std::vector<taint> many;
  for (int i = 0; i < 12; ++i) {
    many.push_back(no_execute("k" + std::to_string(i)));
  }
  const auto r = decide(update({}, many), c).response;
  ASSERT_THAT(r.warnings, SizeIs(max_warnings + 1));
  EXPECT_EQ(r.warnings.back(), "... and 4 more NoExecute taints added to n1");
  std::size_t total = 0;
  for (const auto& w : r.warnings) {
    total += w.size();
  }
  EXPECT_LT(total, 4096U);
}

TEST(admission_webhook, a_node_with_more_taints_than_considered_gets_one_warning_and_no_preview) {
  auto c = ten_nodes();
  c.pods_read = 0;
  std::vector<taint> many;
  for (std::size_t i = 0; i <= max_review_taints; ++i) {
    many.push_back(no_execute("k" + std::to_string(i)));
  }
  const auto d = decide(update({}, many), c);
  EXPECT_EQ(d.outcome, review_outcome::too_many_taints);
  EXPECT_TRUE(d.response.allowed);
  ASSERT_THAT(d.response.warnings, SizeIs(1));
  EXPECT_THAT(d.response.warnings[0], HasSubstr("65 NoExecute taints (at most 64)"));
  EXPECT_EQ(c.pods_read, 0U) << "no preview is made: the pods are not even read";
  // At the bound, the taints are previewed (the warnings say so).
  many.pop_back();
  const auto at = decide(update({}, many), c);
  EXPECT_EQ(at.outcome, review_outcome::warned);
  EXPECT_THAT(at.response.warnings, SizeIs(max_warnings + 1));
}

TEST(admission_webhook, added_taints_are_listed_once_each_in_order) {
  const controller::node_view before{
      .name = "n", .taints = {no_execute("a"), no_execute("b", "1")}, .hold = {}};
  const controller::node_view now{
      .name = "n",
      .taints = {no_execute("c"), no_execute("a"), no_execute("b", "2"), no_execute("c"),
                 no_execute("d"), no_execute("b", "2")},
      .hold = {}};
  const auto added = added_no_execute_taints(&before, now);
  ASSERT_THAT(added, SizeIs(3));
  EXPECT_EQ(added[0].key, "c");
  EXPECT_EQ(added[1].key, "b");
  EXPECT_EQ(added[1].value, "2");
  EXPECT_EQ(added[2].key, "d");
  EXPECT_THAT(added_no_execute_taints(nullptr, now), SizeIs(4));
}

TEST(admission_webhook, a_review_out_of_budget_is_allowed_without_warnings) {
  const auto c = ten_nodes();
  int asked = 0;
  // The budget runs out after the first preview.
  const auto d =
      decide(update({}, {no_execute("a"), no_execute("b")}), c, [&asked] { return ++asked > 1; });
  EXPECT_EQ(d.outcome, review_outcome::over_budget);
  EXPECT_TRUE(d.response.allowed);
  EXPECT_THAT(d.response.warnings, IsEmpty());
  EXPECT_EQ(d.response.uid, "u-7");
  const auto served = serve(R"({"not":)", c, [] { return true; });
  EXPECT_EQ(served.outcome, review_outcome::malformed);
}

TEST(admission_webhook, not_synced_says_so) {
  auto c = ten_nodes();
  c.waiting = "waiting for the first LIST of pods";
  const auto r = decide(update({}, {no_execute("k")}), c).response;
  EXPECT_TRUE(r.allowed);
  EXPECT_THAT(r.warnings, ElementsAre("taint-eviction-controller cannot preview this taint yet: "
                                      "waiting for the first LIST of pods"));
}

TEST(admission_webhook, the_cache_says_what_the_node_carried) {
  // kube-apiserver 1.20 sends an UPDATE's oldObject equal to its object: the cached node
  // (without the taint) says it is added.
  auto c = ten_nodes();
  auto r = decide(update({no_execute("k", "x")}, {no_execute("k", "x")}), c).response;
  ASSERT_THAT(r.warnings, SizeIs(1));
  EXPECT_THAT(r.warnings[0], StartsWith("tainting n1 with k=x:NoExecute evicts 2 pods now"));
  // Once cached, it is not added again.
  c.all_nodes[1].taints = {no_execute("k", "x")};
  EXPECT_THAT(decide(update({no_execute("k", "x")}, {no_execute("k", "x")}), c).response.warnings,
              IsEmpty());
}

TEST(admission_webhook, a_node_not_cached_yet_is_read_from_the_request) {
  auto c = ten_nodes();
  c.all_nodes.erase(c.all_nodes.begin() + 1);  // n1 not cached yet
  c.all_nodes.pop_back();                      // nor n9
  EXPECT_THAT(decide(update({no_execute("k")}, {no_execute("k")}), c).response.warnings, IsEmpty());
  const auto r = decide(update({}, {no_execute("k")}), c).response;
  ASSERT_THAT(r.warnings, SizeIs(1));
  // n1 counted once, among 9 nodes.
  EXPECT_THAT(r.warnings[0], HasSubstr("11% of nodes"));
}

TEST(admission_webhook, deny_mode_off_by_default) {
  auto c = ten_nodes();
  c.in_force.storm_breaker.max_tainted_nodes_percent = 5;
  const auto r = decide(update({}, {no_execute("k")}), c).response;
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.code, 0U);
}

TEST(admission_webhook, deny_mode_refuses_too_many_evictions) {
  auto c = ten_nodes();
  c.in_force.admission.deny_evicting_more_than = 2;
  const auto r = decide(update({}, {no_execute("k", "x")}), c).response;
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.code, 403U);
  EXPECT_THAT(r.message,
              StartsWith("tainting n1 with k=x:NoExecute evicts 3 pods (2 now, 1 later), more "
                         "than admission.denyEvictingMoreThan 2. To go ahead, annotate the node "
                         "taint-eviction-controller/acknowledge-eviction=true first"));
  EXPECT_THAT(r.warnings, SizeIs(1));  // the preview too
  c.in_force.admission.deny_evicting_more_than = 3;
  EXPECT_TRUE(decide(update({}, {no_execute("k", "x")}), c).response.allowed);
}

TEST(admission_webhook, deny_mode_refuses_opening_the_breaker) {
  auto c = ten_nodes();
  c.in_force.storm_breaker.max_tainted_nodes_percent = 50;
  c.in_force.admission.deny_if_breaker_opens = true;
  for (int i = 2; i < 7; ++i) {
    c.all_nodes[static_cast<std::size_t>(i)].taints = {no_execute("other")};
  }
  const auto r = decide(update({}, {no_execute("k")}), c).response;  // 6 of 10
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.message, HasSubstr("opens the storm breaker (6 of 10 nodes, 60%, would carry "
                                   "NoExecute taints it counts; it opens above 50%)"));
  c.all_nodes[6].taints.clear();  // 5 of 10: not over 50%
  EXPECT_TRUE(decide(update({}, {no_execute("k")}), c).response.allowed);
}

TEST(admission_webhook, deny_mode_never_refuses) {
  auto c = ten_nodes();
  c.in_force.admission.deny_evicting_more_than = 0;
  // The acknowledgement.
  EXPECT_TRUE(decide(update({}, {no_execute("k")}, true), c).response.allowed);
  // A removal.
  c.all_nodes[1].taints = {no_execute("k")};
  EXPECT_TRUE(decide(update({no_execute("k")}, {}), c).response.allowed);
  c.all_nodes[1].taints.clear();
  // The node lifecycle controller's taints, by whoever.
  const auto lifecycle = decide(update({}, {no_execute("node.kubernetes.io/unreachable"),
                                            no_execute("node.kubernetes.io/not-ready")}),
                                c)
                             .response;
  EXPECT_TRUE(lifecycle.allowed);
  EXPECT_THAT(lifecycle.warnings, SizeIs(2));  // but they are previewed
  // The node controller, whatever the taint.
  auto nc = update({}, {no_execute("k")});
  nc.user = std::string(node_controller_user);
  EXPECT_TRUE(decide(nc, c).response.allowed);
  // Anyone else is refused.
  EXPECT_FALSE(decide(update({}, {no_execute("k")}), c).response.allowed);
}

TEST(admission_webhook, serve_answers_400_to_garbage) {
  const auto c = ten_nodes();
  const auto bad = serve("{\"not\":", c);
  EXPECT_EQ(bad.status, 400U);
  EXPECT_EQ(bad.content_type, "text/plain; charset=utf-8");
  EXPECT_THAT(bad.body, StartsWith("AdmissionReview: not JSON"));
  EXPECT_EQ(bad.body.find('\n'), bad.body.size() - 1);
}

TEST(admission_webhook, serve_answers_in_the_version_asked) {
  const auto c = ten_nodes();
  const std::string body =
      R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u-9","kind":{"group":"","version":"v1","kind":"Node"},"operation":"UPDATE",)"
      R"("object":{"metadata":{"name":"n1"},"spec":{"taints":[{"key":"k","effect":"NoExecute"}]}},)"
      R"("oldObject":{"metadata":{"name":"n1"},"spec":{}}}})";
  const auto ok = serve(body, c);
  ASSERT_EQ(ok.status, 200U) << ok.body;
  const auto j = nlohmann::json::parse(ok.body);
  EXPECT_EQ(j["apiVersion"], "admission.k8s.io/v1beta1");
  EXPECT_EQ(j["response"]["uid"], "u-9");
  EXPECT_EQ(j["response"]["allowed"], true);
  ASSERT_EQ(j["response"]["warnings"].size(), 1U);
  EXPECT_THAT(j["response"]["warnings"][0].get<std::string>(),
              StartsWith("tainting n1 with k:NoExecute evicts 2 pods now"));
}

}  // namespace
}  // namespace tec::admission

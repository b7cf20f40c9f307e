// preview(): what a NoExecute taint not on yet would do, computed by the decision code, and the
// one-line summary the webhook and the plugin print.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tec/controller/preview.hpp"

namespace tec::controller {
namespace {

taint no_execute(std::string key, std::string value = "") {
  taint t;
  t.key = std::move(key);
  t.value = std::move(value);
  t.effect = taint_effect::no_execute;
  return t;
}

toleration tolerate(std::string key, std::optional<std::int64_t> seconds) {
  toleration t;
  t.key = std::move(key);
  t.op = toleration_operator::exists;
  t.effect = taint_effect::no_execute;
  t.seconds = seconds;
  return t;
}

pod_view pod(std::string ns, std::string name, std::string node,
             std::vector<toleration> tolerations = {}) {
  pod_view p;
  p.namespace_ = std::move(ns);
  p.name = std::move(name);
  p.node_name = std::move(node);
  p.tolerations = std::move(tolerations);
  return p;
}

node_view node(std::string name, std::vector<taint> taints = {}) {
  return node_view{std::move(name), std::move(taints), std::nullopt};
}

// One node, a pod of each outcome.
preview_input mixed() {
  preview_input in;
  in.added = no_execute("dedicated", "x");
  in.targets = {node("node-7")};
  in.all_nodes = {node("node-7"), node("node-8")};
  in.pods = {pod("a", "plain", "node-7"), pod("b", "waits", "node-7", {tolerate("dedicated", 300)}),
             pod("c", "stays", "node-7", {tolerate("dedicated", std::nullopt)}),
             pod("d", "zero", "node-7", {tolerate("dedicated", 0)}),
             pod("a", "elsewhere", "node-8")};
  return in;
}

TEST(preview, each_pod_gets_the_controllers_decision_and_why) {
  const preview_result r = preview(mixed());
  ASSERT_EQ(r.pods.size(), 4U);  // the pod on node-8 is not on a target
  EXPECT_EQ(r.pods[0].what, pod_preview::outcome::now);
  EXPECT_EQ(r.pods[0].why, "no toleration for dedicated=x:NoExecute");
  EXPECT_FALSE(r.pods[0].used.has_value());
  EXPECT_EQ(r.pods[1].what, pod_preview::outcome::after);
  EXPECT_EQ(r.pods[1].seconds, 300);
  EXPECT_EQ(r.pods[1].why, "tolerates dedicated=x:NoExecute for 300s");
  ASSERT_TRUE(r.pods[1].used.has_value());
  EXPECT_EQ(r.pods[1].used->seconds, 300);
  EXPECT_EQ(r.pods[2].what, pod_preview::outcome::never);
  EXPECT_EQ(r.pods[2].why, "tolerates dedicated=x:NoExecute forever");
  EXPECT_EQ(r.pods[3].what, pod_preview::outcome::now);
  EXPECT_EQ(r.pods[3].why, "tolerates dedicated=x:NoExecute for 0s");
  EXPECT_EQ(r.evicted_now, 2U);
  EXPECT_EQ(r.namespaces_now, 2U);
  EXPECT_EQ(r.evicted_later, 1U);
  EXPECT_EQ(r.latest_seconds, 300);
  EXPECT_EQ(r.never, 1U);
  EXPECT_EQ(r.skipped, 0U);
  EXPECT_TRUE(r.already_tainted.empty());
  EXPECT_EQ(summary(r),
            "tainting node-7 with dedicated=x:NoExecute evicts 2 pods now (2 namespaces), 1 more "
            "within 300s; 1 tolerates it forever; 50% of nodes would carry NoExecute taints");
}

TEST(preview, the_shortest_time_over_the_nodes_taints_wins_and_names_its_taint) {
  preview_input in;
  in.added = no_execute("dedicated");
  in.targets = {node("n", {no_execute("node.kubernetes.io/unreachable")})};
  in.all_nodes = in.targets;
  in.pods = {pod("a", "p", "n",
                 {tolerate("node.kubernetes.io/unreachable", 300), tolerate("dedicated", 60)})};
  const preview_result r = preview(in);
  ASSERT_EQ(r.pods.size(), 1U);
  EXPECT_EQ(r.pods[0].seconds, 60);
  ASSERT_TRUE(r.pods[0].by_taint.has_value());
  EXPECT_EQ(r.pods[0].by_taint->key, "dedicated");
  EXPECT_EQ(r.already_tainted, std::vector<std::string>{"n"});
}

TEST(preview, the_added_taint_replaces_one_of_the_same_key_and_effect) {
  const std::vector<taint> t =
      with_taint({no_execute("k", "old"), no_execute("other")}, no_execute("k", "new"));
  ASSERT_EQ(t.size(), 2U);
  EXPECT_EQ(t[0].value, "new");
  EXPECT_EQ(t[1].key, "other");
  taint schedule = no_execute("k");
  schedule.effect = taint_effect::no_schedule;
  EXPECT_EQ(with_taint({schedule}, no_execute("k")).size(), 2U);
}

TEST(preview, scoping_rules_and_opt_outs_leave_pods_alone_and_say_which) {
  preview_input in = mixed();
  in.policy.exclude.namespaces = {"b"};
  in.opted_out_namespaces = {"c"};
  in.pods[0].opted_out = true;
  const preview_result r = preview(in);
  EXPECT_EQ(r.pods[0].skip, skip_reason::annotation);
  EXPECT_EQ(r.pods[0].why, "excluded: the pod has taint-eviction-controller/exclude: \"true\"");
  EXPECT_EQ(r.pods[1].skip, skip_reason::namespace_);
  EXPECT_EQ(r.pods[1].why, "excluded: policy exclude.namespaces lists b");
  EXPECT_EQ(r.pods[2].skip, skip_reason::namespace_annotation);
  EXPECT_EQ(r.skipped, 3U);
  EXPECT_EQ(r.evicted_now, 1U);  // d/zero
}

TEST(preview, taint_rules_ignore_or_change_the_time_and_are_named) {
  preview_input in = mixed();
  taint_rule floor;
  floor.key = "dedicated";
  floor.min_toleration_seconds = 60;
  in.policy.taints = {floor};
  preview_result r = preview(in);
  EXPECT_EQ(r.pods[0].what, pod_preview::outcome::after);
  EXPECT_EQ(r.pods[0].seconds, 60);
  EXPECT_EQ(r.pods[0].rule, "dedicated");
  EXPECT_EQ(r.pods[0].why,
            "no toleration for dedicated=x:NoExecute, taint rule dedicated makes it 60s");
  EXPECT_EQ(r.pods[1].why, "tolerates dedicated=x:NoExecute for 300s");  // over the floor
  EXPECT_EQ(r.pods[3].why,
            "tolerates dedicated=x:NoExecute for 0s, taint rule dedicated makes it 60s");

  taint_rule ignore;
  ignore.key = "ded";
  ignore.prefix = true;
  ignore.action = taint_action::ignore;
  in.policy.taints = {ignore};
  r = preview(in);
  EXPECT_EQ(r.pods[0].skip, skip_reason::taint_ignored);
  EXPECT_EQ(r.evicted_now + r.evicted_later, 0U);
}

TEST(preview, terminating_pods_are_left_out) {
  preview_input in = mixed();
  in.pods[0].terminating = true;
  EXPECT_EQ(preview(in).pods.size(), 3U);
}

TEST(preview, the_storm_breaker_share_counts_its_keys_and_says_whether_it_opens) {
  preview_input in;
  in.added = no_execute("dedicated");
  in.targets = {node("n1"), node("n2")};
  in.all_nodes = {node("n1"), node("n2"), node("n3", {no_execute("other")}), node("n4")};
  in.policy.storm_breaker.max_tainted_nodes_percent = 50;
  preview_result r = preview(in);
  EXPECT_EQ(r.storm.nodes, 4U);
  EXPECT_EQ(r.storm.tainted_now, 1U);
  EXPECT_EQ(r.storm.tainted_after, 3U);
  EXPECT_FALSE(r.storm.breaker_open_now);
  EXPECT_TRUE(r.storm.breaker_opens);
  EXPECT_EQ(summary(r),
            "tainting n1, n2 with dedicated:NoExecute evicts 0 pods now; 75% of nodes would carry "
            "NoExecute taints: the storm breaker opens at 50%");

  in.policy.storm_breaker.taint_keys = {"other"};  // the added taint does not count
  r = preview(in);
  EXPECT_EQ(r.storm.tainted_after, 1U);
  EXPECT_FALSE(r.storm.breaker_opens);

  in.policy.storm_breaker.taint_keys = {};
  in.policy.storm_breaker.min_tainted_nodes = 4;  // 3 tainted: not enough
  EXPECT_FALSE(preview(in).storm.breaker_opens);
}

TEST(preview, the_rate_limit_gives_how_long_the_immediate_evictions_take) {
  preview_input in;
  in.added = no_execute("k");
  in.targets = {node("n")};
  in.all_nodes = in.targets;
  for (int i = 0; i < 25; ++i) {
    in.pods.push_back(pod("ns", "p" + std::to_string(i), "n"));
  }
  in.policy.rate_limit.evictions_per_second = 5;  // burst: 5
  const preview_result r = preview(in);
  EXPECT_DOUBLE_EQ(r.storm.immediate_seconds, 4.0);
  EXPECT_EQ(summary(r),
            "tainting n with k:NoExecute evicts 25 pods now (1 namespace); 100% of nodes would "
            "carry NoExecute taints; at 5/s the immediate evictions take 4s");
  in.pods.resize(3);
  EXPECT_TRUE(
      summary(preview(in)).ends_with("; the rate limit's burst lets them all start at once"));
}

TEST(preview, many_targets_are_counted_not_listed) {
  preview_input in;
  in.added = no_execute("k");
  for (int i = 0; i < 5; ++i) {
    in.targets.push_back(node("n" + std::to_string(i)));
  }
  in.all_nodes = in.targets;
  EXPECT_TRUE(summary(preview(in)).starts_with("tainting 5 nodes with k:NoExecute"));
}

// 2023-11-14T22:13:20Z.
constexpr std::int64_t hold_now = 1'700'000'000;

TEST(preview, a_hold_in_force_moves_an_eviction_to_its_end) {
  preview_input in = mixed();
  in.now_unix = hold_now;
  in.targets[0].hold = parse_hold("2023-11-14T22:23:20Z");  // 600 s from now
  in.pods[3].hold = parse_hold("2023-11-14T22:33:20Z");     // "zero", 1200 s from now
  const preview_result r = preview(in);
  ASSERT_EQ(r.pods.size(), 4U);
  // plain: now -> at the node's hold end.
  EXPECT_EQ(r.pods[0].what, pod_preview::outcome::after);
  EXPECT_EQ(r.pods[0].seconds, 600);
  EXPECT_EQ(r.pods[0].held_until_unix, hold_now + 600);
  EXPECT_EQ(r.pods[0].why,
            "no toleration for dedicated=x:NoExecute; hold until 2023-11-14T22:23:20Z (node "
            "node-7)");
  // waits: 300 s -> 600 s.
  EXPECT_EQ(r.pods[1].seconds, 600);
  // stays: never stays never.
  EXPECT_EQ(r.pods[2].what, pod_preview::outcome::never);
  EXPECT_FALSE(r.pods[2].held_until_unix.has_value());
  // zero: the pod's own hold is the later.
  EXPECT_EQ(r.pods[3].seconds, 1200);
  EXPECT_NE(r.pods[3].why.find("hold until 2023-11-14T22:33:20Z (the pod)"), std::string::npos)
      << r.pods[3].why;
  EXPECT_EQ(r.evicted_now, 0U);
  EXPECT_EQ(r.evicted_later, 3U);
  EXPECT_EQ(r.latest_seconds, 1200);
  EXPECT_NE(summary(r).find("evicts 0 pods now, 3 more within 1200s; 1 tolerates it forever; 3 "
                            "held by hold-until;"),
            std::string::npos)
      << summary(r);
}

TEST(preview, the_settling_time_holds_what_the_new_taint_causes_sooner) {
  preview_input in = mixed();
  in.policy.storm_breaker.max_tainted_nodes_percent = 50;
  in.policy.storm_breaker.settle_seconds = 10;
  in.policy.rate_limit.evictions_per_second = 1;
  in.policy.rate_limit.burst = 1;
  preview_result r = preview(in);
  ASSERT_EQ(r.pods.size(), 4U);
  // plain and zero (now) wait for the settling time; waits (300 s) is later anyway; stays never.
  EXPECT_EQ(r.pods[0].what, pod_preview::outcome::after);
  EXPECT_EQ(r.pods[0].seconds, 10);
  EXPECT_TRUE(r.pods[0].settling);
  EXPECT_EQ(r.pods[0].why,
            "no toleration for dedicated=x:NoExecute; settling: waits until its taints are 10s old "
            "(stormBreaker.settleSeconds)");
  EXPECT_EQ(r.pods[1].seconds, 300);
  EXPECT_FALSE(r.pods[1].settling);
  EXPECT_EQ(r.pods[2].what, pod_preview::outcome::never);
  EXPECT_EQ(r.pods[3].seconds, 10);
  EXPECT_EQ(r.evicted_now, 0U);
  EXPECT_EQ(r.storm.settling, 2U);
  EXPECT_EQ(r.storm.settle_seconds, 10);
  EXPECT_DOUBLE_EQ(r.storm.immediate_seconds, 1.0) << "the two settling go together: 1 over burst";
  EXPECT_NE(summary(r).find("evicts 0 pods now, 3 more within 300s; 1 tolerates it forever; 2 "
                            "wait 10s for the storm breaker's settling time;"),
            std::string::npos)
      << summary(r);

  // A taint the breaker does not count (taintKeys), or a breaker that is off: no settling.
  in.policy.storm_breaker.taint_keys = {"node.kubernetes.io/unreachable"};
  EXPECT_EQ(preview(in).pods[0].what, pod_preview::outcome::now);
  in.policy.storm_breaker.taint_keys.clear();
  in.policy.storm_breaker.max_tainted_nodes_percent = 0;
  EXPECT_EQ(preview(in).pods[0].what, pod_preview::outcome::now);
  EXPECT_EQ(preview(in).storm.settle_seconds, 0);

  // The node's older taint causes plain's eviction too, but the new one is among the causes:
  // it still waits. A pod that tolerates the new taint forever is evicted by the old one alone,
  // which is taken as settled.
  in.policy.storm_breaker.max_tainted_nodes_percent = 50;
  in.targets[0].taints = {no_execute("old")};
  r = preview(in);
  EXPECT_TRUE(r.pods[0].settling);
  EXPECT_EQ(r.pods[2].what, pod_preview::outcome::now) << "stays: evicted by old, settled";
  EXPECT_FALSE(r.pods[2].settling);

  // An older taint with a timeAdded 4 s ago settles in 6 s: stays waits that long; the others
  // wait for the new taint's 10 s. Without now_unix its age is unknown: settled.
  in.targets[0].taints[0].time_added_unix = hold_now - 4;
  in.now_unix = hold_now;
  r = preview(in);
  EXPECT_EQ(r.pods[2].what, pod_preview::outcome::after);
  EXPECT_EQ(r.pods[2].seconds, 6);
  EXPECT_TRUE(r.pods[2].settling);
  EXPECT_EQ(r.pods[0].seconds, 10);
  in.now_unix.reset();
  EXPECT_EQ(preview(in).pods[2].what, pod_preview::outcome::now);
}

TEST(preview, a_hold_is_cut_at_max_hold_and_ignored_when_past_malformed_or_unasked) {
  preview_input in = mixed();
  in.policy.max_hold = std::chrono::minutes(5);
  in.targets[0].hold = parse_hold("2023-11-14T23:13:20Z");  // an hour from now
  EXPECT_EQ(preview(in).pods[0].what, pod_preview::outcome::now) << "no now_unix: not looked at";
  in.now_unix = hold_now;
  preview_result r = preview(in);
  EXPECT_EQ(r.pods[0].seconds, 300);
  EXPECT_EQ(r.pods[0].held_until_unix, hold_now + 300);
  EXPECT_NE(r.pods[0].why.find(", cut at maxHold 5m0s)"), std::string::npos) << r.pods[0].why;
  EXPECT_EQ(r.pods[1].seconds, 600) << "300 s of its own + maxHold";
  in.targets[0].hold = parse_hold("2023-11-14T22:13:19Z");  // past
  r = preview(in);
  EXPECT_EQ(r.pods[0].what, pod_preview::outcome::now);
  EXPECT_EQ(r.pods[1].seconds, 300);
  in.targets[0].hold = parse_hold("tomorrow");
  EXPECT_EQ(preview(in).pods[0].what, pod_preview::outcome::now);
  in.targets[0].hold = parse_hold("2023-11-14T22:16:20Z");  // 180 s: before "waits"'s 300 s
  r = preview(in);
  EXPECT_EQ(r.pods[0].seconds, 180);
  EXPECT_EQ(r.pods[1].seconds, 300);
  EXPECT_FALSE(r.pods[1].held_until_unix.has_value());
}

TEST(decide_pod, a_node_without_no_execute_taints_evicts_nothing) {
  taint soft = no_execute("k");
  soft.effect = taint_effect::no_schedule;
  const pod_preview p = decide_pod(pod("a", "p", "n"), {soft}, {}, false);
  EXPECT_EQ(p.what, pod_preview::outcome::never);
  EXPECT_EQ(p.why, "the node has no NoExecute taints");
}

TEST(decide_pod, matches_the_node_taints_as_the_controller_does) {
  const pod_preview p = decide_pod(pod("a", "p", "n", {tolerate("k", 30)}),
                                   {no_execute("k"), no_execute("j")}, {}, false);
  EXPECT_EQ(p.what, pod_preview::outcome::now);
  EXPECT_EQ(p.why, "no toleration for j:NoExecute");
}

}  // namespace
}  // namespace tec::controller

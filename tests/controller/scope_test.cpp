// Scoping (the policy's exclude and taints rules, the opt-out annotation): which pods on a
// tainted node are left alone, per-taint floors and caps on tolerationSeconds, and what a
// policy reload or an annotation does to evictions already scheduled.

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "controller/support/harness.hpp"
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
using testing::manual_options;
using testing::with_policy;

taint keyed(std::string key) {
  taint t;
  t.key = std::move(key);
  t.effect = taint_effect::no_execute;
  return t;
}

toleration tolerate(std::string key, std::int64_t seconds) {
  toleration t;
  t.key = std::move(key);
  t.op = toleration_operator::exists;
  t.effect = taint_effect::no_execute;
  if (seconds >= 0) {
    t.seconds = seconds;
  }
  return t;
}

taint_rule rule(std::string key, taint_action action, std::int64_t min = 0, std::int64_t max = 0) {
  taint_rule r;
  r.prefix = !key.empty() && key.back() == '*';
  if (r.prefix) {
    key.pop_back();
  }
  r.key = std::move(key);
  r.action = action;
  r.min_toleration_seconds = min;
  r.max_toleration_seconds = max;
  return r;
}

std::uint64_t skips(const controller& c, skip_reason r) {
  return counted(c, "pods_skipped_total", to_string(r));
}

// --- the rules alone ---

TEST(RuledDecide, WithoutRulesItIsDecide) {
  const std::vector<taint> taints{make_taint(1)};
  const std::vector<toleration> tols{make_toleration(1, 30)};
  const auto rd = decide(taints, tols, std::span<const taint_rule>());
  EXPECT_EQ(rd.decision.time, toleration_time::after_seconds(30));
  EXPECT_FALSE(rd.all_ignored);
  EXPECT_EQ(rd.overridden, nullptr);
}

TEST(RuledDecide, IgnoredTaintsAreLeftOut) {
  const std::vector<taint> taints{keyed("vendor.example.com/maintenance"), keyed("k2")};
  const std::vector<toleration> tols{tolerate("k2", 60)};
  const std::vector<taint_rule> rules{rule("vendor.example.com/*", taint_action::ignore)};
  auto rd = decide(taints, tols, rules);
  EXPECT_FALSE(rd.decision.untolerated);  // the untolerated vendor taint does not count
  EXPECT_EQ(rd.decision.time, toleration_time::after_seconds(60));
  EXPECT_FALSE(rd.all_ignored);

  const std::vector<taint> only_vendor{keyed("vendor.example.com/maintenance")};
  rd = decide(only_vendor, tols, rules);
  EXPECT_TRUE(rd.all_ignored);
  EXPECT_TRUE(rd.decision.time.is_forever());
}

TEST(RuledDecide, FloorRaisesShortAndMissingTolerations) {
  const std::vector<taint> taints{keyed("node.kubernetes.io/unreachable")};
  const std::vector<taint_rule> rules{
      rule("node.kubernetes.io/unreachable", taint_action::evict, 120, 900)};
  // 30 s -> 120 s.
  std::vector<toleration> tols{tolerate("node.kubernetes.io/unreachable", 30)};
  auto rd = decide(taints, tols, rules);
  EXPECT_EQ(rd.decision.time, toleration_time::after_seconds(120));
  ASSERT_NE(rd.overridden, nullptr);
  EXPECT_EQ(rd.overridden->key, "node.kubernetes.io/unreachable");
  EXPECT_EQ(rd.rule, &rules[0]);
  // 0 s (evict now) -> 120 s.
  tols = {tolerate("node.kubernetes.io/unreachable", 0)};
  EXPECT_EQ(decide(taints, tols, rules).decision.time, toleration_time::after_seconds(120));
  // Not tolerated -> 120 s, not "evict now".
  rd = decide(taints, std::vector<toleration>{}, rules);
  EXPECT_FALSE(rd.decision.untolerated);
  EXPECT_EQ(rd.decision.time, toleration_time::after_seconds(120));
  // Within the bounds: untouched, and no override reported.
  tols = {tolerate("node.kubernetes.io/unreachable", 300)};
  rd = decide(taints, tols, rules);
  EXPECT_EQ(rd.decision.time, toleration_time::after_seconds(300));
  EXPECT_EQ(rd.overridden, nullptr);
}

TEST(RuledDecide, CapLowersFiniteTolerationsOnly) {
  const std::vector<taint> taints{keyed("node.kubernetes.io/unreachable")};
  const std::vector<taint_rule> rules{rule("node.kubernetes.io/*", taint_action::evict, 0, 900)};
  std::vector<toleration> tols{tolerate("node.kubernetes.io/unreachable", 3600)};
  EXPECT_EQ(decide(taints, tols, rules).decision.time, toleration_time::after_seconds(900));
  tols = {tolerate("node.kubernetes.io/unreachable", -1)};  // forever: not capped
  const auto rd = decide(taints, tols, rules);
  EXPECT_TRUE(rd.decision.time.is_forever());
  EXPECT_EQ(rd.overridden, nullptr);
}

TEST(RuledDecide, FirstMatchingRuleWinsAndUnmatchedTaintsAreUpstreams) {
  const std::vector<taint_rule> rules{rule("example.com/a", taint_action::evict, 0, 10),
                                      rule("example.com/*", taint_action::ignore)};
  const std::vector<taint> taints{keyed("example.com/a"), keyed("example.com/b")};
  const std::vector<toleration> tols{tolerate("example.com/a", 100)};
  auto rd = decide(taints, tols, rules);  // b ignored, a capped to 10
  EXPECT_EQ(rd.decision.time, toleration_time::after_seconds(10));
  const std::vector<taint> other{keyed("other")};  // no rule: untolerated as upstream
  rd = decide(other, tols, rules);
  EXPECT_TRUE(rd.decision.untolerated);
}

TEST(RuledDecide, AStarAloneMatchesEveryKey) {
  const std::vector<taint_rule> rules{rule("*", taint_action::evict, 0, 60)};
  const std::vector<taint> taints{keyed("a"), keyed("b/c")};
  const std::vector<toleration> tols{tolerate("a", 600), tolerate("b/c", 120)};
  EXPECT_EQ(decide(taints, tols, rules).decision.time, toleration_time::after_seconds(60));
}

TEST(Selector, MatchLabelsAndExpressions) {
  const std::string labels = "app=web\ntier=frontend\nprotected=";
  EXPECT_EQ(label_value(labels, "tier"), "frontend");
  EXPECT_EQ(label_value(labels, "protected"), "");
  EXPECT_FALSE(label_value(labels, "tie").has_value());
  EXPECT_FALSE(label_value("", "app").has_value());

  label_selector s;
  EXPECT_FALSE(selects(s, labels)) << "an empty selector selects nothing";
  s.match_labels = {{"app", "web"}};
  EXPECT_TRUE(selects(s, labels));
  s.match_labels = {{"app", "db"}};
  EXPECT_FALSE(selects(s, labels));
  s.match_labels = {{"app", "web"}};
  using op = label_requirement::op;
  s.match_expressions = {{"tier", op::in, {"backend", "frontend"}}};
  EXPECT_TRUE(selects(s, labels));
  s.match_expressions = {{"tier", op::not_in, {"frontend"}}};
  EXPECT_FALSE(selects(s, labels));
  s.match_expressions = {{"missing", op::not_in, {"x"}}};
  EXPECT_TRUE(selects(s, labels)) << "NotIn holds for an absent label";
  s.match_expressions = {{"protected", op::exists, {}}};
  EXPECT_TRUE(selects(s, labels));
  s.match_expressions = {{"protected", op::does_not_exist, {}}};
  EXPECT_FALSE(selects(s, labels));
  s.match_expressions = {{"missing", op::in, {"x"}}};
  EXPECT_FALSE(selects(s, labels));
}

// --- the controller ---

TEST(Scope, NoPolicyEvictsAsUpstreamEvenDaemonSetMirrorAndTerminalPods) {
  harness h;
  pod_view ds = make_pod("ds", "n1");
  ds.owner_kind = "DaemonSet";
  pod_view mirror = make_pod("mirror", "n1");
  mirror.mirror = true;
  pod_view done = make_pod("done", "n1");
  done.phase = pod_phase::succeeded;
  h.add_pod(ds);
  h.add_pod(mirror);
  h.add_pod(done);
  h.add_node(make_node("n1", {make_taint(1)}));
  EXPECT_TRUE(h.evicted("ds"));
  EXPECT_TRUE(h.evicted("mirror"));
  EXPECT_TRUE(h.evicted("done"));
}

TEST(Scope, ExcludedPodsAreLeftAloneAndCountedByReason) {
  eviction_policy p;
  p.exclude.namespaces = {"kube-system"};
  p.exclude.mirror_pods = true;
  p.exclude.terminal_pods = true;
  p.exclude.daemon_set_pods = true;
  p.exclude.pod_selector.match_labels = {{"protected", "true"}};
  harness h(with_policy(p));
  pod_view sys = make_pod("sys", "n1");
  sys.namespace_ = "kube-system";
  pod_view ds = make_pod("ds", "n1");
  ds.owner_kind = "DaemonSet";
  pod_view rs = make_pod("rs", "n1");
  rs.owner_kind = "ReplicaSet";
  pod_view mirror = make_pod("mirror", "n1");
  mirror.mirror = true;
  pod_view failed = make_pod("failed", "n1");
  failed.phase = pod_phase::failed;
  pod_view running = make_pod("running", "n1");
  running.phase = pod_phase::running;
  pod_view labelled = make_pod("labelled", "n1");
  labelled.labels = "app=x\nprotected=true";
  pod_view annotated = make_pod("annotated", "n1");
  annotated.opted_out = true;
  for (const auto* pod : {&sys, &ds, &rs, &mirror, &failed, &running, &labelled, &annotated}) {
    h.add_pod(*pod);
  }
  h.add_node(make_node("n1", {make_taint(1)}));
  EXPECT_TRUE(h.evicted("rs"));
  EXPECT_TRUE(h.evicted("running"));
  for (const char* name : {"sys", "ds", "mirror", "failed", "labelled", "annotated"}) {
    EXPECT_FALSE(h.evicted(name)) << name;
  }
  h.advance(1h);
  EXPECT_FALSE(h.evicted("labelled"));
  for (const auto r : {skip_reason::namespace_, skip_reason::daemon_set, skip_reason::mirror,
                       skip_reason::terminal, skip_reason::pod_selector, skip_reason::annotation}) {
    EXPECT_EQ(skips(h.ctl, r), 1U) << to_string(r);
  }
  EXPECT_EQ(skips(h.ctl, skip_reason::namespace_annotation), 0U);
}

TEST(Scope, TheAnnotationWorksWithoutAPolicyAndCancelsAPendingEviction) {
  harness h;
  pod_view pod = make_pod("p", "n1", {make_toleration(1, 60)});
  h.add_pod(pod);
  h.add_node(make_node("n1", {make_taint(1)}));
  ASSERT_TRUE(h.scheduled("p"));
  pod.opted_out = true;  // kubectl annotate pod p taint-eviction-controller/exclude=true
  h.update_pod(pod);
  EXPECT_FALSE(h.scheduled("p"));
  EXPECT_EQ(h.sink.events_of("p", event_kind::cancelling_deletion), 1U);
  h.advance(2min);
  EXPECT_FALSE(h.evicted("p"));
  pod.opted_out = false;  // the annotation removed: counted from now, as a new toleration
  h.update_pod(pod);
  ASSERT_TRUE(h.scheduled("p"));
  h.advance(59s);
  EXPECT_FALSE(h.evicted("p"));
  h.advance(2s);
  EXPECT_TRUE(h.evicted("p"));
}

TEST(Scope, ANamespaceOptOutAndRedecideAll) {
  std::set<std::string> opted;
  controller_options o = manual_options();
  o.namespace_opted_out = [&opted](std::string_view ns) { return opted.contains(std::string(ns)); };
  harness h(std::move(o));
  pod_view a = make_pod("a", "n1", {make_toleration(1, 60)});
  a.namespace_ = "team-a";
  pod_view b = make_pod("b", "n1", {make_toleration(1, 60)});
  h.add_pod(a);
  h.add_pod(b);
  h.add_node(make_node("n1", {make_taint(1)}));
  ASSERT_TRUE(h.scheduled("a", "team-a"));
  opted.insert("team-a");  // the namespace informer saw the annotation
  h.ctl.redecide_all();
  h.settle();
  EXPECT_FALSE(h.scheduled("a", "team-a"));
  EXPECT_TRUE(h.scheduled("b"));
  EXPECT_EQ(skips(h.ctl, skip_reason::namespace_annotation), 1U);
  h.advance(61s);
  EXPECT_FALSE(h.evicted("a"));
  EXPECT_TRUE(h.evicted("b"));
  opted.clear();
  h.ctl.redecide_all();
  h.settle();
  EXPECT_TRUE(h.scheduled("a", "team-a"));
}

TEST(Scope, IgnoredTaintsEvictNothing) {
  eviction_policy p;
  p.taints = {rule("vendor.example.com/*", taint_action::ignore)};
  harness h(with_policy(p));
  h.add_pod(make_pod("p", "n1"));
  h.add_node(make_node("n1", {keyed("vendor.example.com/drain")}));
  h.advance(1h);
  EXPECT_FALSE(h.evicted("p"));
  EXPECT_EQ(skips(h.ctl, skip_reason::taint_ignored), 1U);
  // A taint without a rule on the same node still evicts.
  h.update_node(make_node("n1", {keyed("vendor.example.com/drain"), make_taint(1)}));
  EXPECT_TRUE(h.evicted("p"));
}

TEST(Scope, FloorAndCapSetTheFireTimeAndAreCounted) {
  eviction_policy p;
  p.taints = {rule("node.kubernetes.io/unreachable", taint_action::evict, 120, 900)};
  harness h(with_policy(p));
  h.add_pod(make_pod("short", "n1", {tolerate("node.kubernetes.io/unreachable", 30)}));
  h.add_pod(make_pod("long", "n1", {tolerate("node.kubernetes.io/unreachable", 3600)}));
  h.add_pod(make_pod("none", "n1"));
  h.add_pod(make_pod("mid", "n1", {tolerate("node.kubernetes.io/unreachable", 300)}));
  h.add_node(make_node("n1", {keyed("node.kubernetes.io/unreachable")}));
  EXPECT_FALSE(h.evicted("none")) << "the floor applies to a pod without a toleration";
  h.advance(119s);
  EXPECT_FALSE(h.evicted("short"));
  EXPECT_FALSE(h.evicted("none"));
  h.advance(2s);
  EXPECT_TRUE(h.evicted("short"));
  EXPECT_TRUE(h.evicted("none"));
  h.advance(300s - 121s + 1s);
  EXPECT_TRUE(h.evicted("mid"));
  EXPECT_FALSE(h.evicted("long"));
  h.advance(900s - 301s + 1s);
  EXPECT_TRUE(h.evicted("long"));
  EXPECT_EQ(counted(h.ctl, "toleration_overrides_total"), 3U);  // short, none, long; not mid
}

TEST(Scope, AReloadThatExcludesCancelsAndOneThatCapsKeepsScheduledTimes) {
  harness h;
  pod_view web = make_pod("web", "n1", {make_toleration(1, 600)});
  web.labels = "app=web";
  h.add_pod(web);
  h.add_pod(make_pod("db", "n1", {make_toleration(1, 600)}));
  h.add_node(make_node("n1", {make_taint(1)}));
  ASSERT_TRUE(h.scheduled("web"));
  ASSERT_TRUE(h.scheduled("db"));
  eviction_policy p;
  p.exclude.pod_selector.match_labels = {{"app", "web"}};
  p.taints = {rule("testTaint1", taint_action::evict, 0, 60)};
  h.ctl.set_policy(p);
  h.settle();
  EXPECT_FALSE(h.scheduled("web"));
  EXPECT_EQ(h.sink.events_of("web", event_kind::cancelling_deletion), 1U);
  // db's eviction keeps its time (upstream keeps a scheduled eviction's time).
  h.advance(61s);
  EXPECT_FALSE(h.evicted("db"));
  h.advance(600s);
  EXPECT_TRUE(h.evicted("db"));
  EXPECT_FALSE(h.evicted("web"));
}

TEST(Scope, ALabelChangeIsSeenOnlyWhenScoped) {
  eviction_policy p;
  p.exclude.pod_selector.match_labels = {{"protected", "true"}};
  harness h(with_policy(p));
  pod_view pod = make_pod("p", "n1", {make_toleration(1, 60)});
  h.add_pod(pod);
  h.add_node(make_node("n1", {make_taint(1)}));
  ASSERT_TRUE(h.scheduled("p"));
  pod.labels = "protected=true";
  h.update_pod(pod);
  EXPECT_FALSE(h.scheduled("p"));
}

TEST(Scope, TheReplayCountsFromTheTaintTimeWithTheRules) {
  eviction_policy p;
  p.taints = {rule("testTaint1", taint_action::evict, 0, 100)};
  controller_options o = with_policy(p);
  const auto start = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  const auto steady_start = timedqueue::manual_driver::default_start;
  auto clock =
      std::make_shared<test::manual_clock>(steady_start, start + steady_start.time_since_epoch());
  o.clock = clock;
  harness h(std::move(o), clock);
  pod_view pod = make_pod("p", "n1", {make_toleration(1, 3600)});
  h.index.put(pod);
  taint t = make_taint(1);
  const auto now_unix = std::chrono::duration_cast<std::chrono::seconds>(
                            (start + h.drv.now().time_since_epoch()).time_since_epoch())
                            .count();
  t.time_added_unix = now_unix - 70;  // tainted 70 s ago; the cap leaves 30 s
  const node_view n = make_node("n1", {t});
  h.ctl.node_updated(nullptr, &n, update_origin::replay);
  h.settle();
  ASSERT_TRUE(h.scheduled("p"));
  h.advance(29s);
  EXPECT_FALSE(h.evicted("p"));
  h.advance(2s);
  EXPECT_TRUE(h.evicted("p"));
}

}  // namespace
}  // namespace tec::controller

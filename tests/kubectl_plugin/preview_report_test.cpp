#include "tec/kubectl_plugin/preview_report.hpp"

#include <gtest/gtest.h>

#include "tec/base/rfc3339.hpp"

namespace tec::kubectl_plugin {
namespace {

using controller::pod_preview;

pod_preview pod(std::string name, pod_preview::outcome what, std::int64_t seconds,
                std::string why) {
  pod_preview p;
  p.namespace_ = "shop";
  p.name = std::move(name);
  p.node = "node-1";
  p.what = what;
  p.seconds = seconds;
  p.why = std::move(why);
  return p;
}

preview_report sample() {
  preview_report r;
  r.now_unix = *base::parse_rfc3339("2026-11-28T03:07:00Z");
  r.policy = "none (no ConfigMap x/y with policy.yaml): upstream's behaviour";
  r.result.added = controller::taint{"dedicated", "x", controller::taint_effect::no_execute, 0};
  r.result.targets = {"node-1"};
  r.result.pods.push_back(
      pod("plain", pod_preview::outcome::now, 0, "no toleration for dedicated=x:NoExecute"));
  auto later =
      pod("tolerant", pod_preview::outcome::after, 300, "tolerates dedicated=x:NoExecute for 300s");
  controller::toleration t;
  t.key = "dedicated";
  t.value = "x";
  t.effect = controller::taint_effect::no_execute;
  t.seconds = 300;
  later.used = t;
  later.by_taint = r.result.added;
  later.rule = "dedicated";
  r.result.pods.push_back(later);
  auto never = pod("excluded", pod_preview::outcome::never, 0, "excluded: namespace shop");
  never.skip = controller::skip_reason::namespace_;
  r.result.pods.push_back(never);
  r.result.evicted_now = 1;
  r.result.evicted_later = 1;
  r.result.latest_seconds = 300;
  r.result.skipped = 1;
  r.result.storm.nodes = 4;
  r.result.storm.tainted_after = 1;
  return r;
}

std::string table_part(const std::string& out) {
  return out.substr(0, out.find("\n\n") + 1);
}

TEST(outcome_text, now_after_never) {
  const auto r = sample();
  EXPECT_EQ(outcome_text(r.result.pods[0], r.now_unix), "now");
  EXPECT_EQ(outcome_text(r.result.pods[1], r.now_unix), "in 300s (at 03:12:00Z)");
  EXPECT_EQ(outcome_text(r.result.pods[2], r.now_unix), "never");
}

TEST(render_preview, table_golden) {
  const auto out = render_preview(sample(), output_format::table);
  EXPECT_EQ(table_part(out),
            "NAMESPACE   POD        NODE     OUTCOME                  WHY\n"
            "shop        plain      node-1   now                      no toleration for "
            "dedicated=x:NoExecute\n"
            "shop        tolerant   node-1   in 300s (at 03:12:00Z)   tolerates "
            "dedicated=x:NoExecute for 300s\n"
            "shop        excluded   node-1   never                    excluded: namespace shop\n");
  EXPECT_NE(out.find("\nstorm breaker: off (the policy sets no stormBreaker)\n"),
            std::string::npos);
  EXPECT_NE(out.find("\nrate limit: none: 1 immediate eviction starts at once\n"),
            std::string::npos);
  EXPECT_NE(out.find("\npolicy: none (no ConfigMap x/y"), std::string::npos);
}

TEST(render_preview, wide_adds_toleration_and_rule_and_pdbs_go_in_why) {
  auto r = sample();
  r.pdbs.resize(3);
  r.pdbs[0].push_back(pdb_note{"shop/web", 0});
  const auto out = table_part(render_preview(r, output_format::wide));
  EXPECT_NE(out.find("OUTCOME                  WHY"), std::string::npos) << out;
  EXPECT_NE(out.find("TOLERATION                       RULE\n"), std::string::npos) << out;
  EXPECT_NE(out.find("dedicated=x:NoExecute for 300s   dedicated\n"), std::string::npos) << out;
  EXPECT_NE(out.find("no toleration for dedicated=x:NoExecute; PDB shop/web allows 0 now"),
            std::string::npos)
      << out;
}

TEST(render_preview, no_pods) {
  auto r = sample();
  r.result.pods.clear();
  EXPECT_EQ(render_preview(r, output_format::table).rfind("No pods on the target nodes.\n\n", 0),
            0U);
}

TEST(render_preview, json_document) {
  const auto doc = preview_document(sample());
  EXPECT_EQ(doc["taint"], "dedicated=x:NoExecute");
  EXPECT_EQ(doc["pods"][1]["outcome"], "after");
  EXPECT_EQ(doc["pods"][1]["seconds"], 300);
  EXPECT_EQ(doc["pods"][1]["at"], "2026-11-28T03:12:00Z");
  EXPECT_EQ(doc["pods"][1]["toleration"]["tolerationSeconds"], 300);
  EXPECT_EQ(doc["pods"][1]["rule"], "dedicated");
  EXPECT_EQ(doc["pods"][2]["skip"], "namespace");
  EXPECT_TRUE(doc["pods"][0]["seconds"].is_null());
  EXPECT_EQ(doc["storm"]["nodes"], 4);
  const auto yaml = render_preview(sample(), output_format::yaml);
  EXPECT_EQ(yaml.rfind("taint: \"dedicated=x:NoExecute\"\n", 0), 0U) << yaml;
}

TEST(breaker_and_rate_lines, with_a_policy) {
  controller::storm_preview s;
  s.breaker_enabled = true;
  s.nodes = 10;
  s.tainted_now = 4;
  s.tainted_after = 6;
  s.threshold_percent = 50;
  s.breaker_opens = true;
  EXPECT_EQ(breaker_line(s),
            "storm breaker: 4 of 10 nodes carry NoExecute taints it counts now, 6 would (60%); "
            "it opens above 50%: it would open and pause every eviction");
  controller::preview_result r;
  r.evicted_now = 37;
  r.storm.evictions_per_second = 5;
  r.storm.immediate_seconds = 5.4;
  EXPECT_EQ(rate_line(r), "rate limit: 5 evictions/s: 37 immediate evictions take about 6s");
  r.evicted_now = 1;
  r.storm.immediate_seconds = 0;
  EXPECT_EQ(rate_line(r),
            "rate limit: 5 evictions/s: 1 immediate eviction starts at once (within "
            "its burst)");
  // The settling time: those that wait for it go together once it is over.
  s.settle_seconds = 10;
  s.settling = 3;
  EXPECT_EQ(breaker_line(s),
            "storm breaker: 4 of 10 nodes carry NoExecute taints it counts now, 6 would (60%); "
            "it opens above 50%: it would open and pause every eviction; settling time 10s: 3 "
            "evictions wait for it");
  r.evicted_now = 0;
  r.storm.settling = 3;
  EXPECT_EQ(rate_line(r),
            "rate limit: 5 evictions/s: 3 immediate evictions (3 after the settling time) start "
            "at once (within its burst)");
}

}  // namespace
}  // namespace tec::kubectl_plugin

#include "tec/kubectl_plugin/shadow_report.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tec::kubectl_plugin {
namespace {

// The document as docs/operations.md ("Shadow mode") shows it.
const std::string shadow_body = R"json({"windowSeconds": 30,
 "counts": {"agreed": 4, "onlyThem": 1, "onlyUs": 1, "cancelledBoth": 1, "ambiguous": 5,
            "deletedByOthers": 2, "pending": 3},
 "settledEarly": 0,
 "agreedDelaySeconds": {"max": 0.09, "mean": 0.04},
 "disagreements": [
   {"outcome": "only_them", "pod": "shop/web-0", "uid": "u0", "node": "node-2",
    "taints": [],
    "ours": "none",
    "theirs": "deleted at 2026-11-23T09:40:12.345Z (event: Marking for deletion Pod shop/web-0)",
    "at": "2026-11-23T09:40:32.400Z"},
   {"outcome": "only_us", "pod": "batch/job-1", "uid": "u1", "node": "node-3",
    "taints": ["dedicated=gpu:NoExecute"],
    "ours": "would delete at 2026-11-23T09:41:00.000Z", "theirs": "none",
    "at": "2026-11-23T09:41:30.000Z"}],
 "builtinEvictions": [
   {"pod": "shop/web-1", "uid": "u2", "node": "node-2", "taints": ["dedicated=gpu:NoExecute"],
    "deletedAt": "2026-11-23T09:39:00.100Z",
    "evidence": "event: Marking for deletion Pod shop/web-1",
    "oursAt": "2026-11-23T09:39:00.050Z", "verdict": "agreed",
    "reason": "both evicted it within the window", "delaySeconds": 0.05,
    "settledAt": "2026-11-23T09:39:00.100Z", "early": false},
   {"pod": "batch/job-2", "uid": "u3", "node": "node-3", "taints": ["dedicated=gpu:NoExecute"],
    "deletedAt": "2026-11-23T09:40:20.000Z",
    "evidence": "condition: DisruptionTarget DeletionByTaintManager",
    "oursAt": "2026-11-23T09:40:20.090Z", "verdict": "agreed",
    "reason": "both evicted it within the window", "delaySeconds": 0.09,
    "settledAt": "2026-11-23T09:40:20.090Z", "early": false},
   {"pod": "shop/web-0", "uid": "u0", "node": "node-2", "taints": [],
    "deletedAt": "2026-11-23T09:40:12.345Z",
    "evidence": "event: Marking for deletion Pod shop/web-0",
    "oursAt": "never", "verdict": "only_them", "reason": "ours made no decision on it",
    "delaySeconds": 0, "settledAt": "2026-11-23T09:40:42.400Z", "early": false}],
 "builtinEvictionsDropped": 5})json";

TEST(parse_shadow_document, reads_the_document) {
  auto doc = shadow::parse_shadow_document(shadow_body);
  ASSERT_TRUE(doc) << doc.error().message;
  const auto& d = doc.value();
  EXPECT_EQ(d.window_seconds, 30);
  EXPECT_EQ(d.counts.agreed, 4U);
  EXPECT_EQ(d.counts.only_them, 1U);
  EXPECT_EQ(d.counts.only_us, 1U);
  EXPECT_EQ(d.counts.cancelled_both, 1U);
  EXPECT_EQ(d.counts.ambiguous, 5U);
  EXPECT_EQ(d.counts.deleted_by_others, 2U);
  EXPECT_EQ(d.counts.pending, 3U);
  EXPECT_DOUBLE_EQ(d.counts.agreed_delay_max, 0.09);
  ASSERT_EQ(d.disagreements.size(), 2U);
  EXPECT_EQ(d.disagreements[1].namespace_, "batch");
  EXPECT_EQ(d.disagreements[1].name, "job-1");
  EXPECT_EQ(d.disagreements[1].taints, std::vector<std::string>{"dedicated=gpu:NoExecute"});
}

TEST(parse_shadow_document, refuses_other_documents) {
  EXPECT_FALSE(shadow::parse_shadow_document("{}"));
  EXPECT_FALSE(shadow::parse_shadow_document("not json"));
  EXPECT_FALSE(shadow::parse_shadow_document(R"({"evictions": [], "acting": true})"));
  EXPECT_FALSE(shadow::parse_shadow_document(R"({"counts": {}, "disagreements": {}})"));
  // Odd fields are skipped, not fatal.
  auto doc = shadow::parse_shadow_document(
      R"({"counts": {"agreed": "x"}, "disagreements": [1, {"pod": 2}]})");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc.value().counts.agreed, 0U);
  ASSERT_EQ(doc.value().disagreements.size(), 1U);
  EXPECT_EQ(doc.value().disagreements[0].name, "");
}

TEST(render_shadow, a_summary_and_the_disagreements) {
  const auto doc = shadow::parse_shadow_document(shadow_body).value();
  const std::string out = render_shadow(doc, "pod tec/x", "", output_format::table);
  EXPECT_NE(out.find("Shadow mode, pod tec/x (window 30s): agreed 4, only_them 1 (the built-in "
                     "evicted, ours would not), only_us 1 (ours would have evicted, the built-in "
                     "did not), cancelled_both 1, ambiguous 5 (possibly the built-in's, not "
                     "proven), deleted_by_others 2, open 3.\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("0.04s apart on average (at most 0.09s)"), std::string::npos) << out;
  EXPECT_NE(out.find("OUTCOME     NAMESPACE   POD"), std::string::npos) << out;
  EXPECT_NE(out.find("only_them   shop        web-0"), std::string::npos) << out;
  EXPECT_NE(out.find("dedicated=gpu:NoExecute"), std::string::npos) << out;
  const std::string shop = render_shadow(doc, "pod tec/x", "shop", output_format::table);
  EXPECT_NE(shop.find("web-0"), std::string::npos);
  EXPECT_EQ(shop.find("job-1"), std::string::npos) << "another namespace";
  EXPECT_NE(render_shadow(doc, "s", "none-here", output_format::table)
                .find("No disagreement in namespace none-here."),
            std::string::npos);
}

TEST(render_shadow, no_disagreement_says_so) {
  auto doc = shadow::parse_shadow_document(shadow_body).value();
  doc.counts.only_them = 0;
  doc.counts.only_us = 0;
  doc.counts.ambiguous = 0;
  doc.disagreements.clear();
  const std::string out = render_shadow(doc, "s", "", output_format::table);
  EXPECT_NE(out.find("No disagreement: switching over would have changed nothing so far."),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("OUTCOME"), std::string::npos);
}

TEST(parse_shadow_document, reads_the_builtin_evictions) {
  const auto d = shadow::parse_shadow_document(shadow_body).value();
  EXPECT_TRUE(d.history_served);
  EXPECT_EQ(d.counts.builtin_evictions_dropped, 5U);
  ASSERT_EQ(d.builtin_evictions.size(), 3U);
  const auto& e = d.builtin_evictions[0];
  EXPECT_EQ(e.namespace_, "shop");
  EXPECT_EQ(e.name, "web-1");
  EXPECT_EQ(e.verdict, "agreed");
  EXPECT_EQ(e.ours_at, "2026-11-23T09:39:00.050Z");
  EXPECT_DOUBLE_EQ(e.delay_seconds, 0.05);
  // A controller from before the history: the verdict still reads, the history is not served.
  auto old = nlohmann::json::parse(shadow_body);
  old.erase("builtinEvictions");
  old.erase("builtinEvictionsDropped");
  const auto o = shadow::parse_shadow_document(old.dump()).value();
  EXPECT_FALSE(o.history_served);
  EXPECT_TRUE(o.builtin_evictions.empty());
  EXPECT_EQ(o.counts.agreed, 4U);
}

TEST(render_shadow_history, newest_first_agreed_ones_too) {
  const auto doc = shadow::parse_shadow_document(shadow_body).value();
  const std::string out = render_shadow_history(doc, "pod tec/x", "", output_format::table);
  EXPECT_EQ(out.rfind("Shadow mode, pod tec/x (window 30s): 3 evictions by the built-in taint "
                      "manager, newest first; 5 older ones dropped.\n\n",
                      0),
            0U)
      << out;
  const auto header = out.find("DELETED                    NAMESPACE   POD     NODE     TAINT");
  const auto web0 = out.find("2026-11-23T09:40:12.345Z   shop        web-0   node-2   <none>");
  const auto job2 = out.find("2026-11-23T09:40:20.000Z   batch       job-2");
  const auto web1 = out.find("2026-11-23T09:39:00.100Z   shop        web-1");
  ASSERT_NE(header, std::string::npos) << out;
  ASSERT_NE(web0, std::string::npos) << out;
  ASSERT_NE(job2, std::string::npos) << out;
  ASSERT_NE(web1, std::string::npos) << out;
  // Settled web-1, job-2, web-0 (theirs alone waits a window): listed by deletion time.
  EXPECT_LT(header, job2);
  EXPECT_LT(job2, web0) << "newest first";
  EXPECT_LT(web0, web1);
  EXPECT_NE(out.find("never                      only_them   ours made no decision on it\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2026-11-23T09:39:00.050Z   agreed      both evicted it within the window"),
            std::string::npos)
      << out;
  const std::string shop = render_shadow_history(doc, "s", "shop", output_format::table);
  EXPECT_NE(shop.find("3 evictions by the built-in taint manager (2 in namespace shop), "),
            std::string::npos)
      << shop;
  EXPECT_EQ(shop.find("job-2"), std::string::npos) << "another namespace";
  const std::string none = render_shadow_history(doc, "s", "none-here", output_format::table);
  EXPECT_NE(none.find("(0 in namespace none-here), newest first; 5 older ones dropped.\n"),
            std::string::npos)
      << none;
  EXPECT_EQ(none.find("DELETED"), std::string::npos) << none;
}

TEST(render_shadow_history, json_and_yaml) {
  const auto doc = shadow::parse_shadow_document(shadow_body).value();
  const auto j =
      nlohmann::json::parse(render_shadow_history(doc, "pod tec/x", "shop", output_format::json));
  EXPECT_EQ(j["source"], "pod tec/x");
  EXPECT_EQ(j["windowSeconds"], 30);
  EXPECT_EQ(j["builtinEvictionsDropped"], 5);
  ASSERT_EQ(j["builtinEvictions"].size(), 2U);
  EXPECT_EQ(j["builtinEvictions"][0]["pod"], "shop/web-0") << "newest first";
  EXPECT_EQ(j["builtinEvictions"][1]["pod"], "shop/web-1");
  EXPECT_EQ(j["builtinEvictions"][1]["verdict"], "agreed");
  EXPECT_EQ(j["builtinEvictions"][1]["oursAt"], "2026-11-23T09:39:00.050Z");
  EXPECT_EQ(j["builtinEvictions"][1]["evidence"], "event: Marking for deletion Pod shop/web-1");
  const std::string yaml = render_shadow_history(doc, "s", "", output_format::yaml);
  EXPECT_NE(yaml.find("builtinEvictionsDropped: 5"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("verdict: \"only_them\""), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("disagreements"), std::string::npos) << yaml;
}

TEST(render_shadow, json_keeps_the_fields) {
  const auto doc = shadow::parse_shadow_document(shadow_body).value();
  const auto j =
      nlohmann::json::parse(render_shadow(doc, "pod tec/x", "batch", output_format::json));
  EXPECT_EQ(j["source"], "pod tec/x");
  EXPECT_EQ(j["counts"]["onlyThem"], 1);
  EXPECT_EQ(j["counts"]["deletedByOthers"], 2);
  ASSERT_EQ(j["disagreements"].size(), 1U);
  EXPECT_EQ(j["disagreements"][0]["pod"], "batch/job-1");
  EXPECT_EQ(j["disagreements"][0]["ours"], "would delete at 2026-11-23T09:41:00.000Z");
  const std::string yaml = render_shadow(doc, "s", "", output_format::yaml);
  EXPECT_NE(yaml.find("onlyUs: 1"), std::string::npos) << yaml;
}

}  // namespace
}  // namespace tec::kubectl_plugin

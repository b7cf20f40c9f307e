// /debug/evictions: the JSON document built from controller::evictions().

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "tec/reports/evictions_report.hpp"

namespace tec::reports {
namespace {

using namespace std::chrono_literals;
using base::clock_bridge;
using base::wall_clock;
using nlohmann::json;

const auto steady0 = std::chrono::steady_clock::time_point(1h);
const auto wall0 = wall_clock::time_point(std::chrono::seconds(1'795'448'100));  // 15:35:00Z

controller::eviction_view pending_view() {
  controller::eviction_view v;
  v.pod = {"ns1", "web-0", "uid-1"};
  v.node = "node-1";
  v.taints = {{"node.kubernetes.io/unreachable", "", controller::taint_effect::no_execute, 0},
              {"dedicated", "gpu", controller::taint_effect::no_execute, 0}};
  v.due = steady0 + 300s + 250ms;
  v.state = "pending";
  v.why = "";
  return v;
}

TEST(EvictionsReport, ListsEveryFieldWithWallClockTimes) {
  controller::eviction_list list;
  list.total = 2;
  list.evictions.push_back(pending_view());
  controller::eviction_view retrying = pending_view();
  retrying.pod = {"ns2", "db-1", "uid-2"};
  retrying.taints.clear();
  retrying.state = "retrying";
  retrying.why = "backoff";
  retrying.attempts = 3;
  retrying.last_error = "DELETE pod ns2/db-1: 403 Forbidden";
  list.evictions.push_back(retrying);

  const std::string text = evictions_json(list, true, clock_bridge(steady0, wall0), wall0 + 1500ms);
  EXPECT_EQ(text.rfind(R"({"generatedAt":"2026-11-23T15:35:01.500Z","acting":true,"total":2,)", 0),
            0U)
      << text;
  const json doc = json::parse(text);
  EXPECT_EQ(doc["truncated"], false);
  ASSERT_EQ(doc["evictions"].size(), 2U);
  const json& e = doc["evictions"][0];
  EXPECT_EQ(e["pod"], "ns1/web-0");
  EXPECT_EQ(e["uid"], "uid-1");
  EXPECT_EQ(e["node"], "node-1");
  EXPECT_EQ(e["taints"],
            json::array({"node.kubernetes.io/unreachable:NoExecute", "dedicated=gpu:NoExecute"}));
  EXPECT_EQ(e["due"], "2026-11-23T15:40:00.250Z");
  EXPECT_EQ(e["state"], "pending");
  EXPECT_EQ(e["why"], "");
  EXPECT_EQ(e["attempts"], 0);
  EXPECT_EQ(e["lastError"], "");
  const json& r = doc["evictions"][1];
  EXPECT_EQ(r["taints"], json::array());
  EXPECT_EQ(r["state"], "retrying");
  EXPECT_EQ(r["why"], "backoff");
  EXPECT_EQ(r["attempts"], 3);
  EXPECT_EQ(r["lastError"], "DELETE pod ns2/db-1: 403 Forbidden");
}

TEST(EvictionsReport, ABlockedOneHasItsFirstRefusalAndItsFallbackTime) {
  controller::eviction_list list;
  list.total = 2;
  controller::eviction_view blocked = pending_view();
  blocked.state = "blocked";
  blocked.why = "pdb";
  blocked.blocked_since = steady0 + 301s;
  blocked.fallback_at = steady0 + 331s;
  list.evictions.push_back(blocked);
  blocked.pod = {"ns1", "web-1", "uid-2"};
  blocked.fallback_at.reset();
  list.evictions.push_back(blocked);
  list.evictions.push_back(pending_view());
  const json doc = json::parse(evictions_json(list, true, clock_bridge(steady0, wall0), wall0));
  ASSERT_EQ(doc["evictions"].size(), 3U);
  EXPECT_EQ(doc["evictions"][0]["state"], "blocked");
  EXPECT_EQ(doc["evictions"][0]["why"], "pdb");
  EXPECT_EQ(doc["evictions"][0]["blockedSince"], "2026-11-23T15:40:01.000Z");
  EXPECT_EQ(doc["evictions"][0]["fallbackAt"], "2026-11-23T15:40:31.000Z");
  EXPECT_TRUE(doc["evictions"][1]["fallbackAt"].is_null()) << "never";
  EXPECT_FALSE(doc["evictions"][2].contains("blockedSince")) << "only blocked ones";
  EXPECT_FALSE(doc["evictions"][2].contains("fallbackAt"));
}

TEST(EvictionsReport, TruncatedWhenTheTotalIsLarger) {
  controller::eviction_list list;
  list.total = max_listed_evictions + 5;
  list.evictions.assign(3, pending_view());
  const json doc = json::parse(evictions_json(list, true, clock_bridge(steady0, wall0), wall0));
  EXPECT_EQ(doc["total"], max_listed_evictions + 5);
  EXPECT_EQ(doc["truncated"], true);
  EXPECT_EQ(doc["evictions"].size(), 3U);
}

TEST(EvictionsReport, AStandbyListsNothing) {
  const std::string text = evictions_json({}, false, clock_bridge(steady0, wall0), wall0);
  EXPECT_EQ(text, R"({"generatedAt":"2026-11-23T15:35:00.000Z","acting":false,"total":0,)"
                  R"("truncated":false,"evictions":[]})");
}

TEST(EvictionsReport, ApiTextIsOnlyEscaped) {
  controller::eviction_list list;
  list.total = 1;
  controller::eviction_view v = pending_view();
  v.last_error = "denied: \"quoted\"\n<script>\x01 \xFF end";
  list.evictions.push_back(v);
  const std::string text = evictions_json(list, true, clock_bridge(steady0, wall0), wall0);
  EXPECT_NE(text.find(R"(denied: \"quoted\"\n<script>\u0001 )"), std::string::npos) << text;
  const json doc = json::parse(text);
  EXPECT_EQ(doc["evictions"][0]["lastError"], "denied: \"quoted\"\n<script>\x01 \xEF\xBF\xBD end");
}

// The daemon writes and the plugin reads the same type: what one writes the other reads back.
TEST(EvictionsReport, TheDocumentReadsBackAsWritten) {
  controller::eviction_list list;
  list.total = 3;
  list.evictions.push_back(pending_view());
  controller::eviction_view blocked = pending_view();
  blocked.pod = {"ns2", "db-1", "uid-2"};
  blocked.state = "retrying";
  blocked.why = "blocked";
  blocked.attempts = 4;
  blocked.last_error = "429: a disruption budget";
  blocked.blocked_since = steady0 + 10s;
  blocked.fallback_at = steady0 + 70s;
  list.evictions.push_back(blocked);
  blocked.pod.name = "db-2";
  blocked.fallback_at.reset();  // never deleted anyway: "fallbackAt": null
  list.evictions.push_back(blocked);
  const auto doc = evictions_document_of(list, true, clock_bridge(steady0, wall0), wall0);
  const std::string text = to_json(doc);
  EXPECT_NE(text.find(R"("blockedSince":"2026-11-23T15:35:10.000Z","fallbackAt":null)"),
            std::string::npos)
      << text;
  const auto back = parse_evictions_document(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, doc);
  EXPECT_EQ(back->evictions[1].fallback_at, "2026-11-23T15:36:10.000Z");
  EXPECT_EQ(to_json(*back), text);
}

TEST(EvictionsReport, ReadingBackRefusesOtherDocumentsAndSkipsBadEntries) {
  EXPECT_FALSE(parse_evictions_document("{}"));
  EXPECT_FALSE(parse_evictions_document("not json"));
  EXPECT_FALSE(parse_evictions_document(R"({"evictions":{}})"));
  const auto doc = parse_evictions_document(
      R"({"acting":"yes","total":-1,"evictions":[1,{"pod":7,"attempts":"x","uid":"u"}]})");
  ASSERT_TRUE(doc);
  EXPECT_FALSE(doc->acting);
  EXPECT_EQ(doc->total, 0U);
  ASSERT_EQ(doc->evictions.size(), 1U);
  EXPECT_EQ(doc->evictions[0].pod, "");
  EXPECT_EQ(doc->evictions[0].uid, "u");
  EXPECT_EQ(doc->evictions[0].attempts, 0);
}

}  // namespace
}  // namespace tec::reports

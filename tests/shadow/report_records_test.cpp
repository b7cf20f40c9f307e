// report_records: the records of /debug/shadow, their JSON both ways (the daemon writes them,
// the kubectl plugin reads them) and the bounded log of the built-in's evictions.

#include "tec/shadow/report_records.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace tec::shadow {
namespace {

builtin_eviction record(const std::string& name) {
  builtin_eviction e;
  e.namespace_ = "shop";
  e.name = name;
  e.uid = "uid-" + name;
  e.node = "node-2";
  e.taints = {"dedicated=gpu:NoExecute"};
  e.deleted_at = "2026-11-23T09:40:12.345Z";
  e.evidence = "event: Marking for deletion Pod shop/" + name;
  e.ours_at = "2026-11-23T09:40:12.400Z";
  e.verdict = "agreed";
  e.reason = "both evicted it within the window";
  e.delay_seconds = 0.055;
  e.settled_at = "2026-11-23T09:40:12.400Z";
  return e;
}

TEST(BuiltinEviction, JsonFieldsInOrderAndBack) {
  const auto e = record("web-0");
  const auto j = to_json(e);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) {
    keys.push_back(k);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"pod", "uid", "node", "taints", "deletedAt", "evidence",
                                            "oursAt", "verdict", "reason", "settledAt",
                                            "delaySeconds", "early"}));
  EXPECT_EQ(j["pod"], "shop/web-0");
  EXPECT_EQ(builtin_eviction_from_json(nlohmann::json::parse(j.dump())), e);
}

TEST(BuiltinEviction, OddFieldsStayEmpty) {
  const auto e = builtin_eviction_from_json(nlohmann::json::parse(
      R"({"pod": "no-namespace", "uid": 7, "taints": ["a", 1], "delaySeconds": "x",
          "early": true, "extra": {}})"));
  EXPECT_EQ(e.namespace_, "");
  EXPECT_EQ(e.name, "no-namespace");
  EXPECT_EQ(e.uid, "");
  EXPECT_EQ(e.taints, std::vector<std::string>{"a"});
  EXPECT_EQ(e.delay_seconds, 0.0);
  EXPECT_TRUE(e.early);
  EXPECT_EQ(builtin_eviction_from_json(nlohmann::json::array()), builtin_eviction{});
}

TEST(Disagreement, JsonFieldsInOrderAndBack) {
  const disagreement d{"only_us",
                       "batch",
                       "job-1",
                       "u1",
                       "node-3",
                       {"dedicated=gpu:NoExecute"},
                       "would delete at 2026-11-23T09:41:00.000Z",
                       "none",
                       "2026-11-23T09:41:30.000Z"};
  const auto j = to_json(d);
  EXPECT_EQ(j.dump(), R"({"outcome":"only_us","pod":"batch/job-1","uid":"u1","node":"node-3",)"
                      R"("taints":["dedicated=gpu:NoExecute"],)"
                      R"("ours":"would delete at 2026-11-23T09:41:00.000Z","theirs":"none",)"
                      R"("at":"2026-11-23T09:41:30.000Z"})");
  EXPECT_EQ(disagreement_from_json(nlohmann::json::parse(j.dump())), d);
  EXPECT_EQ(disagreement_from_json(nlohmann::json::parse(R"({"pod": 2, "ours": []})")),
            disagreement{});
}

TEST(BuiltinEvictionLog, KeepsTheLatestAndCountsTheDropped) {
  builtin_eviction_log log(2);
  log.add(record("a"));
  log.add(record("b"));
  EXPECT_EQ(log.dropped(), 0U);
  log.add(record("c"));
  log.add(record("d"));
  ASSERT_EQ(log.records().size(), 2U);
  EXPECT_EQ(log.records().front().name, "c") << "oldest first";
  EXPECT_EQ(log.records().back().name, "d");
  EXPECT_EQ(log.dropped(), 2U);
  builtin_eviction_log none(0);
  none.add(record("a"));
  EXPECT_TRUE(none.records().empty());
  EXPECT_EQ(none.dropped(), 1U);
}

}  // namespace
}  // namespace tec::shadow

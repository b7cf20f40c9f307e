#include "tec/kubectl_plugin/pending_report.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tec/base/rfc3339.hpp"
#include "tec/kubectl_plugin/explain_report.hpp"

namespace tec::kubectl_plugin {
namespace {

const std::string evictions_body = R"({"generatedAt": "2026-11-23T15:35:00.000Z", "acting": true,
  "total": 2, "truncated": false, "evictions": [
  {"pod": "shop/web-0", "uid": "u0", "node": "node-2",
   "taints": ["node.kubernetes.io/unreachable:NoExecute"], "due": "2026-11-23T15:40:00.000Z",
   "state": "pending", "why": "", "attempts": 0, "lastError": ""},
  {"pod": "shop/db-1", "uid": "u1", "node": "node-3", "taints": ["dedicated=gpu:NoExecute"],
   "due": "2026-11-23T15:30:10.500Z", "state": "retrying", "why": "backoff", "attempts": 6,
   "lastError": "DELETE pod shop/db-1: 403 Forbidden"}]})";

std::int64_t at(const char* t) {
  return *base::parse_rfc3339(t);
}

TEST(pending_entries, are_the_documents_own_entries) {
  auto doc = reports::parse_evictions_document(evictions_body);
  ASSERT_TRUE(doc) << doc.error().message;
  EXPECT_TRUE(doc.value().acting);
  ASSERT_EQ(doc.value().evictions.size(), 2U);
  const auto& e = doc.value().evictions[1];
  EXPECT_EQ(reports::namespace_of(e), "shop");
  EXPECT_EQ(reports::name_of(e), "db-1");
  EXPECT_EQ(e.node, "node-3");
  EXPECT_EQ(e.attempts, 6);
  EXPECT_EQ(e.why, "backoff");
  // An entry printed alone is the document's entry: read back, it is the same.
  const auto one = entry_document(e);
  EXPECT_EQ(one["pod"], "shop/db-1");
  EXPECT_EQ(one["lastError"], "DELETE pod shop/db-1: 403 Forbidden");
  EXPECT_EQ(one.size(), 9U);
}

TEST(render_pending, table_golden) {
  auto doc = reports::parse_evictions_document(evictions_body);
  ASSERT_TRUE(doc);
  EXPECT_EQ(render_pending(doc.value().evictions, "pod x", false, output_format::table,
                           at("2026-11-23T15:35:00Z")),
            "POD     NODE     TAINT                                      DUE                       "
            "            STATE      WHY\n"
            "web-0   node-2   node.kubernetes.io/unreachable:NoExecute   2026-11-23T15:40:00.000Z "
            "(in 300s)    pending    <none>\n"
            "db-1    node-3   dedicated=gpu:NoExecute                    2026-11-23T15:30:10.500Z "
            "(290s ago)   retrying   backoff: DELETE pod shop/db-1: 403 Forbidden\n");
  const auto wide = render_pending(doc.value().evictions, "pod x", true, output_format::table, 0);
  EXPECT_EQ(wide.rfind("NAMESPACE   POD", 0), 0U) << wide;
  EXPECT_EQ(render_pending({}, "events", false, output_format::table, 0),
            "No pending evictions.\n");
  const auto json = render_pending(doc.value().evictions, "pod x", false, output_format::json, 0);
  EXPECT_NE(json.find("\"source\": \"pod x\""), std::string::npos);
  EXPECT_NE(json.find("\"pod\": \"shop/db-1\""), std::string::npos);
}

TEST(entry_from_event, parses_the_scheduled_message) {
  event_view ev;
  ev.namespace_ = "shop";
  ev.pod = "web-0";
  ev.pod_uid = "u0";
  ev.message =
      "Pod shop/web-0 will be evicted at 2026-11-23T15:40:00Z: taint "
      "node.kubernetes.io/unreachable:NoExecute, tolerationSeconds 300";
  const auto e = entry_from_event(ev);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pod, "shop/web-0");
  EXPECT_EQ(e->due, "2026-11-23T15:40:00Z");
  EXPECT_EQ(e->taints, std::vector<std::string>{"node.kubernetes.io/unreachable:NoExecute"});
  EXPECT_EQ(e->state, "scheduled");
  EXPECT_EQ(e->why, "Event: tolerationSeconds 300");
  ev.message = "something else";
  EXPECT_FALSE(entry_from_event(ev));
}

TEST(decode_history, and_history_line) {
  const std::string body = R"({"generatedAt": "2026-11-28T03:20:00.000Z", "capacity": 1000,
    "total": 1, "records": [{"pod": "shop/web-0", "uid": "u0", "node": "node-1",
     "taints": ["dedicated=x:NoExecute"],
     "toleration": {"key": "dedicated", "operator": "Equal", "value": "x",
                    "effect": "NoExecute", "tolerationSeconds": 300},
     "scheduledAt": "2026-11-28T03:07:12.120Z", "due": "2026-11-28T03:12:12.120Z",
     "done": "2026-11-28T03:12:12.410Z", "attempts": 1,
     "policy": ["waited 2.1s: rate_limit"], "result": "deleted", "lastError": ""}]})";
  auto records = decode_history(body);
  ASSERT_TRUE(records) << records.error().message;
  ASSERT_EQ(records.value().size(), 1U);
  EXPECT_EQ(history_line(records.value()[0]),
            "2026-11-28T03:12:12.410Z deleted: scheduled 2026-11-28T03:07:12.120Z, due "
            "2026-11-28T03:12:12.120Z, 1 attempt; node node-1, taints dedicated=x:NoExecute; "
            "toleration dedicated=x:NoExecute for 300s; policy: waited 2.1s: rate_limit");
  EXPECT_FALSE(decode_history("[]"));

  // The pod is gone (the morning after): explain tells its history alone.
  explain_report gone;
  gone.pod_found = false;
  gone.pod.namespace_ = "shop";
  gone.pod.name = "web-0";
  gone.reached = "pod taint-eviction-controller/tec-0";
  gone.history = records.value();
  EXPECT_EQ(render_explain(gone, output_format::table),
            "Pod shop/web-0 no longer exists; the acting replica (pod "
            "taint-eviction-controller/tec-0) remembers it.\nHistory (oldest first):\n  " +
                history_line(records.value()[0]) + "\n");
  const auto doc = nlohmann::json::parse(render_explain(gone, output_format::json));
  EXPECT_EQ(doc["pod"], "shop/web-0");
  EXPECT_EQ(doc["found"], false);
  ASSERT_EQ(doc["history"].size(), 1U);
  EXPECT_EQ(doc["history"][0]["result"], "deleted");
}

}  // namespace
}  // namespace tec::kubectl_plugin

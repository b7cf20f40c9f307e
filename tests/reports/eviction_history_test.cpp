// The eviction history's ring, its JSON (the record is a contract with the kubectl plugin), the
// bounds of a record and the /debug/history query.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "tec/reports/eviction_history.hpp"

namespace tec::reports {
namespace {

using namespace std::chrono_literals;

const std::chrono::system_clock::time_point hist_t0{std::chrono::seconds(1'795'000'000)};

history_record history_entry(std::string pod, std::string node = "node-1") {
  history_record r;
  r.pod = std::move(pod);
  r.uid = "uid-" + r.pod;
  r.node = std::move(node);
  r.taints = {"dedicated=x:NoExecute"};
  r.toleration = history_toleration{"dedicated", "Equal", "x", "NoExecute", 300};
  r.scheduled_at = hist_t0;
  r.due = hist_t0 + 300s;
  r.done = hist_t0 + 300s + 290ms;
  r.attempts = 1;
  r.result = "deleted";
  return r;
}

TEST(EvictionHistory, RecordJsonHasTheContractsFieldsInOrder) {
  history_record r = history_entry("ns/web-0");
  r.policy = {"taint rule example.com/* raised tolerationSeconds 5 -> 60",
              "waited 2.1s: rate_limit"};
  EXPECT_EQ(to_json(r),
            R"({"pod":"ns/web-0","uid":"uid-ns/web-0","node":"node-1",)"
            R"("taints":["dedicated=x:NoExecute"],)"
            R"("toleration":{"key":"dedicated","operator":"Equal","value":"x",)"
            R"("effect":"NoExecute","tolerationSeconds":300},)"
            R"("scheduledAt":"2026-11-18T11:06:40.000Z","due":"2026-11-18T11:11:40.000Z",)"
            R"("done":"2026-11-18T11:11:40.290Z","attempts":1,)"
            R"("policy":["taint rule example.com/* raised tolerationSeconds 5 -> 60",)"
            R"("waited 2.1s: rate_limit"],"result":"deleted","lastError":""})");
}

TEST(EvictionHistory, NoTolerationIsNullAndForeverIsANullSeconds) {
  history_record r = history_entry("ns/a");
  r.toleration.reset();
  EXPECT_NE(to_json(r).find(R"("toleration":null,)"), std::string::npos);
  r.toleration = history_toleration{"k", "Exists", "", "", std::nullopt};
  EXPECT_NE(to_json(r).find(R"("toleration":{"key":"k","operator":"Exists","value":"","effect":"",)"
                            R"("tolerationSeconds":null})"),
            std::string::npos);
  r.policy.clear();
  EXPECT_NE(to_json(r).find(R"("policy":[])"), std::string::npos);
}

TEST(EvictionHistory, OddStringsAreEscapedAndParseBack) {
  history_record r = history_entry("ns/a");
  r.last_error = "quote \" backslash \\ newline \n tab \t bell \x07 u\xc3\xa9 bad \xff end";
  r.node = "</script>\"";
  const std::string line = to_json(clipped(r));
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one log line";
  const auto parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["node"], "</script>\"");
  const std::string err = parsed["lastError"];
  EXPECT_NE(err.find("quote \" backslash \\"), std::string::npos);
  EXPECT_EQ(err.find('\n'), std::string::npos) << "control characters become spaces";
  EXPECT_NE(err.find("u\xc3\xa9"), std::string::npos) << "UTF-8 kept";
  EXPECT_NE(err.find("\xef\xbf\xbd"), std::string::npos) << "invalid UTF-8 is U+FFFD";
  // Even unclipped, the JSON itself stays valid (invalid UTF-8 replaced, controls escaped).
  EXPECT_TRUE(nlohmann::json::accept(to_json(r)));
}

TEST(EvictionHistory, ARecordIsBounded) {
  history_record r = history_entry("ns/a");
  r.last_error = std::string(1'000'000, 'e');
  r.taints = std::vector<std::string>(1000, std::string(10'000, 't'));
  r.policy = std::vector<std::string>(100, "line");
  const history_record c = clipped(r);
  EXPECT_LE(c.last_error.size(), max_history_string);
  EXPECT_EQ(c.taints.size(), max_history_list);
  EXPECT_EQ(c.taints.back(), "... 985 more");
  for (const auto& t : c.taints) {
    EXPECT_LE(t.size(), max_history_string);
  }
  EXPECT_EQ(c.policy.size(), max_history_list);
  EXPECT_LT(to_json(c).size(), 20'000U);
}

TEST(EvictionHistory, TheRingKeepsTheLastCapacityRecords) {
  eviction_history h(3);
  for (int i = 0; i < 5; ++i) {
    h.add(history_entry("ns/p" + std::to_string(i)));
  }
  EXPECT_EQ(h.total(), 5U);
  const auto kept = h.records();
  ASSERT_EQ(kept.size(), 3U);
  EXPECT_EQ(kept[0].pod, "ns/p2") << "oldest first";
  EXPECT_EQ(kept[2].pod, "ns/p4");
  const auto doc = nlohmann::json::parse(to_json(h.document({}, hist_t0)));
  EXPECT_EQ(doc["generatedAt"], "2026-11-18T11:06:40.000Z");
  EXPECT_EQ(doc["capacity"], 3);
  EXPECT_EQ(doc["total"], 5);
  ASSERT_EQ(doc["records"].size(), 3U);
  EXPECT_EQ(doc["records"][0]["pod"], "ns/p2");
  std::vector<std::string> keys;
  const auto ordered = nlohmann::ordered_json::parse(to_json(h.document({}, hist_t0)));
  for (const auto& [k, v] : ordered.items()) {
    keys.push_back(k);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"generatedAt", "capacity", "total", "records"}));
}

TEST(EvictionHistory, CapacityZeroKeepsNothing) {
  eviction_history h(0);
  h.add(history_entry("ns/a"));
  EXPECT_EQ(h.total(), 1U);
  EXPECT_TRUE(h.records().empty());
}

TEST(EvictionHistory, FiltersByPodAndNode) {
  eviction_history h(10);
  h.add(history_entry("ns/a", "n1"));
  h.add(history_entry("ns/b", "n1"));
  h.add(history_entry("ns/a", "n2"));
  h.add(history_entry("other/a", "n2"));
  EXPECT_EQ(h.records({"ns/a", ""}).size(), 2U);
  EXPECT_EQ(h.records({"", "n2"}).size(), 2U);
  EXPECT_EQ(h.records({"ns/a", "n2"}).size(), 1U);
  EXPECT_EQ(h.records({"ns/zz", ""}).size(), 0U);
  const auto doc = nlohmann::json::parse(to_json(h.document({"", "n1"}, hist_t0)));
  EXPECT_EQ(doc["total"], 4) << "total counts every record, filtered or not";
  EXPECT_EQ(doc["records"].size(), 2U);
}

TEST(EvictionHistory, ParsesTheQuery) {
  auto f = parse_history_query("");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->pod, "");
  f = parse_history_query("pod=ns%2Fweb-0&node=node-1");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->pod, "ns/web-0");
  EXPECT_EQ(f->node, "node-1");
  f = parse_history_query("pod=ns/web-0");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->pod, "ns/web-0");
}

TEST(EvictionHistory, RefusesABadQueryWithOneBoundedLine) {
  for (const std::string& q : std::vector<std::string>{
           "podx=1", "pod=a&pod=b", "limit=3", "pod=%zz", "pod=" + std::string(10'000, 'a')}) {
    const auto f = parse_history_query(q);
    ASSERT_FALSE(f) << q;
    EXPECT_EQ(f.error().http_status, 400);
    EXPECT_LT(f.error().message.size(), 200U) << q;
    EXPECT_EQ(f.error().message.find('\n'), std::string::npos);
  }
}

// The daemon writes and the plugin reads the same type: what one writes the other reads back.
TEST(EvictionHistory, TheDocumentReadsBackAsWritten) {
  eviction_history h(10);
  history_record r = history_entry("ns/web-0");
  r.policy = {"waited 2.1s: rate_limit"};
  r.last_error = "DELETE: 403";
  h.add(r);
  r = history_entry("ns/web-1");
  r.toleration.reset();  // untolerated: null
  h.add(r);
  r = history_entry("ns/web-2");
  r.toleration = history_toleration{"k", "Exists", "", "", std::nullopt};  // forever
  r.done = hist_t0 + 7ms;
  h.add(r);
  const std::string text = to_json(h.document({}, hist_t0 + 1s));
  const auto back = parse_history_document(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(to_json(*back), text);
  ASSERT_EQ(back->records.size(), 3U);
  EXPECT_EQ(back->total, 3U);
  EXPECT_EQ(back->capacity, 10U);
  EXPECT_EQ(back->records[0].done, hist_t0 + 300s + 290ms) << "milliseconds kept";
  EXPECT_EQ(back->records[0].last_error, "DELETE: 403");
  EXPECT_FALSE(back->records[1].toleration);
  ASSERT_TRUE(back->records[2].toleration);
  EXPECT_FALSE(back->records[2].toleration->seconds);
  EXPECT_EQ(back->records[2].done, hist_t0 + 7ms);
}

TEST(EvictionHistory, ReadingBackRefusesOtherDocumentsAndSkipsBadRecords) {
  EXPECT_FALSE(parse_history_document("[]"));
  EXPECT_FALSE(parse_history_document("{}"));
  EXPECT_FALSE(parse_history_document(R"({"records":"x"})"));
  const auto doc = parse_history_document(
      R"({"total":-2,"records":[7,{"pod":1,"done":"yesterday","attempts":"x","result":"deleted"}]})");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->total, 0U);
  ASSERT_EQ(doc->records.size(), 1U);
  EXPECT_EQ(doc->records[0].pod, "");
  EXPECT_EQ(doc->records[0].done, std::chrono::system_clock::time_point{});
  EXPECT_EQ(doc->records[0].attempts, 0U);
  EXPECT_EQ(doc->records[0].result, "deleted");
}

}  // namespace
}  // namespace tec::reports

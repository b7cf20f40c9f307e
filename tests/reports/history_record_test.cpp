// The controller's eviction outcomes as history records (reports/history_record.*); the
// --history-size flag's test is in tests/cmd/options_test.cpp.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tec/reports/history_record.hpp"

namespace tec::reports {
namespace {

using namespace std::chrono_literals;

const base::clock::time_point hist_steady0{std::chrono::hours(1)};
const std::chrono::system_clock::time_point hist_wall0{std::chrono::seconds(1'795'000'000)};

controller::eviction_outcome outcome() {
  controller::eviction_outcome o;
  o.pod = {"ns", "web-0", "u-1"};
  o.node = "node-1";
  o.taints = {{"dedicated", "x", controller::taint_effect::no_execute, 0}};
  o.used = controller::toleration{"dedicated", controller::toleration_operator::equal, "x",
                                  controller::taint_effect::no_execute, 300};
  o.matched = o.taints[0];
  o.scheduled_at = hist_steady0;
  o.due = hist_steady0 + 300s;
  o.done = hist_steady0 + 300s + 290ms;
  o.attempts = 1;
  o.result = controller::outcome_result::deleted;
  return o;
}

TEST(HistoryRecord, MapsEveryField) {
  const history_record r =
      history_record_of(outcome(), base::clock_bridge(hist_steady0, hist_wall0));
  EXPECT_EQ(r.pod, "ns/web-0");
  EXPECT_EQ(r.uid, "u-1");
  EXPECT_EQ(r.node, "node-1");
  EXPECT_EQ(r.taints, std::vector<std::string>{"dedicated=x:NoExecute"});
  ASSERT_TRUE(r.toleration.has_value());
  EXPECT_EQ(r.toleration->key, "dedicated");
  EXPECT_EQ(r.toleration->op, "Equal");
  EXPECT_EQ(r.toleration->value, "x");
  EXPECT_EQ(r.toleration->effect, "NoExecute");
  EXPECT_EQ(r.toleration->seconds, 300);
  EXPECT_EQ(r.scheduled_at, hist_wall0);
  EXPECT_EQ(r.due, hist_wall0 + 300s);
  EXPECT_EQ(r.done, hist_wall0 + 300s + 290ms);
  EXPECT_EQ(r.attempts, 1U);
  EXPECT_TRUE(r.policy.empty());
  EXPECT_EQ(r.result, "deleted");
  EXPECT_EQ(r.last_error, "");
}

TEST(HistoryRecord, UntoleratedHasNoToleration) {
  auto o = outcome();
  o.used.reset();
  o.matched.reset();
  EXPECT_FALSE(
      history_record_of(o, base::clock_bridge(hist_steady0, hist_wall0)).toleration.has_value());
  o.used = controller::toleration{"", controller::toleration_operator::exists, "", std::nullopt,
                                  std::nullopt};
  const auto r = history_record_of(o, base::clock_bridge(hist_steady0, hist_wall0));
  ASSERT_TRUE(r.toleration.has_value());
  EXPECT_EQ(r.toleration->op, "Exists");
  EXPECT_EQ(r.toleration->effect, "");
  EXPECT_EQ(r.toleration->seconds, std::nullopt);
}

TEST(HistoryRecord, ADeferralsWaitComesBeforeAdmissions) {
  auto o = outcome();
  o.deferred = 30s;
  o.deferred_why = "hold";
  o.waited = 2100ms;
  o.waited_why = "rate_limit";
  EXPECT_EQ(policy_lines(o),
            (std::vector<std::string>{"waited 30s: hold", "waited 2.1s: rate_limit"}));
  o.deferred_why = "settling";
  o.waited = 50ms;
  EXPECT_EQ(policy_lines(o), (std::vector<std::string>{"waited 30s: settling"}));
}

TEST(HistoryRecord, PolicyLines) {
  auto o = outcome();
  EXPECT_TRUE(policy_lines(o).empty());
  o.waited = 99ms;
  EXPECT_TRUE(policy_lines(o).empty()) << "the timer's latency is no wait";
  o.rule = controller::rule_effect{"example.com/*", 5, 60};
  o.waited = 2100ms;
  o.waited_why = "rate_limit";
  EXPECT_EQ(policy_lines(o),
            (std::vector<std::string>{"taint rule example.com/* raised tolerationSeconds 5 -> 60",
                                      "waited 2.1s: rate_limit"}));
  o.rule = controller::rule_effect{"dedicated", 600, 60};
  o.waited_why = "";
  o.waited = 3s;
  EXPECT_EQ(policy_lines(o),
            (std::vector<std::string>{"taint rule dedicated lowered tolerationSeconds 600 -> 60",
                                      "waited 3s"}));
  o.rule = controller::rule_effect{"dedicated", std::nullopt, 60};
  o.waited = 0s;
  o.refusals = 3;
  o.fallback_after = 60s;
  o.result = controller::outcome_result::deleted_after_fallback;
  EXPECT_EQ(policy_lines(o), (std::vector<std::string>{
                                 "taint rule dedicated raised tolerationSeconds untolerated -> 60",
                                 "Evict mode: refused 3 times by a PodDisruptionBudget",
                                 "deleted after fallbackAfter 1m0s"}));
}

TEST(HistoryRecord, ResultNames) {
  using controller::outcome_result;
  const std::vector<std::pair<outcome_result, std::string>> names = {
      {outcome_result::deleted, "deleted"},
      {outcome_result::evicted, "evicted"},
      {outcome_result::deleted_after_fallback, "deleted_after_fallback"},
      {outcome_result::would_delete, "would_delete"},
      {outcome_result::pod_gone, "pod_gone"},
      {outcome_result::replaced, "replaced"},
      {outcome_result::cancelled_untainted, "cancelled_untainted"}};
  for (const auto& [r, name] : names) {
    auto o = outcome();
    o.result = r;
    EXPECT_EQ(history_record_of(o, base::clock_bridge(hist_steady0, hist_wall0)).result, name);
  }
}

}  // namespace
}  // namespace tec::reports

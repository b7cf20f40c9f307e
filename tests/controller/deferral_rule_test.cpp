// The one rule for how long an eviction waits past its own time (controller/src/deferral_rule.hpp),
// called by the controller's deferrals and by the preview alike: the hold (cut at maxHold), the
// storm breaker's settling, the later of the two, and which taints settle.

#include <gtest/gtest.h>

#include <string>
#include <vector>

// The controller's parts are internal to tec_controller (controller/src/).
#include "deferral_rule.hpp"

namespace tec::controller::detail {
namespace {

using namespace std::chrono_literals;
using reason = deferral_verdict::reason;

deferral_verdict run(wait_duration own, std::optional<wait_duration> hold,
                     wait_duration max_hold = 24h, wait_duration settle = 0s,
                     std::vector<wait_duration> ages = {}) {
  deferral_input in;
  in.own = own;
  in.hold_left = hold;
  in.max_hold = max_hold;
  in.settle = settle;
  in.cause_ages = ages;
  return defer(in);
}

TEST(deferral_rule, nothing_defers_without_a_hold_or_settling) {
  EXPECT_EQ(run(0s, std::nullopt).why, reason::none);
  EXPECT_EQ(run(30s, std::nullopt, 24h, 0s, {0s}).why, reason::none) << "no settling time";
}

TEST(deferral_rule, a_hold_defers_to_its_end_cut_at_max_hold_past_the_own_time) {
  auto v = run(10s, 60s);
  EXPECT_EQ(v.why, reason::hold);
  EXPECT_EQ(v.wait, 60s);
  EXPECT_EQ(v.held, 60s);
  EXPECT_FALSE(v.cut);
  v = run(10s, 2h, 1h);
  EXPECT_EQ(v.wait, 1h + 10s);
  EXPECT_TRUE(v.cut);
  v = run(10s, 1h + 10s, 1h);
  EXPECT_EQ(v.wait, 1h + 10s);
  EXPECT_FALSE(v.cut) << "ends exactly at the cap";
  EXPECT_EQ(run(60s, 30s).why, reason::none) << "a hold ending before the own time";
  EXPECT_EQ(run(30s, 30s).why, reason::none) << "nor at it";
}

TEST(deferral_rule, settling_waits_for_the_youngest_cause) {
  auto v = run(0s, std::nullopt, 24h, 60s, {50s, 10s, 70s});
  EXPECT_EQ(v.why, reason::settle);
  EXPECT_EQ(v.wait, 50s) << "the cause 10 s old settles in 50 s";
  EXPECT_FALSE(v.held);
  EXPECT_EQ(run(0s, std::nullopt, 24h, 60s, {-5s}).wait, 60s) << "a future timeAdded counts as new";
  EXPECT_EQ(run(60s, std::nullopt, 24h, 60s, {0s}).why, reason::none) << "not later than own";
  EXPECT_EQ(run(0s, std::nullopt, 24h, 60s, {}).why, reason::none) << "no cause";
}

TEST(deferral_rule, the_later_of_hold_and_settling_wins_a_tie_goes_to_the_hold) {
  auto v = run(0s, 30s, 24h, 60s, {0s});
  EXPECT_EQ(v.why, reason::settle);
  EXPECT_EQ(v.wait, 60s);
  EXPECT_EQ(v.held, 30s) << "the hold is still told of";
  v = run(0s, 90s, 24h, 60s, {0s});
  EXPECT_EQ(v.why, reason::hold);
  EXPECT_EQ(v.wait, 90s);
  v = run(0s, 60s, 24h, 60s, {0s});
  EXPECT_EQ(v.why, reason::hold);
}

TEST(deferral_rule, a_due_time_already_past_may_still_be_deferred_to_a_past_instant) {
  // A resumed countdown whose fire time passed: the deferral is what the rule says, even if it
  // lies in the past too (the queue fires at once either way).
  const auto v = run(-30s, std::nullopt, 24h, 60s, {80s});
  EXPECT_EQ(v.why, reason::settle);
  EXPECT_EQ(v.wait, -20s);
}

TEST(deferral_rule, settling_causes_are_the_evicting_taints_the_breaker_counts) {
  const std::vector<taint> taints = {
      {"a", "", taint_effect::no_execute, 0},
      {"b", "", taint_effect::no_execute, 0},
      {"ignored", "", taint_effect::no_execute, 0},
      {"forever", "", taint_effect::no_execute, 0},
  };
  std::vector<toleration> tolerations(1);
  tolerations[0].key = "forever";
  tolerations[0].op = toleration_operator::exists;
  taint_rule ignore;
  ignore.key = "ignored";
  ignore.action = taint_action::ignore;
  const std::vector<taint_rule> rules = {ignore};
  const auto keys = [](const std::vector<taint>& ts) {
    std::vector<std::string> out;
    for (const auto& t : ts) {
      out.push_back(t.key);
    }
    return out;
  };
  EXPECT_EQ(keys(settling_causes(taints, tolerations, rules, {})),
            (std::vector<std::string>{"a", "b"}));
  const std::vector<std::string> only_b = {"b"};
  EXPECT_EQ(keys(settling_causes(taints, tolerations, rules, only_b)),
            (std::vector<std::string>{"b"}));
}

}  // namespace
}  // namespace tec::controller::detail

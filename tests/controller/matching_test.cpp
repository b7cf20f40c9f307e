// Toleration matching (docs/behaviour.md §3) and the minimum toleration time, including the
// upstream getMinTolerationTime table and the edge cases where upstream overflows.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "controller/support/fakes.hpp"
#include "controller/support/matching_reference.hpp"
#include "tec/controller/matching.hpp"

namespace tec::controller {
namespace {

using testing::make_taint;
using testing::make_toleration;
using testing::match_result;
using testing::matching_tolerations;
using testing::min_toleration_time;

taint t(std::string key, std::string value, taint_effect effect = taint_effect::no_execute) {
  return taint{std::move(key), std::move(value), effect, 0};
}

toleration tol(std::string key, toleration_operator op, std::string value,
               std::optional<taint_effect> effect = taint_effect::no_execute,
               std::optional<std::int64_t> seconds = std::nullopt) {
  toleration x;
  x.key = std::move(key);
  x.op = op;
  x.value = std::move(value);
  x.effect = effect;
  x.seconds = seconds;
  return x;
}

TEST(Tolerates, EqualMatchesKeyValueEffect) {
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::equal, "v"), t("k", "v")));
  EXPECT_FALSE(tolerates(tol("k", toleration_operator::equal, "v"), t("k", "w")));
  EXPECT_FALSE(tolerates(tol("k", toleration_operator::equal, "v"), t("other", "v")));
  EXPECT_FALSE(
      tolerates(tol("k", toleration_operator::equal, "v", taint_effect::no_schedule), t("k", "v")));
  // Equal with empty values on both sides is a match.
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::equal, ""), t("k", "")));
}

TEST(Tolerates, EmptyEffectMatchesEveryEffect) {
  for (const auto e : {taint_effect::no_execute, taint_effect::no_schedule,
                       taint_effect::prefer_no_schedule, taint_effect::unknown}) {
    EXPECT_TRUE(tolerates(tol("k", toleration_operator::equal, "v", std::nullopt), t("k", "v", e)));
  }
}

TEST(Tolerates, EmptyKeyWithExistsToleratesEverything) {
  const toleration all = tol("", toleration_operator::exists, "", std::nullopt);
  EXPECT_TRUE(tolerates(all, t("a", "1")));
  EXPECT_TRUE(tolerates(all, t("node.kubernetes.io/unreachable", "")));
  EXPECT_TRUE(tolerates(all, t("b", "x", taint_effect::no_schedule)));
  // With an effect, only that effect.
  const toleration ne = tol("", toleration_operator::exists, "", taint_effect::no_execute);
  EXPECT_TRUE(tolerates(ne, t("a", "1")));
  EXPECT_FALSE(tolerates(ne, t("a", "1", taint_effect::no_schedule)));
}

TEST(Tolerates, EmptyKeyWithoutExistsToleratesNothing) {
  // Invalid in the API (validation requires Exists with an empty key).
  EXPECT_FALSE(tolerates(tol("", toleration_operator::equal, ""), t("k", "")));
  EXPECT_FALSE(tolerates(tol("", toleration_operator::equal, "v"), t("k", "v")));
  EXPECT_FALSE(tolerates(tol("", toleration_operator::lt, "5"), t("k", "1")));
}

TEST(Tolerates, ExistsIgnoresValue) {
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::exists, ""), t("k", "anything")));
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::exists, "ignored"), t("k", "x")));
  EXPECT_FALSE(tolerates(tol("k", toleration_operator::exists, ""), t("j", "x")));
}

TEST(Tolerates, LtGtCompareNumerically) {
  // Lt: taint value < toleration value.
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::lt, "10"), t("k", "9")));
  EXPECT_FALSE(tolerates(tol("k", toleration_operator::lt, "10"), t("k", "10")));
  EXPECT_FALSE(tolerates(tol("k", toleration_operator::lt, "10"), t("k", "11")));
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::lt, "2"), t("k", "-100")));
  // Numeric, not lexicographic.
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::lt, "100"), t("k", "9")));
  // Gt: taint value > toleration value.
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::gt, "10"), t("k", "11")));
  EXPECT_FALSE(tolerates(tol("k", toleration_operator::gt, "10"), t("k", "10")));
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::gt, "-5"), t("k", "0")));
  EXPECT_TRUE(tolerates(tol("k", toleration_operator::gt, "9223372036854775806"),
                        t("k", "9223372036854775807")));
  // Key and effect still apply.
  EXPECT_FALSE(tolerates(tol("j", toleration_operator::gt, "1"), t("k", "2")));
}

TEST(Tolerates, LtGtNonNumericDoesNotTolerate) {
  for (const char* bad : {"", "abc", "1.5", "+", "-", " 1", "1 ", "0x10", "1_0",
                          "9223372036854775808", "-9223372036854775809", "1e3"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(tolerates(tol("k", toleration_operator::lt, "100"), t("k", bad)));
    EXPECT_FALSE(tolerates(tol("k", toleration_operator::gt, "-100"), t("k", bad)));
    EXPECT_FALSE(tolerates(tol("k", toleration_operator::lt, bad), t("k", "1")));
    EXPECT_FALSE(tolerates(tol("k", toleration_operator::gt, bad), t("k", "1")));
  }
}

TEST(Tolerates, UnknownOperatorDoesNotTolerate) {
  EXPECT_FALSE(tolerates(tol("k", toleration_operator::unknown, "v"), t("k", "v")));
  EXPECT_FALSE(tolerates(tol("", toleration_operator::unknown, ""), t("k", "")));
}

TEST(ParseInt64, AsGoStrconvParseIntBase10) {
  EXPECT_EQ(parse_int64("0"), 0);
  EXPECT_EQ(parse_int64("42"), 42);
  EXPECT_EQ(parse_int64("-42"), -42);
  EXPECT_EQ(parse_int64("9223372036854775807"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(parse_int64("-9223372036854775808"), std::numeric_limits<std::int64_t>::min());
  // ParseInt takes a sign and leading zeros (k/k#134665: the values are not canonicalised).
  EXPECT_EQ(parse_int64("007"), 7);
  EXPECT_EQ(parse_int64("+7"), 7);
  EXPECT_EQ(parse_int64("-0"), 0);
  EXPECT_EQ(parse_int64("+0"), 0);
  EXPECT_EQ(parse_int64("-007"), -7);
  for (const char* bad : {"", "+", "-", "7a", "1_000", " 1", "1 ", "0x10", "1e3", "1.5", "--1",
                          "+-1", "9223372036854775808", "-9223372036854775809"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_int64(bad));
  }
}

// upstream's TestTolerationToleratesTaint (staging/src/k8s.io/api/core/v1/toleration_test.go,
// with the Lt/Gt cases of k/k#134665), case by case, plus the ParseInt cases ours got wrong
// before (a taint value "007" against Gt 5 is tolerated upstream).
TEST(Tolerates, UpstreamTable) {
  const auto ns = taint_effect::no_schedule;
  const auto ne = taint_effect::no_execute;
  struct row {
    const char* description;
    toleration tol;
    taint taint_;
    bool tolerated;
  };
  const std::string sla = "node.kubernetes.io/sla";
  const std::vector<row> rows{
      {"same key and effect, Exists, taint without value",
       tol("foo", toleration_operator::exists, "", ns), t("foo", "", ns), true},
      {"same key and effect, Exists, taint with a value",
       tol("foo", toleration_operator::exists, "", ns), t("foo", "bar", ns), true},
      {"empty key with Exists matches every key", tol("", toleration_operator::exists, "", ns),
       t("foo", "bar", ns), true},
      {"same key, effect and value, Equal", tol("foo", toleration_operator::equal, "bar", ns),
       t("foo", "bar", ns), true},
      {"different values, Equal", tol("foo", toleration_operator::equal, "value1", ns),
       t("foo", "value2", ns), false},
      {"different effects, Equal", tol("foo", toleration_operator::equal, "bar", ns),
       t("foo", "bar", ne), false},
      {"Gt, taint value less", tol(sla, toleration_operator::gt, "950", ns), t(sla, "800", ns),
       false},
      {"Gt, taint value greater", tol(sla, toleration_operator::gt, "750", ns), t(sla, "950", ns),
       true},
      {"Lt, taint value greater", tol(sla, toleration_operator::lt, "800", ns), t(sla, "950", ns),
       false},
      {"Lt, taint value less", tol(sla, toleration_operator::lt, "950", ns), t(sla, "800", ns),
       true},
      {"Gt, equal values", tol(sla, toleration_operator::gt, "950", ns), t(sla, "950", ns), false},
      {"Gt, non-numeric taint value", tol(sla, toleration_operator::gt, "950", ns),
       t(sla, "high", ns), false},
      {"Gt, negative values, taint value less",
       tol("test-key", toleration_operator::gt, "-100", ns), t("test-key", "-200", ns), false},
      {"Gt, large int64 threshold",
       tol("test-key", toleration_operator::gt, "9223372036854775806", ns),
       t("test-key", "100", ns), false},
      // ParseInt, not a canonical-decimal check.
      {"Gt 5, taint value 007", tol("k", toleration_operator::gt, "5", ne), t("k", "007", ne),
       true},
      {"Lt 5, taint value +3", tol("k", toleration_operator::lt, "5", ne), t("k", "+3", ne), true},
      {"Lt 1, taint value -0", tol("k", toleration_operator::lt, "1", ne), t("k", "-0", ne), true},
      {"Gt 010, taint value 9", tol("k", toleration_operator::gt, "010", ne), t("k", "9", ne),
       false},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(r.description);
    EXPECT_EQ(tolerates(r.tol, r.taint_), r.tolerated);
  }
}

TEST(MatchingTolerations, FirstTolerationInListOrderPerTaint) {
  const std::vector<taint> taints{make_taint(1), make_taint(2)};
  const std::vector<toleration> tols{make_toleration(2, 5), make_toleration(1, 10),
                                     make_toleration(1, -1), make_toleration(2, 1)};
  const match_result r = matching_tolerations(taints, tols);
  ASSERT_TRUE(r.all_tolerated);
  ASSERT_EQ(r.used.size(), 2U);
  EXPECT_EQ(r.used[0], &tols[1]);
  EXPECT_EQ(r.used[1], &tols[0]);
  EXPECT_EQ(min_toleration_time(r.used), toleration_time::after_seconds(5));
}

TEST(MatchingTolerations, SignalsNotAllTolerated) {
  const std::vector<taint> taints{make_taint(1), make_taint(2)};
  const std::vector<toleration> tols{make_toleration(1, -1)};
  const match_result r = matching_tolerations(taints, tols);
  EXPECT_FALSE(r.all_tolerated);
  EXPECT_TRUE(r.used.empty());
  EXPECT_TRUE(decide(taints, tols, {}).decision.untolerated);
}

TEST(MatchingTolerations, NoTaintsIsAllTolerated) {
  const match_result r = matching_tolerations({}, std::vector<toleration>{});
  EXPECT_TRUE(r.all_tolerated);
  EXPECT_TRUE(r.used.empty());
}

TEST(MatchingTolerations, FirstMatchWinsEvenWhenALaterOneIsLonger) {
  // [k 10 s, k forever] -> the first is used: evicted at 10 s.
  const std::vector<taint> taints{make_taint(1)};
  const std::vector<toleration> tols{make_toleration(1, 10), make_toleration(1, -1)};
  EXPECT_EQ(min_toleration_time(matching_tolerations(taints, tols).used),
            toleration_time::after_seconds(10));
  const pod_decision d = decide(taints, tols, {}).decision;
  EXPECT_FALSE(d.untolerated);
  EXPECT_EQ(d.time, toleration_time::after_seconds(10));
}

// Upstream TestGetMinTolerationTime.
TEST(MinTolerationTime, UpstreamTable) {
  const toleration one = make_toleration(1, 1);
  const toleration two = make_toleration(2, 2);
  const toleration unset = make_toleration(1, -1);
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{}), toleration_time::immediately());
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{unset}), toleration_time::never());
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{one, two}),
            toleration_time::after_seconds(1));
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{one, unset}),
            toleration_time::after_seconds(1));
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{unset, one}),
            toleration_time::after_seconds(1));
}

TEST(MinTolerationTime, ZeroAndNegativeMeanNow) {
  toleration zero = make_toleration(1, 0);
  toleration negative = make_toleration(1, 0);
  negative.seconds = -5;
  const toleration unset = make_toleration(1, -1);
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{zero}), toleration_time::immediately());
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{negative}), toleration_time::immediately());
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{unset, negative, make_toleration(2, 9)}),
            toleration_time::immediately());
  EXPECT_EQ(toleration_time::immediately().delay(), std::chrono::nanoseconds::zero());
}

TEST(MinTolerationTime, HugeSecondsSaturateInsteadOfOverflowing) {
  toleration huge = make_toleration(1, 0);
  huge.seconds = std::numeric_limits<std::int64_t>::max();
  const toleration_time tt = min_toleration_time(std::vector<toleration>{huge});
  ASSERT_EQ(tt.what, toleration_time::kind::after);
  EXPECT_EQ(tt.delay(), toleration_time::max_delay);
  EXPECT_GT(tt.delay(), std::chrono::hours(24 * 365 * 50));
  // Just below the nanosecond overflow of upstream's int64 multiplication.
  huge.seconds = std::numeric_limits<std::int64_t>::max() / 1'000'000'000 + 1;
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{huge}).delay(), toleration_time::max_delay);
  toleration one = make_toleration(1, 1);
  EXPECT_EQ(min_toleration_time(std::vector<toleration>{one}).delay(), std::chrono::seconds(1));
}

TEST(Decide, ZeroSecondsIsToleratedButImmediate) {
  const std::vector<taint> taints{make_taint(1)};
  const pod_decision d =
      decide(taints, std::vector<toleration>{make_toleration(1, 0)}, {}).decision;
  EXPECT_FALSE(d.untolerated);
  EXPECT_TRUE(d.time.is_now());
  // A later untolerated taint still makes it untolerated.
  const std::vector<taint> two{make_taint(1), make_taint(2)};
  EXPECT_TRUE(decide(two, std::vector<toleration>{make_toleration(1, 0)}, {}).decision.untolerated);
}

TEST(Decide, AgreesWithMatchingAndMin) {
  const std::vector<std::vector<toleration>> cases{
      {},
      {make_toleration(1, -1)},
      {make_toleration(1, 3), make_toleration(2, -1)},
      {make_toleration(2, 7), make_toleration(1, 3)},
      {tol("", toleration_operator::exists, "", std::nullopt, 30)},
      {make_toleration(1, 0), make_toleration(2, 5)},
  };
  const std::vector<taint> taints{make_taint(1), make_taint(2)};
  for (const auto& tols : cases) {
    const match_result m = matching_tolerations(taints, tols);
    const pod_decision d = decide(taints, tols, {}).decision;
    EXPECT_EQ(d.untolerated, !m.all_tolerated);
    if (m.all_tolerated) {
      EXPECT_EQ(d.time, min_toleration_time(m.used));
    }
  }
}

}  // namespace
}  // namespace tec::controller

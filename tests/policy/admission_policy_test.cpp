// The policy file's `admission` table: the webhook's deny mode (issue 32 item 2).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tec/policy/policy_file.hpp"

namespace tec::policy {
namespace {

using ::testing::HasSubstr;

parse_result parse_admission(const std::string& body) {
  return parse_policy(
      "apiVersion: taint-eviction-controller/v1alpha1\nkind: EvictionPolicy\n" + body,
      "policy.yaml");
}

TEST(policy_admission, off_by_default) {
  const auto r = parse_admission("");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_FALSE(r.policy->admission.deny_mode());
  EXPECT_EQ(describe(*r.policy).find("admission"), std::string::npos);
}

TEST(policy_admission, every_field) {
  const auto r = parse_admission(
      "stormBreaker: {maxTaintedNodesPercent: 50}\n"
      "admission:\n"
      "  denyEvictingMoreThan: 10\n"
      "  denyIfBreakerOpens: true\n");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(r.policy->admission.deny_evicting_more_than, 10U);
  EXPECT_TRUE(r.policy->admission.deny_if_breaker_opens);
  EXPECT_TRUE(r.policy->admission.deny_mode());
  EXPECT_THAT(describe(*r.policy),
              HasSubstr(", admission denies taints evicting more than 10 pods or opening the "
                        "storm breaker unless acknowledged"));
}

TEST(policy_admission, zero_is_a_limit) {
  const auto r = parse_admission("admission: {denyEvictingMoreThan: 0}\n");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(r.policy->admission.deny_evicting_more_than, 0U);
  EXPECT_TRUE(r.policy->admission.deny_mode());
}

TEST(policy_admission, strict) {
  const auto r = parse_admission(
      "admission:\n"
      "  denyEvictingMoreThan: -1\n"
      "  denyIfBreakerOpens: yes\n"
      "  denyAll: true\n");
  ASSERT_FALSE(r);
  const auto s = r.summary();
  EXPECT_THAT(s, HasSubstr("policy.yaml:4:25: admission.denyEvictingMoreThan: must not be "
                           "negative, got -1"));
  EXPECT_THAT(s, HasSubstr("admission.denyIfBreakerOpens: expected true or false"));
  EXPECT_THAT(s, HasSubstr("admission.denyAll: unknown field (known: denyEvictingMoreThan, "
                           "denyIfBreakerOpens)"));
}

TEST(policy_admission, breaker_denial_needs_a_breaker) {
  const auto r = parse_admission("admission: {denyIfBreakerOpens: true}\n");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.summary(), HasSubstr("admission.denyIfBreakerOpens: has no effect without "
                                     "stormBreaker.maxTaintedNodesPercent"));
}

}  // namespace
}  // namespace tec::policy

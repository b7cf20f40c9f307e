// deploy/policy.yaml, the ConfigMap the Deployment mounts for --policy: as shipped it is "no
// policy" (upstream's behaviour), and its commented example, uncommented, is a valid policy
// that sets what the comments say. Keeps the example an operator copies from true.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>

#include "tec/policy/policy_file.hpp"

namespace tec::policy {
namespace {

/// The text under data."policy.yaml" of deploy/policy.yaml.
std::string shipped_text() {
  const YAML::Node cm = YAML::LoadFile(std::string(TEC_SOURCE_DIR) + "/deploy/policy.yaml");
  EXPECT_EQ(cm["kind"].as<std::string>(), "ConfigMap");
  return cm["data"]["policy.yaml"].as<std::string>();
}

/// `text` with its commented-out fields ("# key: ..." and "#   - item") turned on.
std::string uncommented(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("# ") && line.find(':') != std::string::npos &&
        !line.starts_with("# Everything")) {
      line.erase(0, 2);
    } else if (line.starts_with("#     - ")) {
      line.erase(0, 2);
      line.insert(0, "  ");
    }
    out += line + "\n";
  }
  return out;
}

TEST(shipped_policy, as_shipped_it_is_no_policy) {
  const auto r = parse_policy(shipped_text(), "deploy/policy.yaml");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(*r.policy, controller::eviction_policy{});
}

TEST(shipped_policy, its_commented_example_is_valid_and_sets_every_section) {
  const std::string text = uncommented(shipped_text());
  const auto r = parse_policy(text, "deploy/policy.yaml (uncommented)");
  ASSERT_TRUE(r) << r.summary() << "\n" << text;
  EXPECT_FALSE(r.policy->dry_run);
  EXPECT_FALSE(r.policy->rate_limit.unlimited()) << text;
  EXPECT_TRUE(r.policy->storm_breaker.enabled()) << text;
  EXPECT_EQ(r.policy->storm_breaker.taint_keys.size(), 2U) << text;
  EXPECT_EQ(r.policy->exclude.namespaces.size(), 1U) << text;
  EXPECT_EQ(r.policy->exclude.pod_selector.match_labels.size(), 1U) << text;
  EXPECT_TRUE(r.policy->exclude.mirror_pods) << text;
  EXPECT_EQ(r.policy->taints.size(), 3U) << text;
  EXPECT_EQ(r.policy->mode, controller::eviction_mode::evict) << text;
  ASSERT_EQ(r.policy->taints.size(), 3U);
  EXPECT_EQ(r.policy->taints[2].fallback_after, std::chrono::seconds(30)) << text;
  EXPECT_EQ(r.policy->max_hold, std::chrono::hours(4)) << text;
  EXPECT_EQ(r.policy->storm_breaker.settle_seconds, 10U) << text;
  EXPECT_EQ(r.policy->admission.deny_evicting_more_than, 20U) << text;
  EXPECT_TRUE(r.policy->admission.deny_if_breaker_opens) << text;
}

}  // namespace
}  // namespace tec::policy

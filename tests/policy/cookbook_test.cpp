// docs/policy.md's "Policy cookbook": every YAML block of that section is a whole policy file
// that parses and sets something. Keeps the examples an operator copies valid.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tec/policy/policy_file.hpp"

namespace tec::policy {
namespace {

/// The ```yaml blocks between the "### Policy cookbook" heading and the next heading.
std::vector<std::string> cookbook_blocks() {
  std::ifstream in(std::string(TEC_SOURCE_DIR) + "/docs/policy.md");
  EXPECT_TRUE(in) << "cannot read docs/policy.md";
  std::vector<std::string> blocks;
  bool in_section = false;
  bool in_block = false;
  for (std::string line; std::getline(in, line);) {
    if (!in_block && line.starts_with("#")) {
      in_section = line == "### Policy cookbook";
      continue;
    }
    if (!in_section) {
      continue;
    }
    if (line == "```yaml") {
      in_block = true;
      blocks.emplace_back();
    } else if (in_block && line == "```") {
      in_block = false;
    } else if (in_block) {
      blocks.back() += line + "\n";
    }
  }
  return blocks;
}

TEST(cookbook, every_recipe_is_a_valid_policy_that_sets_something) {
  const auto blocks = cookbook_blocks();
  ASSERT_GE(blocks.size(), 3U) << "no cookbook section in docs/policy.md (three recipes)";
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto r = parse_policy(blocks[i], "docs/policy.md cookbook #" + std::to_string(i + 1));
    ASSERT_TRUE(r) << r.summary() << "\n" << blocks[i];
    EXPECT_NE(*r.policy, controller::eviction_policy{}) << blocks[i];
  }
}

}  // namespace
}  // namespace tec::policy

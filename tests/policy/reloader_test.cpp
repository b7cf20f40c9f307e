// Re-reading the policy file: changes are found by content, applied once, and a broken or
// missing file is reported once while the policy in force stays.

#include "tec/policy/reloader.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "policy/support/hostile.hpp"

namespace tec::policy {
namespace {

using ::testing::HasSubstr;
using kind = reload_result::kind;

using test::policy_header;

/// A file whose content the test sets; nullopt reads as a missing file.
struct fake_file {
  std::optional<std::string> text;
  int reads = 0;

  reloader::read_fn reader() {
    return [this](const std::string& path) -> base::result<std::string> {
      ++reads;
      if (!text) {
        return base::make_error(base::errc::config_invalid, path + ": cannot open");
      }
      return *text;
    };
  }
};

controller::eviction_policy rate(double per_second) {
  controller::eviction_policy p;
  p.rate_limit.evictions_per_second = per_second;
  return p;
}

std::string rate_file(const std::string& per_second) {
  return std::string(policy_header) + "rateLimit:\n  evictionsPerSecond: " + per_second + "\n";
}

/// A reloader of "p.yaml" started with rate(5) from a file that says so, polled once.
class policy_reloader_running : public ::testing::Test {
protected:
  policy_reloader_running() { EXPECT_EQ(r.poll().what, kind::unchanged); }

  fake_file f{rate_file("5")};
  reloader r{"p.yaml", rate(5), f.reader()};
};

TEST(policy_reloader, the_policy_read_at_start_is_not_applied_again) {
  fake_file f{rate_file("5")};
  reloader r("p.yaml", rate(5), f.reader());
  EXPECT_EQ(r.poll().what, kind::unchanged);
  EXPECT_EQ(r.poll().what, kind::unchanged);
  EXPECT_EQ(f.reads, 2);
}

TEST_F(policy_reloader_running, a_new_valid_content_is_applied_once) {
  f.text = rate_file("7");
  const auto changed = r.poll();
  ASSERT_EQ(changed.what, kind::applied);
  EXPECT_EQ(*changed.policy, rate(7));
  EXPECT_EQ(r.in_force(), rate(7));
  EXPECT_EQ(r.poll().what, kind::unchanged);
}

TEST(policy_reloader, a_change_before_the_first_poll_is_seen) {
  fake_file f{rate_file("9")};
  reloader r("p.yaml", rate(5), f.reader());
  const auto first = r.poll();
  ASSERT_EQ(first.what, kind::applied);
  EXPECT_EQ(*first.policy, rate(9));
}

TEST_F(policy_reloader_running, a_comment_only_change_applies_nothing) {
  f.text = "# reviewed\n" + rate_file("5");
  EXPECT_EQ(r.poll().what, kind::unchanged);
}

TEST_F(policy_reloader_running, an_invalid_file_is_rejected_once_and_the_old_policy_stays) {
  f.text = rate_file("-1");
  const auto bad = r.poll();
  ASSERT_EQ(bad.what, kind::rejected);
  ASSERT_EQ(bad.errors.size(), 1U);
  EXPECT_THAT(bad.errors.front(), HasSubstr("p.yaml:4:23: rateLimit.evictionsPerSecond"));
  EXPECT_FALSE(bad.policy);
  EXPECT_EQ(r.in_force(), rate(5));
  EXPECT_EQ(bad.summary(), bad.errors.front());
  EXPECT_EQ(r.poll().what, kind::unchanged);  // the same broken content: reported once
  f.text = rate_file("6");
  const auto fixed = r.poll();
  ASSERT_EQ(fixed.what, kind::applied);
  EXPECT_EQ(*fixed.policy, rate(6));
}

TEST_F(policy_reloader_running, a_missing_file_is_rejected_once_and_its_return_is_seen) {
  f.text.reset();
  const auto gone = r.poll();
  ASSERT_EQ(gone.what, kind::rejected);
  EXPECT_THAT(gone.errors.front(), HasSubstr("p.yaml: cannot open"));
  EXPECT_EQ(r.poll().what, kind::unchanged);
  EXPECT_EQ(r.in_force(), rate(5));
  f.text = rate_file("8");
  EXPECT_EQ(r.poll().what, kind::applied);
}

TEST(policy_reloader, a_configmap_symlink_swap_is_seen_by_content) {
  // How the kubelet updates a ConfigMap volume: the file is a symlink through `..data`, which
  // is swapped to a new timestamped directory.
  namespace fs = std::filesystem;
  const auto dir =
      fs::temp_directory_path() /
      ("tec-reloader-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir / "..2026_01");
  fs::create_directories(dir / "..2026_02");
  std::ofstream(dir / "..2026_01" / "policy.yaml") << rate_file("5");
  std::ofstream(dir / "..2026_02" / "policy.yaml") << rate_file("3");
  fs::create_directory_symlink("..2026_01", dir / "..data");
  fs::create_symlink("..data/policy.yaml", dir / "policy.yaml");
  reloader r((dir / "policy.yaml").string(), rate(5));
  EXPECT_EQ(r.poll().what, kind::unchanged);
  fs::create_directory_symlink("..2026_02", dir / "..data_tmp");
  fs::rename(dir / "..data_tmp", dir / "..data");
  const auto swapped = r.poll();
  ASSERT_EQ(swapped.what, kind::applied);
  EXPECT_EQ(*swapped.policy, rate(3));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tec::policy

// Hostile policy files (issue 29, item 1): reading one costs work and memory bounded by its
// size, not by what its aliases expand to; what is reported is a bounded number of bounded,
// escaped lines; the file is opened once and never blocks on a FIFO.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>

#include "policy/support/hostile.hpp"
#include "policy/support/load.hpp"
#include "tec/policy/policy_file.hpp"
#include "tec/policy/reloader.hpp"

namespace tec::policy {
namespace {

using test::load_policy_file;
using test::policy_header;
using ::testing::HasSubstr;
using ::testing::Not;

/// Fails unless `line` is one line of printable text (no C0/C1 control character, no byte
/// that is not part of UTF-8 text; base::printable's output) of bounded length.
void expect_one_bounded_line(const std::string& line) {
  EXPECT_LE(line.size(), max_error_bytes + 64) << line.substr(0, 200);
  for (const char c : line) {
    const auto b = static_cast<unsigned char>(c);
    ASSERT_TRUE(b >= 0x20 && b != 0x7F) << "control byte " << int{b} << " in " << line;
  }
  EXPECT_THAT(line, Not(HasSubstr("\xC2\x85")));  // U+0085, NEL
}

void expect_bounded(const parse_result& r) {
  EXPECT_LE(r.errors.size(), max_reported_errors + 1);
  for (const auto& e : r.errors) {
    expect_one_bounded_line(e);
  }
  expect_one_bounded_line(r.summary().substr(0, max_error_bytes));
  EXPECT_LE(r.summary().size(), (max_reported_errors + 1) * (max_error_bytes + 64));
}

TEST(hostile_policy, the_issues_files_have_the_issues_sizes) {
  EXPECT_EQ(test::aliased_unknown_keys().size(), 12'968U);
  EXPECT_EQ(test::aliased_valid_selector().size(), 10'038U);
}

TEST(hostile_policy, aliases_of_a_map_of_unknown_keys_are_one_error_not_a_million) {
  const auto r = parse_policy(test::aliased_unknown_keys(), "policy.yaml");
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1U) << r.errors.front() << " ... " << r.errors.back();
  EXPECT_THAT(r.errors.front(), HasSubstr("policy.yaml:3:"));
  EXPECT_THAT(r.errors.front(), HasSubstr("aliases (*name) expand this document past"));
  EXPECT_THAT(r.errors.front(), HasSubstr("65536 + 2 x its 12968 bytes"));
  expect_bounded(r);
}

TEST(hostile_policy, a_valid_policy_whose_aliases_expand_to_a_million_values_is_refused) {
  const auto r = parse_policy(test::aliased_valid_selector(), "policy.yaml");
  ASSERT_FALSE(r) << "accepted with " << r.policy->exclude.pod_selector.match_expressions.size()
                  << " requirements";
  ASSERT_EQ(r.errors.size(), 1U);
  EXPECT_THAT(r.errors.front(), HasSubstr("aliases (*name) expand this document past"));
  expect_bounded(r);
}

TEST(hostile_policy, aliases_within_the_budget_are_read_as_written_out) {
  std::string text = std::string(policy_header) +
                     "exclude:\n  podSelector:\n    matchExpressions:\n"
                     "      - &e {key: tier, operator: In, values: [a, b, c, d, e, f, g, h]}\n";
  for (int i = 0; i < 50; ++i) {
    text += "      - *e\n";
  }
  text += "stormBreaker:\n  maxTaintedNodesPercent: 50\n  taintKeys: &k [a/b, c/d]\n";
  const auto r = parse_policy(text, "policy.yaml");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(r.policy->exclude.pod_selector.match_expressions.size(), 51U);
  EXPECT_EQ(r.policy->exclude.pod_selector.match_expressions.back().values.size(), 8U);
  EXPECT_EQ(r.policy->storm_breaker.taint_keys.size(), 2U);
}

TEST(hostile_policy, a_dense_file_without_aliases_is_within_the_budget) {
  // The densest valid content: one-byte list items, about two bytes of file each, and the
  // densest invalid one: a flow map of one-letter keys (each an unknown field), as large as
  // the largest file the reader takes (the budget grows with the size as the cost does).
  constexpr std::size_t size = max_file_bytes;
  std::string values;
  while (values.size() < size) {
    values += "a,";
  }
  const auto dense = std::string(policy_header) +
                     "exclude:\n  podSelector:\n    matchExpressions: [{key: k, operator: In, "
                     "values: [" +
                     values + "a]}]\n";
  const auto r = parse_policy(dense, "policy.yaml");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(r.policy->exclude.pod_selector.match_expressions.front().values.size(),
            values.size() / 2 + 1);

  std::string keys;
  while (keys.size() < size) {
    keys += "x,";
  }
  const auto unknown =
      parse_policy(std::string(policy_header) + "rateLimit: {" + keys + "x}\n", "policy.yaml");
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.errors.front(), HasSubstr("rateLimit.x: unknown field"));
}

TEST(hostile_policy, at_most_twenty_errors_are_listed_and_the_rest_counted) {
  std::string text(policy_header);
  for (int i = 0; i < 1000; ++i) {
    text += "unknown" + std::to_string(i) + ": 1\n";
  }
  const auto r = parse_policy(text, "policy.yaml");
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), max_reported_errors + 1);
  EXPECT_THAT(r.errors.front(), HasSubstr("policy.yaml:3:1: unknown0: unknown field"));
  EXPECT_THAT(r.errors[max_reported_errors - 1], HasSubstr("unknown19: unknown field"));
  EXPECT_EQ(r.errors.back(), "... and 980 more");
  EXPECT_THAT(r.summary(), HasSubstr("unknown19: unknown field (known: "));
  EXPECT_THAT(r.summary(), HasSubstr("; ... and 980 more"));
  expect_bounded(r);
}

TEST(hostile_policy, a_long_key_is_clipped_in_its_error) {
  const std::string key(100'000, 'x');  // an explicit key ("? "): an implicit one has 1024 at most
  const auto r = parse_policy(std::string(policy_header) + "? " + key + "\n: 1\n", "policy.yaml");
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1U);
  EXPECT_THAT(r.errors.front(), HasSubstr("policy.yaml:3:3: xxxx"));
  EXPECT_THAT(r.errors.front(), HasSubstr("[clipped: "));
  expect_bounded(r);
}

TEST(hostile_policy, keys_values_and_the_path_are_escaped) {
  // A key with a line break forged a second log line; C1 controls, escape sequences and
  // bytes that are not UTF-8 reach the log the same way.
  const auto r = parse_policy(std::string(policy_header) +
                                  "\"a\\nI0101 00:00:00 forged line\": 1\n"
                                  "\"\\e[31mred\\x85\": 1\n"
                                  "dryRun: \"yes\\r\\n\"\n"
                                  "rateLimit: {\"\xFF\xFE\": 1}\n",
                              "/etc/policy\n/p.yaml");
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 4U) << r.summary();
  EXPECT_THAT(r.errors[0], HasSubstr("/etc/policy\\n/p.yaml:3:1: a\\nI0101 00:00:00 forged line: "
                                     "unknown field"));
  EXPECT_THAT(r.errors[1], HasSubstr(": \\x1b[31mred\\u0085: unknown field"));
  EXPECT_THAT(r.errors[2], HasSubstr("dryRun: expected true or false, got the quoted string "
                                     "\"yes\\r\\n\""));
  EXPECT_THAT(r.errors[3], HasSubstr("rateLimit.\\xff\\xfe: unknown field"));
  expect_bounded(r);
}

TEST(hostile_policy, a_yaml_depth_limit_says_so_not_bad_file) {
  const std::string deep = std::string(policy_header) + "taints: " + std::string(3000, '[') +
                           std::string(3000, ']') + "\n";
  const auto r = parse_policy(deep, "policy.yaml");
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1U);
  EXPECT_THAT(r.errors.front(), HasSubstr("levels deep, the most the YAML parser allows"));
  EXPECT_THAT(r.errors.front(), Not(HasSubstr("bad file")));
}

TEST(hostile_policy, a_reload_of_the_hostile_files_is_one_bounded_rejection) {
  std::string content = std::string(policy_header);
  reloader r("p.yaml", controller::eviction_policy{},
             [&](const std::string&) -> base::result<std::string> { return content; });
  EXPECT_EQ(r.poll().what, reload_result::kind::unchanged);
  for (const auto& hostile : {test::aliased_unknown_keys(), test::aliased_valid_selector()}) {
    content = hostile;
    const auto polled = r.poll();
    ASSERT_EQ(polled.what, reload_result::kind::rejected);
    ASSERT_EQ(polled.errors.size(), 1U);
    EXPECT_THAT(polled.summary(), HasSubstr("p.yaml:"));
    expect_one_bounded_line(polled.summary());
    EXPECT_EQ(r.in_force(), controller::eviction_policy{});
  }
}

/// A directory of its own under the temporary directory, removed at the end.
class policy_files : public ::testing::Test {
protected:
  policy_files() {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~policy_files() override { std::filesystem::remove_all(dir_); }
  policy_files(const policy_files&) = delete;
  policy_files& operator=(const policy_files&) = delete;
  policy_files(policy_files&&) = delete;
  policy_files& operator=(policy_files&&) = delete;

  [[nodiscard]] std::string path(const std::string& name) const { return (dir_ / name).string(); }

private:
  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() /
      ("tec-hostile-policy-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
};

TEST_F(policy_files, a_fifo_is_refused_without_waiting_for_a_writer) {
  // With no writer, open() of a FIFO without O_NONBLOCK never returns: this test would hang.
  const auto fifo = path("policy.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto r = read_policy_text(fifo);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, fifo + ": not a regular file");
  // A symlink to it (a ConfigMap mount is made of symlinks) is looked through, and refused.
  std::filesystem::create_symlink(fifo, path("link.yaml"));
  EXPECT_THAT(load_policy_file(path("link.yaml")).summary(), HasSubstr(": not a regular file"));
}

TEST_F(policy_files, a_device_is_refused_after_opening_it_without_reading_it) {
  EXPECT_EQ(read_policy_text("/dev/zero").error().message, "/dev/zero: not a regular file");
  EXPECT_EQ(read_policy_text("/dev/null").error().message, "/dev/null: not a regular file");
}

TEST_F(policy_files, a_path_with_a_line_break_is_escaped_in_the_error) {
  const auto missing = path("a\nb.yaml");
  const auto r = read_policy_text(missing);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("a\\nb.yaml: cannot open the policy file (No such "));
  expect_one_bounded_line(r.error().message);
}

TEST_F(policy_files, the_file_is_read_whole_and_its_size_bounded) {
  const auto file = path("policy.yaml");
  std::ofstream(file) << policy_header << "dryRun: true\n";
  const auto ok = load_policy_file(file);
  ASSERT_TRUE(ok) << ok.summary();
  EXPECT_TRUE(ok.policy->dry_run);
  std::ofstream(file) << policy_header << "# " << std::string(max_file_bytes, 'x') << "\n";
  EXPECT_EQ(read_policy_text(file).error().message,
            file + ": larger than " + std::to_string(max_file_bytes) + " bytes");
  std::ofstream(file) << "";
  EXPECT_EQ(read_policy_text(file).value(), "");
}

}  // namespace
}  // namespace tec::policy

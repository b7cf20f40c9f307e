// tec/version.hpp: what --version and build_info report, as cmake/commit.cmake generated it for
// this build (cmake/version.sh's rule is tested on a scratch repository by
// tests/release/release_test.sh).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tec/version.hpp"

namespace {

TEST(version, is_a_release_version_from_git_or_the_unknown_one) {
  const std::string v = tec::version;
  EXPECT_TRUE(std::regex_match(v, std::regex(R"(v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)"))) << v;
}

TEST(version, commit_is_twelve_hex_digits_or_unknown) {
  const std::string c = tec::commit;
  EXPECT_TRUE(std::regex_match(c, std::regex(R"([0-9a-f]{12}(-dirty)?|unknown)"))) << c;
}

TEST(version, compiler_names_the_compiler_and_its_version) {
  const std::string cc = tec::compiler;
  EXPECT_TRUE(std::regex_match(cc, std::regex(R"((gcc|clang) [0-9]+\.[0-9]+.*)"))) << cc;
#if defined(__clang__)
  EXPECT_EQ(cc.rfind("clang ", 0), 0U) << cc;
#else
  EXPECT_EQ(cc.rfind("gcc ", 0), 0U) << cc;
#endif
}

}  // namespace

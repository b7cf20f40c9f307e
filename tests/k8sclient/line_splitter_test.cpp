#include "tec/k8sclient/line_splitter.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tec::k8sclient {
namespace {

/// Collects what a splitter yields; errors are recorded in stream order as "!error".
struct collector {
  line_splitter splitter;
  std::vector<std::string> out;

  explicit collector(std::size_t max = line_splitter::default_max_line_bytes) : splitter(max) {}

  void feed(std::string_view bytes) {
    splitter.feed(
        bytes, [&](std::string_view line) { out.emplace_back(line); },
        [&](const base::error& e) {
          EXPECT_EQ(e.code, make_error_code(base::errc::line_too_long));
          out.emplace_back("!" + e.message);
        });
  }
};

TEST(line_splitter, whole_lines_in_one_chunk) {
  collector c;
  c.feed("{\"a\":1}\n{\"b\":2}\n");
  EXPECT_EQ(c.out, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
  EXPECT_FALSE(c.splitter.has_partial_line());
}

TEST(line_splitter, line_split_across_chunks) {
  collector c;
  c.feed("{\"type\":\"ADD");
  EXPECT_TRUE(c.out.empty());
  EXPECT_TRUE(c.splitter.has_partial_line());
  c.feed("ED\",\"object\"");
  c.feed(":{}}\n{\"x");
  EXPECT_EQ(c.out, (std::vector<std::string>{"{\"type\":\"ADDED\",\"object\":{}}"}));
  c.feed("\":1}\n");
  EXPECT_EQ(c.out.back(), "{\"x\":1}");
  EXPECT_FALSE(c.splitter.has_partial_line());
}

TEST(line_splitter, byte_by_byte) {
  const std::string stream = "first line\nsecond\r\n\n\nthird one here\n";
  collector c;
  for (const char ch : stream) {
    c.feed(std::string_view(&ch, 1));
  }
  EXPECT_EQ(c.out, (std::vector<std::string>{"first line", "second", "third one here"}));
}

TEST(line_splitter, random_chunking_gives_the_same_lines) {
  std::string stream;
  std::vector<std::string> expected;
  for (int i = 0; i < 200; ++i) {
    std::string line = "{\"n\":" + std::to_string(i) + ",\"pad\":\"" +
                       std::string(static_cast<std::size_t>(i * 7 % 300), 'x') + "\"}";
    expected.push_back(line);
    stream += line + (i % 3 == 0 ? "\r\n" : "\n");
  }
  std::mt19937 rng(42);
  for (int round = 0; round < 20; ++round) {
    collector c;
    std::size_t pos = 0;
    while (pos < stream.size()) {
      const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 500)(rng);
      c.feed(std::string_view(stream).substr(pos, n));
      pos += n;
    }
    EXPECT_EQ(c.out, expected);
  }
}

TEST(line_splitter, crlf_split_between_chunks) {
  collector c;
  c.feed("abc\r");
  c.feed("\ndef\r\n");
  EXPECT_EQ(c.out, (std::vector<std::string>{"abc", "def"}));
}

TEST(line_splitter, empty_lines_and_lone_cr_are_skipped) {
  collector c;
  c.feed("\n\r\n\n");
  EXPECT_TRUE(c.out.empty());
}

TEST(line_splitter, over_long_line_in_one_chunk_then_recovery) {
  collector c(10);
  c.feed("0123456789\n01234567890\nok\n");
  ASSERT_EQ(c.out.size(), 3U);
  EXPECT_EQ(c.out[0], "0123456789");  // exactly at the bound
  EXPECT_EQ(c.out[1].rfind("!watch event line longer than 10 bytes", 0), 0U) << c.out[1];
  EXPECT_EQ(c.out[2], "ok");
}

TEST(line_splitter, over_long_line_across_chunks_is_bounded_and_reported_once) {
  collector c(16);
  c.feed("short\n");
  for (int i = 0; i < 1000; ++i) {
    c.feed("xxxxxxxxxx");  // 10 000 bytes without a newline
    EXPECT_LE(c.splitter.buffered_bytes(), 17U);
  }
  c.feed("xx\nnext line\n");
  ASSERT_EQ(c.out.size(), 3U);
  EXPECT_EQ(c.out[0], "short");
  EXPECT_EQ(c.out[1][0], '!');
  EXPECT_EQ(c.out[2], "next line");
}

TEST(line_splitter, over_long_when_the_newline_arrives) {
  collector c(8);
  c.feed("12345");
  c.feed("6789\nafter\n");  // 9 bytes: one over the bound, noticed at the newline
  ASSERT_EQ(c.out.size(), 2U);
  EXPECT_EQ(c.out[0][0], '!');
  EXPECT_EQ(c.out[1], "after");
}

TEST(line_splitter, crlf_at_the_bound_is_not_too_long) {
  collector c(4);
  c.feed("abcd\r");
  c.feed("\n");
  EXPECT_EQ(c.out, (std::vector<std::string>{"abcd"}));
}

// The default bound is 8 MiB (a JSON parser needs many times a line while parsing, and the
// process runs under a memory limit): a line of exactly 8 MiB passes, one byte more does not.
TEST(line_splitter, the_default_bound_is_8_mib) {
  constexpr std::size_t mib8 = std::size_t{8} << 20U;
  collector c;
  c.feed(std::string(mib8, 'x') + "\n");
  ASSERT_EQ(c.out.size(), 1U);
  EXPECT_EQ(c.out[0].size(), mib8);
  c.out.clear();
  c.feed(std::string(mib8 + 1, 'y') + "\nok\n");
  ASSERT_EQ(c.out.size(), 2U);
  EXPECT_EQ(c.out[0].front(), '!');
  EXPECT_EQ(c.out[1], "ok");
}

TEST(line_splitter, reset_drops_a_partial_line) {
  collector c;
  c.feed("partial");
  c.splitter.reset();
  EXPECT_FALSE(c.splitter.has_partial_line());
  c.feed("whole\n");
  EXPECT_EQ(c.out, (std::vector<std::string>{"whole"}));
}

}  // namespace
}  // namespace tec::k8sclient

// The helpers every writer shares: API error values, path and query
// escaping.

#include "tec/k8sclient/api_error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>

#include "tec/k8sclient/paths.hpp"

namespace tec::k8sclient {
namespace {

using nlohmann::json;

std::string status_body(unsigned code, const std::string& reason, const std::string& message) {
  return json{{"kind", "Status"},   {"apiVersion", "v1"}, {"status", "Failure"},
              {"message", message}, {"reason", reason},   {"code", code}}
      .dump();
}

TEST(paths, escapes_path_segments) {
  EXPECT_EQ(escape_path_segment("web-0.a_b~"), "web-0.a_b~");
  EXPECT_EQ(escape_path_segment("a/b?c"), "a%2Fb%3Fc");
  EXPECT_EQ(escape_path_segment(std::string_view("a b\0%\xc3\xa9", 7)), "a%20b%00%25%C3%A9");
}

TEST(paths, escapes_continue_tokens_as_query_values) {
  EXPECT_EQ(escape_path_segment("eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ=="),
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ%3D%3D");
  EXPECT_EQ(escape_path_segment("a/b+c&d"), "a%2Fb%2Bc%26d");
}

TEST(api_error, uses_the_status_message_or_a_bounded_body) {
  auto err = api_error("DELETE pod a/b", response{403, status_body(403, "Forbidden", "nope")});
  EXPECT_EQ(err.code, make_error_code(base::errc::forbidden));
  EXPECT_EQ(err.http_status, 403);
  EXPECT_EQ(err.message, "DELETE pod a/b: 403 Forbidden: nope");

  auto raw = api_error("x", response{502, std::string(1000, 'z')});
  EXPECT_EQ(raw.code, make_error_code(base::errc::server_error));
  EXPECT_LT(raw.message.size(), 300U);

  auto odd = api_error("x", response{418, "[1,2"});
  EXPECT_EQ(odd.code, make_error_code(base::errc::http_status));
  EXPECT_EQ(error_reason(odd), "http_418");
}

}  // namespace
}  // namespace tec::k8sclient

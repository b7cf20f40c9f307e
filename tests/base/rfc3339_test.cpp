// RFC 3339: the one formatter, at each precision its users need (the API's metav1.Time and
// MicroTime, the JSON reports' milliseconds, the scheduled event's seconds), and the parser.

#include "tec/base/rfc3339.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace tec::base {
namespace {

using std::chrono::system_clock;
using namespace std::chrono_literals;

const system_clock::time_point fixed_wall{std::chrono::microseconds{1714564800123456}};

TEST(rfc3339, seconds_and_microseconds) {
  EXPECT_EQ(format_rfc3339(fixed_wall), "2024-05-01T12:00:00Z");
  EXPECT_EQ(format_rfc3339(fixed_wall, rfc3339_digits::microseconds),
            "2024-05-01T12:00:00.123456Z");
  EXPECT_EQ(format_rfc3339(system_clock::time_point{}, rfc3339_digits::microseconds),
            "1970-01-01T00:00:00.000000Z");
}

TEST(rfc3339, milliseconds) {
  const auto t = system_clock::time_point{} + std::chrono::seconds(1'700'000'000) + 42ms;
  EXPECT_EQ(format_rfc3339(t, rfc3339_digits::milliseconds), "2023-11-14T22:13:20.042Z");
}

TEST(rfc3339, seconds_are_floored_before_1970_and_leap_days_kept) {
  EXPECT_EQ(format_rfc3339(system_clock::time_point{}), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_rfc3339(system_clock::time_point(std::chrono::seconds(951'782'400))),
            "2000-02-29T00:00:00Z");
  EXPECT_EQ(format_rfc3339(system_clock::time_point(std::chrono::seconds(-1))),
            "1969-12-31T23:59:59Z");
  EXPECT_EQ(format_rfc3339(system_clock::time_point{} - 1ms, rfc3339_digits::milliseconds),
            "1969-12-31T23:59:59.999Z");
}

TEST(rfc3339, parse_forms) {
  EXPECT_EQ(parse_rfc3339("2024-05-01T12:34:56Z"), 1714566896);
  EXPECT_EQ(parse_rfc3339("2024-05-01T12:34:56.123456Z"), 1714566896);
  EXPECT_EQ(parse_rfc3339("2024-05-01T14:34:56+02:00"), 1714566896);
  EXPECT_EQ(parse_rfc3339("2024-05-01T10:04:56-02:30"), 1714566896);
  EXPECT_EQ(parse_rfc3339("2000-02-29T23:59:59Z"), 951868799);
  EXPECT_EQ(parse_rfc3339("1969-12-31T23:00:00Z"), -3600);
  for (const char* bad :
       {"", "2024-05-01", "2024-05-01T12:34:56", "2024-13-01T00:00:00Z", "2023-02-29T00:00:00Z",
        "2024-05-01T24:00:00Z", "2024-05-01T12:34:56.Z", "2024-05-01T12:34:56+0200",
        "2024-05-01T12:34:56Zjunk", "2024-05-01 12:34:56Z"}) {
    EXPECT_FALSE(parse_rfc3339(bad)) << bad;
  }
}

TEST(rfc3339, what_it_writes_it_reads) {
  const auto t = system_clock::time_point(std::chrono::seconds(1714566896));
  for (const auto digits :
       {rfc3339_digits::none, rfc3339_digits::milliseconds, rfc3339_digits::microseconds}) {
    EXPECT_EQ(parse_rfc3339(format_rfc3339(t + 5ms, digits)), 1714566896);
  }
}

}  // namespace
}  // namespace tec::base

#include "tec/base/rfc3339.hpp"

#include <fmt/format.h>

namespace tec::base {

namespace {

/// Reads `n` decimal digits at `pos`; -1 when any is not a digit.
int digits_at(std::string_view s, std::size_t pos, std::size_t n) noexcept {
  if (pos + n > s.size()) {
    return -1;
  }
  int value = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') {
      return -1;
    }
    value = value * 10 + (s[i] - '0');
  }
  return value;
}

}  // namespace

std::string format_rfc3339(std::chrono::system_clock::time_point t, rfc3339_digits digits) {
  using namespace std::chrono;
  const auto micros = floor<microseconds>(t);
  const auto secs = floor<seconds>(micros);
  const auto day = floor<days>(secs);
  const year_month_day ymd{day};
  const hh_mm_ss hms{secs - day};
  std::string out =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  hms.hours().count(), hms.minutes().count(), hms.seconds().count());
  const auto fraction = (micros - secs).count();  // [0, 999999]
  if (digits == rfc3339_digits::milliseconds) {
    out += fmt::format(".{:03}", fraction / 1000);
  } else if (digits == rfc3339_digits::microseconds) {
    out += fmt::format(".{:06}", fraction);
  }
  out += 'Z';
  return out;
}

std::optional<std::int64_t> parse_rfc3339(std::string_view s) noexcept {
  using namespace std::chrono;
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+hh:mm|-hh:mm)
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
      s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  const int y = digits_at(s, 0, 4);
  const int m = digits_at(s, 5, 2);
  const int d = digits_at(s, 8, 2);
  const int hour = digits_at(s, 11, 2);
  const int minute = digits_at(s, 14, 2);
  const int second = digits_at(s, 17, 2);
  if (y < 0 || m < 0 || d < 0 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 ||
      second > 59) {
    return std::nullopt;
  }
  const year_month_day date{year{y}, month{static_cast<unsigned>(m)},
                            day{static_cast<unsigned>(d)}};
  if (!date.ok()) {  // month 1-12, a day the month has (leap years included)
    return std::nullopt;
  }
  std::size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const std::size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      ++pos;
    }
    if (pos == start || pos - start > 9) {
      return std::nullopt;
    }
  }
  std::int64_t offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int oh = digits_at(s, pos + 1, 2);
    const int om = digits_at(s, pos + 4, 2);
    if (pos + 6 > s.size() || s[pos + 3] != ':' || oh < 0 || oh > 23 || om < 0 || om > 59) {
      return std::nullopt;
    }
    offset =
        std::int64_t{s[pos] == '+' ? 1 : -1} * (std::int64_t{oh} * 3600 + std::int64_t{om} * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) {
    return std::nullopt;
  }
  const std::int64_t days_since_epoch = sys_days{date}.time_since_epoch().count();
  return days_since_epoch * 86400 + std::int64_t{hour} * 3600 + std::int64_t{minute} * 60 + second -
         offset;
}

}  // namespace tec::base

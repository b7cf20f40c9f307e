#include "tec/informers/records.hpp"

namespace tec::informers {
namespace {

/// Reads `n` decimal digits at `pos`; -1 when any is not a digit.
int digits(std::string_view s, std::size_t pos, std::size_t n) noexcept {
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

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool leap(int y) noexcept {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

}  // namespace

controller::taint_effect parse_taint_effect(std::string_view text) noexcept {
  using controller::taint_effect;
  if (text == "NoExecute") {
    return taint_effect::no_execute;
  }
  if (text == "NoSchedule") {
    return taint_effect::no_schedule;
  }
  if (text == "PreferNoSchedule") {
    return taint_effect::prefer_no_schedule;
  }
  return taint_effect::unknown;
}

controller::toleration_operator parse_toleration_operator(std::string_view text) noexcept {
  using controller::toleration_operator;
  if (text.empty() || text == "Equal") {
    return toleration_operator::equal;
  }
  if (text == "Exists") {
    return toleration_operator::exists;
  }
  if (text == "Lt") {
    return toleration_operator::lt;
  }
  if (text == "Gt") {
    return toleration_operator::gt;
  }
  return toleration_operator::unknown;
}

controller::pod_phase parse_pod_phase(std::string_view text) noexcept {
  using controller::pod_phase;
  if (text == "Running") {
    return pod_phase::running;
  }
  if (text == "Pending") {
    return pod_phase::pending;
  }
  if (text == "Succeeded") {
    return pod_phase::succeeded;
  }
  if (text == "Failed") {
    return pod_phase::failed;
  }
  return pod_phase::unknown;
}

std::optional<std::int64_t> parse_rfc3339(std::string_view s) noexcept {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+hh:mm|-hh:mm)
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
      s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  const int year = digits(s, 0, 4);
  const int month = digits(s, 5, 2);
  const int day = digits(s, 8, 2);
  const int hour = digits(s, 11, 2);
  const int minute = digits(s, 14, 2);
  const int second = digits(s, 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 ||
      minute > 59 || second < 0 || second > 59) {
    return std::nullopt;
  }
  static constexpr int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const int max_day = month_days[month - 1] + (month == 2 && leap(year) ? 1 : 0);
  if (day > max_day) {
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
    const int oh = digits(s, pos + 1, 2);
    const int om = digits(s, pos + 4, 2);
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
  const std::int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  return days * 86400 + std::int64_t{hour} * 3600 + std::int64_t{minute} * 60 + second - offset;
}

}  // namespace tec::informers

#include "tec/base/duration.hpp"

#include <cmath>
#include <cstdint>

namespace tec::base {

std::optional<std::chrono::milliseconds> parse_go_duration(std::string_view text) {
  // Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+, or "0".
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s == "0") {
    return std::chrono::milliseconds{0};
  }
  if (s.empty()) {
    return std::nullopt;
  }
  long double total_ns = 0;
  while (!s.empty()) {
    std::size_t i = 0;
    long double value = 0;
    bool digits = false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      value = value * 10 + (s[i] - '0');
      digits = true;
      ++i;
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      long double scale = 0.1L;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        value += (s[i] - '0') * scale;
        scale /= 10;
        digits = true;
        ++i;
      }
    }
    if (!digits) {
      return std::nullopt;
    }
    std::size_t j = i;
    while (j < s.size() && !(s[j] >= '0' && s[j] <= '9') && s[j] != '.') {
      ++j;
    }
    const std::string_view unit = s.substr(i, j - i);
    long double ns_per_unit = 0;
    if (unit == "ns") {
      ns_per_unit = 1;
    } else if (unit == "us" || unit == "\u00b5s" || unit == "\u03bcs") {
      ns_per_unit = 1e3L;
    } else if (unit == "ms") {
      ns_per_unit = 1e6L;
    } else if (unit == "s") {
      ns_per_unit = 1e9L;
    } else if (unit == "m") {
      ns_per_unit = 60e9L;
    } else if (unit == "h") {
      ns_per_unit = 3600e9L;
    } else {
      return std::nullopt;  // a missing or unknown unit
    }
    total_ns += value * ns_per_unit;
    s.remove_prefix(j);
  }
  // Go's limit is ~292 years in int64 nanoseconds.
  if (total_ns > 9.2e18L) {
    return std::nullopt;
  }
  const auto ms = static_cast<std::int64_t>(std::llround(static_cast<double>(total_ns / 1e6L)));
  return std::chrono::milliseconds{negative ? -ms : ms};
}

std::string format_duration(std::chrono::milliseconds d) {
  std::int64_t ms = d.count();
  std::string out;
  if (ms < 0) {
    out.push_back('-');
    ms = -ms;
  }
  if (ms == 0) {
    return "0s";
  }
  if (ms < 1000) {
    return out + std::to_string(ms) + "ms";
  }
  const std::int64_t h = ms / 3'600'000;
  const std::int64_t m = (ms / 60'000) % 60;
  const std::int64_t s = (ms / 1000) % 60;
  const std::int64_t rest = ms % 1000;
  if (h > 0) {
    out += std::to_string(h) + "h";
  }
  if (h > 0 || m > 0) {
    out += std::to_string(m) + "m";
  }
  out += std::to_string(s);
  if (rest > 0) {
    std::string frac = std::to_string(rest + 1000).substr(1);
    while (frac.back() == '0') {
      frac.pop_back();
    }
    out += "." + frac;
  }
  return out + "s";
}

}  // namespace tec::base

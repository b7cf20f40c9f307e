#include "tec/controller/ports.hpp"

#include <array>
#include <cstdio>

namespace tec::controller {

std::string format_rfc3339_seconds(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto secs = floor<seconds>(t);
  const auto day = floor<days>(secs);
  const year_month_day ymd{day};
  const hh_mm_ss hms{secs - day};
  std::array<char, 32> buf{};
  const int n = std::snprintf(
      buf.data(), buf.size(), "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
      static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
      static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
      static_cast<int>(hms.seconds().count()));
  return {buf.data(), n > 0 ? static_cast<std::size_t>(n) : 0};
}

std::string describe_taint(const taint& t) {
  std::string out = t.key;
  if (!t.value.empty()) {
    out.push_back('=');
    out += t.value;
  }
  out += t.effect == taint_effect::no_execute ? ":NoExecute" : ":Other";
  return out;
}

std::string scheduled_event_detail(std::chrono::system_clock::time_point due, const taint& t,
                                   std::int64_t seconds) {
  std::string out = format_rfc3339_seconds(due);
  out.append(": taint ").append(describe_taint(t));
  out.append(", tolerationSeconds ").append(std::to_string(seconds));
  return out;
}

}  // namespace tec::controller

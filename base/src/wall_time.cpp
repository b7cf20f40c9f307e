#include "tec/base/wall_time.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace tec::base {

std::string format_rfc3339_ms(wall_clock::time_point t) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const auto secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  const auto frac = static_cast<int>(ms - static_cast<std::int64_t>(secs) * 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::array<char, 40> buf{};
  const auto n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf.data(), n);
  std::array<char, 8> f{};
  std::snprintf(f.data(), f.size(), ".%03dZ", frac);
  out += f.data();
  return out;
}

}  // namespace tec::base

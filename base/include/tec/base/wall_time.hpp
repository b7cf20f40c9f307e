#pragma once

// Wall-clock times for the JSON reports on the metrics port (/debug/shadow,
// /debug/evictions): the driver's steady clock mapped onto the wall clock, and RFC 3339 with
// milliseconds. Pure; any thread.

#include <chrono>
#include <string>

namespace tec::base {

using wall_clock = std::chrono::system_clock;

/// `t` as RFC 3339 in UTC with milliseconds ("2026-11-23T08:40:00.123Z").
[[nodiscard]] std::string format_rfc3339_ms(wall_clock::time_point t);

/// Maps the driver's (steady) clock onto the wall clock: both read once, at construction.
/// Good enough for a report (a wall clock step later shifts the reported times, nothing else).
class clock_bridge {
public:
  clock_bridge()
      : steady_origin_(std::chrono::steady_clock::now()), wall_origin_(wall_clock::now()) {}
  clock_bridge(std::chrono::steady_clock::time_point steady_origin,
               wall_clock::time_point wall_origin)
      : steady_origin_(steady_origin), wall_origin_(wall_origin) {}
  [[nodiscard]] wall_clock::time_point wall(std::chrono::steady_clock::time_point t) const {
    return wall_origin_ + std::chrono::duration_cast<wall_clock::duration>(t - steady_origin_);
  }

private:
  std::chrono::steady_clock::time_point steady_origin_;
  wall_clock::time_point wall_origin_;
};

}  // namespace tec::base

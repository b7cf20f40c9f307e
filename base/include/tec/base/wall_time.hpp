#pragma once

// Wall-clock times for the JSON reports on the metrics port (/debug/shadow,
// /debug/evictions): the driver's steady clock mapped onto the wall clock (tec/base/rfc3339.hpp
// writes them). Pure; any thread.

#include <chrono>

namespace tec::base {

using wall_clock = std::chrono::system_clock;

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

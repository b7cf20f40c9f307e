#pragma once

#include <memory>

#include "tec/base/clock.hpp"

namespace tec::async {

/// The production alarm clock: base::real_clock()'s time (steady_clock, system_clock) with
/// Asio steady_timers for the alarms (shared; stateless).
std::shared_ptr<base::alarm_clock> real_alarm_clock();

}  // namespace tec::async

#pragma once

// The queue's timer (private to timedqueue/src).

#include "tec/timedqueue/timed_queue.hpp"

#include <functional>
#include <optional>
#include <utility>

namespace tec::timedqueue::detail {

/// A deadline that is never reached: entries due then never fire (and backoff saturates there).
constexpr time_point never = time_point::max();

/// The driver's one timer, armed for the earliest time the queue must wake, and armed again
/// only for an earlier time: cancels do not re-arm, a timer that fires early finds nothing due
/// and re-arms to the new earliest.
///
/// Thread-safety: guarded by the queue's mutex, so that arms reach the driver in order.
class wake_timer {
public:
  explicit wake_timer(driver& drv) : drv_(drv) {}

  /// What the timer calls (through the driver); set once, before the first arm_for().
  void set_on_due(std::function<void()> on_due) { on_due_ = std::move(on_due); }

  /// Arms the driver for `due` unless it is armed for that time or earlier (or `due` is never).
  void arm_for(time_point due) {
    if (due == never || (armed_ && *armed_ <= due)) {
      return;
    }
    armed_ = due;
    drv_.arm(due, on_due_);
  }

  /// The timer's callback runs: it is not armed any more.
  void fired() { armed_.reset(); }

  /// After a tick: arms for `next`, or disarms the driver when `next` is never and nothing
  /// since fired() armed it.
  void rearm(time_point next) {
    if (next != never) {
      arm_for(next);
    } else if (!armed_) {
      drv_.disarm();
    }
  }

  void disarm() {
    armed_.reset();
    drv_.disarm();
  }

private:
  driver& drv_;
  std::function<void()> on_due_;
  std::optional<time_point> armed_;
};

}  // namespace tec::timedqueue::detail

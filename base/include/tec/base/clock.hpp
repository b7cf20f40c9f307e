#pragma once

// The one clock (client-go's k8s.io/utils/clock): now() on the steady clock for deadlines,
// waits and the timed queue, wall() for the times written or reported. alarm_clock adds
// one-shot alarms: every deadline and wait of the client and the reflector, and the timed
// queue's timer. Tests substitute tests/support/manual_clock.hpp (now() and wall() move
// together when advanced, and fire the alarms), so no test waits on wall time. Production:
// real_clock() here and async::real_alarm_clock() (tec/asio/real_alarm_clock.hpp), so that
// what only reads the time (the controller) links no Asio.
//
// Thread-safety: now(), wall() and at() may be called from any thread. An alarm's callback is
// posted to the executor given to at(); destroying the alarm on that executor guarantees the
// callback will not run (not even one already due and posted).

#include <chrono>
#include <functional>
#include <memory>

namespace boost::asio {
class any_io_executor;  // <boost/asio/any_io_executor.hpp>, which callers of at() include.
}  // namespace boost::asio

namespace tec::base {

using wall_clock = std::chrono::system_clock;

class clock {
public:
  using time_point = std::chrono::steady_clock::time_point;

  clock() = default;
  virtual ~clock() = default;
  clock(const clock&) = delete;
  clock& operator=(const clock&) = delete;

  [[nodiscard]] virtual time_point now() = 0;

  /// The wall clock's time now. Neither allocates.
  [[nodiscard]] virtual wall_clock::time_point wall() = 0;
};

/// A clock that also rings.
class alarm_clock : public clock {
public:
  /// A scheduled callback; destroying it cancels the callback.
  class alarm {
  public:
    alarm() = default;
    virtual ~alarm() = default;
    alarm(const alarm&) = delete;
    alarm& operator=(const alarm&) = delete;
  };

  /// Posts `fire` to `ex` once now() reaches `when` (at once if it already has), unless the
  /// returned alarm is destroyed first.
  [[nodiscard]] virtual std::unique_ptr<alarm> at(const boost::asio::any_io_executor& ex,
                                                  time_point when, std::function<void()> fire) = 0;
};

/// steady_clock and system_clock (shared; stateless).
std::shared_ptr<clock> real_clock();

/// Maps steady times kept earlier onto the wall clock, for the JSON reports on the metrics port
/// (/debug/shadow, /debug/evictions): both clocks read once, at construction. Good enough for a
/// report (a wall clock step later shifts the reported times, nothing else). Pure; any thread.
class clock_bridge {
public:
  explicit clock_bridge(clock& c) : clock_bridge(c.now(), c.wall()) {}
  clock_bridge(clock::time_point steady_origin, wall_clock::time_point wall_origin)
      : steady_origin_(steady_origin), wall_origin_(wall_origin) {}
  [[nodiscard]] wall_clock::time_point wall(clock::time_point t) const {
    return wall_origin_ + std::chrono::duration_cast<wall_clock::duration>(t - steady_origin_);
  }

private:
  clock::time_point steady_origin_;
  wall_clock::time_point wall_origin_;
};

}  // namespace tec::base

#pragma once

// A driver for tests: a manual clock (tests/support/manual_clock.hpp) that only moves when told
// to, and a runner that either runs posted work inline, when the test says so, or records it
// for the test to run.
//
// Thread-safe (one mutex, never held while running a callback), but time only moves in
// advance(), so tests drive it from one thread. Posted work never runs inside post() or arm().

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "support/manual_clock.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::timedqueue {

class manual_driver final : public driver {
public:
  /// `run_posted_inline`: posted work runs inside run_pending()/advance() automatically
  /// (true), or waits in a list until the test calls run_pending() (false).
  static constexpr time_point default_start = time_point{} + std::chrono::hours(1);

  explicit manual_driver(time_point start = default_start, bool run_posted_inline = true);
  /// On `clock` (shared with what reads its wall(), such as controller_options::clock).
  explicit manual_driver(std::shared_ptr<test::manual_clock> clock, bool run_posted_inline = true);

  [[nodiscard]] time_point now() const override;
  void arm(time_point deadline, std::function<void()> on_due) override;
  void disarm() override;
  void post(std::function<void()> fn) override;

  /// Moves the clock forward by `d` (saturating at time_point::max()), firing the timer (if
  /// due) and running posted work after every deadline crossed on the way, in time order, so
  /// entries fire at their own deadline. Without run_posted_inline, a due timer callback is
  /// only queued with the posted work, and the clock ends at now() + d.
  void advance(duration d);
  /// Runs posted work (including work posted while running) until none is left, and the
  /// timer callback if the timer is armed to a deadline <= now(). Returns how many functions
  /// ran (timer callbacks included).
  std::size_t run_pending();
  /// From now on the timer fires `late` after its deadline (a busy machine's late wake-ups):
  /// advance() moves the clock to deadline + late before calling it.
  void set_lateness(duration late);
  /// How many posted functions wait to run.
  [[nodiscard]] std::size_t posted() const;
  [[nodiscard]] std::optional<time_point> armed_deadline() const;

private:
  mutable std::mutex mu_;
  const std::shared_ptr<test::manual_clock> clock_;  ///< Moved under mu_.
  bool inline_;
  std::optional<time_point> deadline_;
  duration late_{0};
  std::function<void()> on_due_;
  std::deque<std::function<void()>> posted_;
};

}  // namespace tec::timedqueue

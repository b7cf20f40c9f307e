#pragma once

// Where the client and the reflector take time from: now() and one-shot alarms. Every deadline
// (dial, TLS handshake, request, the idle guard of a watch, waits for a pooled connection) and
// every wait (QPS, Retry-After, network-retry and reflector backoff) is an alarm on this clock,
// so tests substitute a manual clock they advance by hand and no test waits on wall time.
// The production clock is std::chrono::steady_clock with Asio timers.
//
// Thread-safety: now() and at() may be called from any thread. An alarm's callback is posted to
// the executor given to at(); destroying the alarm on that executor guarantees the callback
// will not run (not even one already due and posted).

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>

namespace tec::k8sclient {

class clock {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// A scheduled callback; destroying it cancels the callback.
  class alarm {
  public:
    alarm() = default;
    virtual ~alarm() = default;
    alarm(const alarm&) = delete;
    alarm& operator=(const alarm&) = delete;
  };

  clock() = default;
  virtual ~clock() = default;
  clock(const clock&) = delete;
  clock& operator=(const clock&) = delete;

  [[nodiscard]] virtual time_point now() = 0;

  /// Posts `fire` to `ex` once now() reaches `when` (at once if it already has), unless the
  /// returned alarm is destroyed first.
  [[nodiscard]] virtual std::unique_ptr<alarm> at(const boost::asio::any_io_executor& ex,
                                                  time_point when, std::function<void()> fire) = 0;
};

/// steady_clock and asio::steady_timer (shared; stateless).
std::shared_ptr<clock> steady_clock_source();

}  // namespace tec::k8sclient

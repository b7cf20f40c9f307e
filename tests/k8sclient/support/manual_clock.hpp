#pragma once

// A k8sclient::clock tests advance by hand (Seastar's manual_clock, client-go's fake clock): time
// stands still until advance(), which posts every alarm that came due to its executor. With
// client_options::connector (an in-memory transport) nothing in a client test then depends on
// wall time: a deadline or a backoff fires because the test moved the clock past it.
//
// Thread-safety: every member may be called from any thread.

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "tec/k8sclient/clock.hpp"

namespace tec::k8sclient::testing {

class manual_clock final : public k8sclient::clock {
public:
  /// Starts at an arbitrary fixed point, far from the epoch (so `now - 1h` is valid).
  manual_clock() = default;

  time_point now() override;
  std::unique_ptr<alarm> at(const boost::asio::any_io_executor& ex, time_point when,
                            std::function<void()> fire) override;

  /// Moves time forward by `d` and posts the alarms now due (earliest first).
  void advance(std::chrono::nanoseconds d);

  /// When the earliest alarm still armed is due; nullopt when none is.
  [[nodiscard]] std::optional<time_point> next_alarm();

  /// Alarms still armed (not fired, not destroyed).
  [[nodiscard]] std::size_t armed();

private:
  struct entry;
  class handle;
  void post_due();  // mu_ held

  std::mutex mu_;
  time_point now_ = time_point{} + std::chrono::hours{24 * 365};
  std::multimap<time_point, std::shared_ptr<entry>> pending_;
};

}  // namespace tec::k8sclient::testing

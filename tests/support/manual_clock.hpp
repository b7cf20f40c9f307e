#pragma once

// The base::clock of the tests, advanced by hand (Seastar's manual_clock, client-go's fake
// clock): time stands still until advance(), which moves now() and wall() together and posts
// every alarm that came due to its executor. With client_options::connector (an in-memory
// transport) nothing in a client test then depends on wall time: a deadline or a backoff fires
// because the test moved the clock past it.
//
// Thread-safety: every member may be called from any thread.

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "tec/base/clock.hpp"

namespace tec::test {

class manual_clock final : public base::clock {
public:
  static constexpr base::wall_clock::time_point wall_2024{std::chrono::seconds{1'704'067'200}};

  /// By default, starts at an arbitrary fixed point far from the epoch (so `now - 1h` is
  /// valid), wall() at 2024-01-01T00:00:00Z.
  explicit manual_clock(time_point start = time_point{} + std::chrono::hours{24 * 365},
                        base::wall_clock::time_point wall_start = wall_2024);

  time_point now() override;
  base::wall_clock::time_point wall() override;
  std::unique_ptr<alarm> at(const boost::asio::any_io_executor& ex, time_point when,
                            std::function<void()> fire) override;

  /// Moves time (now() and wall()) forward by `d` and posts the alarms now due (earliest first).
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
  const time_point start_;
  const base::wall_clock::time_point wall_start_;
  time_point now_;
  std::multimap<time_point, std::shared_ptr<entry>> pending_;
};

}  // namespace tec::test

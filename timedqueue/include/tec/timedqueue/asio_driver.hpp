#pragma once

// The production driver: a base::clock (its now() and one alarm at a time for the timer),
// work posted to an Asio executor (typically a thread pool or io_context run by one or more
// threads).
//
// Thread-safe: now(), arm(), disarm() and post() may be called from any thread. The alarm is
// set and destroyed on a strand of the timer executor and on_due runs there. Its state is
// shared with the handlers it posts, so a handler that runs after the driver is destroyed does
// nothing. The executors (their io_context or thread_pool) must outlive the driver, which
// posts a disarm from its destructor.

#include <boost/asio/any_io_executor.hpp>
#include <memory>

#include "tec/base/clock.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::timedqueue {

class asio_driver final : public driver {
public:
  /// The timer runs on a strand of `timer_executor`; work is posted to `work_executor`.
  asio_driver(const boost::asio::any_io_executor& timer_executor,
              boost::asio::any_io_executor work_executor,
              std::shared_ptr<base::clock> clock = base::real_clock());
  ~asio_driver() override;

  [[nodiscard]] time_point now() const override;
  void arm(time_point deadline, std::function<void()> on_due) override;
  void disarm() override;
  void post(std::function<void()> fn) override;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace tec::timedqueue

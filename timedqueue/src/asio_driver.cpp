#include "tec/timedqueue/asio_driver.hpp"

#include <mutex>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

namespace tec::timedqueue {

/// Shared with every handler it posts, so a handler that runs after the driver is gone finds
/// live (if retired) state. All timer operations run on `strand`; `generation` orders arm and
/// disarm calls made from any thread: a strand task or a timer wake-up that belongs to an
/// older call sees a newer generation and does nothing.
struct asio_driver::impl : std::enable_shared_from_this<asio_driver::impl> {
  impl(const boost::asio::any_io_executor& timer_executor,
       boost::asio::any_io_executor work_executor, std::shared_ptr<base::clock> c)
      : clock(std::move(c)),
        strand(boost::asio::make_strand(timer_executor)),
        work(std::move(work_executor)) {}

  /// Runs on the strand.
  void start_wait(std::uint64_t gen, time_point deadline, std::function<void()> on_due) {
    {
      std::lock_guard lock(mu);
      if (gen != generation) {
        return;
      }
    }
    // Replacing the alarm cancels the one of an older arm(); the alarm fires on the strand.
    alarm = clock->at(strand, deadline, [weak = weak_from_this(), gen, on_due = std::move(on_due)] {
      auto self = weak.lock();
      if (!self) {
        return;
      }
      {
        std::lock_guard lock(self->mu);
        if (gen != self->generation) {
          return;
        }
      }
      on_due();
    });
  }

  std::shared_ptr<base::clock> clock;
  boost::asio::strand<boost::asio::any_io_executor> strand;
  boost::asio::any_io_executor work;
  std::unique_ptr<base::clock::alarm> alarm;  ///< Only touched on the strand.
  std::mutex mu;
  std::uint64_t generation = 0;  ///< Guarded by mu.
};

asio_driver::asio_driver(const boost::asio::any_io_executor& timer_executor,
                         boost::asio::any_io_executor work_executor,
                         std::shared_ptr<base::clock> clock)
    : impl_(std::make_shared<impl>(timer_executor, std::move(work_executor), std::move(clock))) {}

asio_driver::~asio_driver() {
  disarm();
}

time_point asio_driver::now() const {
  return impl_->clock->now();
}

// arm() and disarm() post while holding `mu`, so their tasks reach the strand in the order of
// their generations, whichever threads call them.

void asio_driver::arm(time_point deadline, std::function<void()> on_due) {
  std::lock_guard lock(impl_->mu);
  const std::uint64_t gen = ++impl_->generation;
  boost::asio::post(impl_->strand,
                    [self = impl_, gen, deadline, on_due = std::move(on_due)]() mutable {
                      self->start_wait(gen, deadline, std::move(on_due));
                    });
}

void asio_driver::disarm() {
  std::lock_guard lock(impl_->mu);
  ++impl_->generation;
  boost::asio::post(impl_->strand, [self = impl_] { self->alarm.reset(); });
}

void asio_driver::post(std::function<void()> fn) {
  boost::asio::post(impl_->work, std::move(fn));
}

}  // namespace tec::timedqueue

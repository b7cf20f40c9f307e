#include "tec/base/clock.hpp"

#include <boost/asio/steady_timer.hpp>

namespace tec::base {

namespace {

class real_source final : public clock {
public:
  time_point now() override { return std::chrono::steady_clock::now(); }
  wall_clock::time_point wall() override { return wall_clock::now(); }

  std::unique_ptr<alarm> at(const boost::asio::any_io_executor& ex, time_point when,
                            std::function<void()> fire) override {
    return std::make_unique<timer_alarm>(ex, when, std::move(fire));
  }

private:
  // The timer is shared with its handler, which checks `cancelled`: a timer that expired before
  // the alarm was destroyed has its handler queued already, and cancel() cannot recall it.
  class timer_alarm final : public alarm {
  public:
    timer_alarm(const boost::asio::any_io_executor& ex, time_point when, std::function<void()> fire)
        : state_(std::make_shared<state>(ex, when)) {
      state_->timer.async_wait(
          [s = state_, fire = std::move(fire)](const boost::system::error_code& ec) {
            if (!ec && !s->cancelled) {
              fire();
            }
          });
    }
    ~timer_alarm() override {
      state_->cancelled = true;
      state_->timer.cancel();
    }
    timer_alarm(const timer_alarm&) = delete;
    timer_alarm& operator=(const timer_alarm&) = delete;

  private:
    struct state {
      state(const boost::asio::any_io_executor& ex, time_point when) : timer(ex, when) {}
      boost::asio::steady_timer timer;
      bool cancelled = false;
    };
    std::shared_ptr<state> state_;
  };
};

}  // namespace

std::shared_ptr<clock> real_clock() {
  static const auto source = std::make_shared<real_source>();
  return source;
}

}  // namespace tec::base

#include "support/manual_driver.hpp"

#include <utility>

namespace tec::timedqueue {

manual_driver::manual_driver(time_point start, bool run_posted_inline)
    : manual_driver(std::make_shared<test::manual_clock>(start), run_posted_inline) {}

manual_driver::manual_driver(std::shared_ptr<test::manual_clock> clock, bool run_posted_inline)
    : clock_(std::move(clock)), inline_(run_posted_inline) {}

time_point manual_driver::now() const {
  return clock_->now();
}

void manual_driver::arm(time_point deadline, std::function<void()> on_due) {
  std::lock_guard lock(mu_);
  deadline_ = deadline;
  on_due_ = std::move(on_due);
}

void manual_driver::disarm() {
  std::lock_guard lock(mu_);
  deadline_.reset();
  on_due_ = nullptr;
}

void manual_driver::set_lateness(duration late) {
  std::lock_guard lock(mu_);
  late_ = late;
}

void manual_driver::post(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  posted_.push_back(std::move(fn));
}

void manual_driver::advance(duration d) {
  time_point target;
  {
    std::lock_guard lock(mu_);
    const time_point now = clock_->now();
    target = d > duration::zero() && now > time_point::max() - d ? time_point::max() : now + d;
  }
  for (;;) {
    if (inline_) {
      run_pending();
    }
    std::function<void()> due;
    {
      std::lock_guard lock(mu_);
      const time_point fires = deadline_ && *deadline_ <= time_point::max() - late_
                                   ? *deadline_ + late_
                                   : time_point::max();
      if (!deadline_ || fires > target) {
        break;
      }
      if (fires > clock_->now()) {
        clock_->advance(fires - clock_->now());
      }
      deadline_.reset();
      due = std::exchange(on_due_, nullptr);
      if (!inline_) {
        // The callback waits with the rest of the posted work for run_pending().
        if (due) {
          posted_.push_back(std::move(due));
        }
        continue;
      }
    }
    if (due) {
      due();
    }
  }
  {
    std::lock_guard lock(mu_);
    if (target > clock_->now()) {
      clock_->advance(target - clock_->now());
    }
  }
  if (inline_) {
    run_pending();
  }
}

std::size_t manual_driver::run_pending() {
  std::size_t ran = 0;
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard lock(mu_);
      if (deadline_ && *deadline_ <= clock_->now()) {
        deadline_.reset();
        fn = std::exchange(on_due_, nullptr);
      } else if (!posted_.empty()) {
        fn = std::move(posted_.front());
        posted_.pop_front();
      } else {
        break;
      }
    }
    if (fn) {
      fn();
      ++ran;
    }
  }
  return ran;
}

std::size_t manual_driver::posted() const {
  std::lock_guard lock(mu_);
  return posted_.size();
}

std::optional<time_point> manual_driver::armed_deadline() const {
  std::lock_guard lock(mu_);
  return deadline_;
}

}  // namespace tec::timedqueue

#pragma once

// What a shutdown waits for (private to timedqueue/src).

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace tec::timedqueue::detail {

/// The queue's closed flag and what its shutdown waits for: the runs in flight (completions
/// handed to the work and not yet completed, detached runs included) and the threads between
/// deciding to post starts and having posted them (see starter::post).
///
/// Thread-safety: guarded by the queue's mutex; every function requires it held (the waits
/// take its lock and release it while they wait).
class run_gate {
public:
  [[nodiscard]] bool closed() const { return closed_; }
  /// Refuses everything from now on; false when it already did.
  bool close() { return !std::exchange(closed_, true); }

  /// A thread is to post starts (it holds the mutex now, posts without it, then calls
  /// post_ended()).
  void post_begins() { ++posting_; }
  void post_ended() {
    if (--posting_ == 0 && closed_) {
      cv_.notify_all();
    }
  }

  void run_begins() { ++active_runs_; }
  /// A run ended: when it was the last one after close(), returns the callbacks of
  /// wait_posts() to call (without the mutex).
  [[nodiscard]] std::vector<std::function<void()>> run_ended() {
    std::vector<std::function<void()>> idle;
    if (--active_runs_ == 0 && closed_) {
      idle.swap(idle_callbacks_);
      cv_.notify_all();
    }
    return idle;
  }

  /// After close(): waits until no thread is posting starts (only driver::post() calls are
  /// waited for here, never user code). True when no run is in flight either; otherwise
  /// `on_idle` (if set) is kept for the run_ended() of the last one.
  bool wait_posts(std::unique_lock<std::mutex>& lock, std::function<void()>& on_idle) {
    cv_.wait(lock, [this] { return posting_ == 0; });
    if (active_runs_ == 0) {
      return true;
    }
    if (on_idle) {
      idle_callbacks_.push_back(std::move(on_idle));
    }
    return false;
  }

  /// After close(): waits until no run is in flight.
  void wait_runs(std::unique_lock<std::mutex>& lock) {
    cv_.wait(lock, [this] { return active_runs_ == 0; });
  }

private:
  std::condition_variable cv_;
  bool closed_ = false;
  std::size_t active_runs_ = 0;
  std::size_t posting_ = 0;
  std::vector<std::function<void()>> idle_callbacks_;
};

}  // namespace tec::timedqueue::detail

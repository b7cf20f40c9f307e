#pragma once

// A thread of its own running an io_context: the daemon gives each job that must not wait
// behind another one of these (the control loop, serving, leader election), so that a slow
// request on the secure port never delays a timer, a watch or a lease renewal.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tec::async {

/// An io_context and the one thread that runs it, named for top -H and perf (at most 15
/// characters are kept).
///
/// Threads: start() and finish() from the owning thread (once each, in that order); context()
/// and executor() from any thread. Lifetime: the objects whose handlers run on it are destroyed
/// after finish() (or before start()); the io_context outlives them when the io_thread is
/// declared before them.
class io_thread {
public:
  using executor_type = boost::asio::io_context::executor_type;

  explicit io_thread(std::string name);
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;
  ~io_thread();

  [[nodiscard]] boost::asio::io_context& context() noexcept { return io_; }
  [[nodiscard]] executor_type executor() noexcept { return io_.get_executor(); }

  /// Runs the io_context until finish() lets it run out of work. An exception that leaves a
  /// handler is passed to `on_failure` (on the thread, which then ends).
  void start(std::function<void(const std::exception&)> on_failure);

  /// Lets the thread end once it has no work left, waits until `deadline`, then stops the
  /// io_context (pending handlers are dropped) and joins. True when it ran out of work in time.
  bool finish(std::chrono::steady_clock::time_point deadline);

  /// Whether the thread is running (between start() and its end).
  [[nodiscard]] bool running() const;

private:
  std::string name_;
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<executor_type> work_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool started_ = false;  // guarded by mutex_
  bool ended_ = false;    // guarded by mutex_
};

}  // namespace tec::async

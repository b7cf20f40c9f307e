#pragma once

// One owner for long-running coroutines (STYLE.md rule 8: structured shutdown, nothing
// detached). A task_group starts coroutines on one executor, counts them until their
// completion handler has run, and cancels them; its owner stops them in the order it needs
// through stages, and waits (with a deadline) until they have all finished.
//
// Why cancellation_signals owned by the group, rather than experimental::make_parallel_group
// or a bare counted gate: the tasks start at different times (the leader elector only once
// the caches are synced) and from different threads, which a parallel_group (all operations
// known when it is launched) cannot express; a bare gate counts but cannot cancel. Boost 1.81's
// cancellation_signal is not thread-safe, so every slot is bound and every signal emitted on
// the group's executor.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace tec::async {

/// Starts, counts and cancels coroutines on one executor.
///
/// A stage is a small number the owner picks per task (e.g. 0 for the leader election, 1 for
/// the watches, 2 for periodic jobs) to cancel and wait for groups of tasks in its own order;
/// the group gives stages no order of its own. Calls that take no stage act on every task.
///
/// Threads: every member may be called from any thread, but wait_idle() must not be called
/// from the executor's own thread (it blocks until handlers that run there have run). Tasks,
/// their completion handlers and the cancellation run on the executor.
/// Lifetime: the group must outlive the completion of every task it started, or the
/// executor's destruction of the unfinished ones (io_context::stop() and its destructor);
/// destroy it before its execution context is destroyed, and only after wait_idle() returned
/// true or the context stopped running.
class task_group {
public:
  using executor_type = boost::asio::any_io_executor;
  using clock = std::chrono::steady_clock;

  explicit task_group(executor_type executor) : executor_(std::move(executor)) {}
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;
  task_group(task_group&&) = delete;
  task_group& operator=(task_group&&) = delete;
  ~task_group() = default;

  /// Starts `task` on the executor in `stage`, unless close() was called (then returns false
  /// and neither the task nor `on_done` ever runs). When it finishes, `on_done` is called on
  /// the executor as co_spawn calls it (`void(std::exception_ptr)` for awaitable<void>,
  /// `void(std::exception_ptr, T)` for awaitable<T>); the task counts as running until
  /// on_done has returned.
  template <class T, class Handler>
  bool spawn(int stage, boost::asio::awaitable<T> task, Handler on_done) {
    auto e = admit(stage);
    if (!e) {
      return false;
    }
    // Bound on the executor: the signal is emitted there (cancel()), and a signal and its
    // slot must not be touched from two threads at once.
    boost::asio::dispatch(executor_, [this, e, task = std::move(task),
                                      on_done = std::move(on_done)]() mutable {
      boost::asio::co_spawn(
          executor_, std::move(task),
          boost::asio::bind_cancellation_slot(
              e->signal.slot(), [this, e, on_done = std::move(on_done)](auto&&... results) mutable {
                on_done(std::forward<decltype(results)>(results)...);
                finish(e);
              }));
    });
    return true;
  }

  /// From now on spawn() refuses new tasks (as a gate closes). Idempotent.
  void close();

  /// Emits terminal cancellation, on the executor, to every task of `stage` (every task when
  /// nullopt) started before this call and still running. A task ends when it notices (its
  /// next or current co_await of an Asio operation fails with operation_aborted); tasks that
  /// are not awaiting one notice when they next do.
  void cancel(std::optional<int> stage = std::nullopt);

  /// Blocks until no task of `stage` (of any stage when nullopt) is running, or until
  /// `deadline`; true when none runs. Not from the executor's thread.
  bool wait_idle(std::optional<int> stage, clock::time_point deadline);

  /// Tasks of `stage` (of any stage when nullopt) running now.
  [[nodiscard]] std::size_t running(std::optional<int> stage = std::nullopt) const;

private:
  struct entry {
    explicit entry(int s) : stage(s) {}
    const int stage;
    boost::asio::cancellation_signal signal;  // executor only
  };

  // nullptr when closed; otherwise counted as running from now on.
  std::shared_ptr<entry> admit(int stage);
  // The executor, after the task's on_done: no longer running.
  void finish(const std::shared_ptr<entry>& e);

  executor_type executor_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  bool closed_ = false;                      // guarded by mutex_
  std::list<std::shared_ptr<entry>> tasks_;  // guarded by mutex_: the running ones
};

}  // namespace tec::async

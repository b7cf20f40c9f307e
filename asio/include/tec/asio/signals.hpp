#pragma once

// Signals as one coroutine, for a task_group to own: each signal a signal_set delivers is
// handed to a function until the coroutine is cancelled.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>

namespace tec::async {

/// Calls `on_signal(signo)` on the coroutine's executor for each signal `signals` delivers,
/// until the wait fails (cancellation of the coroutine, or signals.cancel()): then it returns
/// without an exception. `signals` is borrowed and must outlive the coroutine; its signals
/// stay registered (and queued) as long as it lives, whether or not the coroutine runs.
boost::asio::awaitable<void> each_signal(boost::asio::signal_set& signals,
                                         std::function<void(int)> on_signal);

}  // namespace tec::async

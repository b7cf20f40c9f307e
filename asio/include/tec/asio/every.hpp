#pragma once

// A periodic job as one coroutine: wait `interval`, run `fn`, again, until cancelled (e.g. by
// the task_group that started it) or until `fn` says to stop; or run `fn` at once and again
// after the interval it names each time (repeat).

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>

namespace tec::async {

/// Runs `fn()` every `interval` on the coroutine's executor, measured from the end of the
/// previous run (as a timer re-armed in its handler does); the first run is one interval after
/// the start. `fn` returning false ends the loop. Cancellation (as the coroutine's cancellation
/// state lets it through: terminal by default) ends it at the wait; a cancellation emitted
/// while `fn` runs ends it before the next wait, without an exception. An exception `fn`
/// throws ends it and reaches the completion handler. `fn` is owned by the coroutine.
/// (std::function rather than a template parameter: GCC refuses a coroutine frame, instantiated
/// from a header, that holds a lambda of an anonymous namespace; -Wsubobject-linkage.)
boost::asio::awaitable<void> every(std::chrono::steady_clock::duration interval,
                                   std::function<bool()> fn);

/// The same with a coroutine as `fn` (awaited before the next wait is armed). A cancellation
/// while `fn` is suspended reaches the operation it awaits (which may then throw
/// operation_aborted, as any Asio operation does) and otherwise ends the loop after `fn`.
boost::asio::awaitable<void> every(std::chrono::steady_clock::duration interval,
                                   std::function<boost::asio::awaitable<bool>()> fn);

/// Runs `fn()` at once, then again each time the interval it returned has passed, on the
/// coroutine's executor, until cancelled. Unlike every(), a cancellation never reaches `fn`:
/// each run is a coroutine of its own (on the same executor) that ends by itself (e.g. its
/// requests end with their client's shutdown), so nothing throws operation_aborted from inside
/// it; the loop ends at its wait, or after the run in flight. An exception `fn` throws ends the
/// loop and reaches the completion handler. `fn` is owned by the coroutine.
boost::asio::awaitable<void> repeat(
    std::function<boost::asio::awaitable<std::chrono::steady_clock::duration>()> fn);

}  // namespace tec::async

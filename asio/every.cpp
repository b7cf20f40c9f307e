#include "tec/asio/every.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

namespace tec::async {

// The cancellation state is read in the coroutine itself, before each co_await: Asio 1.81
// throws operation_aborted from a co_await (of an operation or of another awaitable) once the
// state says cancelled, and a cancelled loop is to end without an exception.

boost::asio::awaitable<void> every(std::chrono::steady_clock::duration interval,
                                   std::function<boost::asio::awaitable<bool>()> fn) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  for (;;) {
    const boost::asio::cancellation_state state =
        co_await boost::asio::this_coro::cancellation_state;
    if (state.cancelled() != boost::asio::cancellation_type::none) {
      co_return;
    }
    timer.expires_after(interval);
    const auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec || state.cancelled() != boost::asio::cancellation_type::none) {
      co_return;  // (a cancellation that came with the timer's completion)
    }
    if (!co_await fn()) {
      co_return;
    }
  }
}

boost::asio::awaitable<void> every(std::chrono::steady_clock::duration interval,
                                   std::function<bool()> fn) {
  return every(interval,
               [fn = std::move(fn)]() -> boost::asio::awaitable<bool> { co_return fn(); });
}

boost::asio::awaitable<void> repeat(
    std::function<boost::asio::awaitable<std::chrono::steady_clock::duration>()> fn) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  for (;;) {
    const boost::asio::cancellation_state state =
        co_await boost::asio::this_coro::cancellation_state;
    if (state.cancelled() != boost::asio::cancellation_type::none) {
      co_return;
    }
    // An empty slot: the run is not cancelled with this coroutine.
    const auto interval = co_await boost::asio::co_spawn(
        timer.get_executor(), fn(),
        boost::asio::bind_cancellation_slot(boost::asio::cancellation_slot(),
                                            boost::asio::use_awaitable));
    if (state.cancelled() != boost::asio::cancellation_type::none) {
      co_return;
    }
    timer.expires_after(interval);
    const auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec) {
      co_return;
    }
  }
}

}  // namespace tec::async

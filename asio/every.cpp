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

namespace {

namespace asio = boost::asio;

bool cancelled(const asio::cancellation_state& state) {
  return state.cancelled() != asio::cancellation_type::none;
}

// Waits `interval` on `timer` (the caller has checked `state`); false when the wait failed or
// was cancelled (a cancellation that came with the timer's completion too).
asio::awaitable<bool> pause(asio::steady_timer& timer, std::chrono::steady_clock::duration interval,
                            const asio::cancellation_state& state) {
  timer.expires_after(interval);
  const auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return !ec && !cancelled(state);
}

}  // namespace

asio::awaitable<void> every(std::chrono::steady_clock::duration interval,
                            std::function<asio::awaitable<bool>()> fn) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  while (!cancelled(state) && co_await pause(timer, interval, state) && co_await fn()) {
  }
}

boost::asio::awaitable<void> every(std::chrono::steady_clock::duration interval,
                                   std::function<bool()> fn) {
  return every(interval,
               [fn = std::move(fn)]() -> boost::asio::awaitable<bool> { co_return fn(); });
}

asio::awaitable<void> repeat(
    std::function<asio::awaitable<std::chrono::steady_clock::duration>()> fn) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  while (!cancelled(state)) {
    // An empty slot: the run is not cancelled with this coroutine.
    const auto interval = co_await asio::co_spawn(
        timer.get_executor(), fn(),
        asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
    if (cancelled(state) || !co_await pause(timer, interval, state)) {
      co_return;
    }
  }
}

}  // namespace tec::async

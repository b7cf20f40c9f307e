#pragma once

// Runs one coroutine to completion on a test's io_context (bounded), for tests of awaitable
// APIs. Thread: the caller's; the io_context must not be run elsewhere meanwhile.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>

namespace tec::k8sclient::testing {

namespace detail {
/// Shared with the spawned coroutine and its completion handler, so neither ever writes into
/// the frame of a run_sync() that has already returned (after a timeout, or when the value is
/// in but the completion handler has not run yet).
template <class T>
struct sync_state {
  std::optional<T> out;
  std::exception_ptr failure;
  bool done = false;  ///< The completion handler ran.
};

/// The value, or nullopt if the coroutine has not finished; rethrows what it threw.
template <class T>
std::optional<T> take(sync_state<T>& state) {
  if (state.failure) {
    std::rethrow_exception(state.failure);
  }
  if (!state.done) {
    return std::nullopt;
  }
  return std::move(state.out);
}

template <class T>
boost::asio::awaitable<void> capture(boost::asio::awaitable<T> aw,
                                     std::shared_ptr<sync_state<T>> state) {
  state->out.emplace(co_await std::move(aw));
}
}  // namespace detail

/// Runs `io` until `done()` holds, for at most `limit`; returns done(). Handles one handler at
/// a time (waiting at most 10 ms for one), so it returns as soon as the condition holds.
/// Restarts `io` when it ran out of work.
template <class Pred>
bool run_until(boost::asio::io_context& io, Pred&& done,
               std::chrono::milliseconds limit = std::chrono::seconds{30}) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    if (io.stopped()) {
      io.restart();
    }
    io.run_one_for(std::chrono::milliseconds{10});
  }
  return done();
}

/// Spawns `aw` on `io`, runs `io` until the coroutine and its completion handler have both
/// finished, or `limit` passes; nullopt on the latter.
template <class T>
std::optional<T> run_sync(boost::asio::io_context& io, boost::asio::awaitable<T> aw,
                          std::chrono::milliseconds limit = std::chrono::seconds{20}) {
  auto state = std::make_shared<detail::sync_state<T>>();
  boost::asio::co_spawn(io, detail::capture(std::move(aw), state), [state](std::exception_ptr e) {
    state->failure = e;
    state->done = true;
  });
  io.restart();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!state->done && std::chrono::steady_clock::now() < deadline) {
    if (io.run_one_until(deadline) == 0 && io.stopped()) {
      break;
    }
  }
  return detail::take(*state);
}

}  // namespace tec::k8sclient::testing

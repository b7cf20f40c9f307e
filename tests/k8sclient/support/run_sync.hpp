#pragma once

// Runs one coroutine to completion on a test's io_context (bounded), for tests of awaitable
// APIs. Thread: the caller's; the io_context must not be run elsewhere meanwhile.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <optional>

namespace tec::k8s::testing {

namespace detail {
template <class T>
boost::asio::awaitable<void> capture(boost::asio::awaitable<T> aw, std::optional<T>* out) {
  out->emplace(co_await std::move(aw));
}
}  // namespace detail

/// Spawns `aw` on `io`, runs `io` until it completes or `limit` passes; nullopt on the latter.
template <class T>
std::optional<T> run_sync(boost::asio::io_context& io, boost::asio::awaitable<T> aw,
                          std::chrono::milliseconds limit = std::chrono::seconds{20}) {
  std::optional<T> out;
  std::exception_ptr failure;
  boost::asio::co_spawn(io, detail::capture(std::move(aw), &out),
                        [&failure](std::exception_ptr e) { failure = e; });
  io.restart();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!out && !failure && std::chrono::steady_clock::now() < deadline) {
    if (io.run_one_until(deadline) == 0 && io.stopped()) {
      break;
    }
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
  return out;
}

}  // namespace tec::k8s::testing

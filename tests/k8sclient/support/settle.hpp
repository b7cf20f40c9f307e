#pragma once

// Driving an io_context without a wall clock, for tests whose client runs on an in-memory
// transport (client_options::connector) and a manual_clock: there, when no handler is ready,
// nothing will happen until the test acts (moves the clock, releases a reply), so "wait until X"
// becomes "run what is ready, then look". Thread: the caller's; the io_context must not be run
// elsewhere meanwhile.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>

#include "k8sclient/support/run_sync.hpp"
#include "support/manual_clock.hpp"

namespace tec::k8sclient::testing {

/// Bound on the handlers one settle() runs: a livelock fails the test instead of hanging it.
inline constexpr std::size_t settle_budget = 5'000'000;

/// Runs the handlers ready on `io` until `done()` holds or none is ready; returns done().
template <class Pred>
bool settle(boost::asio::io_context& io, Pred&& done) {
  for (std::size_t ran = 0; !done() && ran < settle_budget; ++ran) {
    io.restart();
    if (io.poll_one() == 0) {
      break;
    }
  }
  return done();
}

/// settle(), and whenever nothing is ready, moves `clock` to its next alarm (as long as that is
/// within `horizon` of the time it started at): the backoffs and deadlines on the way to
/// `done()` fire in order, with no wall-clock wait. Returns done().
template <class Pred>
bool settle_advancing(boost::asio::io_context& io, test::manual_clock& clock, Pred&& done,
                      std::chrono::nanoseconds horizon = std::chrono::hours{1}) {
  const auto end = clock.now() + horizon;
  while (!settle(io, done)) {
    const auto next = clock.next_alarm();
    if (!next || *next > end) {
      return false;
    }
    clock.advance(*next - clock.now());
  }
  return true;
}

/// Spawns `aw` on `io` and settles until it has finished; nullopt if it is still waiting
/// (for the clock or the test) when nothing is ready.
template <class T>
std::optional<T> settle_sync(boost::asio::io_context& io, boost::asio::awaitable<T> aw) {
  auto state = std::make_shared<detail::sync_state<T>>();
  boost::asio::co_spawn(io, detail::capture(std::move(aw), state), [state](std::exception_ptr e) {
    state->failure = e;
    state->done = true;
  });
  settle(io, [&] { return state->done; });
  return detail::take(*state);
}

}  // namespace tec::k8sclient::testing

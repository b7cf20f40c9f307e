// each_signal(): deliveries handed on in order, and the end at cancellation.

#include "tec/asio/signals.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <exception>
#include <vector>

#include "tec/asio/task_group.hpp"

namespace {

namespace asio = boost::asio;
using tec::async::each_signal;
using tec::async::task_group;

TEST(each_signal, hands_on_each_signal_until_its_group_cancels_it) {
  asio::io_context io;
  // Registered before raise(): the signal waits in the set until the coroutine asks for it.
  asio::signal_set signals(io, SIGUSR1, SIGUSR2);
  task_group group(io.get_executor());
  std::vector<int> seen;
  bool ended_cleanly = false;
  group.spawn(0,
              each_signal(signals,
                          [&](int signo) {
                            seen.push_back(signo);
                            if (seen.size() == 2) {
                              group.cancel();
                            }
                          }),
              [&](const std::exception_ptr& e) { ended_cleanly = !e; });
  std::raise(SIGUSR1);
  std::raise(SIGUSR2);
  io.run();  // returns only once the coroutine ended
  EXPECT_EQ(seen, (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_TRUE(ended_cleanly);
}

TEST(each_signal, ends_when_the_set_is_cancelled) {
  asio::io_context io;
  asio::signal_set signals(io, SIGUSR1);
  bool ended = false;
  asio::co_spawn(io, each_signal(signals, [](int) {}),
                 [&](const std::exception_ptr& e) { ended = !e; });
  io.poll();  // waiting
  signals.cancel();
  io.run();
  EXPECT_TRUE(ended);
}

}  // namespace

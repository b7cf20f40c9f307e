#include "tec/asio/real_alarm_clock.hpp"

#include <gtest/gtest.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>

namespace tec::async {
namespace {

using namespace std::chrono_literals;

// The production clock. Only alarms already due are used: nothing here waits on wall time.

TEST(real_alarm_clock_test, an_alarm_already_due_fires_on_its_executor) {
  boost::asio::io_context io;
  auto clk = real_alarm_clock();
  int fired = 0;
  auto ring = clk->at(io.get_executor(), clk->now() - 1s, [&] { ++fired; });
  EXPECT_EQ(fired, 0);  // posted, not called inline
  io.poll();
  EXPECT_EQ(fired, 1);
}

// A deadline the I/O beat must not close the connection afterwards: the alarm is destroyed
// when the operation completes, possibly after it came due but before its callback ran.
TEST(real_alarm_clock_test, an_alarm_destroyed_before_its_callback_ran_never_fires) {
  boost::asio::io_context io;
  auto clk = real_alarm_clock();
  int fired = 0;
  auto ring = clk->at(io.get_executor(), clk->now() - 1s, [&] { ++fired; });
  ring.reset();
  io.poll();
  EXPECT_EQ(fired, 0);
}

}  // namespace
}  // namespace tec::async

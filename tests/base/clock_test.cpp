#include "tec/base/clock.hpp"

#include <gtest/gtest.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>

#include "support/manual_clock.hpp"

namespace tec::base {
namespace {

using namespace std::chrono_literals;

// The production clock. Only alarms already due are used: nothing here waits on wall time.

TEST(real_clock_test, an_alarm_already_due_fires_on_its_executor) {
  boost::asio::io_context io;
  auto clk = real_clock();
  int fired = 0;
  auto ring = clk->at(io.get_executor(), clk->now() - 1s, [&] { ++fired; });
  EXPECT_EQ(fired, 0);  // posted, not called inline
  io.poll();
  EXPECT_EQ(fired, 1);
}

// A deadline the I/O beat must not close the connection afterwards: the alarm is destroyed
// when the operation completes, possibly after it came due but before its callback ran.
TEST(real_clock_test, an_alarm_destroyed_before_its_callback_ran_never_fires) {
  boost::asio::io_context io;
  auto clk = real_clock();
  int fired = 0;
  auto ring = clk->at(io.get_executor(), clk->now() - 1s, [&] { ++fired; });
  ring.reset();
  io.poll();
  EXPECT_EQ(fired, 0);
}

TEST(real_clock_test, is_shared_and_monotonic) {
  auto a = real_clock();
  auto b = real_clock();
  EXPECT_EQ(a.get(), b.get());
  const auto t0 = a->now();
  EXPECT_LE(t0, b->now());
}

// The tests' clock (tests/support/manual_clock.hpp): one advance moves both times and posts
// the alarms that came due, and only those.
TEST(manual_clock_test, advance_moves_now_and_wall_together_and_fires_due_alarms) {
  boost::asio::io_context io;
  test::manual_clock clk;
  const auto t0 = clk.now();
  const auto w0 = clk.wall();
  int fired = 0;
  auto ring = clk.at(io.get_executor(), t0 + 10s, [&] { ++fired; });
  clk.advance(9s);
  io.poll();
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(clk.next_alarm(), t0 + 10s);
  clk.advance(1s);
  EXPECT_EQ(clk.now(), t0 + 10s);
  EXPECT_EQ(clk.wall(), w0 + 10s);
  io.restart();  // the first poll() ran out of work
  io.poll();
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(clk.armed(), 0U);
}

}  // namespace
}  // namespace tec::base

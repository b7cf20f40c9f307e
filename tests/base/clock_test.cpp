#include "tec/base/clock.hpp"

#include <gtest/gtest.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>

#include "support/manual_clock.hpp"

namespace tec::base {
namespace {

using namespace std::chrono_literals;

// The production clock (time only; its alarm clock is tested in tests/asio).

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

// task_group, every() and repeat(): counts and conditions on a real io_context, never elapsed time.

#include "tec/asio/task_group.hpp"

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <thread>

#include "tec/asio/every.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using tec::async::every;
using tec::async::repeat;
using tec::async::task_group;

// Waits on a timer that never fires on its own (a day): only cancellation ends it.
asio::awaitable<void> wait_forever(bool& aborted) {
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::hours(24));
  const auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  aborted = ec == asio::error::operation_aborted;
}

asio::awaitable<int> answer() {
  co_return 42;
}

TEST(task_group, runs_a_task_and_counts_it_until_its_handler_returned) {
  asio::io_context io;
  task_group group(io.get_executor());
  int result = 0;
  std::size_t running_in_handler = 0;
  ASSERT_TRUE(group.spawn(0, answer(), [&](const std::exception_ptr& e, int v) {
    EXPECT_FALSE(e);
    result = v;
    running_in_handler = group.running();
  }));
  EXPECT_EQ(group.running(), 1U);
  io.run();
  EXPECT_EQ(result, 42);
  EXPECT_EQ(running_in_handler, 1U);
  EXPECT_EQ(group.running(), 0U);
}

TEST(task_group, cancel_of_one_stage_leaves_the_others_running) {
  asio::io_context io;
  task_group group(io.get_executor());
  bool a_aborted = false;
  bool b_aborted = false;
  int done = 0;
  group.spawn(0, wait_forever(a_aborted), [&](const std::exception_ptr&) { ++done; });
  group.spawn(1, wait_forever(b_aborted), [&](const std::exception_ptr&) { ++done; });
  io.poll();  // both started and waiting
  group.cancel(0);
  io.poll();
  EXPECT_EQ(done, 1);
  EXPECT_TRUE(a_aborted);
  EXPECT_EQ(group.running(0), 0U);
  EXPECT_EQ(group.running(1), 1U);
  group.cancel();
  io.run();  // returns: nothing left
  EXPECT_EQ(done, 2);
  EXPECT_TRUE(b_aborted);
  EXPECT_EQ(group.running(), 0U);
}

TEST(task_group, a_closed_group_refuses_new_tasks) {
  asio::io_context io;
  task_group group(io.get_executor());
  group.close();
  bool called = false;
  EXPECT_FALSE(group.spawn(0, answer(), [&](const std::exception_ptr&, int) { called = true; }));
  io.run();
  EXPECT_FALSE(called);
  EXPECT_EQ(group.running(), 0U);
}

TEST(task_group, a_task_that_throws_reaches_its_handler_and_is_no_longer_counted) {
  asio::io_context io;
  task_group group(io.get_executor());
  std::exception_ptr seen;
  group.spawn(
      0,
      []() -> asio::awaitable<void> {
        throw std::runtime_error("boom");
        co_return;
      }(),
      [&](const std::exception_ptr& e) { seen = e; });
  io.run();
  ASSERT_TRUE(seen);
  EXPECT_THROW(std::rethrow_exception(seen), std::runtime_error);
  EXPECT_EQ(group.running(), 0U);
}

TEST(task_group, wait_idle_from_another_thread_returns_once_the_stage_finished) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  task_group group(io.get_executor());
  bool aborted = false;
  group.spawn(0, wait_forever(aborted), [](const std::exception_ptr&) {});
  std::thread runner([&] { io.run(); });
  // Not finished yet: a deadline already past answers at once.
  EXPECT_FALSE(group.wait_idle(0, task_group::clock::now()));
  group.cancel(0);
  EXPECT_TRUE(group.wait_idle(0, task_group::clock::now() + std::chrono::hours(1)));
  EXPECT_TRUE(group.wait_idle(std::nullopt, task_group::clock::now()));
  work.reset();
  runner.join();
  EXPECT_TRUE(aborted);
}

TEST(every, runs_until_fn_returns_false) {
  asio::io_context io;
  int calls = 0;
  bool finished = false;
  asio::co_spawn(io, every(1ms, [&] { return ++calls < 3; }), [&](const std::exception_ptr& e) {
    EXPECT_FALSE(e);
    finished = true;
  });
  io.run();
  EXPECT_TRUE(finished);
  EXPECT_EQ(calls, 3);
}

TEST(every, accepts_an_awaitable_fn) {
  asio::io_context io;
  int calls = 0;
  asio::co_spawn(io, every(1ms, [&]() -> asio::awaitable<bool> { co_return ++calls < 2; }),
                 asio::detached);
  io.run();
  EXPECT_EQ(calls, 2);
}

TEST(every, ends_when_its_group_cancels_it) {
  asio::io_context io;
  task_group group(io.get_executor());
  int calls = 0;
  int done = 0;
  std::exception_ptr seen;
  // An fn that always returns true never ends the loop by itself; a cancellation from inside
  // fn (the emission is posted, so it reaches the loop during or after this run of fn) ends it.
  group.spawn(0,
              every(1ms,
                    [&] {
                      if (++calls == 2) {
                        group.cancel();
                      }
                      return true;
                    }),
              [&](const std::exception_ptr& e) {
                seen = e;
                ++done;
              });
  io.run();  // returns only because the loop ended
  EXPECT_EQ(done, 1);
  EXPECT_FALSE(seen);
  EXPECT_GE(calls, 2);
  EXPECT_LE(calls, 3);
  EXPECT_EQ(group.running(), 0U);
}

TEST(every, a_cancellation_while_fn_runs_ends_the_loop_before_the_next_wait) {
  asio::io_context io;
  task_group group(io.get_executor());
  int calls = 0;
  std::exception_ptr seen;
  bool finished = false;
  group.spawn(0,
              every(1ms,
                    [&]() -> asio::awaitable<bool> {
                      ++calls;
                      group.cancel();
                      // Let the posted emission run while fn is still running.
                      co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
                      co_return true;
                    }),
              [&](const std::exception_ptr& e) {
                seen = e;
                finished = true;
              });
  io.run();
  EXPECT_TRUE(finished);
  EXPECT_FALSE(seen);
  EXPECT_EQ(calls, 1);
}

TEST(repeat, runs_at_once_then_after_each_interval_until_cancelled_at_its_wait) {
  asio::io_context io;
  task_group group(io.get_executor());
  int calls = 0;
  int done = 0;
  std::exception_ptr seen;
  group.spawn(0, repeat([&]() -> asio::awaitable<std::chrono::steady_clock::duration> {
                if (++calls == 3) {
                  group.cancel();
                }
                co_return 1ms;
              }),
              [&](const std::exception_ptr& e) {
                seen = e;
                ++done;
              });
  io.run();  // returns only because the loop ended
  EXPECT_EQ(done, 1);
  EXPECT_FALSE(seen);
  EXPECT_EQ(calls, 3);
}

TEST(repeat, a_cancellation_never_reaches_the_run_in_flight) {
  asio::io_context io;
  task_group group(io.get_executor());
  int calls = 0;
  bool run_finished = false;
  std::exception_ptr seen;
  bool finished = false;
  group.spawn(0, repeat([&]() -> asio::awaitable<std::chrono::steady_clock::duration> {
                ++calls;
                group.cancel();
                // Would throw operation_aborted if the cancellation reached this run.
                asio::steady_timer timer(co_await asio::this_coro::executor, 1ms);
                co_await timer.async_wait(asio::use_awaitable);
                run_finished = true;
                co_return std::chrono::hours(24);
              }),
              [&](const std::exception_ptr& e) {
                seen = e;
                finished = true;
              });
  io.run();
  EXPECT_TRUE(finished);
  EXPECT_FALSE(seen);
  EXPECT_TRUE(run_finished);
  EXPECT_EQ(calls, 1);
}

}  // namespace

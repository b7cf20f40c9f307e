#include "tec/timedqueue/asio_driver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

TEST(asio_driver, fires_the_timer_once_due_and_posts_work) {
  boost::asio::io_context ctx;
  asio_driver drv(ctx.get_executor(), ctx.get_executor());
  std::vector<std::string> order;
  drv.post([&] { order.emplace_back("posted"); });
  drv.arm(drv.now() + 50ms, [&] { order.emplace_back("late"); });
  drv.arm(drv.now() + 1ms, [&] { order.emplace_back("replaced"); });
  EXPECT_TRUE(order.empty());
  ctx.run();
  EXPECT_EQ(order, (std::vector<std::string>{"posted", "replaced"}));
  EXPECT_GE(drv.now(), time_point{});
}

TEST(asio_driver, disarm_stops_the_timer) {
  boost::asio::io_context ctx;
  asio_driver drv(ctx.get_executor(), ctx.get_executor());
  bool fired = false;
  drv.arm(drv.now() + 1ms, [&] { fired = true; });
  drv.disarm();
  ctx.run();
  EXPECT_FALSE(fired);
}

TEST(asio_driver, handlers_outliving_the_driver_are_harmless) {
  boost::asio::io_context ctx;
  bool fired = false;
  {
    asio_driver drv(ctx.get_executor(), ctx.get_executor());
    drv.arm(drv.now(), [&] { fired = true; });
  }
  ctx.run();
  EXPECT_FALSE(fired);
}

/// The real timer on real time. Nothing here depends on how fast the machine is: an entry that
/// is already due when scheduled starts at once, one that is not starts from the timer, and
/// either way it runs exactly once and never before its time. (Which entries start in which
/// order is the manual driver's to test: timed_queue_test.) Regression: "cancelled" was due
/// 1 ms ahead, and a slow machine passed that before cancel() was called.
TEST(asio_driver, runs_a_timed_queue_on_an_io_context) {
  boost::asio::io_context ctx;
  asio_driver drv(ctx.get_executor(), ctx.get_executor());
  std::vector<std::string> runs;
  std::map<std::string, time_point> fire_at;
  timed_queue queue(drv, [&](const run_info& info, completion done) {
    runs.emplace_back(info.key);
    EXPECT_GE(drv.now(), fire_at.at(std::string(info.key))) << info.key << " ran early";
    done.complete(outcome::success());
  });
  const time_point now = drv.now();
  fire_at = {{"now", now}, {"soon", now + 5ms}, {"later", now + 20ms}};
  queue.schedule("now", now, fire_at["now"]);
  queue.schedule("soon", now, fire_at["soon"]);
  queue.schedule("later", now, fire_at["later"]);
  queue.schedule("cancelled", now, now + 1h);
  EXPECT_TRUE(queue.cancel("cancelled"));
  // Bounded: the timer may still be armed for the cancelled entry (cancels do not re-arm).
  const auto cap = std::chrono::steady_clock::now() + 30s;
  while (runs.size() < 3 && std::chrono::steady_clock::now() < cap) {
    ctx.run_one_for(10ms);
  }
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs.front(), "now");
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(runs, (std::vector<std::string>{"later", "now", "soon"}));
  EXPECT_EQ(queue.size(), 0U);
  queue.shutdown();
  ctx.run();  // shutdown() disarmed the timer: nothing is left
}

/// Several threads schedule and cancel while a thread pool fires the timer, runs the work and
/// completes it (often failing it once) from other threads. Meant for TSan; checks bookkeeping.
TEST(asio_driver, concurrent_schedule_cancel_and_completion) {
  boost::asio::thread_pool pool(3);
  asio_driver drv(pool.get_executor(), pool.get_executor());
  std::mutex mu;
  std::condition_variable cv;
  std::size_t work_calls = 0;
  std::size_t completed = 0;
  std::atomic<std::size_t> cancelled_seen{0};
  retry_policy retry;
  retry.initial = 1ms;
  retry.max = 4ms;
  retry.seed = 7;
  timed_queue queue(
      drv,
      [&](const run_info& info, completion done) {
        {
          std::lock_guard lock(mu);
          ++work_calls;
        }
        const bool fail = info.attempt == 1 && info.payload.back() % 2 == 0;
        boost::asio::post(pool, [&, fail, done = std::move(done)]() mutable {
          if (done.cancelled()) {
            cancelled_seen.fetch_add(1, std::memory_order_relaxed);
          }
          done.complete(fail ? outcome::failure("first try fails") : outcome::success());
          {
            std::lock_guard lock(mu);
            ++completed;
          }
          cv.notify_all();
        });
      },
      retry);

  constexpr int threads = 4;
  constexpr int ops = 3000;
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(static_cast<std::mt19937::result_type>(t + 1));
      std::uniform_int_distribution<int> pick(0, 199);
      std::uniform_int_distribution<int> delay_us(0, 3000);
      for (int i = 0; i < ops; ++i) {
        const std::string key =
            "ns-" + std::to_string(pick(rng) % 7) + "/pod-" + std::to_string(pick(rng));
        if (i % 3 == 2) {
          queue.cancel(key);
        } else {
          const time_point now = drv.now();
          const auto delay = std::chrono::microseconds(i % 2 == 0 ? 0 : delay_us(rng));
          queue.schedule(key, now, now + delay, "uid-" + std::to_string(i));
        }
        (void)queue.lookup(key);
      }
    });
  }
  for (auto& c : clients) {
    c.join();
  }

  {
    std::unique_lock lock(mu);
    const bool drained =
        cv.wait_for(lock, 60s, [&] { return queue.size() == 0 && completed == work_calls; });
    EXPECT_TRUE(drained) << "queue size " << queue.size() << ", " << completed << " of "
                         << work_calls << " runs completed";
  }
  queue.shutdown();
  pool.join();

  const queue_stats s = queue.stats();
  EXPECT_EQ(s.pending + s.running + s.backing_off, 0U);
  EXPECT_EQ(s.started, work_calls);
  EXPECT_LE(s.succeeded + s.failed, s.started);
  EXPECT_GT(s.succeeded, 0U);
  EXPECT_GT(s.retries, 0U);
  EXPECT_EQ(completed, work_calls);
}

/// Shutting down and destroying queue and driver while the pool is firing the timer and
/// starting work: nothing may touch the driver afterwards (ASan/TSan check this).
TEST(asio_driver, teardown_while_the_timer_is_firing) {
  boost::asio::thread_pool pool(2);
  std::atomic<int> runs{0};
  for (int round = 0; round < 30; ++round) {
    asio_driver drv(pool.get_executor(), pool.get_executor());
    timed_queue queue(drv, [&](const run_info&, completion done) {
      runs.fetch_add(1, std::memory_order_relaxed);
      done.complete(outcome::success());
    });
    const time_point now = drv.now();
    for (int i = 0; i < 200; ++i) {
      queue.schedule("ns/pod-" + std::to_string(i), now,
                     now + std::chrono::microseconds(i % 3 == 0 ? 0 : i * 5));
    }
    queue.shutdown();
  }
  pool.join();
  EXPECT_GE(runs.load(), 0);
}

}  // namespace
}  // namespace tec::timedqueue

// io_thread: an io_context on a thread of its own. Waits are on conditions with generous
// bounds (no assertion on elapsed time).

#include "tec/asio/io_thread.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include <pthread.h>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using tec::async::io_thread;

constexpr auto generous = 60s;

TEST(io_thread, runs_posted_work_on_its_own_named_thread_and_drains_at_finish) {
  io_thread t("tec-test");
  std::promise<std::pair<std::thread::id, std::string>> ran;
  asio::post(t.executor(), [&ran] {
    std::array<char, 16> name{};
    ::pthread_getname_np(::pthread_self(), name.data(), name.size());
    ran.set_value({std::this_thread::get_id(), std::string(name.data())});
  });
  EXPECT_FALSE(t.running());
  t.start({});
  auto done = ran.get_future();
  ASSERT_EQ(done.wait_for(generous), std::future_status::ready);
  const auto [id, name] = done.get();
  EXPECT_NE(id, std::this_thread::get_id());
  EXPECT_EQ(name, "tec-test");
  // Work posted before finish() runs before the thread ends.
  std::atomic<int> later{0};
  for (int i = 0; i < 100; ++i) {
    asio::post(t.executor(), [&later] { ++later; });
  }
  EXPECT_TRUE(t.finish(std::chrono::steady_clock::now() + generous));
  EXPECT_EQ(later.load(), 100);
  EXPECT_FALSE(t.running());
}

TEST(io_thread, finish_stops_what_would_outlive_the_deadline) {
  io_thread t("tec-test");
  // A timer that never fires keeps the io_context busy: finish() must stop it.
  asio::steady_timer forever(t.context(), asio::steady_timer::time_point::max());
  std::atomic<bool> aborted{false};
  forever.async_wait([&aborted](const boost::system::error_code&) { aborted = true; });
  t.start({});
  EXPECT_FALSE(t.finish(std::chrono::steady_clock::now()));
  EXPECT_FALSE(t.running());
  EXPECT_FALSE(aborted.load()) << "a stopped io_context does not run the handler";
}

TEST(io_thread, an_exception_from_a_handler_reaches_on_failure_and_ends_the_thread) {
  io_thread t("tec-test");
  std::mutex mu;
  std::condition_variable cv;
  std::string failure;
  t.start([&](const std::exception& e) {
    const std::lock_guard lock(mu);
    failure = e.what();
    cv.notify_all();
  });
  asio::post(t.executor(), [] { throw std::runtime_error("boom"); });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, generous, [&] { return !failure.empty(); }));
  }
  EXPECT_EQ(failure, "boom");
  EXPECT_TRUE(t.finish(std::chrono::steady_clock::now() + generous));
}

TEST(io_thread, a_thread_never_started_finishes_at_once) {
  io_thread t("tec-test");
  EXPECT_TRUE(t.finish(std::chrono::steady_clock::now()));
}

}  // namespace

#include "tec/k8sclient/client.hpp"

#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "k8sclient/support/settle.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/manual_clock.hpp"

namespace tec::k8sclient {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using testing::fake_http_server;
using testing::reply;
using testing::run_sync;

// Bound on waits for something that happens at once when things work (a loaded 2-core machine
// under a sanitizer can be 10x slower than an idle one). Only the loopback group waits on it.
constexpr auto wait_cap = 30s;

// The client on an in-memory transport (client_options::connector) and a manual clock, client and
// server on the test's one io_context: no socket, no thread, and no wall-clock wait. Whatever
// needs time (a deadline, Retry-After, a backoff) happens because the test advances clock_.
class client_test : public ::testing::Test {
protected:
  rest_config plain_config() const { return testing::plain_config(server_); }

  /// No client-side rate limit; every wait the client asks for is recorded (by reason) and
  /// skipped, so tests assert the waits asked for instead of measuring time.
  client_options fast_options() {
    client_options opts;
    opts.qps = 0;
    opts.request_timeout = 60s;  // tests of the timeouts set short ones
    opts.clock = clock_;
    opts.connector = server_.connector();
    opts.delay = [this](wait_reason why, std::chrono::nanoseconds wanted) {
      switch (why) {
        case wait_reason::retry_after:
          waits_.push_back(wanted);
          break;
        case wait_reason::network_retry:
          network_waits_.push_back(wanted);
          break;
        case wait_reason::rate_limit:
          rate_waits_.push_back(wanted);
          break;
      }
      return std::chrono::nanoseconds::zero();
    };
    return opts;
  }

  /// Runs what is ready until `done()` holds; false if it does not once nothing is left to
  /// run (then only the test can move things: the clock, a held reply).
  template <class Pred>
  bool run_until(Pred done) {
    return testing::settle(io_, done);
  }

  /// Runs everything that is ready.
  void run_ready() {
    testing::settle(io_, [] { return false; });
  }

  /// Starts sending `req` on the io_context; `out` is set when the send completes.
  void start_send(client& c, request req, std::optional<base::result<response>>& out) {
    asio::co_spawn(
        io_,
        [](client& to, request r,
           std::optional<base::result<response>>* into) -> asio::awaitable<void> {
          *into = co_await to.send(std::move(r));
        }(c, std::move(req), &out),
        asio::detached);
  }

  /// A GET into res_ answered 503 with a Retry-After of an hour (then 200 "done"), with no
  /// `delay` seam, and the clock moved to a second before the retry is due.
  std::unique_ptr<client> sleeping_an_hour_before_a_retry() {
    server_.push(reply::with(503, "", {{"Retry-After", "3600"}}));
    server_.push(reply::with(200, "done"));
    auto opts = fast_options();
    opts.delay = nullptr;
    opts.request_timeout = 1h;
    auto c = std::make_unique<client>(io_.get_executor(), plain_config(), opts);
    start_send(*c, request(http::verb::get, "/x"), res_);
    EXPECT_FALSE(run_until([&] { return res_.has_value(); }));
    clock_->advance(3599s);
    run_ready();
    EXPECT_EQ(server_.requests().size(), 1U);
    EXPECT_FALSE(res_.has_value());
    return c;
  }

  /// Moves the clock to 1 ms short of `limit`, where `res` must still be pending, then onto
  /// it, where it must end with errc::timeout.
  void expect_timeout_at(std::chrono::milliseconds limit,
                         const std::optional<base::result<response>>& res) {
    clock_->advance(limit - 1ms);
    run_ready();
    ASSERT_FALSE(res.has_value());
    clock_->advance(1ms);
    ASSERT_TRUE(run_until([&] { return res.has_value(); }));
    ASSERT_FALSE(*res);
    EXPECT_EQ(res->error().code, make_error_code(base::errc::timeout));
  }

  /// Shuts `c` down and expects the send started into `res` to end with shutting_down.
  void expect_ended_by_shutdown(client& c, const std::optional<base::result<response>>& res) {
    c.shutdown();
    ASSERT_TRUE(run_until([&] { return res.has_value(); }));
    ASSERT_FALSE(*res);
    EXPECT_EQ(res->error().code, make_error_code(base::errc::shutting_down));
  }

  base::result<response> get(client& c, std::string target, bool idempotent = true) {
    request req;
    req.target = std::move(target);
    req.idempotent = idempotent;
    auto out = testing::settle_sync(io_, c.send(std::move(req)));
    if (!out) {
      ADD_FAILURE() << "send did not complete";
      return base::error{make_error_code(base::errc::timeout), "test limit", 0};
    }
    return std::move(*out);
  }

  asio::io_context io_;
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>();
  fake_http_server server_{io_.get_executor()};
  std::vector<std::chrono::nanoseconds> waits_;  ///< Retry-After waits asked for.
  std::vector<std::chrono::nanoseconds> network_waits_;
  std::vector<std::chrono::nanoseconds> rate_waits_;
  std::optional<base::result<response>> res_;
};

TEST_F(client_test, get_returns_status_and_body_with_request_headers) {
  server_.push(reply::with(200, R"({"major":"1"})"));
  auto cfg = plain_config();
  cfg.bearer_token = "s3cret";
  client c(io_.get_executor(), cfg, fast_options());
  auto res = get(c, "/version");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200U);
  EXPECT_EQ(res->body, R"({"major":"1"})");
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 1U);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].target, "/version");
  EXPECT_EQ(reqs[0].header("authorization"), "Bearer s3cret");
  EXPECT_EQ(reqs[0].header("accept"), "application/json");
  EXPECT_EQ(reqs[0].header("host"), "127.0.0.1:" + server_.port());
}

TEST_F(client_test, post_sends_body_and_content_type) {
  server_.push(reply::with(201, "{}"));
  client c(io_.get_executor(), plain_config(), fast_options());
  request req;
  req.method = http::verb::post;
  req.target = "/api/v1/namespaces/default/events";
  req.body = R"({"kind":"Event"})";
  auto res = testing::settle_sync(io_, c.send(req));
  ASSERT_TRUE(res && *res);
  EXPECT_EQ((*res)->status, 201U);
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 1U);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].body, req.body);
  EXPECT_EQ(reqs[0].header("content-type"), "application/json");
}

TEST_F(client_test, non_2xx_is_a_response_not_an_error) {
  server_.push(reply::with(404, R"({"kind":"Status","code":404})"));
  client c(io_.get_executor(), plain_config(), fast_options());
  auto res = get(c, "/api/v1/namespaces/x/pods/y");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404U);
  EXPECT_EQ(res->body, R"({"kind":"Status","code":404})");
}

TEST_F(client_test, sequential_requests_reuse_one_connection) {
  server_.set_fallback(reply::with(200, "ok"));
  client c(io_.get_executor(), plain_config(), fast_options());
  for (int i = 0; i < 5; ++i) {
    auto res = get(c, "/healthz");
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->body, "ok");
  }
  EXPECT_EQ(server_.connections(), 1U);
  for (const auto& r : server_.requests()) {
    EXPECT_EQ(r.connection, 1U);
  }
}

TEST_F(client_test, connection_closed_by_server_while_idle_is_replaced) {
  server_.push(reply::with(200, "one", {{"Connection", "close"}}).close());
  server_.push(reply::with(200, "two"));
  client c(io_.get_executor(), plain_config(), fast_options());
  ASSERT_TRUE(get(c, "/a"));
  // A POST is not replayable, so it must not be put on the connection the server closed.
  request req;
  req.method = http::verb::post;
  req.target = "/b";
  req.body = "{}";
  auto res = testing::settle_sync(io_, c.send(req));
  ASSERT_TRUE(res && *res) << (res ? (*res).error().message : "timeout");
  EXPECT_EQ((*res)->body, "two");
  EXPECT_EQ(server_.connections(), 2U);
}

asio::awaitable<void> send_into(client& c, std::string target, std::atomic<int>* ok) {
  request req;
  req.target = std::move(target);
  req.idempotent = true;
  auto res = co_await c.send(std::move(req));
  if (res && res->status == 200) {
    ++*ok;
  }
}

TEST_F(client_test, concurrent_requests_use_several_connections_up_to_the_pool_size) {
  server_.set_fallback(reply().hold("go").raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
  auto opts = fast_options();
  opts.max_connections = 2;
  client c(io_.get_executor(), plain_config(), opts);
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(io_, send_into(c, "/r" + std::to_string(i), &ok), asio::detached);
  }
  // Two requests are in flight on two connections; the third waits for one of them.
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 2; }));
  run_ready();
  EXPECT_EQ(server_.requests().size(), 2U);
  server_.release("go");
  EXPECT_TRUE(run_until([&] { return ok.load() == 3; }));
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(server_.connections(), 2U);
  EXPECT_EQ(server_.requests().size(), 3U);
}

namespace {
asio::awaitable<void> send_recorded(client& c, std::string target, bool background,
                                    std::vector<std::string>* done) {
  request req(http::verb::get, target);
  req.background = background;
  auto res = co_await c.send(std::move(req));
  if (res && res->status == 200) {
    done->push_back(target);
  }
}
}  // namespace

TEST_F(client_test, two_connections_freed_at_once_wake_two_waiters) {
  // Regression: a second wake-up aimed at the waiter already woken was lost, so the pool
  // ran with one connection idle while requests waited.
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  server_.push(reply().hold("a").raw(ok));
  server_.push(reply().hold("a").raw(ok));
  server_.push(reply().hold("b").raw(ok));
  server_.push(reply().hold("b").raw(ok));
  auto opts = fast_options();
  opts.max_connections = 2;
  client c(io_.get_executor(), plain_config(), opts);
  std::vector<std::string> done;
  for (int i = 0; i < 4; ++i) {
    asio::co_spawn(io_, send_recorded(c, "/r" + std::to_string(i), false, &done), asio::detached);
  }
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 2; }));
  server_.release("a");
  // Both freed connections carry the two waiting requests while the first two connections'
  // replies are all that happened; "b" (the only way for a lost wake-up to be covered up
  // by a later release) is not released before.
  EXPECT_TRUE(run_until([this] { return server_.requests().size() == 4; }));
  server_.release("b");
  EXPECT_TRUE(run_until([&] { return done.size() == 4; }));
  EXPECT_EQ(done.size(), 4U);
  EXPECT_EQ(server_.connections(), 2U);
}

TEST_F(client_test, plain_requests_start_slowly_and_each_answer_lets_one_more_in) {
  // Issue 30's burst: 500 DELETEs due at once over 128 connections made the API server share
  // its CPU between all of them. After an idle spell only initial_plain_window plain requests
  // are on the wire; each answer frees its place and adds one.
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  server_.push(reply().hold("a").raw(ok));
  server_.set_fallback(reply().hold("b").raw(ok));
  auto opts = fast_options();
  opts.max_connections = 8;
  opts.initial_plain_window = 2;
  client c(io_.get_executor(), plain_config(), opts);
  std::vector<std::string> done;
  for (int i = 0; i < 5; ++i) {
    asio::co_spawn(io_, send_recorded(c, "/r" + std::to_string(i), false, &done), asio::detached);
  }
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 2; }));
  run_ready();
  EXPECT_EQ(server_.requests().size(), 2U) << "six connections free, and three requests wait";
  server_.release("a");
  // One answered: a window of three, one of them in use.
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 4; }));
  run_ready();
  EXPECT_EQ(server_.requests().size(), 4U);
  EXPECT_EQ(done.size(), 1U);
  server_.release("b");
  EXPECT_TRUE(run_until([&] { return done.size() == 5; }));
}

TEST_F(client_test, a_place_freed_in_the_window_goes_to_the_request_waiting_for_it) {
  // A request woken for the window's free place used to look again when it ran, and one that
  // arrived in between took the place: the woken one queued up anew (a mass eviction woke
  // ~10 waiters for each place).
  server_.set_fallback(reply().raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
  auto opts = fast_options();
  opts.max_connections = 1;
  opts.initial_plain_window = 1;
  client c(io_.get_executor(), plain_config(), opts);
  std::vector<std::string> done;
  // "/late" is sent in the same turn as "/first"'s answer arrives, before "/waiting" runs.
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        co_await send_recorded(c, "/first", false, &done);
        co_await send_recorded(c, "/late", false, &done);
      },
      asio::detached);
  asio::co_spawn(io_, send_recorded(c, "/waiting", false, &done), asio::detached);
  ASSERT_TRUE(run_until([&] { return done.size() == 3; }));
  EXPECT_EQ(done, (std::vector<std::string>{"/first", "/waiting", "/late"}));
}

TEST_F(client_test, background_requests_wait_for_every_other_waiter) {
  server_.set_fallback(reply().hold("go").raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
  auto opts = fast_options();
  opts.max_connections = 1;
  opts.request_timeout = 1h;  // the queued requests wait for the pool under this deadline
  client c(io_.get_executor(), plain_config(), opts);
  std::vector<std::string> done;
  // /first holds the only connection (the server holds its answer)...
  asio::co_spawn(io_, send_recorded(c, "/first", false, &done), asio::detached);
  ASSERT_TRUE(run_until([this] { return !server_.requests().empty(); }));
  // ...then a background request and two normal ones queue for it. Nothing can complete
  // before "go", so running every ready handler puts all three in their queues.
  asio::co_spawn(io_, send_recorded(c, "/event", true, &done), asio::detached);
  asio::co_spawn(io_, send_recorded(c, "/delete-1", false, &done), asio::detached);
  asio::co_spawn(io_, send_recorded(c, "/delete-2", false, &done), asio::detached);
  run_ready();
  EXPECT_TRUE(done.empty());
  server_.release("go");
  EXPECT_TRUE(run_until([&] { return done.size() == 4; }));
  EXPECT_EQ(done, (std::vector<std::string>{"/first", "/delete-1", "/delete-2", "/event"}));
}

TEST_F(client_test, background_requests_alone_go_at_once) {
  server_.set_fallback(reply().raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
  auto opts = fast_options();
  opts.max_connections = 1;
  client c(io_.get_executor(), plain_config(), opts);
  std::vector<std::string> done;
  asio::co_spawn(io_, send_recorded(c, "/event-1", true, &done), asio::detached);
  asio::co_spawn(io_, send_recorded(c, "/event-2", true, &done), asio::detached);
  EXPECT_TRUE(run_until([&] { return done.size() == 2; }));
  EXPECT_EQ(done, (std::vector<std::string>{"/event-1", "/event-2"}));
}

TEST_F(client_test, background_requests_wait_for_the_answers_to_plain_requests) {
  // Issue 16: with a connection free, an eviction's event POST went out with its DELETE and
  // the API server handled both at once. It now waits until the DELETE is answered.
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  server_.push(reply().match("/delete").hold("answer").raw(ok));
  server_.set_fallback(reply().raw(ok));
  auto opts = fast_options();
  opts.max_connections = 4;
  client c(io_.get_executor(), plain_config(), opts);
  std::vector<std::string> done;
  asio::co_spawn(io_, send_recorded(c, "/delete", false, &done), asio::detached);
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 1; }));
  asio::co_spawn(io_, send_recorded(c, "/event", true, &done), asio::detached);
  run_ready();
  EXPECT_EQ(server_.requests().size(), 1U);  // three connections free, and the event waits
  EXPECT_TRUE(done.empty());
  server_.release("answer");
  EXPECT_TRUE(run_until([&] { return done.size() == 2; }));
  EXPECT_EQ(done, (std::vector<std::string>{"/delete", "/event"}));
  EXPECT_EQ(server_.requests().size(), 2U);
}

TEST_F(client_test, background_requests_do_not_wait_for_streams) {
  // A watch's answer never ends: only plain requests hold the background ones back.
  server_.push(reply::chunked(200).match("/watch").chunk("{}\n").stall());
  server_.set_fallback(reply().raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
  auto opts = fast_options();
  opts.max_connections = 2;
  client c(io_.get_executor(), plain_config(), opts);
  std::optional<base::result<response>> watch;
  asio::co_spawn(
      io_,
      [](client& to, std::optional<base::result<response>>* out) -> asio::awaitable<void> {
        *out = co_await to.stream(
            request(http::verb::get, "/watch"), [](std::string_view) { return true; }, 1h);
      }(c, &watch),
      asio::detached);
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 1; }));
  std::vector<std::string> done;
  asio::co_spawn(io_, send_recorded(c, "/event", true, &done), asio::detached);
  EXPECT_TRUE(run_until([&] { return done.size() == 1; }));
  EXPECT_FALSE(watch.has_value());
  c.shutdown();
  run_ready();
}

TEST_F(client_test, background_requests_go_once_a_plain_request_fails) {
  // The mark ends with the attempt however it ends: a refused connection here.
  server_.set_fallback(reply().raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
  auto opts = fast_options();
  opts.max_retries = 0;
  bool refuse = true;
  auto connect = server_.connector();
  opts.connector =
      [&refuse,
       connect](const asio::any_io_executor& ex) -> base::result<std::unique_ptr<byte_stream>> {
    if (std::exchange(refuse, false)) {
      return base::make_error(base::errc::connection_failed, "refused");
    }
    return connect(ex);
  };
  client c(io_.get_executor(), plain_config(), opts);
  std::optional<base::result<response>> failed;
  start_send(c, request(http::verb::delete_, "/delete"), failed);
  std::vector<std::string> done;
  asio::co_spawn(io_, send_recorded(c, "/event", true, &done), asio::detached);
  EXPECT_TRUE(run_until([&] { return failed.has_value() && done.size() == 1; }));
  ASSERT_TRUE(failed.has_value());
  EXPECT_FALSE(*failed);
  EXPECT_EQ(done, (std::vector<std::string>{"/event"}));
}

TEST_F(client_test, too_many_requests_honours_retry_after) {
  server_.push(reply::with(429, "slow down", {{"Retry-After", "3"}}));
  server_.push(reply::with(200, "done"));
  client c(io_.get_executor(), plain_config(), fast_options());
  auto res = get(c, "/api/v1/pods");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200U);
  EXPECT_EQ(res->body, "done");
  ASSERT_EQ(waits_.size(), 1U);
  EXPECT_EQ(waits_[0], 3s);
  EXPECT_EQ(server_.requests().size(), 2U);
}

// Without the `delay` seam the client sleeps the time wanted (Retry-After, capped at the request
// timeout: an hour here) on its clock: the retry goes out once the clock has moved an hour, not
// before; shutdown() ends the sleep.
TEST_F(client_test, retry_after_is_really_slept_when_not_injected) {
  auto c = sleeping_an_hour_before_a_retry();
  expect_ended_by_shutdown(*c, res_);
  EXPECT_EQ(server_.requests().size(), 1U);
}

TEST_F(client_test, retry_after_is_slept_on_the_clock) {
  auto c = sleeping_an_hour_before_a_retry();
  clock_->advance(1s);
  ASSERT_TRUE(run_until([&] { return res_.has_value(); }));
  ASSERT_TRUE(*res_) << res_->error().message;
  EXPECT_EQ((*res_)->body, "done");
  EXPECT_EQ(server_.requests().size(), 2U);
}

TEST_F(client_test, service_unavailable_is_retried_then_succeeds_for_a_post_too) {
  server_.push(reply::with(503, "", {{"Retry-After", "1"}}));
  server_.push(reply::with(500, "", {{"Retry-After", "2"}}));
  server_.push(reply::with(200, "done"));
  client c(io_.get_executor(), plain_config(), fast_options());
  request req;
  req.method = http::verb::post;
  req.target = "/p";
  req.body = "{}";
  auto res = testing::settle_sync(io_, c.send(req));
  ASSERT_TRUE(res && *res);
  EXPECT_EQ((*res)->status, 200U);
  EXPECT_EQ(waits_, (std::vector<std::chrono::nanoseconds>{1s, 2s}));
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3U);
  EXPECT_EQ(reqs[2].body, "{}");
}

TEST_F(client_test, server_error_without_retry_after_is_returned_at_once) {
  // client-go retries 429/5xx only when the server says when (Retry-After).
  server_.push(reply::with(500, "boom"));
  client c(io_.get_executor(), plain_config(), fast_options());
  auto res = get(c, "/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500U);
  EXPECT_EQ(server_.requests().size(), 1U);
}

TEST_F(client_test, retries_exhausted_returns_the_last_status) {
  server_.set_fallback(reply::with(429, "busy", {{"Retry-After", "0"}}));
  auto opts = fast_options();
  opts.max_retries = 3;
  client c(io_.get_executor(), plain_config(), opts);
  auto res = get(c, "/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429U);
  EXPECT_EQ(res->body, "busy");
  EXPECT_EQ(server_.requests().size(), 4U);
  EXPECT_EQ(waits_.size(), 3U);
}

TEST_F(client_test, retries_go_through_the_rate_limiter) {
  server_.push(reply::with(429, "", {{"Retry-After", "0"}}));
  server_.push(reply::with(200, "ok"));
  auto opts = fast_options();
  opts.qps = 5;    // 200 ms per token once the burst of one is spent
  opts.burst = 1;  // the token bucket refills on clock_, which stands still
  client c(io_.get_executor(), plain_config(), opts);
  auto res = get(c, "/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200U);
  // The first send takes the burst; the retry waits for the next token.
  EXPECT_EQ(rate_waits_, (std::vector<std::chrono::nanoseconds>{0ns, 200ms}));
  EXPECT_EQ(waits_, (std::vector<std::chrono::nanoseconds>{0s}));
}

// The QPS limit is a token bucket (client-go's): the burst at once, then a token every 1/qps,
// reservations queueing up behind each other while the clock stands still.
TEST_F(client_test, rate_limit_spends_the_burst_then_waits_for_tokens) {
  auto opts = fast_options();
  opts.qps = 10;
  opts.burst = 3;
  client c(io_.get_executor(), plain_config(), opts);
  for (int i = 0; i < 5; ++i) {
    server_.push(reply::with(200, "ok"));
    ASSERT_TRUE(get(c, "/x"));
  }
  clock_->advance(200ms);
  server_.push(reply::with(200, "ok"));
  ASSERT_TRUE(get(c, "/x"));
  EXPECT_EQ(rate_waits_,
            (std::vector<std::chrono::nanoseconds>{0ns, 0ns, 0ns, 100ms, 200ms, 100ms}));
}

TEST_F(client_test, non_positive_qps_disables_the_rate_limit) {
  auto opts = fast_options();
  opts.qps = 0;
  opts.burst = 1;
  client c(io_.get_executor(), plain_config(), opts);
  for (int i = 0; i < 100; ++i) {
    server_.push(reply::with(200, "ok"));
    ASSERT_TRUE(get(c, "/x"));
  }
  EXPECT_EQ(rate_waits_, std::vector<std::chrono::nanoseconds>(100, 0ns));
}

TEST_F(client_test, get_cut_mid_response_is_retried) {
  server_.push(reply().raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial").close());
  server_.push(reply::with(200, "whole"));
  client c(io_.get_executor(), plain_config(), fast_options());
  auto res = get(c, "/api/v1/nodes");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->body, "whole");
  EXPECT_EQ(server_.requests().size(), 2U);
}

TEST_F(client_test, post_is_not_retried_after_a_network_error) {
  server_.push(reply::close_now());
  server_.push(reply::with(200, "should not be reached"));
  client c(io_.get_executor(), plain_config(), fast_options());
  request req;
  req.method = http::verb::post;
  req.target = "/api/v1/namespaces/default/events";
  req.body = "{}";
  auto res = testing::settle_sync(io_, c.send(req));
  ASSERT_TRUE(res);
  ASSERT_FALSE(*res);
  EXPECT_EQ((*res).error().code, make_error_code(base::errc::connection_failed));
  EXPECT_EQ(server_.requests().size(), 1U);
  EXPECT_TRUE(network_waits_.empty());
}

TEST_F(client_test, network_errors_are_resent_after_a_growing_jittered_backoff) {
  // Regression: resends went out at once (22 TLS handshakes in 3 s against a broken server).
  for (int i = 0; i < 4; ++i) {
    server_.push(reply::close_now());
  }
  server_.push(reply::with(200, "whole"));
  client c(io_.get_executor(), plain_config(), fast_options());
  auto res = get(c, "/api/v1/nodes");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->body, "whole");
  EXPECT_EQ(server_.requests().size(), 5U);
  // 100 ms doubling, each stretched by a factor in [1, 1.5).
  ASSERT_EQ(network_waits_.size(), 4U);
  auto base = std::chrono::nanoseconds(100ms);
  for (const auto wait : network_waits_) {
    EXPECT_GE(wait, base);
    EXPECT_LT(wait, base * 3 / 2);
    base *= 2;
  }
  EXPECT_TRUE(waits_.empty());
}

TEST_F(client_test, network_retry_backoff_is_capped_and_bounded_by_max_retries) {
  server_.set_fallback(reply::close_now());
  client c(io_.get_executor(), plain_config(), fast_options());
  auto res = get(c, "/api/v1/nodes");
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, make_error_code(base::errc::connection_failed));
  EXPECT_EQ(server_.requests().size(), 11U);  // max_retries 10
  ASSERT_EQ(network_waits_.size(), 10U);
  EXPECT_LT(network_waits_[5], 5s);  // 3.2 s stretched by at most 1.5
  for (std::size_t i = 6; i < network_waits_.size(); ++i) {
    EXPECT_EQ(network_waits_[i], 5s) << i;
  }
}

TEST_F(client_test, network_retry_backoff_is_slept_on_the_clock) {
  server_.push(reply::close_now());
  server_.push(reply::with(200, "whole"));
  auto opts = fast_options();
  opts.delay = nullptr;
  client c(io_.get_executor(), plain_config(), opts);
  std::optional<base::result<response>> res;
  start_send(c, request(http::verb::get, "/x", {}, "application/json", true), res);
  ASSERT_FALSE(run_until([&] { return res.has_value(); }));
  // The first resend waits 100 ms stretched by a factor in [1, 1.5).
  clock_->advance(99ms);
  run_ready();
  EXPECT_EQ(server_.requests().size(), 1U);
  clock_->advance(51ms);
  ASSERT_TRUE(run_until([&] { return res.has_value(); }));
  ASSERT_TRUE(*res) << res->error().message;
  EXPECT_EQ((*res)->body, "whole");
  EXPECT_EQ(server_.requests().size(), 2U);
}

TEST_F(client_test, shutdown_ends_a_network_retry_backoff) {
  server_.set_fallback(reply::close_now());
  auto opts = fast_options();
  const auto record = opts.delay;
  opts.delay = [record](wait_reason why, std::chrono::nanoseconds wanted) {
    record(why, wanted);
    return why == wait_reason::network_retry ? std::chrono::nanoseconds(1h) : wanted;
  };
  client c(io_.get_executor(), plain_config(), opts);
  std::optional<base::result<response>> res;
  start_send(c, request(http::verb::get, "/x", {}, "application/json", true), res);
  ASSERT_TRUE(run_until([this] { return !network_waits_.empty(); }));
  expect_ended_by_shutdown(c, res);
  EXPECT_EQ(server_.requests().size(), 1U);
}

TEST_F(client_test, a_request_withdrawn_during_a_network_backoff_is_not_resent) {
  server_.set_fallback(reply::close_now());
  auto opts = fast_options();
  bool withdrawn = false;
  const auto record = opts.delay;
  opts.delay = [&withdrawn, record](wait_reason why, std::chrono::nanoseconds wanted) {
    withdrawn = withdrawn || why == wait_reason::network_retry;
    return record(why, wanted);
  };
  client c(io_.get_executor(), plain_config(), opts);
  request req(http::verb::delete_, "/api/v1/namespaces/ns/pods/p", {}, "application/json", true);
  req.cancelled = [&withdrawn] { return withdrawn; };
  auto res = testing::settle_sync(io_, c.send(std::move(req)));
  ASSERT_TRUE(res);
  ASSERT_FALSE(*res);
  EXPECT_EQ((*res).error().code, make_error_code(base::errc::cancelled));
  EXPECT_EQ(server_.requests().size(), 1U);
  EXPECT_EQ(network_waits_.size(), 1U);
}

TEST_F(client_test, stalled_server_times_out_at_the_request_timeout) {
  server_.push(reply::no_response());
  auto opts = fast_options();
  opts.request_timeout = 300ms;
  client c(io_.get_executor(), plain_config(), opts);
  std::optional<base::result<response>> out;
  start_send(c, request(http::verb::get, "/x", {}, "application/json", true), out);
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 1; }));
  ASSERT_NO_FATAL_FAILURE(expect_timeout_at(300ms, out));
  const auto& res = *out;
  EXPECT_NE(res.error().message.find("no progress within 300 ms"), std::string::npos)
      << res.error().message;
  EXPECT_EQ(server_.requests().size(), 1U);  // timeouts are not retried
}

TEST_F(client_test, stalled_mid_body_times_out) {
  server_.push(reply().raw("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").stall());
  auto opts = fast_options();
  opts.request_timeout = 300ms;
  client c(io_.get_executor(), plain_config(), opts);
  std::optional<base::result<response>> out;
  start_send(c, request(http::verb::get, "/x", {}, "application/json", true), out);
  ASSERT_FALSE(run_until([&] { return out.has_value(); }));
  clock_->advance(300ms);
  ASSERT_TRUE(run_until([&] { return out.has_value(); }));
  ASSERT_FALSE(*out);
  EXPECT_EQ(out->error().code, make_error_code(base::errc::timeout));
}

TEST_F(client_test, waiting_for_a_pooled_connection_times_out_on_the_clock) {
  // A watch holds the only connection (its body under the idle guard, an hour here).
  server_.push(reply::chunked(200).chunk("{}\n").stall());
  auto opts = fast_options();
  opts.max_connections = 1;
  opts.request_timeout = 300ms;
  client c(io_.get_executor(), plain_config(), opts);
  std::optional<base::result<response>> watch;
  asio::co_spawn(
      io_,
      [](client& to, std::optional<base::result<response>>* out) -> asio::awaitable<void> {
        *out = co_await to.stream(
            request(http::verb::get, "/w"), [](std::string_view) { return true; }, 1h);
      }(c, &watch),
      asio::detached);
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 1; }));
  std::optional<base::result<response>> res;
  start_send(c, request(http::verb::get, "/x", {}, "application/json", true), res);
  run_ready();  // it queues for the connection
  ASSERT_NO_FATAL_FAILURE(expect_timeout_at(300ms, res));
  EXPECT_NE(res->error().message.find("no free connection"), std::string::npos)
      << res->error().message;
  EXPECT_FALSE(watch.has_value());
  EXPECT_EQ(server_.requests().size(), 1U);
}

TEST_F(client_test, oversized_response_is_an_error) {
  server_.push(reply::with(200, std::string(5000, 'x')));
  auto opts = fast_options();
  opts.max_response_bytes = 1000;
  opts.max_retries = 0;
  client c(io_.get_executor(), plain_config(), opts);
  auto res = get(c, "/x", false);
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message.find("larger than"), std::string::npos);
}

TEST_F(client_test, stream_delivers_chunks_split_mid_line_intact) {
  const std::string a = R"({"type":"ADDED","object":{"metadata":{"na)";
  const std::string b = "me\":\"n1\"}}}\n{\"type\":\"DEL";
  const std::string d = "ETED\",\"object\":{}}\n";
  server_.push(reply::chunked(200).chunk(a).hold("second").chunk(b).chunk(d).end());
  client c(io_.get_executor(), plain_config(), fast_options());
  std::string got;
  int pieces = 0;
  request req;
  req.target = "/api/v1/nodes?watch=1";
  req.idempotent = true;
  auto res = testing::settle_sync(io_, c.stream(
                                           req,
                                           [&](std::string_view bytes) {
                                             got.append(bytes);
                                             if (++pieces == 1) {
                                               server_.release("second");
                                             }
                                             return true;
                                           },
                                           1h));
  ASSERT_TRUE(res && *res) << (res ? (*res).error().message : "limit");
  EXPECT_EQ((*res)->status, 200U);
  EXPECT_EQ(got, a + b + d);
  EXPECT_GE(pieces, 2);
}

TEST_F(client_test, stream_with_error_status_returns_the_body) {
  server_.push(reply::with(410, R"({"kind":"Status","code":410})"));
  client c(io_.get_executor(), plain_config(), fast_options());
  bool called = false;
  request req;
  req.target = "/api/v1/pods?watch=1";
  auto res = testing::settle_sync(io_, c.stream(
                                           req,
                                           [&](std::string_view) {
                                             called = true;
                                             return true;
                                           },
                                           1h));
  ASSERT_TRUE(res && *res);
  EXPECT_EQ((*res)->status, 410U);
  EXPECT_EQ((*res)->body, R"({"kind":"Status","code":410})");
  EXPECT_FALSE(called);
}

TEST_F(client_test, idle_stream_times_out) {
  server_.push(reply::chunked(200).chunk("{\"type\":\"BOOKMARK\"}\n").stall());
  client c(io_.get_executor(), plain_config(), fast_options());
  std::string got;
  request req;
  req.target = "/api/v1/pods?watch=1";
  req.idempotent = true;
  std::optional<base::result<response>> res;
  asio::co_spawn(
      io_,
      [](client& to, request r, std::string* into,
         std::optional<base::result<response>>* out) -> asio::awaitable<void> {
        *out = co_await to.stream(
            std::move(r),
            [into](std::string_view bytes) {
              into->append(bytes);
              return true;
            },
            300ms);
      }(c, req, &got, &res),
      asio::detached);
  ASSERT_FALSE(run_until([&] { return res.has_value(); }));
  EXPECT_EQ(got, "{\"type\":\"BOOKMARK\"}\n");
  // The request timeout (60 s) is not what ends it: the idle timeout is, on the clock.
  ASSERT_NO_FATAL_FAILURE(expect_timeout_at(300ms, res));
  EXPECT_NE((*res).error().message.find("no progress within 300 ms"), std::string::npos)
      << (*res).error().message;
  EXPECT_EQ(got, "{\"type\":\"BOOKMARK\"}\n");
  EXPECT_EQ(server_.requests().size(), 1U);  // not replayed once bytes were delivered
}

TEST_F(client_test, a_stream_times_out_idle_timeout_after_its_last_byte_not_its_first) {
  server_.push(reply::chunked(200).chunk("a").hold("b").chunk("b").hold("c").chunk("c").stall());
  client c(io_.get_executor(), plain_config(), fast_options());
  std::string got;
  request req;
  req.target = "/api/v1/pods?watch=1";
  std::optional<base::result<response>> res;
  asio::co_spawn(
      io_,
      [](client& to, request r, std::string* into,
         std::optional<base::result<response>>* out) -> asio::awaitable<void> {
        *out = co_await to.stream(
            std::move(r),
            [into](std::string_view bytes) {
              into->append(bytes);
              return true;
            },
            300ms);
      }(c, req, &got, &res),
      asio::detached);
  ASSERT_TRUE(run_until([&] { return got == "a"; }));
  // Bytes 200 ms apart, past the first byte's 300 ms: the guard counts from the last one.
  for (const char* next : {"b", "c"}) {
    clock_->advance(200ms);
    run_ready();
    server_.release(next);
    ASSERT_TRUE(run_until([&] { return got.back() == *next; })) << got;
    ASSERT_FALSE(res.has_value());
  }
  ASSERT_NO_FATAL_FAILURE(expect_timeout_at(300ms, res));
  EXPECT_EQ(got, "abc");
}

TEST_F(client_test, stream_stopped_by_the_sink) {
  server_.push(reply::chunked(200).chunk("a").hold("never").chunk("b").end());
  client c(io_.get_executor(), plain_config(), fast_options());
  request req;
  req.target = "/w";
  auto res = testing::settle_sync(io_, c.stream(
                                           req, [](std::string_view) { return false; }, 1h));
  ASSERT_TRUE(res && *res);
  EXPECT_EQ((*res)->status, 200U);
}

class temp_file {
public:
  explicit temp_file(const std::string& content) {
    path_ = std::filesystem::temp_directory_path() /
            ("tec-token-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    write(content);
  }
  ~temp_file() { std::filesystem::remove(path_); }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  void write(const std::string& content) const { std::ofstream(path_) << content; }
  [[nodiscard]] std::string path() const { return path_.string(); }

private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

TEST_F(client_test, unauthorized_rereads_the_token_file_and_retries_once) {
  temp_file token("old-token\n");
  server_.push(
      reply().hold("rotated").raw("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"));
  server_.push(reply::with(200, "ok"));
  auto cfg = plain_config();
  cfg.token_file = token.path();
  client c(io_.get_executor(), cfg, fast_options());
  std::optional<base::result<response>> out;
  start_send(c, request(http::verb::get, "/x", {}, "application/json", true), out);
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 1; }));
  token.write("new-token\n");
  server_.release("rotated");
  ASSERT_TRUE(run_until([&] { return out.has_value(); }));
  const auto& res = *out;
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200U);
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  EXPECT_EQ(reqs[0].header("authorization"), "Bearer old-token");
  EXPECT_EQ(reqs[1].header("authorization"), "Bearer new-token");
}

TEST_F(client_test, unauthorized_with_an_unchanged_token_is_returned) {
  temp_file token("same\n");
  server_.set_fallback(reply::with(401, ""));
  auto cfg = plain_config();
  cfg.token_file = token.path();
  client c(io_.get_executor(), cfg, fast_options());
  auto res = get(c, "/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401U);
  EXPECT_EQ(server_.requests().size(), 1U);
}

TEST_F(client_test, observer_sees_every_attempt) {
  server_.push(reply::with(503, "", {{"Retry-After", "0"}}));
  server_.push(reply::with(200, "ok"));
  std::vector<unsigned> statuses;
  auto opts = fast_options();
  opts.observer = [&](http::verb verb, unsigned status, std::chrono::nanoseconds) {
    EXPECT_EQ(verb, http::verb::get);
    statuses.push_back(status);
  };
  client c(io_.get_executor(), plain_config(), opts);
  ASSERT_TRUE(get(c, "/x"));
  EXPECT_EQ(statuses, (std::vector<unsigned>{503, 200}));
}

TEST_F(client_test, bad_ca_is_a_config_error_not_a_crash) {
  rest_config cfg = plain_config();
  cfg.tls = true;
  cfg.ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  client c(io_.get_executor(), cfg, fast_options());
  auto res = get(c, "/x");
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, make_error_code(base::errc::config_invalid));
  EXPECT_EQ(server_.requests().size(), 0U);
}

TEST_F(client_test, invalid_port_is_a_config_error) {
  rest_config cfg = plain_config();
  cfg.port = "http";
  client c(io_.get_executor(), cfg, fast_options());
  auto res = get(c, "/x");
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, make_error_code(base::errc::config_invalid));
}

TEST_F(client_test, shutdown_cancels_a_request_in_flight) {
  server_.push(reply::no_response());
  auto opts = fast_options();
  opts.request_timeout = 1h;  // the clock stands still: only shutdown() can end it
  client c(io_.get_executor(), plain_config(), opts);
  std::optional<base::result<response>> res;
  start_send(c, request(http::verb::get, "/x", {}, "application/json", true), res);
  ASSERT_TRUE(run_until([this] { return server_.requests().size() == 1; }));
  expect_ended_by_shutdown(c, res);
  auto again = get(c, "/y");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, make_error_code(base::errc::shutting_down));
}

}  // namespace
}  // namespace tec::k8sclient

namespace tec::k8sclient {
namespace {

// "Too large" is final: the same request would bring the same body (issue 11: a 10 GB body
// was read up to the cap 10 times over).
TEST_F(client_test, a_response_too_large_is_an_error_value_and_never_retried) {
  server_.set_fallback(reply::with(200, std::string(5000, 'x')));
  auto opts = fast_options();
  opts.max_response_bytes = 1000;
  opts.max_retries = 10;
  client c(io_.get_executor(), plain_config(), opts);
  auto res = get(c, "/api/v1/pods", /*idempotent=*/true);
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, make_error_code(base::errc::response_too_large));
  EXPECT_NE(res.error().message.find("larger than 1000 bytes"), std::string::npos)
      << res.error().message;
  EXPECT_NE(res.error().message.find("GET /api/v1/pods"), std::string::npos) << res.error().message;
  EXPECT_EQ(server_.requests().size(), 1U);
}

TEST_F(client_test, a_streamed_error_body_too_large_is_never_retried) {
  server_.set_fallback(reply::chunked(500).repeat(std::string(64 * 1024, 'e'), 64).end());
  auto opts = fast_options();
  opts.max_retries = 10;
  client c(io_.get_executor(), plain_config(), opts);
  request req;
  req.target = "/api/v1/pods?watch=1";
  req.idempotent = true;
  auto out =
      testing::settle_sync(io_, c.stream(
                                    std::move(req), [](std::string_view) { return true; }, 1h));
  ASSERT_TRUE(out);
  ASSERT_FALSE(*out);
  EXPECT_EQ(out->error().code, make_error_code(base::errc::response_too_large))
      << out->error().message;
  EXPECT_EQ(server_.requests().size(), 1U);
}

}  // namespace
}  // namespace tec::k8sclient

namespace tec::k8sclient {
namespace {

// ---- What is about sockets: real TCP (and TLS) on loopback, the steady clock ----------------

class client_socket_test : public ::testing::Test {
protected:
  static client_options options() { return testing::quick_options(10); }

  base::result<response> get(client& c, std::string target) {
    auto out = run_sync(
        io_, c.send(request(http::verb::get, std::move(target), {}, "application/json", true)),
        wait_cap);
    if (!out) {
      ADD_FAILURE() << "send did not complete";
      return base::error{make_error_code(base::errc::timeout), "test limit", 0};
    }
    return std::move(*out);
  }

  /// A GET with `cfg` fails as connection_failed, its message containing `what`.
  void expect_connection_failed(const rest_config& cfg, const std::string& what) {
    client c(io_.get_executor(), cfg, options());
    auto res = get(c, "/x");
    ASSERT_FALSE(res);
    EXPECT_EQ(res.error().code, make_error_code(base::errc::connection_failed));
    EXPECT_NE(res.error().message.find(what), std::string::npos) << res.error().message;
  }

  fake_http_server server_;
  asio::io_context io_;
};

TEST_F(client_socket_test, requests_reuse_one_tcp_connection) {
  server_.set_fallback(reply::with(200, "ok"));
  client c(io_.get_executor(), testing::plain_config(server_), options());
  for (int i = 0; i < 3; ++i) {
    auto res = get(c, "/healthz");
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->body, "ok");
  }
  EXPECT_EQ(server_.connections(), 1U);
}

TEST_F(client_socket_test, connection_refused_is_a_clear_error) {
  rest_config cfg = testing::plain_config(server_);
  {
    fake_http_server gone;
    cfg.port = gone.port();
  }
  expect_connection_failed(cfg, "cannot connect");
}

TEST_F(client_socket_test, tls_to_a_plain_server_fails_cleanly) {
  server_.set_fallback(reply::with(400, "not tls"));
  rest_config cfg = testing::plain_config(server_);
  cfg.tls = true;
  cfg.insecure_skip_tls_verify = true;
  expect_connection_failed(cfg, "TLS handshake");
}

// The production clock's deadline closes a real socket. Nothing is asserted about how long it
// took; the test only waits for the outcome (bounded by wait_cap).
TEST_F(client_socket_test, a_stalled_tcp_server_times_out_on_the_steady_clock) {
  server_.push(reply::no_response());
  auto opts = options();
  opts.request_timeout = 50ms;
  client c(io_.get_executor(), testing::plain_config(server_), opts);
  auto res = get(c, "/x");
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, make_error_code(base::errc::timeout));
  EXPECT_EQ(server_.requests().size(), 1U);
}

}  // namespace
}  // namespace tec::k8sclient

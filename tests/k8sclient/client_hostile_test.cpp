// The client against a hostile or overloaded API server (issue 29): throttling that lasts, a
// TLS handshake that never completes, a streamed body that never ends.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "k8sclient/support/settle.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/captured_log.hpp"
#include "support/manual_clock.hpp"
#include "tec/base/logger.hpp"
#include "tec/k8sclient/client.hpp"

namespace tec::k8sclient {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using test::captured_log;
using testing::fake_http_server;
using testing::reply;

class client_hostile_test : public ::testing::Test {
protected:
  client_options options() {
    client_options opts = testing::quick_options(10);
    opts.clock = clock_;
    opts.connector = server_.connector();
    return opts;
  }

  base::result<response> get(client& c, const std::string& target) {
    auto out = testing::settle_sync(
        io_, c.send(request(http::verb::get, target, {}, "application/json", true)));
    if (!out) {
      ADD_FAILURE() << "send did not complete";
      return base::error{make_error_code(base::errc::timeout), "test limit", 0};
    }
    return std::move(*out);
  }

  asio::io_context io_;
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>();
  fake_http_server server_{io_.get_executor()};
};

// 150 s of 429s gave no warning line at all (each retried, or returned, at debug level). Now a
// streak is one warning when it begins and one line when it ends, however long it lasts.
TEST_F(client_hostile_test, a_streak_of_429_answers_warns_once) {
  captured_log log(detail::client_log());
  client c(io_.get_executor(), testing::plain_config(server_), options());
  for (int i = 0; i < 8; ++i) {
    server_.push(reply::with(429, R"({"kind":"Status","code":429})", {{"Retry-After", "1"}}));
  }
  server_.push(reply::with(200, "ok"));
  auto first = get(c, "/api/v1/pods?limit=500");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->status, 200U);
  // Two requests answered 429 without Retry-After (returned at once), then a success: a second
  // streak, a second warning.
  server_.push(reply::with(429, "{}"));
  server_.push(reply::with(429, "{}"));
  server_.push(reply::with(200, "ok"));
  EXPECT_EQ(get(c, "/a")->status, 429U);
  EXPECT_EQ(get(c, "/b")->status, 429U);
  EXPECT_EQ(get(c, "/c")->status, 200U);
  EXPECT_EQ(server_.requests().size(), 12U);

  const auto lines = log.lines();
  std::string all;
  for (const auto& l : lines) {
    all += l + "\n";
  }
  EXPECT_EQ(log.count("warning", "429"), 2U) << all;
  EXPECT_EQ(log.count("warning", "throttling this client"), 2U) << all;
  EXPECT_EQ(log.count("warning", "GET /api/v1/pods?limit=500"), 1U) << all;
  EXPECT_EQ(log.count("info", "stopped throttling this client: 8 answers 429"), 1U) << all;
  EXPECT_EQ(log.count("info", "stopped throttling this client: 2 answers 429"), 1U) << all;
}

// A streamed body that never ends (a LIST trickling bytes) is cut at the request's deadline,
// on the clock, whatever the idle guard says.
TEST_F(client_hostile_test, a_stream_is_cut_at_its_deadline) {
  client c(io_.get_executor(), testing::plain_config(server_), options());
  server_.push(reply::chunked(200).chunk("{").stall());
  request req(http::verb::get, "/api/v1/pods", {}, "application/json", true);
  req.deadline = clock_->now() + 5min;
  std::size_t received = 0;
  std::optional<base::result<response>> res;
  // A named closure: the coroutine reads its captures through it until the stream ends.
  auto run = [&]() -> asio::awaitable<void> {
    res = co_await c.stream(
        std::move(req),
        [&](std::string_view bytes) {
          received += bytes.size();
          return true;
        },
        1h);
  };
  asio::co_spawn(io_, run(), asio::detached);
  testing::settle(io_, [&] { return received > 0; });
  ASSERT_EQ(received, 1U);
  clock_->advance(5min - 1ms);
  testing::settle(io_, [&] { return res.has_value(); });
  ASSERT_FALSE(res.has_value());
  clock_->advance(1ms);
  ASSERT_TRUE(testing::settle(io_, [&] { return res.has_value(); }));
  ASSERT_FALSE(*res);
  EXPECT_EQ(res->error().code, make_error_code(base::errc::timeout));
  EXPECT_NE(res->error().message.find("not complete by its deadline"), std::string::npos)
      << res->error().message;
  EXPECT_EQ(server_.requests().size(), 1U);  // never retried
}

// A TLS handshake ended by its deadline was reported as "Operation canceled". Loopback (it is
// about a socket): a listener that accepts nothing and says nothing; the steady clock.
TEST(client_hostile_socket_test, a_tls_handshake_timeout_says_so) {
  asio::io_context io;
  asio::ip::tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});
  rest_config cfg;
  cfg.host = "127.0.0.1";
  cfg.port = std::to_string(silent.local_endpoint().port());
  cfg.tls = true;
  cfg.insecure_skip_tls_verify = true;
  auto opts = testing::quick_options(0);
  opts.tls_handshake_timeout = 50ms;
  client c(io.get_executor(), cfg, opts);
  auto out = testing::run_sync(io, c.send(request(http::verb::get, "/x")), 30s);
  ASSERT_TRUE(out.has_value());
  ASSERT_FALSE(*out);
  const auto& e = out->error();
  EXPECT_EQ(e.code, make_error_code(base::errc::timeout)) << e.message;
  EXPECT_NE(e.message.find("TLS handshake"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("timed out: no answer within 50 ms"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find("canceled"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace tec::k8sclient

#include "tec/serving/http_endpoints.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "k8sclient/support/run_sync.hpp"
#include "serving/support/live_heap.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/serving/request_authorizer.hpp"

namespace tec::serving {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Safety net for a broken server: no test waits this long when things work (a loaded 2-core
// machine under a sanitizer can be 10x slower than an idle one).
constexpr auto test_cap = 30s;

// Runs `ioc` until the coroutine finishes (or test_cap passes) and returns its value.
template <class T>
T run_until_done(asio::io_context& ioc, asio::awaitable<T> aw) {
  std::optional<T> out;
  std::exception_ptr error;
  bool done = false;
  asio::co_spawn(ioc, std::move(aw), [&](std::exception_ptr e, T v) {
    error = e;
    if (!e) {
      out = std::move(v);
    }
    done = true;
  });
  const auto cap = std::chrono::steady_clock::now() + test_cap;
  while (!done && std::chrono::steady_clock::now() < cap) {
    if (ioc.stopped()) {
      ioc.restart();
    }
    ioc.run_one_for(50ms);
  }
  if (error) {
    std::rethrow_exception(error);
  }
  if (!done) {
    throw std::runtime_error("the client coroutine did not finish in time");
  }
  return std::move(*out);
}

// Runs `ioc` until `pred()` holds (or test_cap passes).
template <class Pred>
bool run_until(asio::io_context& ioc, Pred pred) {
  return k8sclient::testing::run_until(ioc, pred, test_cap);
}

asio::awaitable<beast::tcp_stream> connect(tcp::endpoint ep) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(test_cap);
  co_await stream.async_connect(ep, asio::use_awaitable);
  co_return stream;
}

struct reply {
  unsigned status = 0;
  std::string content_type;
  std::string allow;
  std::string content_length;
  std::string body;
  std::string retry_after;
};

asio::awaitable<reply> request(beast::tcp_stream& stream, http::verb method, std::string target,
                               std::string body = {}) {
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "test");
  req.body() = std::move(body);
  req.prepare_payload();
  stream.expires_after(test_cap);
  co_await http::async_write(stream, req, asio::use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.skip(method == http::verb::head);
  co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
  const auto& res = parser.get();
  co_return reply{res.result_int(),
                  std::string(res[http::field::content_type]),
                  std::string(res[http::field::allow]),
                  std::string(res[http::field::content_length]),
                  res.body(),
                  std::string(res[http::field::retry_after])};
}

asio::awaitable<reply> fetch(tcp::endpoint ep, http::verb method, std::string target,
                             std::string body = {}) {
  auto stream = co_await connect(ep);
  // Named, not a temporary in the co_await expression (see http_endpoints.cpp on GCC 12).
  auto op = request(stream, method, std::move(target), std::move(body));
  co_return co_await std::move(op);
}

// Reads until the server closes the connection; returns the bytes read before that. A server
// that keeps the connection open for test_cap fails the test.
asio::awaitable<std::string> read_until_closed(beast::tcp_stream& stream) {
  std::string all;
  char buf[512];
  stream.expires_after(test_cap);
  for (;;) {
    auto [ec, n] =
        co_await stream.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    all.append(buf, n);
    if (ec) {
      EXPECT_NE(ec, beast::error::timeout) << "the server did not close the connection";
      co_return all;
    }
  }
}

class http_endpoints_test : public ::testing::Test {
protected:
  /// Deadlines far beyond any test; the tests of the deadlines set short ones.
  http_endpoints_options options(std::chrono::milliseconds read_timeout = 60'000ms) {
    http_endpoints_options o;
    o.bind_address = "127.0.0.1:0";
    o.read_timeout = read_timeout;
    o.write_timeout = 60'000ms;
    return o;
  }

  tcp::endpoint start(http_endpoints& server) {
    auto ep = server.start();
    if (!ep) {
      ADD_FAILURE() << ep.error().message;
      return {};
    }
    EXPECT_TRUE(ep.value().has_value());
    EXPECT_NE(ep.value()->port(), 0);
    return *ep.value();
  }

  asio::io_context ioc_;
};

TEST_F(http_endpoints_test, serves_metrics) {
  metrics::registry r;
  r.add_counter("hits_total", "Hits.").with({}).inc(7);
  http_endpoints server(ioc_.get_executor(), options());
  server.handle("/metrics", [&r] {
    return http_response{200, std::string(metrics::metrics_content_type), r.render()};
  });
  const auto ep = start(server);
  const auto res = run_until_done(ioc_, fetch(ep, http::verb::get, "/metrics"));
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.content_type.rfind("text/plain; version=0.0.4", 0), 0U) << res.content_type;
  EXPECT_EQ(res.body, r.render());
  EXPECT_NE(res.body.find("hits_total 7\n"), std::string::npos);

  const auto with_query = run_until_done(ioc_, fetch(ep, http::verb::get, "/metrics?x=1"));
  EXPECT_EQ(with_query.status, 200U);
  server.stop();
}

// Work an async handler puts on another executor: says it started, then blocks that
// executor's thread until `gate` opens.
asio::awaitable<http_response> slow_body(std::shared_future<void> gate,
                                         std::atomic<bool>* started) {
  started->store(true);
  gate.wait();
  co_return http_response{200, "application/json", "{\"slow\":true}"};
}

asio::awaitable<http_response> throwing_body() {
  throw std::runtime_error("no report");
  co_return http_response{};
}

TEST_F(http_endpoints_test, an_async_handler_leaves_the_executor_free_while_it_computes) {
  asio::thread_pool pool(1);
  std::promise<void> open;
  const std::shared_future<void> gate = open.get_future().share();
  std::atomic<bool> started{false};
  http_endpoints server(ioc_.get_executor(), options());
  server.handle("/x", [] { return http_response{200, "text/plain", "x"}; });
  server.handle_async("/slow", [&pool, gate, &started] {
    return asio::co_spawn(pool, slow_body(gate, &started), asio::use_awaitable);
  });
  server.handle_async(
      "/throws", [&pool] { return asio::co_spawn(pool, throwing_body(), asio::use_awaitable); });
  const auto ep = start(server);

  std::optional<reply> slow;
  asio::co_spawn(ioc_, fetch(ep, http::verb::get, "/slow"),
                 [&slow](const std::exception_ptr& e, reply r) {
                   EXPECT_FALSE(e);
                   slow = std::move(r);
                 });
  ASSERT_TRUE(run_until(ioc_, [&started] { return started.load(); }));
  // The slow one holds the pool's thread; the server's executor still answers.
  const auto x = run_until_done(ioc_, fetch(ep, http::verb::get, "/x"));
  EXPECT_EQ(x.status, 200U);
  EXPECT_FALSE(slow.has_value());
  open.set_value();
  ASSERT_TRUE(run_until(ioc_, [&slow] { return slow.has_value(); }));
  EXPECT_EQ(slow->status, 200U);
  EXPECT_EQ(slow->content_type, "application/json");
  EXPECT_EQ(slow->body, R"({"slow":true})");

  const auto head = run_until_done(ioc_, fetch(ep, http::verb::head, "/slow"));
  EXPECT_EQ(head.status, 200U);
  EXPECT_EQ(head.content_length, "13");
  EXPECT_EQ(run_until_done(ioc_, fetch(ep, http::verb::post, "/slow", "x")).status, 405U);
  const auto thrown = run_until_done(ioc_, fetch(ep, http::verb::get, "/throws"));
  EXPECT_EQ(thrown.status, 500U);
  EXPECT_NE(thrown.body.find("no report"), std::string::npos) << thrown.body;
  server.stop();
  pool.join();
}

TEST_F(http_endpoints_test, healthz_flips_to_500_with_the_reason) {
  std::atomic<bool> healthy{true};
  http_endpoints server(ioc_.get_executor(), options());
  server.handle_check("/healthz", [&]() -> check_result {
    if (healthy) {
      return {};
    }
    return {false, "watch of pods stalled for 120s"};
  });
  server.handle_check("/readyz", []() -> check_result { throw std::runtime_error("boom"); });
  const auto ep = start(server);

  auto res = run_until_done(ioc_, fetch(ep, http::verb::get, "/healthz"));
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.body, "ok");
  healthy = false;
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/healthz"));
  EXPECT_EQ(res.status, 500U);
  EXPECT_EQ(res.body, "watch of pods stalled for 120s");
  healthy = true;
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/healthz"));
  EXPECT_EQ(res.status, 200U);

  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/readyz"));
  EXPECT_EQ(res.status, 500U);
  EXPECT_EQ(res.body, "check threw: boom");
  server.stop();
}

TEST_F(http_endpoints_test, unknown_path_is_404_and_other_methods_405) {
  http_endpoints server(ioc_.get_executor(), options());
  server.handle("/x", [] { return http_response{200, "text/plain", "x-body"}; });
  const auto ep = start(server);

  auto res = run_until_done(ioc_, fetch(ep, http::verb::get, "/nope"));
  EXPECT_EQ(res.status, 404U);
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/x/"));
  EXPECT_EQ(res.status, 404U);
  for (const auto verb : {http::verb::post, http::verb::put, http::verb::delete_}) {
    res = run_until_done(ioc_, fetch(ep, verb, "/x", "payload"));
    EXPECT_EQ(res.status, 405U);
    EXPECT_EQ(res.allow, "GET, HEAD");
  }
  res = run_until_done(ioc_, fetch(ep, http::verb::head, "/x"));
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.content_length, "6");
  EXPECT_EQ(res.body, "");
  server.stop();
}

// Refuses every request it is asked about, and counts them.
class refuse_all_authorizer final : public request_authorizer {
public:
  int asked = 0;
  asio::awaitable<auth_decision> authorize(std::string /*bearer*/, std::string /*path*/,
                                           std::string /*peer*/) override {
    ++asked;
    co_return auth_decision{auth_outcome::unauthenticated, "no"};
  }
};

TEST_F(http_endpoints_test, a_post_route_has_its_own_body_limit_and_may_skip_the_authorizer) {
  auto o = options();
  o.body_limit = 16;
  auto authz = std::make_shared<refuse_all_authorizer>();
  o.authorizer = authz;
  http_endpoints server(ioc_.get_executor(), o);
  server.handle("/x", [] { return http_response{}; });
  server.handle_post(
      "/review", {.body_limit = 1000, .timeout = 60'000ms, .unauthenticated = true},
      [](std::string_view body) {
        return http_response{200, "application/json", "got " + std::to_string(body.size())};
      });
  server.handle_post("/private",
                     {.body_limit = 1000, .timeout = 60'000ms, .unauthenticated = false},
                     [](std::string_view /*body*/) { return http_response{}; });
  const auto ep = start(server);

  // Over the server's limit, within the route's; no token asked.
  auto res =
      run_until_done(ioc_, fetch(ep, http::verb::post, "/review?t=1", std::string(500, 'a')));
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.body, "got 500");
  EXPECT_EQ(authz->asked, 0);
  // Over the route's limit.
  res = run_until_done(ioc_, fetch(ep, http::verb::post, "/review", std::string(1001, 'a')));
  EXPECT_EQ(res.status, 413U);
  // Other paths keep the server's limit and the authorizer.
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/x", std::string(500, 'a')));
  EXPECT_EQ(res.status, 413U);
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/x"));
  EXPECT_EQ(res.status, 401U);
  res = run_until_done(ioc_, fetch(ep, http::verb::post, "/private", "{}"));
  EXPECT_EQ(res.status, 401U);
  EXPECT_EQ(authz->asked, 2);
  server.stop();
}

TEST_F(http_endpoints_test, a_post_route_answers_405_to_get_and_500_when_it_throws) {
  http_endpoints server(ioc_.get_executor(), options());
  server.handle_post("/review", {.body_limit = 1000, .timeout = 60'000ms, .unauthenticated = false},
                     [](std::string_view body) -> http_response {
                       if (body == "boom") {
                         throw std::runtime_error("boom");
                       }
                       return http_response{200, "text/plain", std::string(body)};
                     });
  const auto ep = start(server);
  auto res = run_until_done(ioc_, fetch(ep, http::verb::get, "/review"));
  EXPECT_EQ(res.status, 405U);
  EXPECT_EQ(res.allow, "POST");
  res = run_until_done(ioc_, fetch(ep, http::verb::post, "/review", "boom"));
  EXPECT_EQ(res.status, 500U);
  res = run_until_done(ioc_, fetch(ep, http::verb::post, "/review", "echo"));
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.body, "echo");
  res = run_until_done(ioc_, fetch(ep, http::verb::post, "/other", "x"));
  EXPECT_EQ(res.status, 405U);
  EXPECT_EQ(res.allow, "GET, HEAD");
  server.stop();
}

TEST_F(http_endpoints_test, a_post_route_cuts_a_slow_body_at_its_own_timeout) {
  http_endpoints server(ioc_.get_executor(), options());
  server.handle_post("/review", {.body_limit = 1000, .timeout = 200ms, .unauthenticated = false},
                     [](std::string_view /*body*/) { return http_response{}; });
  const auto ep = start(server);
  // The headers promise 100 bytes; 10 come, then nothing: closed at the route's timeout, long
  // before the read timeout (60 s), which read_until_closed's cap (30 s) would fail.
  const auto got = run_until_done(ioc_, [](tcp::endpoint e) -> asio::awaitable<std::string> {
    auto stream = co_await connect(e);
    const std::string req =
        "POST /review HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789";
    co_await asio::async_write(stream, asio::buffer(req), asio::use_awaitable);
    co_return co_await read_until_closed(stream);
  }(ep));
  EXPECT_EQ(got, "");
  server.stop();
}

TEST_F(http_endpoints_test, keeps_the_connection_alive_between_requests) {
  http_endpoints server(ioc_.get_executor(), options());
  int calls = 0;
  server.handle("/n", [&] { return http_response{200, "text/plain", std::to_string(++calls)}; });
  const auto ep = start(server);
  const auto bodies = run_until_done(ioc_, [](tcp::endpoint e) -> asio::awaitable<std::string> {
    auto stream = co_await connect(e);
    std::string out;
    for (int i = 0; i < 3; ++i) {
      auto op = request(stream, http::verb::get, "/n");
      out += (co_await std::move(op)).body;
    }
    co_return out;
  }(ep));
  EXPECT_EQ(bodies, "123");
  server.stop();
}

TEST_F(http_endpoints_test, silent_client_is_disconnected_after_the_read_deadline) {
  http_endpoints server(ioc_.get_executor(), options(200ms));
  server.handle("/x", [] { return http_response{}; });
  const auto ep = start(server);
  // The server closes the connection (read_until_closed fails the test if it does not).
  const auto got = run_until_done(ioc_, [](tcp::endpoint e) -> asio::awaitable<std::string> {
    auto stream = co_await connect(e);
    co_return co_await read_until_closed(stream);
  }(ep));
  EXPECT_EQ(got, "") << "no response to a request never sent";
  EXPECT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == 0; }));
  server.stop();
}

TEST_F(http_endpoints_test, slow_client_is_cut_off_at_the_deadline_for_the_whole_request) {
  http_endpoints server(ioc_.get_executor(), options(300ms));
  server.handle("/x", [] { return http_response{}; });
  const auto ep = start(server);
  const auto got = run_until_done(ioc_, [](tcp::endpoint e) -> asio::awaitable<std::string> {
    auto stream = co_await connect(e);
    // A partial request; the rest never comes.
    co_await asio::async_write(stream, asio::buffer(std::string_view("GET /x HTTP/1.1\r\nHo")),
                               asio::use_awaitable);
    co_return co_await read_until_closed(stream);
  }(ep));
  EXPECT_EQ(got, "");
  EXPECT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == 0; }));
  server.stop();
}

TEST_F(http_endpoints_test, oversized_headers_and_bodies_are_refused) {
  auto o = options();
  o.header_limit = 512;
  o.body_limit = 16;
  http_endpoints server(ioc_.get_executor(), o);
  server.handle("/x", [] { return http_response{}; });
  const auto ep = start(server);

  const auto big_header = run_until_done(ioc_, [](tcp::endpoint e) -> asio::awaitable<std::string> {
    auto stream = co_await connect(e);
    const std::string req =
        "GET /x HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n";
    co_await asio::async_write(stream, asio::buffer(req), asio::use_awaitable);
    co_return co_await read_until_closed(stream);
  }(ep));
  EXPECT_EQ(big_header.rfind("HTTP/1.1 431", 0), 0U) << big_header;

  const auto big_body =
      run_until_done(ioc_, fetch(ep, http::verb::get, "/x", std::string(100, 'b')));
  EXPECT_EQ(big_body.status, 413U);
  server.stop();
}

TEST_F(http_endpoints_test, garbage_gets_400_and_a_closed_connection) {
  http_endpoints server(ioc_.get_executor(), options());
  const auto ep = start(server);
  const auto got = run_until_done(ioc_, [](tcp::endpoint e) -> asio::awaitable<std::string> {
    auto stream = co_await connect(e);
    co_await asio::async_write(stream, asio::buffer(std::string_view("\x01\x02 nonsense\r\n\r\n")),
                               asio::use_awaitable);
    co_return co_await read_until_closed(stream);
  }(ep));
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0U) << got;
  server.stop();
}

TEST_F(http_endpoints_test, stop_closes_connected_clients_and_leaves_no_work) {
  http_endpoints server(ioc_.get_executor(), options(60'000ms));
  server.handle("/x", [] { return http_response{}; });
  const auto ep = start(server);
  std::optional<std::string> got;
  asio::co_spawn(
      ioc_,
      [](tcp::endpoint e) -> asio::awaitable<std::string> {
        auto stream = co_await connect(e);
        co_return co_await read_until_closed(stream);
      }(ep),
      [&](std::exception_ptr e, std::string s) {
        ASSERT_FALSE(e);
        got = std::move(s);
      });
  ASSERT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == 1; }));

  server.stop();
  server.stop();  // idempotent
  ioc_.restart();
  ioc_.run_for(test_cap);  // returns early once nothing is left to do
  EXPECT_TRUE(ioc_.stopped()) << "the server left work behind";
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "");
  EXPECT_EQ(server.connections_for_test(), 0U);
}

TEST_F(http_endpoints_test, all_interfaces_and_disabled) {
  {
    auto o = options();
    o.bind_address = ":0";
    http_endpoints server(ioc_.get_executor(), o);
    server.handle("/x", [] { return http_response{200, "text/plain", "any"}; });
    const auto ep = start(server);
    const auto res = run_until_done(
        ioc_,
        fetch(tcp::endpoint{asio::ip::address_v4::loopback(), ep.port()}, http::verb::get, "/x"));
    EXPECT_EQ(res.body, "any");
    server.stop();
  }
  {
    auto o = options();
    o.bind_address = "0";
    http_endpoints server(ioc_.get_executor(), o);
    const auto ep = server.start();
    ASSERT_TRUE(ep);
    EXPECT_FALSE(ep.value().has_value());
  }
}

TEST_F(http_endpoints_test, bind_failure_is_an_error_value) {
  http_endpoints first(ioc_.get_executor(), options());
  const auto ep = start(first);
  auto o = options();
  o.bind_address = "127.0.0.1:" + std::to_string(ep.port());
  http_endpoints second(ioc_.get_executor(), o);
  const auto res = second.start();
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, base::make_error_code(base::errc::config_invalid));
  EXPECT_NE(res.error().message.find(o.bind_address), std::string::npos) << res.error().message;
  first.stop();
}

TEST(parse_bind_address, accepts_and_rejects) {
  auto r = parse_bind_address("0");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r.value().has_value());

  r = parse_bind_address(":8080");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r.value()->address().is_unspecified());
  EXPECT_EQ(r.value()->port(), 8080);

  r = parse_bind_address("127.0.0.1:0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value()->address().to_string(), "127.0.0.1");
  EXPECT_EQ(r.value()->port(), 0);

  r = parse_bind_address("[::1]:9");
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value()->address().to_string(), "::1");

  r = parse_bind_address("localhost:65535");
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value()->address().to_string(), "127.0.0.1");
  EXPECT_EQ(r.value()->port(), 65535);

  for (const char* bad : {"", "8080", "abc:1", "example.com:80", "1.2.3.4:70000", "1.2.3.4:", ":-1",
                          ":80x", "::1:80", "[::1:80", "1.2.3:80"}) {
    const auto b = parse_bind_address(bad);
    EXPECT_FALSE(b) << bad;
    if (!b) {
      EXPECT_EQ(b.error().code, base::make_error_code(base::errc::config_invalid));
    }
  }
}

}  // namespace
}  // namespace tec::serving

namespace tec::serving {
namespace {

// A kubelet probe must get through however many idle or trickling connections hold the
// server (issue 11: /healthz answered nothing while 64 idle connections were open).

asio::awaitable<std::unique_ptr<beast::tcp_stream>> open_stream(tcp::endpoint ep) {
  auto op = connect(ep);
  co_return std::make_unique<beast::tcp_stream>(co_await std::move(op));
}

TEST_F(http_endpoints_test, a_full_server_closes_its_longest_idle_connection_for_a_probe) {
  http_endpoints server(ioc_.get_executor(), options(60'000ms));
  server.handle_check("/healthz", [] { return check_result{}; });
  const auto ep = start(server);
  std::vector<std::unique_ptr<beast::tcp_stream>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(run_until_done(ioc_, open_stream(ep)));
    // In order, so the first one is the longest idle.
    ASSERT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == idle.size(); }));
  }
  const auto res = run_until_done(ioc_, fetch(ep, http::verb::get, "/healthz"));
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.body, "ok");
  EXPECT_LE(server.connections_for_test(), 64U);
  // The longest idle connection was the one closed; the last one opened still works.
  EXPECT_EQ(run_until_done(ioc_, read_until_closed(*idle.front())), "");
  EXPECT_EQ(run_until_done(ioc_, request(*idle.back(), http::verb::get, "/healthz")).status, 200U);
  server.stop();
}

TEST_F(http_endpoints_test, a_full_server_of_busy_connections_closes_the_oldest) {
  auto o = options(60'000ms);
  o.max_connections = 2;
  o.header_timeout = 60'000ms;
  http_endpoints server(ioc_.get_executor(), o);
  server.handle("/x", [] { return http_response{200, "text/plain", "x"}; });
  const auto ep = start(server);
  // Two connections in the middle of their headers: busy, not idle.
  std::vector<std::unique_ptr<beast::tcp_stream>> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(run_until_done(ioc_, open_stream(ep)));
    run_until_done(ioc_, [](beast::tcp_stream& s) -> asio::awaitable<bool> {
      co_await asio::async_write(s, asio::buffer(std::string_view("GET /x HTTP/1.1\r\nHo")),
                                 asio::use_awaitable);
      co_return true;
    }(*busy.back()));
    ASSERT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == busy.size(); }));
  }
  const auto res = run_until_done(ioc_, fetch(ep, http::verb::get, "/x"));
  EXPECT_EQ(res.body, "x");
  EXPECT_EQ(run_until_done(ioc_, read_until_closed(*busy.front())), "");
  server.stop();
}

TEST_F(http_endpoints_test, trickled_headers_are_cut_at_the_header_deadline) {
  auto o = options(60'000ms);  // the idle and whole-request deadline would allow a minute
  o.header_timeout = 300ms;
  http_endpoints server(ioc_.get_executor(), o);
  server.handle("/x", [] { return http_response{}; });
  const auto ep = start(server);
  // A slowloris client: one header byte every 20 ms, until the server hangs up. Bounded by
  // the test cap's worth of bytes, far below the 60 s the other deadlines allow.
  const bool cut = run_until_done(ioc_, [](tcp::endpoint e) -> asio::awaitable<bool> {
    auto stream = co_await connect(e);
    auto [wec, wn] = co_await asio::async_write(
        stream, asio::buffer(std::string_view("GET /x HTTP/1.1\r\nX-Slow: ")),
        asio::as_tuple(asio::use_awaitable));
    if (wec) {
      co_return true;
    }
    asio::steady_timer pace(co_await asio::this_coro::executor);
    for (int i = 0; i < 400; ++i) {  // 400 x 20 ms: within test_cap
      pace.expires_after(20ms);
      co_await pace.async_wait(asio::use_awaitable);
      auto [ec, n] = co_await asio::async_write(stream, asio::buffer(std::string_view("a")),
                                                asio::as_tuple(asio::use_awaitable));
      if (ec) {
        co_return true;  // the server closed the connection
      }
    }
    co_return false;
  }(ep));
  EXPECT_TRUE(cut);
  EXPECT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == 0; }));
  server.stop();
}

TEST_F(http_endpoints_test, the_header_deadline_does_not_cut_an_idle_kept_alive_connection) {
  auto o = options(60'000ms);
  o.header_timeout = 100ms;
  http_endpoints server(ioc_.get_executor(), o);
  server.handle("/x", [] { return http_response{200, "text/plain", "x"}; });
  const auto ep = start(server);
  const auto body = run_until_done(ioc_, [](tcp::endpoint e) -> asio::awaitable<std::string> {
    auto stream = co_await connect(e);
    std::string out;
    for (int i = 0; i < 2; ++i) {
      // Idle for several header deadlines before each request: still served.
      asio::steady_timer idle(co_await asio::this_coro::executor, 500ms);
      co_await idle.async_wait(asio::use_awaitable);
      auto op = request(stream, http::verb::get, "/x");
      out += (co_await std::move(op)).body;
    }
    co_return out;
  }(ep));
  EXPECT_EQ(body, "xx");
  server.stop();
}

}  // namespace
}  // namespace tec::serving

namespace tec::serving {
namespace {

// Issue 29 item 3: /debug/evictions amplified memory for anyone who could reach the port (64
// clients that asked and never read added 149 MB: each held its own copy of the document
// until written).

constexpr std::size_t document_entries = 10'000;

// A document the size of /debug/evictions with 10,000 pending entries and short names
// (evictions_json's fields, about 260 bytes each: 2.6 MB).
std::string evictions_like_document() {
  std::string doc = R"({"generatedAt":"2026-11-23T15:35:00.000Z","acting":true,"total":)" +
                    std::to_string(document_entries) + R"(,"truncated":false,"evictions":[)";
  for (std::size_t i = 0; i < document_entries; ++i) {
    const auto n = std::to_string(i);
    if (i > 0) {
      doc += ',';
    }
    doc += R"({"pod":"ns-)" + n + "/pod-" + n + R"(","uid":"00000000-0000-4000-8000-)" +
           std::string(12 - n.size(), '0') + n + R"(","node":"node-)" + n +
           R"(","taints":["node.kubernetes.io/unreachable:NoExecute"],)" +
           R"("due":"2026-11-23T15:40:00.000Z","state":"pending","why":"","attempts":0,)" +
           R"("lastError":""})";
  }
  doc += "]}";
  return doc;
}

asio::awaitable<http_response> build_document(std::atomic<int>* builds) {
  builds->fetch_add(1);
  co_return http_response{200, "application/json", evictions_like_document()};
}

// A client that sends one request and never reads. Its receive buffer is small (set before
// connect, so the window it offers is), so a large response stalls once the kernel's buffers
// are full and the server holds the rest. Blocking calls: they need no run of the io_context.
class never_reading_client {
public:
  never_reading_client(asio::io_context& ioc, tcp::endpoint ep, const std::string& target)
      : socket_(ioc) {
    socket_.open(ep.protocol());
    socket_.set_option(asio::socket_base::receive_buffer_size(4096));
    socket_.connect(ep);
    asio::write(socket_, asio::buffer("GET " + target + " HTTP/1.1\r\nHost: test\r\n\r\n"));
  }

  /// The response's first bytes are in (or the connection is gone).
  bool answered() {
    boost::system::error_code ec;
    return socket_.available(ec) >= 12 || ec;
  }

  /// The response's status (peeked, not read), 0 if there is none.
  unsigned status() {
    std::array<char, 12> line{};  // "HTTP/1.1 200"
    boost::system::error_code ec;
    if (socket_.available(ec) < line.size() || ec) {
      return 0;
    }
    socket_.receive(asio::buffer(line), tcp::socket::message_peek, ec);
    return ec ? 0 : static_cast<unsigned>(std::stoul(std::string(line.data() + 9, 3)));
  }

private:
  tcp::socket socket_;
};

// Resident set size, for the log only: the assertions count live heap bytes, which do not
// depend on what the allocator caches or returns to the kernel.
long resident_kb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long kb = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> kb;
      return kb;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// Bytes the kernel holds in the send queues of the server's connections (local port `port`),
// from /proc/net/tcp's tx_queue: written by the server, not yet taken by the client.
std::int64_t send_queue_bytes(std::uint16_t port) {
  std::int64_t total = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot;
      std::string local;
      std::string remote;
      std::string state;
      std::string queues;  // tx_queue:rx_queue, hex
      fields >> slot >> local >> remote >> state >> queues;
      const auto colon = local.rfind(':');
      if (colon == std::string::npos || queues.find(':') == std::string::npos ||
          std::stoul(local.substr(colon + 1), nullptr, 16) != port) {
        continue;
      }
      total +=
          static_cast<std::int64_t>(std::stoul(queues.substr(0, queues.find(':')), nullptr, 16));
    }
  }
  return total;
}

struct slow_reader_run {
  std::int64_t heap_growth = 0;  // live heap bytes, all 64 answered, against before
  std::int64_t send_queues = 0;  // the server's kernel send queues then
  long rss_growth_kb = 0;
  std::size_t document_size = 0;
  int ok = 0;    // answered 200
  int busy = 0;  // answered 503
};

// 64 clients ask for the document at once and never read; measures the server's growth once
// each has its answer's first bytes.
slow_reader_run run_slow_readers(asio::io_context& ioc, http_endpoints& server, tcp::endpoint ep) {
  slow_reader_run out;
  out.document_size = evictions_like_document().size();
  const auto heap_before = testing::live_heap_bytes();
  const auto rss_before = resident_kb();
  std::vector<std::unique_ptr<never_reading_client>> clients;
  for (int i = 0; i < 64; ++i) {
    clients.push_back(std::make_unique<never_reading_client>(ioc, ep, "/debug/evictions"));
  }
  EXPECT_TRUE(run_until(ioc, [&] {
    return std::all_of(clients.begin(), clients.end(), [](auto& c) { return c->answered(); });
  }));
  out.heap_growth = testing::live_heap_bytes() - heap_before;
  out.send_queues = send_queue_bytes(ep.port());
  out.rss_growth_kb = resident_kb() - rss_before;
  for (auto& c : clients) {
    const auto status = c->status();
    out.ok += status == 200 ? 1 : 0;
    out.busy += status == 503 ? 1 : 0;
  }
  std::printf(
      "64 never-reading clients of a %zu-byte document: %d answered 200, %d 503; live heap "
      "%+lld bytes, server send queues %lld bytes, RSS %+ld kB\n",
      out.document_size, out.ok, out.busy, static_cast<long long>(out.heap_growth),
      static_cast<long long>(out.send_queues), out.rss_growth_kb);
  clients.clear();
  server.stop();
  EXPECT_TRUE(run_until(ioc, [&] { return server.connections_for_test() == 0; }));
  return out;
}

// Per-connection buffers of 64 connections (the server's and the clients'), far below one
// document.
constexpr std::int64_t connection_overhead = 4 << 20;

TEST_F(http_endpoints_test, sixty_four_never_reading_clients_of_a_debug_document_add_a_few_mb) {
  if (!testing::live_heap_counted()) {
    GTEST_SKIP() << "the heap is not counted here (TSan owns operator new)";
  }
  http_endpoints server(ioc_.get_executor(), options());
  std::atomic<int> builds{0};
  server.handle_async("/debug/evictions", [&builds] { return build_document(&builds); });
  const auto ep = start(server);
  const auto run = run_slow_readers(ioc_, server, ep);
  // What the server holds for them, in its heap or in the kernel's send buffers: at most the
  // default max_async_responses (2) documents, whatever 64 clients do.
  EXPECT_LE(run.heap_growth + run.send_queues,
            2 * static_cast<std::int64_t>(run.document_size) + connection_overhead);
  EXPECT_EQ(run.ok + run.busy, 64);
  EXPECT_LE(builds.load(), 2);
}

TEST_F(http_endpoints_test, concurrent_readers_of_a_debug_document_share_one_copy) {
  if (!testing::live_heap_counted()) {
    GTEST_SKIP() << "the heap is not counted here (TSan owns operator new)";
  }
  auto o = options();
  o.max_async_responses = 64;   // every one of them served
  o.async_response_reuse = 1h;  // by the first document, however slow this machine is
  http_endpoints server(ioc_.get_executor(), o);
  std::atomic<int> builds{0};
  server.handle_async("/debug/evictions", [&builds] { return build_document(&builds); });
  const auto ep = start(server);
  const auto run = run_slow_readers(ioc_, server, ep);
  EXPECT_EQ(run.ok, 64);
  EXPECT_EQ(builds.load(), 1);
  // One copy in the heap, 64 small send buffers (64 KiB, which Linux doubles) in the kernel.
  EXPECT_LE(run.heap_growth, static_cast<std::int64_t>(run.document_size) + connection_overhead);
  EXPECT_LE(run.send_queues, 64 * 128 * 1024);
}

TEST_F(http_endpoints_test,
       beyond_the_cap_a_document_is_503_and_a_reader_that_never_reads_is_dropped) {
  auto o = options();
  o.max_async_responses = 1;
  o.async_response_reuse = 0ms;
  o.write_timeout = 300ms;
  http_endpoints server(ioc_.get_executor(), o);
  std::atomic<int> builds{0};
  // The first build is large (it stalls the reader that never reads), the next one small: a
  // 2.3 MB document written within the test's 300 ms write timeout to a reader that reads
  // failed under ASan on a busy machine ("partial message").
  server.handle_async("/debug/evictions", [&builds]() -> asio::awaitable<http_response> {
    if (builds.fetch_add(1) == 0) {
      co_return http_response{200, "application/json", evictions_like_document()};
    }
    co_return http_response{200, "application/json", "{\"pending\":[]}"};
  });
  server.handle("/metrics", [] { return http_response{200, "text/plain", "m"}; });
  const auto ep = start(server);

  never_reading_client stuck(ioc_, ep, "/debug/evictions");
  ASSERT_TRUE(run_until(ioc_, [&] { return stuck.answered(); }));
  EXPECT_EQ(stuck.status(), 200U);
  // The one slot is taken: another reader is told to come back; other paths are served.
  const auto refused = run_until_done(ioc_, fetch(ep, http::verb::get, "/debug/evictions"));
  EXPECT_EQ(refused.status, 503U);
  EXPECT_EQ(refused.retry_after, "1");
  EXPECT_EQ(run_until_done(ioc_, fetch(ep, http::verb::get, "/metrics")).status, 200U);
  // The write deadline drops the reader that never reads, which frees the slot.
  ASSERT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == 0; }));
  const auto served = run_until_done(ioc_, fetch(ep, http::verb::get, "/debug/evictions"));
  EXPECT_EQ(served.status, 200U);
  EXPECT_EQ(served.body, "{\"pending\":[]}");
  EXPECT_EQ(builds.load(), 2);
  server.stop();
}

}  // namespace
}  // namespace tec::serving

namespace tec::serving {
namespace {

// Issue 29 item 6: a connection flood on the probe port failed 5.6% of probes: the probe's
// own connection was closed to make room while its request was in but not yet read (it
// looked idle: the server had not read its first byte).
TEST_F(http_endpoints_test, a_probe_whose_request_is_in_is_not_closed_for_an_idle_flood) {
  auto o = options(60'000ms);
  o.max_connections = 4;
  http_endpoints server(ioc_.get_executor(), o);
  server.handle_check("/healthz", [] { return check_result{}; });
  const auto ep = start(server);
  // The probe connects first (the longest idle), then idle connections fill the server.
  auto probe = run_until_done(ioc_, open_stream(ep));
  ASSERT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == 1; }));
  std::vector<std::unique_ptr<beast::tcp_stream>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(run_until_done(ioc_, open_stream(ep)));
    ASSERT_TRUE(run_until(ioc_, [&] { return server.connections_for_test() == idle.size() + 1; }));
  }
  // A flood of connections queues in the backlog, then the probe's request arrives; neither
  // is seen by the server until it runs again. Blocking calls: no run of the io_context.
  std::vector<tcp::socket> flood;
  for (int i = 0; i < 8; ++i) {
    flood.emplace_back(ioc_).connect(ep);
  }
  asio::write(probe->socket(),
              asio::buffer(std::string_view("GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")));
  const auto status = run_until_done(ioc_, [](beast::tcp_stream& s) -> asio::awaitable<unsigned> {
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    s.expires_after(test_cap);
    auto [ec, n] = co_await http::async_read(s, buffer, res, asio::as_tuple(asio::use_awaitable));
    co_return ec ? 0U : res.result_int();
  }(*probe));
  EXPECT_EQ(status, 200U) << "the probe's connection was closed to make room";
  // The connections that had sent nothing made the room.
  EXPECT_EQ(run_until_done(ioc_, read_until_closed(*idle.front())), "");
  EXPECT_LE(server.connections_for_test(), 4U);
  server.stop();
}

// Issue 29 item 3: /readyz says why it is not ready. The reason may quote an API server's
// answer (the last LIST error): the probe's body carries a bounded, escaped copy.
TEST_F(http_endpoints_test, a_failed_check_says_why_bounded_and_escaped) {
  std::string reason;
  http_endpoints server(ioc_.get_executor(), options());
  server.handle_check("/readyz", [&]() -> check_result { return {false, reason}; });
  const auto ep = start(server);

  reason = "waiting for the first LIST of pods (last failure: 500 Internal Server Error)";
  auto res = run_until_done(ioc_, fetch(ep, http::verb::get, "/readyz"));
  EXPECT_EQ(res.status, 500U);
  EXPECT_EQ(res.body, reason);

  reason = "";
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/readyz"));
  EXPECT_EQ(res.status, 500U);
  EXPECT_EQ(res.body, "readyz check failed");

  reason = "LIST failed: line one\nforged line\r\x1b[31m" + std::string(100'000, 'x');
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/readyz"));
  EXPECT_EQ(res.status, 500U);
  EXPECT_EQ(res.body.rfind("LIST failed: line one\\x0aforged line\\x0d\\x1b[31mxxx", 0), 0U)
      << res.body.substr(0, 80);
  EXPECT_LE(res.body.size(), 1024U + 32U);
  EXPECT_NE(res.body.find("... (99"), std::string::npos) << res.body.substr(0, 80);
  EXPECT_NE(res.body.find(" more bytes)"), std::string::npos);
  EXPECT_EQ(res.body.find('\n'), std::string::npos);
  server.stop();
}

// /debug/history: the handler is given the query string; a request with another query never
// gets the document of the one before (the reuse window is long here: a shared one would show).
TEST_F(http_endpoints_test, a_query_handler_gets_the_query_and_shares_per_query) {
  auto o = options();
  o.async_response_reuse = 1h;
  http_endpoints server(ioc_.get_executor(), o);
  std::atomic<int> builds{0};
  server.handle_async_query("/debug/history",
                            [&builds](std::string query) -> asio::awaitable<http_response> {
                              ++builds;
                              co_return http_response{200, "text/plain", "query=" + query};
                            });
  server.handle_async("/plain", [&builds]() -> asio::awaitable<http_response> {
    ++builds;
    co_return http_response{200, "text/plain", "plain"};
  });
  const auto ep = start(server);
  auto res = run_until_done(ioc_, fetch(ep, http::verb::get, "/debug/history?pod=ns%2Fa"));
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.body, "query=pod=ns%2Fa");
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/debug/history"));
  EXPECT_EQ(res.body, "query=");
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/debug/history?node=n1"));
  EXPECT_EQ(res.body, "query=node=n1");
  EXPECT_EQ(builds.load(), 3);
  res = run_until_done(ioc_, fetch(ep, http::verb::get, "/plain?x=1"));
  EXPECT_EQ(res.body, "plain") << "handle_async ignores the query";
  server.stop();
}

}  // namespace
}  // namespace tec::serving

// The reflector (here the node informer) against a hostile API server (issue 29): a watch
// answered 410 Gone forever, a LIST body that never ends or trickles, a watch whose headers
// never come. The in-memory transport and a manual clock, except where memory under TCP flow
// control is the point.

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "informers/support/resident_memory.hpp"
#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "k8sclient/support/settle.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/captured_log.hpp"
#include "support/manual_clock.hpp"
#include "tec/informers/informers.hpp"
#include "tec/k8sclient/reflector_impl.hpp"

namespace tec::informers {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using k8sclient::testing::fake_http_server;
using k8sclient::testing::reply;
using test::captured_log;
using time_point = std::chrono::steady_clock::time_point;

std::string untainted_node_json(const std::string& name, const std::string& rv) {
  return R"({"kind":"Node","apiVersion":"v1","metadata":{"name":")" + name + R"(","uid":"uid-)" +
         name + R"(","resourceVersion":")" + rv + R"("},"spec":{}})";
}

std::string list_body(const std::vector<std::string>& items, const std::string& rv) {
  std::string body = R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":")" +
                     rv + R"("},"items":[)";
  for (std::size_t i = 0; i < items.size(); ++i) {
    body += (i == 0 ? "" : ",") + items[i];
  }
  return body + "]}";
}

const std::string gone_status =
    R"json({"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 10 (20)","reason":"Expired","code":410})json";

bool is_watch(const std::string& target) {
  return target.find("watch=1") != std::string::npos;
}

class hostile_reflector_test : public ::testing::Test {
protected:
  hostile_reflector_test() : api_(io_.get_executor(), config(), client_options()) {}

  k8sclient::rest_config config() const { return k8sclient::testing::plain_config(server_); }

  k8sclient::client_options client_options() {
    k8sclient::client_options opts;
    opts.qps = 0;
    opts.request_timeout = 60s;
    opts.clock = clock_;
    opts.connector = server_.connector();
    return opts;
  }

  /// The default backoff (0.8 s doubling to 30 s, reset after 2 minutes), a fixed seed, and an
  /// idle guard beyond the tests' horizon.
  static k8sclient::reflector_options options() {
    k8sclient::reflector_options opts;
    opts.idle_timeout = 2h;
    opts.seed = 1;
    return opts;
  }

  void start(k8sclient::reflector_options opts) {
    informer_ = std::make_unique<node_informer>(api_, store_, nullptr, std::move(opts));
    asio::co_spawn(io_, informer_->run(), [this](const std::exception_ptr& e) {
      finished_ = true;
      if (e) {
        std::rethrow_exception(e);
      }
    });
  }

  /// Runs until `done`, moving the clock to the next alarm whenever nothing is ready; notes
  /// the clock time at which each request arrived.
  bool run_until(const std::function<bool()>& done) {
    return k8sclient::testing::settle_advancing(io_, *clock_, [&] {
      note_arrivals();
      return done();
    });
  }

  /// Runs every handler that is ready, without moving the clock.
  void run_ready() {
    k8sclient::testing::settle(io_, [] { return false; });
  }

  void note_arrivals() {
    const auto reqs = server_.requests();
    while (arrived_.size() < reqs.size()) {
      arrived_.push_back({clock_->now(), reqs[arrived_.size()].target});
    }
  }

  void TearDown() override {
    if (informer_) {
      informer_->stop();
      api_.shutdown();
      EXPECT_TRUE(k8sclient::testing::settle_advancing(io_, *clock_, [this] { return finished_; }));
    }
  }

  struct arrival {
    time_point at;
    std::string target;
  };

  asio::io_context io_;
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>();
  fake_http_server server_{io_.get_executor()};
  client api_;
  node_store store_;
  std::unique_ptr<node_informer> informer_;
  std::vector<arrival> arrived_;
  bool finished_ = false;
};

// Every LIST succeeds and every WATCH is answered 410 Gone. It relisted at once, forever: 1,118
// requests and 1,434 log lines a minute. Now each restart waits for the backoff (0.8 s doubling
// to 30 s), so after the first minute it is two LIST+WATCH rounds a minute, and the log is one
// line a minute.
TEST_F(hostile_reflector_test, a_gone_loop_backs_off_to_a_handful_of_requests_a_minute) {
  captured_log log(k8sclient::detail::watch_log());
  server_.set_fallback(reply::with(200, list_body({untainted_node_json("n1", "8")}, "10")));
  for (int i = 0; i < 400; ++i) {
    server_.push(reply::with(410, gone_status).match("watch=1"));
  }
  start(options());
  const auto t0 = clock_->now();
  run_until([&] { return arrived_.size() > 300 || clock_->now() >= t0 + 10min; });

  ASSERT_LE(arrived_.size(), 300U) << "no backoff: a storm of requests";
  std::vector<int> per_minute(10, 0);
  for (const auto& a : arrived_) {
    const auto minute = std::chrono::duration_cast<std::chrono::minutes>(a.at - t0).count();
    if (minute < 10) {
      ++per_minute[static_cast<std::size_t>(minute)];
    }
  }
  EXPECT_LE(per_minute[0], 20);  // the backoff growing: 0.8, 1.6, 3.2 ... 30 s
  for (std::size_t m = 1; m < per_minute.size(); ++m) {
    EXPECT_LE(per_minute[m], 6) << "minute " << m;
    EXPECT_GE(per_minute[m], 2) << "minute " << m;  // it keeps trying
  }
  const auto st = informer_->stats();
  EXPECT_GE(st.gone, 10U);
  EXPECT_EQ(st.gone, st.backoffs);
  EXPECT_EQ(st.errors, 0U);  // a 410 is routine, not an error
  EXPECT_GE(st.relists, 10U);

  // One line a minute at most (plus the first LIST's), the later ones warnings with a count.
  std::string all;
  for (const auto& l : log.lines()) {
    all += l + "\n";
  }
  // The first minute: the first LIST, the first 410 and its relist; then one line a minute.
  EXPECT_LE(log.lines().size(), 13U) << all;
  EXPECT_GE(log.count("warning", "more restarts in the"), 7U) << all;
}

// After a storm the backoff stays at its cap; two minutes of a healthy watch reset it.
TEST_F(hostile_reflector_test, the_backoff_resets_after_a_healthy_period) {
  server_.set_fallback(reply::with(200, list_body({untainted_node_json("n1", "8")}, "10")));
  constexpr int storm = 8;
  for (int i = 0; i < storm; ++i) {
    server_.push(reply::with(410, gone_status).match("watch=1"));
  }
  server_.push(reply::chunked(200)
                   .hold("healthy")
                   .chunk(R"({"type":"ERROR","object":)" + gone_status + "}\n")
                   .stall()
                   .match("watch=1"));
  server_.push(reply::chunked(200).stall().match("watch=1"));
  start(options());
  const auto watches = [&] {
    return std::count_if(arrived_.begin(), arrived_.end(),
                         [](const arrival& a) { return is_watch(a.target); });
  };
  ASSERT_TRUE(run_until([&] { return watches() == storm + 1; }));
  run_ready();  // the healthy watch's headers are read before the clock moves
  // The wait between each 410 and the LIST after it.
  const auto waits = [&] {
    std::vector<std::chrono::milliseconds> out;
    for (std::size_t i = 0; i + 1 < arrived_.size(); ++i) {
      if (is_watch(arrived_[i].target) && !is_watch(arrived_[i + 1].target)) {
        out.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(arrived_[i + 1].at -
                                                                            arrived_[i].at));
      }
    }
    return out;
  };
  auto before = waits();
  ASSERT_EQ(before.size(), static_cast<std::size_t>(storm));
  EXPECT_GE(before.front(), 800ms);
  EXPECT_LT(before.front(), 1600ms);
  EXPECT_TRUE(std::is_sorted(before.begin(), before.end()));
  EXPECT_EQ(before.back(), 30s);  // at the cap

  // The watch is healthy for three minutes, then answers 410 in the stream.
  clock_->advance(3min);
  const auto healed = clock_->now();
  server_.release("healthy");
  ASSERT_TRUE(run_until([&] { return watches() == storm + 2; }));
  ASSERT_GE(arrived_.size(), 2U);
  const auto& relist = arrived_[arrived_.size() - 2];
  ASSERT_FALSE(is_watch(relist.target)) << relist.target;
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(relist.at - healed);
  EXPECT_GE(wait, 800ms);
  EXPECT_LT(wait, 1600ms);
}

// A LIST body trickling a byte now and then never trips the idle guard; it kept the controller
// unready in silence. Now a warning after a minute, an error at list_timeout (5 minutes), both
// on the clock; current_list_error() says why until a LIST succeeds.
TEST_F(hostile_reflector_test, a_trickling_list_warns_then_fails_at_its_deadline) {
  captured_log log(k8sclient::detail::watch_log());
  server_.push(reply::chunked(200)
                   .chunk(R"({"kind":"NodeList","metadata":{"resourceVersion":"1"},"items":[)")
                   .stall());
  server_.push(reply::with(200, list_body({untainted_node_json("n1", "8")}, "10")));
  server_.push(reply::chunked(200).stall());
  start(options());
  ASSERT_TRUE(k8sclient::testing::settle(io_, [&] { return server_.requests().size() == 1; }));
  run_ready();  // the headers and the first bytes are read before the clock moves
  clock_->advance(60s);
  run_ready();
  EXPECT_EQ(log.count("warning", "LIST still running after 60000 ms"), 1U);
  EXPECT_FALSE(informer_->current_list_error());

  clock_->advance(4min - 1ms);
  run_ready();
  EXPECT_FALSE(informer_->last_list_error());
  EXPECT_EQ(server_.requests().size(), 1U);
  clock_->advance(1ms);
  run_ready();
  const auto err = informer_->current_list_error();
  EXPECT_EQ(err.code, make_error_code(base::errc::timeout)) << err.message;
  EXPECT_NE(err.message.find("not complete within 300000 ms"), std::string::npos) << err.message;
  EXPECT_EQ(log.count("warning", "not complete within 300000 ms"), 1U);
  EXPECT_FALSE(informer_->has_synced());

  ASSERT_TRUE(run_until([&] { return informer_->has_synced(); }));
  EXPECT_FALSE(informer_->current_list_error()) << informer_->current_list_error().message;
  EXPECT_EQ(informer_->last_list_error().code, make_error_code(base::errc::timeout));
  EXPECT_EQ(informer_->stats().list_failures, 1U);
}

// The watch's headers never come: the request timeout (60 s) ends it, and the line said
// "silent for 120000 ms" (the idle guard's limit) after 60 s.
TEST_F(hostile_reflector_test, a_watch_timeout_names_the_limit_that_passed) {
  captured_log log(k8sclient::detail::watch_log());
  server_.push(reply::with(200, list_body({}, "10")));
  server_.push(reply::no_response());
  server_.push(reply::chunked(200).stall());
  auto opts = options();
  opts.idle_timeout = 120s;
  start(opts);
  ASSERT_TRUE(k8sclient::testing::settle(io_, [&] { return server_.requests().size() == 2; }));
  clock_->advance(60s);
  ASSERT_TRUE(k8sclient::testing::settle(io_, [&] { return server_.requests().size() == 3; }));
  std::string all;
  for (const auto& l : log.lines()) {
    all += l + "\n";
  }
  EXPECT_EQ(log.count("warning", "no progress within 60000 ms"), 1U) << all;
  EXPECT_EQ(all.find("120000"), std::string::npos) << all;
}

// ---- A LIST body that never ends: bounded by objects, in bounded memory --------------------

using testing::reset_peak_rss;
using testing::sanitized;
using testing::status_kib;

// Loopback on purpose: memory stays bounded only if TCP's flow control holds the server back
// (an in-memory stream would buffer what the server writes). The steady clock; no backoff. The
// body is 300,000 objects (some 30 MB): as good as endless against a bound of 10,000 (without
// the bound it was listed whole; a truly endless body grew memory ~4 MB/s).
TEST(hostile_list_test, an_endless_list_fails_at_the_object_bound_in_bounded_memory) {
  fake_http_server server;
  asio::io_context io;
  auto copts = k8sclient::testing::quick_options(10);
  client api(io.get_executor(), k8sclient::testing::plain_config(server), copts);
  std::string hundred;
  for (int i = 0; i < 100; ++i) {
    hundred += "," + untainted_node_json("node-" + std::to_string(i % 7), "5");
  }
  server.push(reply::chunked(200)
                  .chunk(R"({"kind":"NodeList","metadata":{"resourceVersion":"1"},"items":[)" +
                         untainted_node_json("first", "1"))
                  .repeat(hundred, 3'000)
                  .chunk("]}")
                  .end());
  server.push(reply::with(200, list_body({untainted_node_json("n1", "8")}, "10")));
  server.push(reply::chunked(200).stall());
  k8sclient::reflector_options opts;
  opts.backoff.initial = 0ms;
  opts.backoff.cap = 0ms;
  opts.seed = 1;
  opts.max_list_objects = 10'000;
  node_store store;
  node_informer informer(api, store, nullptr, opts);
  const long before = status_kib("VmRSS");
  const bool measured = !sanitized && reset_peak_rss() && before > 0;
  bool finished = false;
  asio::co_spawn(io, informer.run(), [&](const std::exception_ptr&) { finished = true; });
  k8sclient::testing::run_until(
      io, [&] { return informer.has_synced(); }, 120s);
  const long peak = status_kib("VmHWM");
  informer.stop();
  api.shutdown();
  EXPECT_TRUE(k8sclient::testing::run_until(
      io, [&] { return finished; }, 30s));

  EXPECT_TRUE(informer.has_synced());
  const auto err = informer.last_list_error();
  EXPECT_EQ(err.code, make_error_code(base::errc::response_too_large)) << err.message;
  EXPECT_NE(err.message.find("more than 10000 objects"), std::string::npos) << err.message;
  const auto st = informer.stats();
  EXPECT_EQ(st.list_failures, 1U);
  EXPECT_EQ(st.lists, 1U);
  EXPECT_EQ(store.size(), 1U);  // the good relist removed what the endless one brought
  if (measured && peak > 0) {
    std::printf("peak resident growth over the endless LIST: %ld KiB\n", peak - before);
    EXPECT_LT(peak - before, 32 * 1024);
  }
}

}  // namespace
}  // namespace tec::informers

#include "tec/k8s/event_recorder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/test_client.hpp"

namespace tec::k8s {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using controller::event_kind;
using controller::pod_ref;
using nlohmann::json;
using testing::fake_http_server;
using testing::reply;

// 2024-05-01T12:00:00.123456Z
const std::chrono::system_clock::time_point fixed_wall{std::chrono::microseconds{1714564800123456}};

/// A clock that moves only when told to.
struct manual_clock {
  std::chrono::steady_clock::time_point steady_now{std::chrono::hours{1000}};
  std::chrono::system_clock::time_point wall_now = fixed_wall;

  event_clock clock() {
    return event_clock{[this] { return steady_now; }, [this] { return wall_now; }};
  }
};

const pod_ref web{"ns1", "web-0", "uid-1"};

/// A pod whose name and uid are both `name`.
pod_ref pod(const std::string& name) {
  return pod_ref{"ns1", name, name};
}

/// The involvedObject name of each request, in arrival order.
std::vector<std::string> pod_names(const std::vector<testing::recorded_request>& reqs) {
  std::vector<std::string> names;
  for (const auto& r : reqs) {
    names.push_back(json::parse(r.body)["involvedObject"]["name"]);
  }
  return names;
}

/// 201 Created, written only once the test releases the gate "answer".
reply created_when_released() {
  reply r;
  r.hold("answer").raw("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}");
  return r;
}

TEST(event_body, has_exactly_the_upstream_fields_plus_the_uid) {
  event_recorder_options opts;
  opts.reporting_instance = "host-a";
  const json body = json::parse(
      make_event_body(web, event_kind::marking_for_deletion, {}, "web-0.abc", opts, fixed_wall));
  EXPECT_EQ(body, json::parse(R"({
    "kind": "Event", "apiVersion": "v1",
    "metadata": {"name": "web-0.abc", "namespace": "ns1"},
    "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": "ns1", "name": "web-0",
                       "uid": "uid-1"},
    "type": "Normal", "reason": "TaintManagerEviction",
    "message": "Marking for deletion Pod ns1/web-0",
    "source": {"component": "taint-eviction-controller"},
    "reportingComponent": "taint-eviction-controller", "reportingInstance": "host-a",
    "firstTimestamp": "2024-05-01T12:00:00Z", "lastTimestamp": "2024-05-01T12:00:00Z",
    "count": 1})"));
  const json cancel = json::parse(
      make_event_body(web, event_kind::cancelling_deletion, {}, "web-0.abd", opts, fixed_wall));
  EXPECT_EQ(cancel["message"], "Cancelling deletion of Pod ns1/web-0");
}

class event_recorder_test : public ::testing::Test {
protected:
  event_recorder_test() : client_(io_.get_executor(), config(), options()) {}

  rest_config config() const { return testing::plain_config(server_); }

  static client_options options() { return testing::quick_options(1); }

  event_recorder_options recorder_options() const {
    event_recorder_options opts;
    opts.reporting_instance = "host-a";
    opts.retry_delay = 0ms;
    return opts;
  }

  /// Runs the io_context until `done()` holds (bounded).
  template <class Pred>
  bool run_until(Pred done) {
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_until(deadline);
    }
    return done();
  }

  /// Runs the io_context until the server has received `n` requests (bounded). For replies
  /// held at a gate, when the io_context has nothing to do until the server answers.
  bool run_until_requests(std::size_t n) {
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      io_.poll();
      if (server_.wait_for_requests(n, 1ms)) {
        return true;
      }
    }
    return false;
  }

  /// Deliveries started and not ended yet (nothing is dropped from the queue in these tests).
  static std::size_t in_flight(const event_recorder& rec) {
    const auto st = rec.stats();
    return static_cast<std::size_t>(st.recorded - st.sent - st.failed) - rec.queued();
  }

  /// Records `n` events for pods p0, p1, ...
  static void record_pods(event_recorder& rec, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(rec.record(pod("p" + std::to_string(i)), event_kind::marking_for_deletion));
    }
  }

  /// Holds every answer until `started` deliveries are at the server, checks that no other
  /// delivery started meanwhile, then releases them and runs until all `n` queued events are
  /// sent. Returns the most deliveries seen in flight at once.
  std::size_t deliver_held(event_recorder& rec, std::size_t n, std::size_t started) {
    EXPECT_TRUE(run_until_requests(started));
    io_.poll();
    EXPECT_EQ(in_flight(rec), started);
    EXPECT_EQ(rec.queued(), n - started);
    EXPECT_EQ(server_.requests().size(), started);
    server_.release("answer");
    std::size_t most = 0;
    EXPECT_TRUE(run_until([&] {
      most = std::max(most, in_flight(rec));
      return rec.stats().sent == n;
    }));
    return most;
  }

  fake_http_server server_;
  asio::io_context io_;
  client client_;
  manual_clock clock_;
};

TEST_F(event_recorder_test, posts_the_event_to_the_pods_namespace) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_.clock());
  rec.start();
  EXPECT_TRUE(rec.record(web, event_kind::marking_for_deletion));
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 1; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 1U);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/api/v1/namespaces/ns1/events");
  const json body = json::parse(reqs[0].body);
  EXPECT_EQ(body["message"], "Marking for deletion Pod ns1/web-0");
  EXPECT_EQ(body["involvedObject"]["uid"], "uid-1");
  const std::string name = body["metadata"]["name"];
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(web-0\.[0-9a-f]+)"))) << name;
  rec.stop();
}

TEST_F(event_recorder_test, names_are_unique_when_the_clock_stands_still) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_.clock());
  rec.start();
  rec.record(web, event_kind::marking_for_deletion);
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 2; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  EXPECT_NE(json::parse(reqs[0].body)["metadata"]["name"],
            json::parse(reqs[1].body)["metadata"]["name"]);
  // Sent concurrently: either may arrive first.
  std::vector<std::string> messages{json::parse(reqs[0].body)["message"],
                                    json::parse(reqs[1].body)["message"]};
  std::sort(messages.begin(), messages.end());
  EXPECT_EQ(messages, (std::vector<std::string>{"Cancelling deletion of Pod ns1/web-0",
                                                "Marking for deletion Pod ns1/web-0"}));
  rec.stop();
}

TEST_F(event_recorder_test, spam_filter_allows_a_burst_of_25_then_one_per_300s_per_object) {
  event_recorder_options opts = recorder_options();
  opts.queue_capacity = 100;
  event_recorder rec(io_.get_executor(), client_, opts, clock_.clock());  // Not started.
  for (int i = 0; i < 25; ++i) {
    EXPECT_TRUE(rec.record(web, event_kind::marking_for_deletion)) << i;
  }
  EXPECT_FALSE(rec.record(web, event_kind::marking_for_deletion));
  EXPECT_FALSE(rec.record(web, event_kind::cancelling_deletion));
  // Another object (same name, another uid) has its own bucket.
  EXPECT_TRUE(rec.record(pod_ref{"ns1", "web-0", "uid-2"}, event_kind::marking_for_deletion));

  clock_.steady_now += 299s;
  EXPECT_FALSE(rec.record(web, event_kind::marking_for_deletion));
  clock_.steady_now += 1s;
  EXPECT_TRUE(rec.record(web, event_kind::marking_for_deletion));
  EXPECT_FALSE(rec.record(web, event_kind::marking_for_deletion));

  clock_.steady_now += 3000s;  // Ten tokens back.
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(rec.record(web, event_kind::marking_for_deletion)) << i;
  }
  EXPECT_FALSE(rec.record(web, event_kind::marking_for_deletion));
  const auto st = rec.stats();
  EXPECT_EQ(st.recorded, 25U + 1U + 1U + 10U);
  EXPECT_EQ(st.dropped_spam, 5U);
}

TEST_F(event_recorder_test, full_queue_drops_the_oldest) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder_options opts = recorder_options();
  opts.queue_capacity = 2;
  event_recorder rec(io_.get_executor(), client_, opts, clock_.clock());
  for (const char* name : {"a", "b", "c"}) {
    EXPECT_TRUE(rec.record(pod_ref{"ns1", name, name}, event_kind::marking_for_deletion));
  }
  EXPECT_EQ(rec.queued(), 2U);
  EXPECT_EQ(rec.stats().dropped_full, 1U);
  rec.start();
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 2; }));
  auto names = pod_names(server_.requests());
  std::sort(names.begin(), names.end());  // Sent concurrently: either may arrive first.
  EXPECT_EQ(names, (std::vector<std::string>{"b", "c"}));
  rec.stop();
}

TEST_F(event_recorder_test, full_queue_can_drop_the_newest) {
  event_recorder_options opts = recorder_options();
  opts.queue_capacity = 2;
  opts.drop_oldest = false;
  event_recorder rec(io_.get_executor(), client_, opts, clock_.clock());
  EXPECT_TRUE(rec.record(pod_ref{"ns1", "a", "a"}, event_kind::marking_for_deletion));
  EXPECT_TRUE(rec.record(pod_ref{"ns1", "b", "b"}, event_kind::marking_for_deletion));
  EXPECT_FALSE(rec.record(pod_ref{"ns1", "c", "c"}, event_kind::marking_for_deletion));
  EXPECT_EQ(rec.queued(), 2U);
  EXPECT_EQ(rec.stats().dropped_full, 1U);
}

TEST_F(event_recorder_test, a_rejected_event_is_counted_and_not_retried) {
  server_.set_fallback(reply::with(
      403, R"({"kind":"Status","message":"events is forbidden","reason":"Forbidden","code":403})"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_.clock());
  rec.start();
  rec.record(web, event_kind::marking_for_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().failed == 1; }));
  EXPECT_EQ(server_.requests().size(), 1U);
  rec.stop();
}

TEST_F(event_recorder_test, transport_failures_are_retried_a_bounded_number_of_times) {
  server_.set_fallback(reply::close_now());
  event_recorder_options opts = recorder_options();
  opts.max_attempts = 3;
  event_recorder rec(io_.get_executor(), client_, opts, clock_.clock());
  rec.start();
  rec.record(web, event_kind::marking_for_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().failed == 1; }));
  EXPECT_EQ(rec.stats().sent, 0U);
  // A POST is not resent by the client after a network error: one request per attempt.
  EXPECT_EQ(server_.requests().size(), 3U);
  rec.stop();
}

TEST_F(event_recorder_test, delivery_continues_after_a_failure) {
  server_.push(reply::with(403, "{}"));
  server_.push(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_.clock());
  rec.start();
  rec.record(pod_ref{"ns1", "a", "a"}, event_kind::marking_for_deletion);
  rec.record(pod_ref{"ns1", "b", "b"}, event_kind::marking_for_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().failed + rec.stats().sent == 2; }));
  EXPECT_EQ(rec.stats().failed, 1U);
  EXPECT_EQ(rec.stats().sent, 1U);
  rec.stop();
}

TEST_F(event_recorder_test, record_is_safe_from_many_threads_while_draining) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options());  // Real clocks.
  rec.start();
  constexpr int threads = 4;
  constexpr int per_thread = 25;
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([&rec, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string name = "p" + std::to_string(t) + "-" + std::to_string(i);
        rec.record(pod_ref{"ns1", name, name}, event_kind::marking_for_deletion);
      }
    });
  }
  const bool all_sent = run_until([&] { return rec.stats().sent == threads * per_thread; });
  for (auto& w : writers) {
    w.join();
  }
  EXPECT_TRUE(all_sent);
  EXPECT_EQ(server_.requests().size(), static_cast<std::size_t>(threads * per_thread));
  rec.stop();
}

TEST_F(event_recorder_test, keeps_up_to_max_in_flight_posts_at_once_in_queue_order) {
  server_.set_fallback(created_when_released());
  event_recorder_options opts = recorder_options();
  opts.max_in_flight = 4;
  event_recorder rec(io_.get_executor(), client_, opts, clock_.clock());
  rec.start();
  record_pods(rec, 10);
  EXPECT_EQ(deliver_held(rec, 10, 4), 4U);
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 10U);
  // The first four are the oldest four, each on its own connection.
  auto first = pod_names(std::vector<testing::recorded_request>(reqs.begin(), reqs.begin() + 4));
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, (std::vector<std::string>{"p0", "p1", "p2", "p3"}));
  std::vector<std::uint64_t> connections;
  for (std::size_t i = 0; i < 4; ++i) {
    connections.push_back(reqs[i].connection);
  }
  std::sort(connections.begin(), connections.end());
  EXPECT_EQ(std::unique(connections.begin(), connections.end()), connections.end());
  rec.stop();
}

TEST_F(event_recorder_test, max_in_flight_1_delivers_one_at_a_time_in_queue_order) {
  server_.set_fallback(created_when_released());
  event_recorder_options opts = recorder_options();
  opts.max_in_flight = 1;
  event_recorder rec(io_.get_executor(), client_, opts, clock_.clock());
  rec.start();
  record_pods(rec, 5);
  EXPECT_EQ(deliver_held(rec, 5, 1), 1U);
  EXPECT_EQ(pod_names(server_.requests()),
            (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"}));
  rec.stop();
}

TEST_F(event_recorder_test, a_burst_of_5000_events_is_sent_in_full_with_the_default_options) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_.clock());
  rec.start();
  constexpr std::size_t burst = 5000;  // A mass eviction: more than upstream's queue of 1000.
  record_pods(rec, burst);
  EXPECT_EQ(rec.queued(), burst);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == burst; }));
  const auto st = rec.stats();
  EXPECT_EQ(st.dropped_full, 0U);
  EXPECT_EQ(st.failed, 0U);
  EXPECT_EQ(server_.requests().size(), burst);
  rec.stop();
}

TEST_F(event_recorder_test, stop_cancels_the_retry_wait_of_every_delivery_in_flight) {
  server_.set_fallback(reply::close_now());
  std::size_t transport_errors = 0;
  client_options copts = options();
  copts.observer = [&transport_errors](boost::beast::http::verb, unsigned status,
                                       std::chrono::nanoseconds) {
    transport_errors += status == 0 ? 1 : 0;
  };
  client c(io_.get_executor(), config(), copts);
  event_recorder_options opts = recorder_options();
  opts.max_in_flight = 4;
  opts.max_attempts = 3;
  opts.retry_delay = std::chrono::hours{1};
  event_recorder rec(io_.get_executor(), c, opts, clock_.clock());
  rec.start();
  record_pods(rec, 6);
  // Four first attempts fail; each delivery then waits an hour on its own timer.
  ASSERT_TRUE(run_until([&] { return transport_errors == 4; }));
  while (io_.poll() > 0) {
  }
  EXPECT_EQ(in_flight(rec), 4U);
  EXPECT_EQ(server_.requests().size(), 4U);  // No wait ended early.
  rec.stop();
  // Each wait ends at once; the attempt after it fails and, stopped, is not retried.
  ASSERT_TRUE(run_until([&] { return rec.stats().failed == 4; }));
  const auto st = rec.stats();
  EXPECT_EQ(st.dropped_stopped, 2U);
  EXPECT_EQ(st.sent, 0U);
  EXPECT_EQ(server_.requests().size(), 8U);
}

TEST_F(event_recorder_test, stop_drops_what_is_queued_and_refuses_more) {
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_.clock());
  rec.record(web, event_kind::marking_for_deletion);
  rec.record(web, event_kind::cancelling_deletion);
  rec.start();
  rec.stop();
  EXPECT_FALSE(rec.record(web, event_kind::marking_for_deletion));
  // The drainer ends without sending anything.
  io_.restart();
  for (int i = 0; i < 20; ++i) {
    io_.poll();
  }
  EXPECT_TRUE(server_.requests().empty());
  EXPECT_EQ(rec.stats().dropped_stopped, 3U);
  EXPECT_EQ(rec.queued(), 0U);
}

}  // namespace
}  // namespace tec::k8s

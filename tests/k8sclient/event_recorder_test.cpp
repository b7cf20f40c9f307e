#include "tec/k8s/event_recorder.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
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

TEST(event_body, has_exactly_the_upstream_fields_plus_the_uid) {
  event_recorder_options opts;
  opts.reporting_instance = "host-a";
  const json body = json::parse(
      make_event_body(web, event_kind::marking_for_deletion, "web-0.abc", opts, fixed_wall));
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
      make_event_body(web, event_kind::cancelling_deletion, "web-0.abd", opts, fixed_wall));
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
  EXPECT_EQ(json::parse(reqs[1].body)["message"], "Cancelling deletion of Pod ns1/web-0");
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
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  EXPECT_EQ(json::parse(reqs[0].body)["involvedObject"]["name"], "b");
  EXPECT_EQ(json::parse(reqs[1].body)["involvedObject"]["name"], "c");
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

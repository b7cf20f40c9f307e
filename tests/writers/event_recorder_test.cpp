#include "tec/writers/event_recorder.hpp"
#include "tec/writers/named_object_events.hpp"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/manual_clock.hpp"
#include "tec/base/sanitize.hpp"

namespace tec::writers {
namespace {

using base::errc;
using base::make_error_code;
using k8sclient::client;

namespace asio = boost::asio;
using namespace std::chrono_literals;
using controller::event_kind;
using controller::pod_ref;
using k8sclient::testing::fake_http_server;
using k8sclient::testing::reply;
using nlohmann::json;

// 2024-05-01T12:00:00.123456Z
const std::chrono::system_clock::time_point fixed_wall{std::chrono::microseconds{1714564800123456}};

const pod_ref web{"ns1", "web-0", "uid-1"};

/// A pod whose name and uid are both `name`.
pod_ref pod(const std::string& name) {
  return pod_ref{"ns1", name, name};
}

/// The involvedObject name of each request, in arrival order.
std::vector<std::string> pod_names(const std::vector<k8sclient::testing::recorded_request>& reqs) {
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
  const json body = json::parse(make_event_body(
      involved_object{.ref = web}, make_event_content(web, event_kind::marking_for_deletion),
      "web-0.abc", opts, fixed_wall, fixed_wall, 1));
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
  EXPECT_EQ(make_event_content(web, event_kind::cancelling_deletion).message,
            "Cancelling deletion of Pod ns1/web-0");
}

TEST(event_body, carries_any_type_reason_and_message_and_the_series_timestamps_and_count) {
  event_recorder_options opts;
  opts.reporting_instance = "host-a";
  const json body = json::parse(
      make_event_body(involved_object{.ref = web},
                      make_event_content(web, event_kind::eviction_failed, "denied by webhook"),
                      "web-0.abc", opts, fixed_wall, fixed_wall + 150s, 3));
  EXPECT_EQ(body["type"], "Warning");
  EXPECT_EQ(body["reason"], "TaintEvictionFailed");
  EXPECT_EQ(body["message"], "Cannot delete Pod ns1/web-0: denied by webhook");
  EXPECT_EQ(body["firstTimestamp"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(body["lastTimestamp"], "2024-05-01T12:02:30Z");
  EXPECT_EQ(body["count"], 3);
}

TEST(event_body, the_patch_sets_count_last_timestamp_and_message) {
  EXPECT_EQ(json::parse(make_event_patch("Cancelling deletion of Pod ns1/web-0", fixed_wall, 2)),
            json::parse(R"({"count": 2, "lastTimestamp": "2024-05-01T12:00:00Z",
                            "message": "Cancelling deletion of Pod ns1/web-0"})"));
}

TEST(event_message, keeps_printable_text_and_utf8_as_it_is) {
  const std::string text =
      "Cannot delete Pod ns/p: \xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";
  EXPECT_EQ(base::sanitize_message(text, 1024), text);
  const std::string full(1024, 'a');
  EXPECT_EQ(base::sanitize_message(full, 1024), full);
}

TEST(event_message, control_characters_become_spaces) {
  EXPECT_EQ(base::sanitize_message("a\nb\r\tc\x1b[31md\x7f"
                                   "e\xC2\x85"
                                   "f",
                                   1024),
            "a b  c [31md e f");
  EXPECT_EQ(base::sanitize_message(std::string("x\0y", 3), 1024), "x y");
}

TEST(event_message, invalid_utf8_becomes_the_replacement_character) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(base::sanitize_message("a\xFF"
                                   "b",
                                   1024),
            "a" + fffd + "b");
  EXPECT_EQ(base::sanitize_message("\xC0\xAF", 1024), fffd + fffd);             // overlong '/'
  EXPECT_EQ(base::sanitize_message("\xED\xA0\x80", 1024), fffd + fffd + fffd);  // surrogate
  EXPECT_EQ(base::sanitize_message("ab\xE2\x82", 1024), "ab" + fffd + fffd);    // truncated
  EXPECT_EQ(base::sanitize_message("\xF4\x90\x80\x80", 1024), fffd + fffd + fffd + fffd);
}

TEST(event_message, a_long_text_is_clipped_on_a_character_boundary) {
  // The euro sign (3 bytes) straddles the cut at 1021: it goes whole.
  const std::string text = std::string(1020, 'a') + "\xE2\x82\xAC" + std::string(10, 'b');
  EXPECT_EQ(base::sanitize_message(text, 1024), std::string(1020, 'a') + "...");
  const std::string huge(200'000, 'x');
  const std::string clipped = base::sanitize_message(huge, 1024);
  EXPECT_EQ(clipped.size(), 1024U);
  EXPECT_EQ(clipped.substr(1021), "...");
  EXPECT_EQ(base::sanitize_message("abcdef", 2), "ab");  // No room for the ellipsis.
}

class event_recorder_test : public ::testing::Test {
protected:
  event_recorder_test() : client_(io_.get_executor(), config(), options()) {}

  k8sclient::rest_config config() const { return k8sclient::testing::plain_config(server_); }

  static k8sclient::client_options options() { return k8sclient::testing::quick_options(1); }

  event_recorder_options recorder_options() const {
    event_recorder_options opts;
    opts.reporting_instance = "host-a";
    opts.retry_delay = 0ms;
    return opts;
  }

  /// Generous: a burst of 5000 requests under ASan on a loaded 2-core machine took 39 s.
  static constexpr auto wait_limit = 120s;

  /// Runs the io_context until `done()` holds (bounded).
  template <class Pred>
  bool run_until(Pred done) {
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + wait_limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_until(deadline);
    }
    return done();
  }

  /// Runs the io_context until the server has received `n` requests (bounded). For replies
  /// held at a gate, when the io_context has nothing to do until the server answers.
  bool run_until_requests(std::size_t n) {
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + wait_limit;
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
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>(
      std::chrono::steady_clock::time_point{std::chrono::hours{1000}}, fixed_wall);
};

TEST_F(event_recorder_test, posts_the_event_to_the_pods_namespace) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
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

TEST_F(event_recorder_test, an_event_on_another_kind_names_it_and_is_its_own_series) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  const involved_object lease{
      .api_version = "coordination.k8s.io/v1", .kind = "Lease", .ref = {"ns1", "web-0", ""}};
  const event_content open{"Warning", "StormBreakerOpen", "Storm breaker open"};
  EXPECT_TRUE(rec.record(lease, open));
  // A pod of the same namespace and name is another object: its own Event, not a PATCH.
  EXPECT_TRUE(rec.record(involved_object{.ref = pod_ref{"ns1", "web-0", ""}}, open));
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 2; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  std::set<std::string> kinds;
  for (const auto& r : reqs) {
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/api/v1/namespaces/ns1/events");
    const json body = json::parse(r.body);
    kinds.insert(body["involvedObject"]["kind"].get<std::string>());
    EXPECT_FALSE(body["involvedObject"].contains("uid")) << r.body;  // None given: none sent.
    if (body["involvedObject"]["kind"] == "Lease") {
      EXPECT_EQ(body["involvedObject"]["apiVersion"], "coordination.k8s.io/v1");
      EXPECT_EQ(body["involvedObject"]["name"], "web-0");
      EXPECT_EQ(body["reason"], "StormBreakerOpen");
      EXPECT_EQ(body["type"], "Warning");
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"Lease", "Pod"}));
  rec.stop();
}

TEST_F(event_recorder_test, names_are_unique_when_the_clock_stands_still) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
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
  event_recorder rec(io_.get_executor(), client_, opts, clock_);  // Not started.
  for (int i = 0; i < 25; ++i) {
    EXPECT_TRUE(rec.record(web, event_kind::marking_for_deletion)) << i;
  }
  EXPECT_FALSE(rec.record(web, event_kind::marking_for_deletion));
  EXPECT_FALSE(rec.record(web, event_kind::cancelling_deletion));
  // Another object (same name, another uid) has its own bucket.
  EXPECT_TRUE(rec.record(pod_ref{"ns1", "web-0", "uid-2"}, event_kind::marking_for_deletion));

  clock_->advance(299s);
  EXPECT_FALSE(rec.record(web, event_kind::marking_for_deletion));
  clock_->advance(1s);
  EXPECT_TRUE(rec.record(web, event_kind::marking_for_deletion));
  EXPECT_FALSE(rec.record(web, event_kind::marking_for_deletion));

  clock_->advance(3000s);  // Ten tokens back.
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
  event_recorder rec(io_.get_executor(), client_, opts, clock_);
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
  event_recorder rec(io_.get_executor(), client_, opts, clock_);
  EXPECT_TRUE(rec.record(pod_ref{"ns1", "a", "a"}, event_kind::marking_for_deletion));
  EXPECT_TRUE(rec.record(pod_ref{"ns1", "b", "b"}, event_kind::marking_for_deletion));
  EXPECT_FALSE(rec.record(pod_ref{"ns1", "c", "c"}, event_kind::marking_for_deletion));
  EXPECT_EQ(rec.queued(), 2U);
  EXPECT_EQ(rec.stats().dropped_full, 1U);
}

TEST_F(event_recorder_test, a_rejected_event_is_counted_and_not_retried) {
  server_.set_fallback(reply::with(
      403, R"({"kind":"Status","message":"events is forbidden","reason":"Forbidden","code":403})"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
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
  event_recorder rec(io_.get_executor(), client_, opts, clock_);
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
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
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
  event_recorder rec(io_.get_executor(), client_, opts, clock_);
  rec.start();
  record_pods(rec, 10);
  EXPECT_EQ(deliver_held(rec, 10, 4), 4U);
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 10U);
  // The first four are the oldest four, each on its own connection.
  auto first =
      pod_names(std::vector<k8sclient::testing::recorded_request>(reqs.begin(), reqs.begin() + 4));
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
  event_recorder rec(io_.get_executor(), client_, opts, clock_);
  rec.start();
  record_pods(rec, 5);
  EXPECT_EQ(deliver_held(rec, 5, 1), 1U);
  EXPECT_EQ(pod_names(server_.requests()),
            (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"}));
  rec.stop();
}

TEST_F(event_recorder_test, a_burst_of_5000_events_is_sent_in_full_with_the_default_options) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
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
  k8sclient::client_options copts = options();
  copts.observer = [&transport_errors](boost::beast::http::verb, unsigned status,
                                       std::chrono::nanoseconds) {
    transport_errors += status == 0 ? 1 : 0;
  };
  client c(io_.get_executor(), config(), copts);
  event_recorder_options opts = recorder_options();
  opts.max_in_flight = 4;
  opts.max_attempts = 3;
  opts.retry_delay = std::chrono::hours{1};
  event_recorder rec(io_.get_executor(), c, opts, clock_);
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
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
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

/// The body of a request as JSON.
json body_of(const k8sclient::testing::recorded_request& r) {
  return json::parse(r.body);
}

/// The combined Event's message for `message`.
std::string combined(const std::string& message) {
  return "(combined from similar events): " + message;
}

TEST_F(event_recorder_test, the_same_event_patches_the_count_of_the_existing_event) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  ASSERT_TRUE(rec.record(web, event_kind::cancelling_deletion));
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 1; }));
  for (std::uint64_t n = 2; n <= 3; ++n) {
    clock_->advance(30s);
    ASSERT_TRUE(rec.record(web, event_kind::cancelling_deletion));
    ASSERT_TRUE(run_until([&] { return rec.stats().updated == n - 1; }));
  }
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3U);
  EXPECT_EQ(reqs[0].method, "POST");
  const json created = body_of(reqs[0]);
  EXPECT_EQ(created["count"], 1);
  const std::string name = created["metadata"]["name"];
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(reqs[i].method, "PATCH");
    EXPECT_EQ(reqs[i].target, "/api/v1/namespaces/ns1/events/" + name);
    EXPECT_EQ(reqs[i].header("content-type"), "application/strategic-merge-patch+json");
  }
  EXPECT_EQ(body_of(reqs[1]), json::parse(R"({"count": 2, "lastTimestamp": "2024-05-01T12:00:30Z",
      "message": "Cancelling deletion of Pod ns1/web-0"})"));
  EXPECT_EQ(body_of(reqs[2]), json::parse(R"({"count": 3, "lastTimestamp": "2024-05-01T12:01:00Z",
      "message": "Cancelling deletion of Pod ns1/web-0"})"));
  const auto st = rec.stats();
  EXPECT_EQ(st.recorded, 3U);
  EXPECT_EQ(st.sent, 1U);
  EXPECT_EQ(st.updated, 2U);
  rec.stop();
}

TEST_F(event_recorder_test, another_message_type_reason_or_pod_is_another_event) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  rec.record(web, event_kind::cancelling_deletion);
  rec.record(web, event_kind::marking_for_deletion);
  rec.record(involved_object{.ref = web},
             event_content{"Warning", "TaintManagerEviction", "Marking for deletion Pod x"});
  rec.record(involved_object{.ref = web},
             event_content{"Normal", "Other", "Marking for deletion Pod x"});
  rec.record(pod_ref{"ns1", "web-0", "uid-2"}, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 5; }));
  for (const auto& r : server_.requests()) {
    EXPECT_EQ(r.method, "POST");
  }
  rec.stop();
}

TEST_F(event_recorder_test, a_patch_answered_404_creates_the_event_again_with_the_full_count) {
  server_.push(reply::with(201, "{}"));
  server_.push(reply::with(404, R"({"kind":"Status","reason":"NotFound","code":404})"));
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 1; }));
  clock_->advance(90s);
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 2; }));
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().updated == 1; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 4U);
  EXPECT_EQ(reqs[1].method, "PATCH");
  EXPECT_EQ(reqs[2].method, "POST");
  const json first = body_of(reqs[0]);
  const json again = body_of(reqs[2]);
  EXPECT_EQ(again["metadata"]["name"], first["metadata"]["name"]);
  EXPECT_EQ(again["count"], 2);
  EXPECT_EQ(again["firstTimestamp"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(again["lastTimestamp"], "2024-05-01T12:01:30Z");
  EXPECT_EQ(reqs[3].method, "PATCH");
  EXPECT_EQ(body_of(reqs[3])["count"], 3);
  EXPECT_EQ(rec.stats().failed, 0U);
  rec.stop();
}

TEST_F(event_recorder_test, a_post_answered_409_after_a_lost_answer_updates_the_event) {
  server_.push(reply::close_now());  // The POST may have landed: its answer is lost.
  server_.push(reply::with(409, R"({"kind":"Status","reason":"AlreadyExists","code":409})"));
  server_.set_fallback(reply::with(200, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().updated == 1; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3U);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[1].method, "POST");
  EXPECT_EQ(reqs[2].method, "PATCH");
  EXPECT_EQ(reqs[2].target, "/api/v1/namespaces/ns1/events/" +
                                body_of(reqs[0])["metadata"]["name"].get<std::string>());
  EXPECT_EQ(body_of(reqs[2])["count"], 1);
  rec.stop();
}

TEST_F(event_recorder_test, the_same_event_after_10_quiet_minutes_is_a_new_event) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 1; }));
  clock_->advance(600s);  // The window runs from the previous occurrence.
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().updated == 1; }));
  clock_->advance(600s);
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().updated == 2; }));
  clock_->advance(601s);  // 1801 s since the first
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 2; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 4U);
  EXPECT_EQ(reqs[3].method, "POST");
  const json fresh = body_of(reqs[3]);
  EXPECT_NE(fresh["metadata"]["name"], body_of(reqs[0])["metadata"]["name"]);
  EXPECT_EQ(fresh["count"], 1);
  EXPECT_EQ(fresh["firstTimestamp"], "2024-05-01T12:30:01Z");
  rec.stop();
}

TEST_F(event_recorder_test, the_10th_distinct_message_of_similar_events_goes_to_a_combined_event) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  const auto failure = [](int i) { return "webhook error " + std::to_string(i); };
  const auto message = [&](int i) { return "Cannot delete Pod ns1/web-0: " + failure(i); };
  for (int i = 1; i <= 9; ++i) {
    clock_->advance(60s);  // Nine minutes in all: each within 10 minutes of the previous.
    rec.record(web, event_kind::eviction_failed, failure(i));
  }
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 9; }));
  auto reqs = server_.requests();
  for (const auto& r : reqs) {
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(body_of(r)["message"].get<std::string>().rfind("Cannot delete Pod", 0), 0U);
  }

  clock_->advance(60s);
  rec.record(web, event_kind::eviction_failed, failure(10));
  ASSERT_TRUE(run_until([&] { return rec.stats().aggregated == 1; }));
  reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 10U);
  EXPECT_EQ(reqs[9].method, "POST");
  const json agg = body_of(reqs[9]);
  EXPECT_EQ(agg["message"], combined(message(10)));
  EXPECT_EQ(agg["type"], "Warning");
  EXPECT_EQ(agg["reason"], "TaintEvictionFailed");
  EXPECT_EQ(agg["count"], 1);

  // Another new message: the combined Event counts it and shows it.
  rec.record(web, event_kind::eviction_failed, failure(11));
  ASSERT_TRUE(run_until([&] { return rec.stats().aggregated == 2; }));
  // A message seen before keeps counting into its own Event.
  rec.record(web, event_kind::eviction_failed, failure(1));
  ASSERT_TRUE(run_until([&] { return rec.stats().updated == 1; }));
  reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 12U);
  EXPECT_EQ(reqs[10].method, "PATCH");
  EXPECT_EQ(reqs[10].target,
            "/api/v1/namespaces/ns1/events/" + agg["metadata"]["name"].get<std::string>());
  EXPECT_EQ(body_of(reqs[10])["count"], 2);
  EXPECT_EQ(body_of(reqs[10])["message"], combined(message(11)));
  EXPECT_EQ(reqs[11].method, "PATCH");
  EXPECT_EQ(body_of(reqs[11])["message"], message(1));
  EXPECT_EQ(body_of(reqs[11])["count"], 2);

  // Ten quiet minutes later, similar events start afresh.
  clock_->advance(601s);
  rec.record(web, event_kind::eviction_failed, failure(12));
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 10; }));
  reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 13U);
  EXPECT_EQ(reqs[12].method, "POST");
  EXPECT_EQ(body_of(reqs[12])["message"], message(12));
  rec.stop();
}

TEST_F(event_recorder_test, similar_events_more_than_10_minutes_apart_are_not_aggregated) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  for (int i = 1; i <= 12; ++i) {
    clock_->advance(601s);
    rec.record(web, event_kind::eviction_failed, "error " + std::to_string(i));
  }
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 12; }));
  EXPECT_EQ(rec.stats().aggregated, 0U);
  rec.stop();
}

TEST_F(event_recorder_test, fifty_records_while_the_post_hangs_make_one_post_and_one_patch) {
  server_.set_fallback(created_when_released());
  event_recorder_options opts = recorder_options();
  opts.spam_burst = 100;
  event_recorder rec(io_.get_executor(), client_, opts, clock_);
  rec.start();
  ASSERT_TRUE(rec.record(web, event_kind::cancelling_deletion));
  ASSERT_TRUE(run_until_requests(1));
  for (int i = 2; i <= 50; ++i) {
    clock_->advance(1s);
    ASSERT_TRUE(rec.record(web, event_kind::cancelling_deletion)) << i;
    io_.poll();
  }
  EXPECT_EQ(server_.requests().size(), 1U);  // Nothing else went out while the POST hangs.
  EXPECT_EQ(rec.queued(), 0U);
  server_.release("answer");
  ASSERT_TRUE(run_until([&] { return rec.stats().sent + rec.stats().updated == 50; }));
  while (io_.poll() > 0) {
  }
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(body_of(reqs[0])["count"], 1);
  EXPECT_EQ(reqs[1].method, "PATCH");
  EXPECT_EQ(body_of(reqs[1])["count"], 50);
  EXPECT_EQ(body_of(reqs[1])["lastTimestamp"], "2024-05-01T12:00:49Z");
  const auto st = rec.stats();
  EXPECT_EQ(st.recorded, 50U);
  EXPECT_EQ(st.sent, 1U);
  EXPECT_EQ(st.updated, 49U);
  rec.stop();
}

TEST_F(event_recorder_test, records_from_many_threads_while_a_request_hangs_are_counted_once) {
  server_.set_fallback(created_when_released());
  event_recorder_options opts = recorder_options();
  opts.spam_burst = 1000;
  event_recorder rec(io_.get_executor(), client_, opts);  // Real clocks.
  rec.start();
  ASSERT_TRUE(rec.record(web, event_kind::cancelling_deletion));
  ASSERT_TRUE(run_until_requests(1));
  constexpr int threads = 4;
  constexpr int per_thread = 50;
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([&rec] {
      for (int i = 0; i < per_thread; ++i) {
        rec.record(web, event_kind::cancelling_deletion);
      }
    });
  }
  server_.release("answer");  // Some PATCHes may go out while the writers still record.
  const auto total = static_cast<std::uint64_t>(1 + threads * per_thread);
  const bool all = run_until([&] { return rec.stats().sent + rec.stats().updated == total; });
  for (auto& w : writers) {
    w.join();
  }
  ASSERT_TRUE(all || run_until([&] { return rec.stats().sent + rec.stats().updated == total; }));
  const auto reqs = server_.requests();
  ASSERT_GE(reqs.size(), 2U);
  EXPECT_EQ(reqs[0].method, "POST");
  std::uint64_t last = 1;
  for (std::size_t i = 1; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].method, "PATCH");
    const std::uint64_t count = body_of(reqs[i])["count"];
    EXPECT_GT(count, last);  // One request at a time: the counts only grow.
    last = count;
  }
  EXPECT_EQ(last, total);
  rec.stop();
}

TEST_F(event_recorder_test, a_rejected_post_keeps_the_series_and_the_next_occurrence_posts_it) {
  server_.push(reply::with(403, R"({"kind":"Status","reason":"Forbidden","code":403})"));
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().failed == 1; }));
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 1; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  EXPECT_EQ(reqs[1].method, "POST");
  EXPECT_EQ(body_of(reqs[1])["count"], 1);
  rec.stop();
}

TEST_F(event_recorder_test, the_series_cache_is_bounded) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder_options opts = recorder_options();
  opts.correlation_cache_size = 2;
  opts.max_in_flight = 1;  // a, b, c end in this order: a is the one forgotten.
  event_recorder rec(io_.get_executor(), client_, opts, clock_);
  rec.start();
  for (const char* name : {"a", "b", "c"}) {
    rec.record(pod(name), event_kind::cancelling_deletion);
  }
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 3; }));
  rec.record(pod("c"), event_kind::cancelling_deletion);  // Remembered: a PATCH.
  ASSERT_TRUE(run_until([&] { return rec.stats().updated == 1; }));
  rec.record(pod("a"), event_kind::cancelling_deletion);  // Forgotten: a new Event.
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 4; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 5U);
  EXPECT_EQ(reqs[3].method, "PATCH");
  EXPECT_EQ(reqs[4].method, "POST");
  rec.stop();
}

TEST_F(event_recorder_test, a_series_with_a_request_in_flight_is_never_forgotten) {
  server_.set_fallback(created_when_released());
  event_recorder_options opts = recorder_options();
  opts.correlation_cache_size = 1;
  event_recorder rec(io_.get_executor(), client_, opts, clock_);
  rec.start();
  for (const char* name : {"a", "b", "c"}) {
    rec.record(pod(name), event_kind::cancelling_deletion);
  }
  ASSERT_TRUE(run_until_requests(3));
  rec.record(pod("a"), event_kind::cancelling_deletion);  // a's POST is still out.
  server_.release("answer");
  ASSERT_TRUE(run_until([&] { return rec.stats().sent + rec.stats().updated == 4; }));
  while (io_.poll() > 0) {
  }
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 4U);
  EXPECT_EQ(reqs[3].method, "PATCH");
  EXPECT_EQ(body_of(reqs[3])["count"], 2);
  EXPECT_EQ(rec.stats().sent, 3U);
  rec.stop();
}

TEST_F(event_recorder_test, the_queue_holds_series_not_occurrences) {
  event_recorder_options opts = recorder_options();
  opts.queue_capacity = 1;
  event_recorder rec(io_.get_executor(), client_, opts, clock_);  // Not started.
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(rec.record(web, event_kind::cancelling_deletion)) << i;
  }
  EXPECT_EQ(rec.queued(), 1U);
  EXPECT_EQ(rec.stats().dropped_full, 0U);
  EXPECT_TRUE(rec.record(pod("other"), event_kind::cancelling_deletion));
  EXPECT_EQ(rec.queued(), 1U);
  EXPECT_EQ(rec.stats().dropped_full, 5U);  // The oldest series, with its five occurrences.
}

TEST_F(event_recorder_test, stop_drops_the_occurrences_pending_on_a_request_in_flight) {
  server_.set_fallback(created_when_released());
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  rec.record(web, event_kind::cancelling_deletion);
  ASSERT_TRUE(run_until_requests(1));
  rec.record(web, event_kind::cancelling_deletion);
  rec.record(web, event_kind::cancelling_deletion);
  rec.stop();
  server_.release("answer");
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 1; }));
  while (io_.poll() > 0) {
  }
  EXPECT_EQ(rec.stats().dropped_stopped, 2U);
  EXPECT_EQ(server_.requests().size(), 1U);
}

TEST_F(event_recorder_test, a_warning_carries_the_api_message_clipped_and_without_controls) {
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  const std::string api_message =
      "admission webhook \"deny\" denied the request:\nforged line\x1b[0m" + std::string(5000, 'x');
  rec.record(web, event_kind::eviction_failed, api_message);
  ASSERT_TRUE(run_until([&] { return rec.stats().sent == 1; }));
  const json body = body_of(server_.requests().at(0));
  EXPECT_EQ(body["type"], "Warning");
  EXPECT_EQ(body["reason"], "TaintEvictionFailed");
  const std::string message = body["message"];
  EXPECT_EQ(message.size(), 1024U);
  EXPECT_EQ(message.rfind("Cannot delete Pod ns1/web-0: admission webhook \"deny\" denied the "
                          "request: forged line [0mxxx",
                          0),
            0U)
      << message;
  EXPECT_EQ(message.substr(1021), "...");
  rec.stop();
}

TEST(named_object_events, paths_by_group) {
  const involved_object cm{.api_version = "v1", .kind = "ConfigMap", .ref = {"ns1", "pol", ""}};
  EXPECT_EQ(named_object_events::path_of(cm, "configmaps"),
            "/api/v1/namespaces/ns1/configmaps/pol");
  const involved_object lease{
      .api_version = "coordination.k8s.io/v1", .kind = "Lease", .ref = {"kube-system", "a b", ""}};
  EXPECT_EQ(named_object_events::path_of(lease, "leases"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/a%20b");
}

TEST_F(event_recorder_test, a_named_object_s_events_carry_the_uid_read_once) {
  server_.push(reply::with(200, R"({"metadata":{"name":"pol","uid":"cm-uid"}})"));
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  named_object_events events(
      client_, rec,
      involved_object{.api_version = "v1", .kind = "ConfigMap", .ref = {"ns1", "pol", "ignored"}},
      "configmaps", spdlog::default_logger());
  int recorded = 0;
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        // Named: GCC 12 mis-destroys temporaries inside co_await expressions.
        event_content one{"Normal", "PolicyApplied", "one"};
        co_await events.record(std::move(one));
        event_content two{"Normal", "PolicyApplied", "two"};
        co_await events.record(std::move(two));
        ++recorded;
      },
      asio::detached);
  ASSERT_TRUE(run_until([&] { return recorded == 1 && rec.stats().sent == 2; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3U) << "one GET, two Events";
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].target, "/api/v1/namespaces/ns1/configmaps/pol");
  for (std::size_t i = 1; i < 3; ++i) {
    const json body = json::parse(reqs[i].body);
    EXPECT_EQ(body["involvedObject"]["kind"], "ConfigMap");
    EXPECT_EQ(body["involvedObject"]["uid"], "cm-uid");
  }
  rec.stop();
}

TEST_F(event_recorder_test, a_named_object_whose_uid_cannot_be_read_gets_events_without_one) {
  server_.push(reply::with(403, R"({"kind":"Status","reason":"Forbidden"})"));
  server_.set_fallback(reply::with(201, "{}"));
  event_recorder rec(io_.get_executor(), client_, recorder_options(), clock_);
  rec.start();
  named_object_events events(
      client_, rec,
      involved_object{.api_version = "v1", .kind = "ConfigMap", .ref = {"ns1", "pol", "stale"}},
      "configmaps", spdlog::default_logger());
  bool recorded = false;
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        event_content bad{"Warning", "PolicyRejected", "bad"};
        co_await events.record(std::move(bad));
        recorded = true;
      },
      asio::detached);
  ASSERT_TRUE(run_until([&] { return recorded && rec.stats().sent == 1; }));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  const json body = json::parse(reqs[1].body);
  EXPECT_EQ(body["involvedObject"]["name"], "pol");
  EXPECT_FALSE(body["involvedObject"].contains("uid")) << body.dump();
  rec.stop();
}

}  // namespace
}  // namespace tec::writers

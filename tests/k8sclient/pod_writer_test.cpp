#include "tec/k8s/pod_writer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "k8sclient/support/test_client.hpp"
#include "tec/k8s/eviction_sink.hpp"

namespace tec::k8s {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using controller::eviction_result;
using controller::eviction_status;
using controller::pod_ref;
using nlohmann::json;
using testing::fake_http_server;
using testing::reply;

using testing::run_sync;

constexpr const char* pod_path = "/api/v1/namespaces/ns1/pods/web-0";

// 2024-05-01T12:00:00.123456Z
const std::chrono::system_clock::time_point fixed_wall{std::chrono::microseconds{1714564800123456}};

std::string status_body(unsigned code, const std::string& reason, const std::string& message,
                        const json& details = nullptr) {
  json s = {{"kind", "Status"},   {"apiVersion", "v1"}, {"status", "Failure"},
            {"message", message}, {"reason", reason},   {"code", code}};
  if (!details.is_null()) {
    s["details"] = details;
  }
  return s.dump();
}

class pod_writer_test : public ::testing::Test {
protected:
  pod_writer_test() : client_(io_.get_executor(), config(), options()) {}

  rest_config config() const { return testing::plain_config(server_); }

  static client_options options() { return testing::quick_options(2); }

  result<delete_outcome> del(const std::string& uid = "uid-1") {
    pod_writer w(client_);
    auto out = run_sync(io_, w.delete_pod("ns1", "web-0", uid));
    if (!out) {
      ADD_FAILURE() << "delete did not complete";
      return make_error(errc::timeout, "test limit");
    }
    return std::move(*out);
  }

  result<patch_outcome> patch(const std::string& uid = "uid-1") {
    pod_writer w(client_, [] { return fixed_wall; });
    auto out = run_sync(io_, w.add_disruption_condition("ns1", "web-0", uid));
    if (!out) {
      ADD_FAILURE() << "patch did not complete";
      return make_error(errc::timeout, "test limit");
    }
    return std::move(*out);
  }

  /// Runs the io_context until `result` is set (bounded).
  void run_until(const std::optional<eviction_result>& r) {
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!r && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_until(deadline);
    }
  }

  fake_http_server server_;
  asio::io_context io_;
  client client_;
};

TEST(pod_writer_format, rfc3339_seconds_and_microseconds) {
  EXPECT_EQ(format_rfc3339(fixed_wall), "2024-05-01T12:00:00Z");
  EXPECT_EQ(format_rfc3339(fixed_wall, true), "2024-05-01T12:00:00.123456Z");
  EXPECT_EQ(format_rfc3339(std::chrono::system_clock::time_point{}, true),
            "1970-01-01T00:00:00.000000Z");
}

TEST(pod_writer_format, escapes_path_segments) {
  EXPECT_EQ(escape_path_segment("web-0.a_b~"), "web-0.a_b~");
  EXPECT_EQ(escape_path_segment("a/b?c"), "a%2Fb%3Fc");
}

TEST(pod_writer_format, api_error_uses_the_status_message_or_a_bounded_body) {
  auto err = api_error("DELETE pod a/b", response{403, status_body(403, "Forbidden", "nope")});
  EXPECT_EQ(err.code, make_error_code(errc::forbidden));
  EXPECT_EQ(err.http_status, 403);
  EXPECT_EQ(err.message, "DELETE pod a/b: 403 Forbidden: nope");

  auto raw = api_error("x", response{502, std::string(1000, 'z')});
  EXPECT_EQ(raw.code, make_error_code(errc::server_error));
  EXPECT_LT(raw.message.size(), 300U);

  auto odd = api_error("x", response{418, "[1,2"});
  EXPECT_EQ(odd.code, make_error_code(errc::http_status));
  EXPECT_EQ(error_reason(odd), "http_418");
}

TEST(pod_writer_format, delete_request_carries_the_uid_precondition) {
  const request req = make_delete_pod_request("ns1", "web-0", "uid-1");
  EXPECT_EQ(req.method, boost::beast::http::verb::delete_);
  EXPECT_EQ(req.target, pod_path);
  EXPECT_TRUE(req.idempotent);
  EXPECT_EQ(req.body,
            R"({"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":"uid-1"}})");
}

TEST_F(pod_writer_test, delete_2xx_is_deleted) {
  server_.push(reply::with(200, R"({"kind":"Pod"})"));
  auto r = del();
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r.value(), delete_outcome::deleted);
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 1U);
  EXPECT_EQ(reqs[0].method, "DELETE");
  EXPECT_EQ(reqs[0].target, pod_path);
  EXPECT_EQ(reqs[0].header("content-type"), "application/json");
  EXPECT_EQ(json::parse(reqs[0].body), json::parse(R"({"kind":"DeleteOptions","apiVersion":"v1",
                            "preconditions":{"uid":"uid-1"}})"));
}

TEST_F(pod_writer_test, delete_404_is_not_found) {
  server_.push(reply::with(404, status_body(404, "NotFound", "pods \"web-0\" not found")));
  auto r = del();
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r.value(), delete_outcome::not_found);
}

TEST_F(pod_writer_test, delete_409_is_uid_mismatch) {
  server_.push(reply::with(
      409, status_body(409, "Conflict",
                       "Precondition failed: UID in precondition: uid-1, UID in object meta: x")));
  auto r = del();
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r.value(), delete_outcome::uid_mismatch);
}

TEST_F(pod_writer_test, delete_500_is_an_error_with_status_and_message) {
  server_.set_fallback(reply::with(500, status_body(500, "InternalError", "etcd is sad")));
  auto r = del();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, make_error_code(errc::server_error));
  EXPECT_EQ(r.err().http_status, 500);
  EXPECT_NE(r.err().message.find("DELETE pod ns1/web-0"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("etcd is sad"), std::string::npos) << r.err().message;
}

TEST_F(pod_writer_test, delete_403_is_forbidden) {
  server_.push(reply::with(403, status_body(403, "Forbidden", "cannot delete pods")));
  auto r = del();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, make_error_code(errc::forbidden));
  EXPECT_NE(r.err().message.find("cannot delete pods"), std::string::npos);
}

TEST_F(pod_writer_test, delete_transport_failure_is_an_error) {
  server_.set_fallback(reply::close_now());
  auto r = del();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().http_status, 0);
  EXPECT_NE(r.err().message.find("DELETE pod ns1/web-0"), std::string::npos);
}

TEST_F(pod_writer_test, patch_adds_the_condition_guarded_by_uid) {
  server_.push(reply::with(200, R"({"kind":"Pod"})"));
  auto r = patch();
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r.value(), patch_outcome::patched);
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 1U);
  EXPECT_EQ(reqs[0].method, "PATCH");
  EXPECT_EQ(reqs[0].target, std::string(pod_path) + "/status");
  EXPECT_EQ(reqs[0].header("content-type"), "application/strategic-merge-patch+json");
  EXPECT_EQ(json::parse(reqs[0].body), json::parse(R"({
    "metadata": {"uid": "uid-1"},
    "status": {"conditions": [{
      "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
      "message": "Taint manager: deleting due to NoExecute taint",
      "lastTransitionTime": "2024-05-01T12:00:00Z"}]}})"));
}

TEST_F(pod_writer_test, patch_404_is_not_found) {
  server_.push(reply::with(404, status_body(404, "NotFound", "gone")));
  auto r = patch();
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r.value(), patch_outcome::not_found);
}

TEST_F(pod_writer_test, patch_rejected_for_uid_is_uid_mismatch) {
  const json details = {{"name", "web-0"},
                        {"kind", "Pod"},
                        {"causes",
                         {{{"reason", "FieldValueInvalid"},
                           {"message", "Invalid value: \"uid-1\": field is immutable"},
                           {"field", "metadata.uid"}}}}};
  server_.push(reply::with(422, status_body(422, "Invalid", "Pod \"web-0\" is invalid", details)));
  auto r = patch();
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r.value(), patch_outcome::uid_mismatch);
}

TEST_F(pod_writer_test, patch_422_for_another_field_is_an_error) {
  const json details = {{"causes", {{{"field", "status.conditions"}}}}};
  server_.push(reply::with(422, status_body(422, "Invalid", "bad condition", details)));
  auto r = patch();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().http_status, 422);
  EXPECT_EQ(error_reason(r.err()), "http_422");
}

TEST_F(pod_writer_test, patch_with_malformed_error_body_is_an_error) {
  server_.push(reply::with(422, R"({"details": {"causes": "not-a-list")"));
  auto r = patch();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().http_status, 422);
}

// --- k8s_eviction_sink ---

TEST_F(pod_writer_test, sink_patches_then_deletes) {
  server_.push(reply::with(200, "{}").match("/status"));
  server_.push(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  std::optional<eviction_result> got;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, {}},
             [&](eviction_result r) { got = std::move(r); });
  run_until(got);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  EXPECT_EQ(reqs[0].method, "PATCH");
  EXPECT_EQ(reqs[1].method, "DELETE");
  const auto st = sink.stats();
  EXPECT_EQ(st.deletions, 1U);
  EXPECT_EQ(st.duration_count, 1U);
  EXPECT_EQ(st.in_flight, 0U);
}

TEST_F(pod_writer_test, sink_skips_the_delete_when_the_patch_finds_no_pod) {
  server_.push(reply::with(404, status_body(404, "NotFound", "gone")));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  std::optional<eviction_result> got;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, {}},
             [&](eviction_result r) { got = std::move(r); });
  run_until(got);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::gone);
  EXPECT_EQ(server_.requests().size(), 1U);
  EXPECT_EQ(sink.stats().already_gone, 1U);
  EXPECT_EQ(sink.stats().deletions, 0U);
}

TEST_F(pod_writer_test, sink_deletes_even_when_the_patch_fails) {
  server_.push(reply::with(403, status_body(403, "Forbidden", "no pods/status")).match("/status"));
  server_.push(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  std::optional<eviction_result> got;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, {}},
             [&](eviction_result r) { got = std::move(r); });
  run_until(got);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  EXPECT_EQ(sink.stats().condition_failures, 1U);
  EXPECT_EQ(sink.stats().deletions, 1U);
}

TEST_F(pod_writer_test, sink_reports_409_as_done_and_500_as_failed) {
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr, {.disruption_condition = false});
  server_.push(reply::with(409, status_body(409, "Conflict", "Precondition failed")));
  std::optional<eviction_result> first;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, {}},
             [&](eviction_result r) { first = std::move(r); });
  run_until(first);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, eviction_status::gone);

  server_.set_fallback(reply::with(500, status_body(500, "InternalError", "boom")));
  std::optional<eviction_result> second;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, {}},
             [&](eviction_result r) { second = std::move(r); });
  run_until(second);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, eviction_status::failed);
  EXPECT_NE(second->error.find("boom"), std::string::npos) << second->error;
  const auto st = sink.stats();
  EXPECT_EQ(st.already_gone, 1U);
  EXPECT_EQ(st.failures, 1U);
  EXPECT_EQ(st.failures_by_reason.at("server_error"), 1U);
  for (const auto& req : server_.requests()) {
    EXPECT_EQ(req.method, "DELETE");  // No condition patch when disabled.
  }
}

TEST_F(pod_writer_test, sink_accepts_evictions_from_many_threads) {
  server_.set_fallback(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  constexpr int threads = 4;
  constexpr int per_thread = 10;
  std::atomic<int> done{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([&sink, &done, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string name = "p" + std::to_string(t) + "-" + std::to_string(i);
        sink.evict({pod_ref{"ns1", name, name}, {}}, [&done](const eviction_result& r) {
          EXPECT_EQ(r.status, eviction_status::deleted);
          done.fetch_add(1);
        });
      }
    });
  }
  for (auto& c : callers) {
    c.join();
  }
  io_.restart();
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (done.load() < threads * per_thread && std::chrono::steady_clock::now() < deadline) {
    io_.run_one_until(deadline);
  }
  EXPECT_EQ(done.load(), threads * per_thread);
  EXPECT_EQ(sink.stats().deletions, static_cast<std::uint64_t>(threads * per_thread));
  EXPECT_EQ(sink.stats().in_flight, 0U);
}

TEST_F(pod_writer_test, sink_refuses_work_after_stop) {
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  sink.stop();
  std::optional<eviction_result> got;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, {}},
             [&](eviction_result r) { got = std::move(r); });
  EXPECT_FALSE(got);  // Never called inline.
  run_until(got);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_TRUE(server_.requests().empty());
}

}  // namespace
}  // namespace tec::k8s

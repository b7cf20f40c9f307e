#include "tec/writers/pod_writer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/manual_clock.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/writers/event_recorder.hpp"
#include "tec/writers/eviction_sink.hpp"

namespace tec::writers {
namespace {
using base::result;
using informers::pod_store;
using k8sclient::error_reason;
using k8sclient::request;
using k8sclient::response;

using base::errc;
using base::make_error_code;
using informers::disruption_state;
using informers::pod_record;
using k8sclient::client;

namespace asio = boost::asio;
using namespace std::chrono_literals;
using controller::eviction_result;
using controller::eviction_status;
using controller::pod_ref;
using k8sclient::testing::fake_http_server;
using k8sclient::testing::reply;
using nlohmann::json;

using k8sclient::testing::run_sync;
constexpr auto http_get = boost::beast::http::verb::get;

constexpr const char* pod_path = "/api/v1/namespaces/ns1/pods/web-0";

// 2024-05-01T12:00:00.123456Z
const std::chrono::system_clock::time_point writer_wall_start{
    std::chrono::microseconds{1714564800123456}};

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

  k8sclient::rest_config config() const { return k8sclient::testing::plain_config(server_); }

  static k8sclient::client_options options() { return k8sclient::testing::quick_options(2); }

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
    test::manual_clock clock(test::manual_clock::time_point{}, writer_wall_start);
    pod_writer w(client_, clock);
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

  /// One eviction of ns1/web-0 (`uid`) through `sink`, run to its end (bounded).
  std::optional<eviction_result> evict(k8s_eviction_sink& sink, const std::string& uid = "uid-1",
                                       std::function<bool()> cancelled = {}) {
    return evict(sink, {pod_ref{"ns1", "web-0", uid}, std::move(cancelled)});
  }

  /// One eviction `req` through `sink`, run to its end (bounded).
  std::optional<eviction_result> evict(k8s_eviction_sink& sink, controller::eviction_request req) {
    std::optional<eviction_result> got;
    sink.evict(std::move(req), [&](eviction_result r) { got = std::move(r); });
    run_until(got);
    EXPECT_TRUE(got) << "the eviction did not end";
    return got;
  }

  /// The methods of the requests the server received, in order.
  std::vector<std::string> methods() const {
    std::vector<std::string> out;
    for (const auto& r : server_.requests()) {
      out.push_back(r.method);
    }
    return out;
  }

  fake_http_server server_;
  asio::io_context io_;
  client client_;
};

TEST(pod_writer_format, delete_request_carries_the_uid_precondition) {
  const request req = make_delete_pod_request("ns1", "web-0", "uid-1");
  EXPECT_EQ(req.method, boost::beast::http::verb::delete_);
  EXPECT_EQ(req.target, pod_path);
  EXPECT_TRUE(req.idempotent);
  EXPECT_EQ(req.accept,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json");
  EXPECT_EQ(req.body,
            R"({"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":"uid-1"}})");
}

TEST_F(pod_writer_test, delete_2xx_is_deleted) {
  server_.push(reply::with(200, R"({"kind":"Pod"})"));
  auto r = del();
  ASSERT_TRUE(r) << r.error().message;
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
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r.value(), delete_outcome::not_found);
}

TEST_F(pod_writer_test, delete_409_is_uid_mismatch) {
  server_.push(reply::with(
      409, status_body(409, "Conflict",
                       "Precondition failed: UID in precondition: uid-1, UID in object meta: x")));
  auto r = del();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r.value(), delete_outcome::uid_mismatch);
}

TEST_F(pod_writer_test, delete_500_is_an_error_with_status_and_message) {
  server_.set_fallback(reply::with(500, status_body(500, "InternalError", "etcd is sad")));
  auto r = del();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, make_error_code(errc::server_error));
  EXPECT_EQ(r.error().http_status, 500);
  EXPECT_NE(r.error().message.find("DELETE pod ns1/web-0"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("etcd is sad"), std::string::npos) << r.error().message;
}

TEST_F(pod_writer_test, delete_403_is_forbidden) {
  server_.push(reply::with(403, status_body(403, "Forbidden", "cannot delete pods")));
  auto r = del();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, make_error_code(errc::forbidden));
  EXPECT_NE(r.error().message.find("cannot delete pods"), std::string::npos);
}

TEST_F(pod_writer_test, delete_transport_failure_is_an_error) {
  server_.set_fallback(reply::close_now());
  auto r = del();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 0);
  EXPECT_NE(r.error().message.find("DELETE pod ns1/web-0"), std::string::npos);
}

TEST_F(pod_writer_test, patch_adds_the_condition_guarded_by_uid) {
  server_.push(reply::with(200, R"({"kind":"Pod"})"));
  auto r = patch();
  ASSERT_TRUE(r) << r.error().message;
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

TEST(pod_writer_format, a_condition_kept_true_leaves_its_transition_time_to_the_merge) {
  const request req = make_disruption_condition_request("ns1", "web-0", "uid-1", std::nullopt);
  EXPECT_EQ(json::parse(req.body), json::parse(R"({
    "metadata": {"uid": "uid-1"},
    "status": {"conditions": [{
      "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
      "message": "Taint manager: deleting due to NoExecute taint"}]}})"));
}

TEST_F(pod_writer_test, patch_404_is_not_found) {
  server_.push(reply::with(404, status_body(404, "NotFound", "gone")));
  auto r = patch();
  ASSERT_TRUE(r) << r.error().message;
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
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r.value(), patch_outcome::uid_mismatch);
}

TEST_F(pod_writer_test, patch_422_for_another_field_is_an_error) {
  const json details = {{"causes", {{{"field", "status.conditions"}}}}};
  server_.push(reply::with(422, status_body(422, "Invalid", "bad condition", details)));
  auto r = patch();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 422);
  EXPECT_EQ(error_reason(r.error()), "http_422");
}

TEST_F(pod_writer_test, patch_with_malformed_error_body_is_an_error) {
  server_.push(reply::with(422, R"({"details": {"causes": "not-a-list")"));
  auto r = patch();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 422);
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

// --- dry-run: the sink's own guard (the controller hands nothing over in dry-run) ---

TEST_F(pod_writer_test, sink_in_dry_run_sends_nothing_and_says_would_delete) {
  std::atomic<bool> dry{true};  // the controller's switch, read at each step
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr,
                         {.dry_run = [&dry] { return dry.load(); }});
  const auto got = evict(sink);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::gone);
  EXPECT_TRUE(server_.requests().empty());
  const auto st = sink.stats();
  EXPECT_EQ(st.dry_run_deletions, 1U);
  EXPECT_EQ(st.deletions, 0U);
  EXPECT_EQ(st.already_gone, 0U);

  // Switched off, the same sink writes again: the guard is what kept the requests away.
  server_.push(reply::with(200, "{}").match("/status"));
  server_.push(reply::with(200, "{}"));
  dry = false;
  const auto real = evict(sink);
  ASSERT_TRUE(real);
  EXPECT_EQ(real->status, eviction_status::deleted);
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH", "DELETE"}));
}

TEST_F(pod_writer_test, sink_in_dry_run_records_no_event) {
  event_recorder recorder(io_.get_executor(), client_);
  std::atomic<bool> dry{true};
  k8s_eviction_sink sink(io_.get_executor(), client_, &recorder,
                         {.dry_run = [&dry] { return dry.load(); }});
  sink.record_event(pod_ref{"ns1", "web-0", "uid-1"}, controller::event_kind::marking_for_deletion,
                    {});
  EXPECT_EQ(recorder.stats().recorded, 0U);
  EXPECT_EQ(sink.stats().dry_run_events, 1U);
  dry = false;
  sink.record_event(pod_ref{"ns1", "web-0", "uid-1"}, controller::event_kind::marking_for_deletion,
                    {});
  EXPECT_EQ(recorder.stats().recorded, 1U);
  recorder.stop();
}

// --- the condition patch refused for good: the DELETE goes on (issue 11, item 4) ---

// The entries of a by-reason map that counted something (the sink holds the usual reasons at
// 0 from the start).
std::map<std::string, std::uint64_t> counted(const std::map<std::string, std::uint64_t>& m) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [k, v] : m) {
    if (v > 0) {
      out.emplace(k, v);
    }
  }
  return out;
}

TEST_F(pod_writer_test, the_usual_failure_reasons_are_there_at_zero_from_the_start) {
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  const auto st = sink.stats();
  for (const std::string_view r : deletion_failure_reasons) {
    EXPECT_EQ(st.failures_by_reason.at(std::string(r)), 0U) << r;
  }
  for (const std::string_view r : condition_failure_reasons) {
    EXPECT_EQ(st.condition_failures_by_reason.at(std::string(r)), 0U) << r;
  }
}

struct permanent_case {
  unsigned status;
  std::string body;
  std::string reason;  // the condition_failures_by_reason label

  friend void PrintTo(const permanent_case& c, std::ostream* os) { *os << c.status; }
};

class sink_permanent_patch_failure : public pod_writer_test,
                                     public ::testing::WithParamInterface<permanent_case> {};

TEST_P(sink_permanent_patch_failure, is_counted_and_the_pod_deleted_without_the_condition) {
  const permanent_case& c = GetParam();
  server_.push(reply::with(c.status, c.body).match("/status"));
  server_.push(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  const auto got = evict(sink);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH", "DELETE"}));
  const auto st = sink.stats();
  EXPECT_EQ(st.condition_failures, 1U);
  EXPECT_EQ(counted(st.condition_failures_by_reason),
            (std::map<std::string, std::uint64_t>{{c.reason, 1}}));
  EXPECT_EQ(st.deletions, 1U);
  EXPECT_EQ(st.failures, 0U);
}

INSTANTIATE_TEST_SUITE_P(
    statuses, sink_permanent_patch_failure,
    ::testing::Values(
        permanent_case{403, status_body(403, "Forbidden", "no pods/status"), "forbidden"},
        permanent_case{422,
                       status_body(422, "Invalid", "bad condition",
                                   json{{"causes", {{{"field", "status.conditions"}}}}}),
                       "http_422"},
        permanent_case{400, status_body(400, "BadRequest", "bad patch"), "http_400"}),
    [](const auto& param_info) { return std::to_string(param_info.param.status); });

// --- the condition patch failed transiently: no DELETE, the attempt fails (item 4) ---

struct transient_case {
  std::string name;
  reply answer;        // the fallback for every request
  std::string reason;  // the failures_by_reason label

  friend void PrintTo(const transient_case& c, std::ostream* os) { *os << c.name; }
};

class sink_transient_patch_failure : public pod_writer_test,
                                     public ::testing::WithParamInterface<transient_case> {};

TEST_P(sink_transient_patch_failure, fails_the_attempt_without_a_delete) {
  server_.set_fallback(GetParam().answer);
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  const auto got = evict(sink);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_NE(got->error.find("PATCH pod status ns1/web-0"), std::string::npos) << got->error;
  for (const auto& m : methods()) {
    EXPECT_EQ(m, "PATCH");  // the client's own retries, never a DELETE
  }
  const auto st = sink.stats();
  EXPECT_EQ(st.condition_failures, 0U);
  EXPECT_TRUE(counted(st.condition_failures_by_reason).empty());
  EXPECT_EQ(st.failures, 1U);
  EXPECT_EQ(counted(st.failures_by_reason),
            (std::map<std::string, std::uint64_t>{{GetParam().reason, 1}}));
  EXPECT_EQ(st.deletions, 0U);
}

INSTANTIATE_TEST_SUITE_P(
    answers, sink_transient_patch_failure,
    ::testing::Values(
        transient_case{"status_503", reply::with(503, status_body(503, "ServiceUnavailable", "x")),
                       "server_error"},
        transient_case{"status_500", reply::with(500, status_body(500, "InternalError", "etcd")),
                       "server_error"},
        transient_case{"status_429",
                       reply::with(429, status_body(429, "TooManyRequests", "slow down")),
                       "too_many_requests"},
        transient_case{"status_401", reply::with(401, status_body(401, "Unauthorized", "token")),
                       "unauthorized"},
        transient_case{"status_409", reply::with(409, status_body(409, "Conflict", "retry")),
                       "conflict"},
        transient_case{"status_408", reply::with(408, status_body(408, "Timeout", "slow")),
                       "http_408"},
        transient_case{"connection_closed", reply::close_now(), "connection_failed"}),
    [](const auto& param_info) { return param_info.param.name; });

TEST_F(pod_writer_test, sink_patch_timeout_fails_the_attempt_without_a_delete) {
  server_.set_fallback(reply::no_response());
  auto opts = k8sclient::testing::quick_options(0);
  opts.request_timeout = 200ms;  // the test waits for it once; nothing is asserted on time
  client c(io_.get_executor(), config(), opts);
  k8s_eviction_sink sink(io_.get_executor(), c, nullptr);
  const auto got = evict(sink);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH"}));
  EXPECT_EQ(sink.stats().failures_by_reason.at("timeout"), 1U);
  EXPECT_EQ(sink.stats().condition_failures, 0U);
}

// --- an idempotent condition (issue 11, item 3) ---

pod_record cached(const std::string& uid, disruption_state state) {
  pod_record r;
  r.pod.namespace_ = "ns1";
  r.pod.name = "web-0";
  r.pod.uid = uid;
  r.pod.node_name = "node-1";
  r.resource_version = "7";
  r.disruption = state;
  return r;
}

/// The condition the PATCH sent, or a discarded json when no PATCH was sent.
json patched_condition(const std::vector<k8sclient::testing::recorded_request>& reqs) {
  for (const auto& r : reqs) {
    if (r.method == "PATCH") {
      return json::parse(r.body)["status"]["conditions"][0];
    }
  }
  return json(json::value_t::discarded);
}

TEST_F(pod_writer_test, sink_skips_the_patch_when_the_cached_pod_has_our_condition) {
  pod_store pods;
  pods.upsert(cached("uid-1", disruption_state::true_ours));
  server_.set_fallback(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr, {.pods = &pods});
  const auto got = evict(sink);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  EXPECT_EQ(methods(), (std::vector<std::string>{"DELETE"}));
  EXPECT_EQ(sink.stats().conditions_unchanged, 1U);
  EXPECT_EQ(sink.stats().conditions_patched, 0U);
}

TEST_F(pod_writer_test, sink_keeps_the_transition_time_of_another_true_condition) {
  pod_store pods;
  pods.upsert(cached("uid-1", disruption_state::true_other));
  server_.set_fallback(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr, {.pods = &pods});
  ASSERT_TRUE(evict(sink));
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH", "DELETE"}));
  const json cond = patched_condition(server_.requests());
  ASSERT_TRUE(cond.is_object());
  EXPECT_EQ(cond["reason"], "DeletionByTaintManager");
  EXPECT_FALSE(cond.contains("lastTransitionTime")) << cond.dump();
}

// observedGeneration (issue 33 item 1): set from the pod's metadata.generation when the
// server's PodCondition schema has the field (OpenAPI v3 of the core group), left out when
// the document is not served (1.20-1.23: 404) or has no such property (1.24-1.32).
TEST(pod_writer_format, the_condition_carries_observed_generation_when_given) {
  const request req = make_disruption_condition_request("ns1", "web-0", "uid-1", std::nullopt, 4);
  EXPECT_EQ(json::parse(req.body)["status"]["conditions"][0]["observedGeneration"], 4);
}

// A trimmed OpenAPI v3 document of the core group (the real one is about 1 MB).
std::string openapi_core(bool with_field) {
  const json props = with_field
                         ? json{{"type", {{"type", "string"}}},
                                {"observedGeneration", {{"type", "integer"}, {"format", "int64"}}},
                                {"status", {{"type", "string"}}}}
                         : json{{"type", {{"type", "string"}}}, {"status", {{"type", "string"}}}};
  return json{{"openapi", "3.0.0"},
              {"paths", {{"/api/v1/pods", {{"get", json::object()}}}}},
              {"components",
               {{"schemas",
                 {{"io.k8s.api.core.v1.NodeCondition",
                   {{"properties", {{"observedGeneration", json::object()}}}}},
                  {"io.k8s.api.core.v1.PodCondition",
                   {{"description", "observedGeneration"},
                    {"properties", props},
                    {"required", {"type", "status"}}}},
                  {"io.k8s.api.core.v1.PodSpec", json::object()}}}}}}
      .dump();
}

TEST(pod_writer_format, the_pod_condition_schema_says_whether_it_has_observed_generation) {
  EXPECT_EQ(condition_schema_has_observed_generation(openapi_core(true)), true);
  EXPECT_EQ(condition_schema_has_observed_generation(openapi_core(false)), false);
  // Another schema's property, or the word elsewhere, does not count.
  EXPECT_EQ(condition_schema_has_observed_generation(
                R"({"components":{"schemas":{"io.k8s.api.core.v1.NodeCondition":)"
                R"({"properties":{"observedGeneration":{}}}}}})"),
            std::nullopt);
  EXPECT_EQ(condition_schema_has_observed_generation("not json"), std::nullopt);
  EXPECT_EQ(condition_schema_has_observed_generation(""), std::nullopt);
  EXPECT_EQ(condition_schema_has_observed_generation(R"({"components":{"schemas":[]}})"),
            std::nullopt);
}

TEST_F(pod_writer_test, sink_sets_observed_generation_where_the_schema_has_it) {
  for (const auto& [answer, want] : std::vector<std::pair<reply, bool>>{
           {reply::with(200, openapi_core(true)), true},
           {reply::with(200, openapi_core(false)), false},
           {reply::with(404, status_body(404, "NotFound", "the server could not find it")), false},
           {reply::with(403, status_body(403, "Forbidden", "no")), false}}) {
    fake_http_server server;
    server.push(reply(answer).match("/openapi/v3/api/v1"));
    server.set_fallback(reply::with(200, "{}"));
    client c(io_.get_executor(), k8sclient::testing::plain_config(server), options());
    pod_store pods;
    pod_record r = cached("uid-1", disruption_state::absent);
    r.generation = 3;
    pods.upsert(r);
    k8s_eviction_sink sink(io_.get_executor(), c, nullptr, {.pods = &pods});
    ASSERT_TRUE(evict(sink));
    const json cond = patched_condition(server.requests());
    ASSERT_TRUE(cond.is_object());
    if (want) {
      EXPECT_EQ(cond["observedGeneration"], 3) << cond.dump();
    } else {
      EXPECT_FALSE(cond.contains("observedGeneration")) << cond.dump();
    }
    EXPECT_EQ(server.requests().at(0).target, "/openapi/v3/api/v1");
  }
}

TEST_F(pod_writer_test, sink_asks_the_schema_once_and_not_for_a_pod_without_generation) {
  server_.push(reply::with(200, openapi_core(true)).match("/openapi/v3/api/v1"));
  server_.set_fallback(reply::with(200, "{}"));
  pod_store pods;
  pods.upsert(cached("uid-1", disruption_state::absent));  // generation 0: nothing to say
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr, {.pods = &pods});
  ASSERT_TRUE(evict(sink));
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH", "DELETE"}));
  for (const std::string uid : {"uid-2", "uid-3"}) {  // ns1/web-0 re-created, generation 1
    pod_record r = cached(uid, disruption_state::absent);
    r.generation = 1;
    pods.upsert(r);
    ASSERT_TRUE(evict(sink, uid));
  }
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH", "DELETE", "GET", "PATCH", "DELETE",
                                                 "PATCH", "DELETE"}));
}

TEST_F(pod_writer_test, sink_patches_with_a_new_time_when_absent_false_or_another_uid) {
  for (const auto& [uid, state] : std::vector<std::pair<std::string, disruption_state>>{
           {"uid-1", disruption_state::absent},
           {"uid-1", disruption_state::not_true},
           {"uid-other", disruption_state::true_ours}}) {
    fake_http_server server;
    server.set_fallback(reply::with(200, "{}"));
    client c(io_.get_executor(), k8sclient::testing::plain_config(server), options());
    pod_store pods;
    pods.upsert(cached(uid, state));
    k8s_eviction_sink sink(io_.get_executor(), c, nullptr, {.pods = &pods});
    ASSERT_TRUE(evict(sink));
    const auto reqs = server.requests();
    ASSERT_EQ(reqs.size(), 2U) << static_cast<int>(state);
    const json cond = patched_condition(reqs);
    ASSERT_TRUE(cond.is_object());
    EXPECT_TRUE(cond["lastTransitionTime"].is_string()) << cond.dump();
  }
}

TEST_F(pod_writer_test, sink_does_not_repatch_on_a_retry_after_a_failed_delete) {
  // No cache: the watch has not shown the condition yet when the retry comes.
  server_.push(reply::with(200, "{}").match("/status"));
  server_.push(reply::with(403, status_body(403, "Forbidden", "denied by webhook")));
  server_.push(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  const auto first = evict(sink);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, eviction_status::failed);
  EXPECT_NE(first->error.find("denied by webhook"), std::string::npos);
  const auto second = evict(sink);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, eviction_status::deleted);
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH", "DELETE", "DELETE"}));
  EXPECT_EQ(sink.stats().conditions_patched, 1U);
  EXPECT_EQ(sink.stats().conditions_unchanged, 1U);
}

TEST_F(pod_writer_test, sink_forgets_a_patched_uid_once_its_eviction_is_over) {
  server_.set_fallback(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  ASSERT_TRUE(evict(sink));
  // The same UID evicted again (a new eviction after the pod came back from... nowhere: a
  // UID is never reused; this shows the memory was released) patches again.
  ASSERT_TRUE(evict(sink));
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH", "DELETE", "PATCH", "DELETE"}));
}

TEST_F(pod_writer_test, sink_remembers_a_bounded_number_of_patched_uids) {
  // Patches succeed, DELETEs fail: every eviction stays "patched, not deleted".
  server_.set_fallback(reply::with(403, status_body(403, "Forbidden", "no")));
  for (int i = 0; i < 4; ++i) {
    server_.push(reply::with(200, "{}").match("/status"));
  }
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr, {.remembered_patches = 2});
  for (const char* uid : {"uid-0", "uid-1", "uid-2"}) {
    ASSERT_TRUE(evict(sink, uid));
  }
  EXPECT_EQ(sink.stats().conditions_patched, 3U);
  // The newest two are remembered; the oldest was forgotten (one redundant patch at worst).
  const std::size_t before = server_.requests().size();
  for (const char* uid : {"uid-2", "uid-1", "uid-0"}) {
    ASSERT_TRUE(evict(sink, uid));
  }
  const auto reqs = server_.requests();
  std::vector<std::string> tail;
  for (std::size_t i = before; i < reqs.size(); ++i) {
    tail.push_back(reqs[i].method);
  }
  EXPECT_EQ(tail, (std::vector<std::string>{"DELETE", "DELETE", "PATCH", "DELETE"}));
}

// --- cancelled means no request (issue 11, item 6) ---

TEST_F(pod_writer_test, sink_sends_nothing_when_cancelled_while_waiting_for_a_connection) {
  // A pool of one connection, held by another request until the test releases it.
  auto opts = options();
  opts.max_connections = 1;
  client c(io_.get_executor(), config(), opts);
  server_.push(reply().hold("go").raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"));
  std::optional<result<response>> held;
  asio::co_spawn(
      io_, [&]() -> asio::awaitable<void> { held = co_await c.send(request(http_get, "/held")); },
      asio::detached);
  io_.restart();
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (server_.requests().empty() && std::chrono::steady_clock::now() < deadline) {
    io_.run_one_for(10ms);
  }
  ASSERT_EQ(server_.requests().size(), 1U);

  k8s_eviction_sink sink(io_.get_executor(), c, nullptr);
  std::atomic<bool> cancelled{false};
  std::optional<eviction_result> got;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, [&] { return cancelled.load(); }},
             [&](eviction_result r) { got = std::move(r); });
  io_.poll();  // the PATCH is now waiting for the connection
  EXPECT_FALSE(got);
  cancelled = true;  // the taint is removed meanwhile
  server_.release("go");
  run_until(got);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_EQ(got->error, "cancelled");
  ASSERT_TRUE(held && *held);
  EXPECT_EQ(methods(), (std::vector<std::string>{"GET"}));
  const auto st = sink.stats();
  EXPECT_EQ(st.cancelled, 1U);
  EXPECT_EQ(st.failures, 0U);
  EXPECT_EQ(st.condition_failures, 0U);
}

TEST_F(pod_writer_test, sink_sends_nothing_when_cancelled_while_rate_limited) {
  std::atomic<bool> cancelled{false};
  auto opts = options();
  opts.qps = 0.001;  // one request, then a 1000 s wait for the next token
  opts.burst = 1;
  // The cancel arrives during the rate limiter's wait (the seam sees the wait start).
  opts.delay = [&](k8sclient::wait_reason why, std::chrono::nanoseconds wanted) {
    if (why == k8sclient::wait_reason::rate_limit && wanted > std::chrono::nanoseconds::zero()) {
      cancelled = true;
    }
    return std::chrono::nanoseconds::zero();
  };
  client c(io_.get_executor(), config(), opts);
  server_.set_fallback(reply::with(200, "{}"));
  ASSERT_TRUE(run_sync(io_, c.send(request(http_get, "/first"))));  // takes the token

  for (const bool condition : {true, false}) {
    cancelled = false;
    k8s_eviction_sink sink(io_.get_executor(), c, nullptr, {.disruption_condition = condition});
    const auto got = evict(sink, "uid-1", [&] { return cancelled.load(); });
    ASSERT_TRUE(got);
    EXPECT_EQ(got->status, eviction_status::failed);
    EXPECT_EQ(got->error, "cancelled");
    EXPECT_EQ(sink.stats().cancelled, 1U);
    EXPECT_EQ(sink.stats().failures, 0U);
  }
  EXPECT_EQ(methods(), (std::vector<std::string>{"GET"}));
}

TEST_F(pod_writer_test, sink_stops_between_the_patch_and_the_delete_when_cancelled) {
  std::atomic<bool> cancelled{false};
  server_.push(reply().hold("patched").raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"));
  server_.set_fallback(reply::with(200, "{}"));
  // Counts the requests that went to the rate limiter: the DELETE must not even take a token.
  int limiter_calls = 0;
  auto opts = options();
  opts.delay = [&](k8sclient::wait_reason why, std::chrono::nanoseconds wanted) {
    limiter_calls += why == k8sclient::wait_reason::rate_limit ? 1 : 0;
    return wanted;
  };
  client c(io_.get_executor(), config(), opts);
  k8s_eviction_sink sink(io_.get_executor(), c, nullptr);
  std::optional<eviction_result> got;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, [&] { return cancelled.load(); }},
             [&](eviction_result r) { got = std::move(r); });
  std::thread canceller([&] {
    // Once the PATCH is on the wire (no longer cancellable), the eviction is cancelled.
    EXPECT_TRUE(server_.wait_for_requests(1, 20s));
    cancelled = true;
    server_.release("patched");
  });
  run_until(got);
  canceller.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_EQ(got->error, "cancelled");
  EXPECT_EQ(methods(), (std::vector<std::string>{"PATCH"}));
  EXPECT_EQ(limiter_calls, 1);
  EXPECT_EQ(sink.stats().failures, 0U);
}

// An eviction cancelled after its condition went on: the controller tells the sink
// (eviction_cancelled), which sets the condition it added to False. Nothing for a pod it did
// not patch, nor in dry-run.
TEST_F(pod_writer_test, sink_withdraws_the_condition_it_added_when_the_eviction_is_cancelled) {
  server_.set_fallback(reply::with(200, "{}"));
  std::atomic<bool> dry{false};
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr,
                         {.dry_run = [&dry] { return dry.load(); }});
  std::atomic<bool> cancelled{false};
  std::optional<eviction_result> got;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, [&] { return cancelled.load(); }},
             [&](eviction_result r) { got = std::move(r); });
  ASSERT_TRUE(k8sclient::testing::run_until(io_, [&] { return server_.requests().size() == 1; }));
  cancelled = true;  // after the PATCH: the DELETE is withdrawn
  run_until(got);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->error, "cancelled");
  sink.eviction_cancelled(pod_ref{"ns1", "web-0", "uid-1"});
  ASSERT_TRUE(k8sclient::testing::run_until(io_, [&] { return sink.stats().in_flight == 0; }));
  ASSERT_EQ(methods(), (std::vector<std::string>{"PATCH", "PATCH"}));
  const auto req = server_.requests()[1];
  EXPECT_EQ(req.target, "/api/v1/namespaces/ns1/pods/web-0/status");
  const json body = json::parse(req.body);
  EXPECT_EQ(body["metadata"]["uid"], "uid-1");
  const json& cond = body["status"]["conditions"][0];
  EXPECT_EQ(cond["type"], "DisruptionTarget");
  EXPECT_EQ(cond["status"], "False");
  EXPECT_TRUE(cond["reason"].is_null()) << "removed by the merge";
  EXPECT_TRUE(cond["message"].is_null());
  EXPECT_TRUE(cond["lastTransitionTime"].is_string());
  EXPECT_EQ(sink.stats().conditions_withdrawn, 1U);
  // Once only: the second call finds nothing of ours to withdraw.
  sink.eviction_cancelled(pod_ref{"ns1", "web-0", "uid-1"});
  // Never patched by this sink: nothing sent.
  sink.eviction_cancelled(pod_ref{"ns1", "web-1", "uid-2"});
  dry = true;
  sink.eviction_cancelled(pod_ref{"ns1", "web-0", "uid-1"});
  ASSERT_TRUE(k8sclient::testing::run_until(io_, [&] { return sink.stats().in_flight == 0; }));
  EXPECT_EQ(server_.requests().size(), 2U);
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

// The daemon's shutdown waits for the evictions in flight with wait_idle(): it must wake as
// the last one completes, not at the end of its budget (nor at the next tick of a poll).
TEST_F(pod_writer_test, sink_wait_idle_wakes_when_the_last_eviction_completes) {
  server_.set_fallback(reply::with(200, "{}"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  EXPECT_TRUE(sink.wait_idle(0ms));
  std::optional<eviction_result> got;
  sink.evict({pod_ref{"ns1", "web-0", "uid-1"}, {}},
             [&](eviction_result r) { got = std::move(r); });
  EXPECT_FALSE(sink.wait_idle(0ms));  // in flight until the executor runs it
  // A budget longer than the bound below: only a wake-up on completion makes it ready in time.
  auto waited = std::async(std::launch::async, [&sink] { return sink.wait_idle(120s); });
  run_until(got);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  ASSERT_EQ(waited.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(waited.get());
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

// --- Evict mode: the Eviction API ---

// The /api/v1 discovery document of a 1.20 API server, cut to a few resources.
std::string discovery_with(const std::string& version) {
  return json{{"kind", "APIResourceList"},
              {"groupVersion", "v1"},
              {"resources",
               json::array({{{"name", "pods"}, {"namespaced", true}, {"kind", "Pod"}},
                            {{"name", "pods/eviction"},
                             {"namespaced", true},
                             {"group", "policy"},
                             {"version", version},
                             {"kind", "Eviction"},
                             {"verbs", json::array({"create"})}},
                            {{"name", "pods/status"}, {"namespaced", true}, {"kind", "Pod"}}})}}
      .dump();
}

TEST(pod_writer_format, evict_request_is_an_eviction_with_the_uid_precondition) {
  const request req = make_evict_pod_request("ns1", "web-0", "uid-1", "policy/v1beta1");
  EXPECT_EQ(req.method, boost::beast::http::verb::post);
  EXPECT_EQ(req.target, std::string(pod_path) + "/eviction");
  EXPECT_FALSE(req.idempotent) << "a resent eviction may be refused where the first passed";
  EXPECT_EQ(json::parse(req.body), json::parse(R"({"apiVersion":"policy/v1beta1","kind":"Eviction",
      "metadata":{"name":"web-0","namespace":"ns1"},
      "deleteOptions":{"preconditions":{"uid":"uid-1"}}})"));
}

TEST(pod_writer_format, the_eviction_version_comes_from_discovery) {
  EXPECT_EQ(eviction_version_in_discovery(discovery_with("v1beta1")), "policy/v1beta1");
  EXPECT_EQ(eviction_version_in_discovery(discovery_with("v1")), "policy/v1");
  EXPECT_EQ(eviction_version_in_discovery(R"({"resources":[{"name":"pods"}]})"), std::nullopt);
  EXPECT_EQ(eviction_version_in_discovery("not json"), std::nullopt);
  EXPECT_EQ(eviction_version_in_discovery(R"({"resources":{}})"), std::nullopt);
  EXPECT_EQ(eviction_version_in_discovery(R"({"resources":[{"name":"pods/eviction"}]})"),
            std::nullopt);
}

class evict_sink_test : public pod_writer_test {
protected:
  std::optional<eviction_result> evict_api(k8s_eviction_sink& sink,
                                           const std::string& uid = "uid-1") {
    std::optional<eviction_result> got;
    controller::eviction_request req{pod_ref{"ns1", "web-0", uid}, {}};
    req.method = controller::eviction_method::evict;
    sink.evict(std::move(req), [&](eviction_result r) { got = std::move(r); });
    run_until(got);
    EXPECT_TRUE(got) << "the eviction did not end";
    return got;
  }
};

TEST_F(evict_sink_test, discovers_once_then_posts_the_eviction_without_a_condition) {
  server_.push(reply::with(200, discovery_with("v1beta1")).match("/api/v1"));
  server_.push(reply::with(201, R"({"kind":"Status","status":"Success"})").match("/eviction"));
  server_.push(reply::with(201, R"({"kind":"Status","status":"Success"})").match("/eviction"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  auto got = evict_api(sink);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  got = evict_api(sink);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3U) << "one discovery, two evictions, no condition patch";
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].target, "/api/v1");
  EXPECT_EQ(reqs[1].method, "POST");
  EXPECT_EQ(reqs[1].target, std::string(pod_path) + "/eviction");
  EXPECT_EQ(json::parse(reqs[1].body)["apiVersion"], "policy/v1beta1");
  EXPECT_EQ(sink.stats().evictions, 2U);
  EXPECT_EQ(sink.stats().deletions, 0U);
}

TEST_F(evict_sink_test, a_429_is_blocked_with_the_servers_message) {
  server_.push(reply::with(200, discovery_with("v1")).match("/api/v1"));
  server_.push(reply::with(429, status_body(429, "TooManyRequests",
                                            "Cannot evict pod as it would violate the pod's "
                                            "disruption budget."))
                   .match("/eviction"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  const auto got = evict_api(sink);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::blocked);
  EXPECT_EQ(got->error, "Cannot evict pod as it would violate the pod's disruption budget.");
  EXPECT_EQ(sink.stats().blocked, 1U);
  EXPECT_EQ(sink.stats().failures, 0U);
}

TEST_F(evict_sink_test, gone_pods_and_other_errors) {
  server_.push(reply::with(200, discovery_with("v1")).match("/api/v1"));
  server_.push(reply::with(404, status_body(404, "NotFound", "pods \"web-0\" not found"))
                   .match("/eviction"));
  server_.push(reply::with(409, status_body(409, "Conflict",
                                            "Precondition failed: UID in precondition: uid-1, UID "
                                            "in object meta: x"))
                   .match("/eviction"));
  // A conflict on the budget's update, not about the pod: retried.
  server_.push(reply::with(409, status_body(409, "Conflict",
                                            "Operation cannot be fulfilled on "
                                            "poddisruptionbudgets.policy \"pdb\": the object has "
                                            "been modified"))
                   .match("/eviction"));
  server_.push(reply::with(500, status_body(500, "InternalError",
                                            "This pod has more than one PodDisruptionBudget, which "
                                            "the eviction subresource does not support."))
                   .match("/eviction"));
  server_.push(reply::with(403, status_body(403, "Forbidden", "no create on pods/eviction"))
                   .match("/eviction"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  EXPECT_EQ(evict_api(sink)->status, eviction_status::gone);
  EXPECT_EQ(evict_api(sink)->status, eviction_status::gone);
  auto got = evict_api(sink);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_NE(got->error.find("the object has been modified"), std::string::npos) << got->error;
  got = evict_api(sink);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_NE(got->error.find("more than one PodDisruptionBudget"), std::string::npos) << got->error;
  got = evict_api(sink);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_NE(got->error.find("403"), std::string::npos) << got->error;
  EXPECT_EQ(sink.stats().already_gone, 2U);
  EXPECT_EQ(sink.stats().failures, 3U);
}

TEST_F(evict_sink_test, a_failed_discovery_fails_the_attempt_and_is_tried_again) {
  server_.push(
      reply::with(403, status_body(403, "Forbidden", "no get on /api/v1")).match("/api/v1"));
  server_.push(reply::with(200, R"({"resources":[]})").match("/api/v1"));
  server_.push(reply::with(200, discovery_with("v1beta1")).match("/api/v1"));
  server_.push(reply::with(201, "{}").match("/eviction"));
  k8s_eviction_sink sink(io_.get_executor(), client_, nullptr);
  auto got = evict_api(sink);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_NE(got->error.find("403"), std::string::npos) << got->error;
  got = evict_api(sink);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_NE(got->error.find("does not list pods/eviction"), std::string::npos) << got->error;
  EXPECT_EQ(evict_api(sink)->status, eviction_status::deleted);
}

// --- --fresh-node-check (issue 33 item 4) ---

controller::taint no_execute(std::string key, std::string value = {}) {
  return controller::taint{std::move(key), std::move(value), controller::taint_effect::no_execute};
}

/// A Node as the API server returns it, with `taints` ([{"key",...}] JSON).
std::string node_body(const std::string& name, const std::string& taints) {
  return R"({"kind":"Node","apiVersion":"v1","metadata":{"name":")" + name +
         R"(","uid":"node-uid","resourceVersion":"7"},"spec":{"taints":)" + taints + "}}";
}

class fresh_node_test : public pod_writer_test {
protected:
  k8s_eviction_sink make_sink() {
    return k8s_eviction_sink(io_.get_executor(), client_, nullptr,
                             eviction_sink_options{.fresh_node_check = true, .clock = &clock_});
  }

  static controller::eviction_request request_for(const std::string& name,
                                                  std::vector<controller::taint> causes = {
                                                      no_execute("k", "v")}) {
    controller::eviction_request req{pod_ref{"ns1", name, "uid-" + name}, {}};
    req.node = "n1";
    req.causes = std::move(causes);
    return req;
  }

  /// The sink, and a server whose answer to the node's GET (n1 with k=v:NoExecute) waits for
  /// release("node"); every other request gets 200.
  k8s_eviction_sink sink_with_held_read() {
    server_.push(
        reply::with(200, node_body("n1", R"([{"key":"k","value":"v","effect":"NoExecute"}])"))
            .hold("node")
            .match("/api/v1/nodes/"));
    server_.set_fallback(reply::with(200, "{}"));
    return make_sink();
  }

  std::vector<std::string> node_gets() const {
    std::vector<std::string> out;
    for (const auto& r : server_.requests()) {
      if (r.target.starts_with("/api/v1/nodes/")) {
        out.push_back(r.method + " " + r.target);
      }
    }
    return out;
  }

  test::manual_clock clock_;
};

TEST_F(fresh_node_test, a_node_that_still_carries_the_taint_lets_the_delete_go) {
  server_.push(reply::with(200, node_body("n1", R"([{"key":"other","effect":"NoSchedule"},
                               {"key":"k","value":"v","effect":"NoExecute"}])")));
  server_.set_fallback(reply::with(200, "{}"));
  auto sink = make_sink();
  const auto got = evict(sink, request_for("web-0"));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  EXPECT_EQ(methods(), (std::vector<std::string>{"GET", "PATCH", "DELETE"}));
  EXPECT_EQ(server_.requests()[0].target, "/api/v1/nodes/n1");
  const auto st = sink.stats();
  EXPECT_EQ(st.fresh_node_checks.at("taint_present"), 1U);
  EXPECT_EQ(st.fresh_node_checks.at("taint_gone"), 0U);
  EXPECT_EQ(st.fresh_node_reads, 1U);
  EXPECT_EQ(st.deletions, 1U);
}

TEST_F(fresh_node_test, a_node_without_the_taint_gets_no_write_and_the_attempt_is_stale) {
  // The same key with another value, or another effect, is not the taint that caused it.
  server_.push(reply::with(200, node_body("n1", R"([{"key":"k","value":"w","effect":"NoExecute"},
                                                    {"key":"k","value":"v","effect":"NoSchedule"}])")));
  server_.set_fallback(reply::with(200, "{}"));
  auto sink = make_sink();
  const auto got = evict(sink, request_for("web-0", {no_execute("k", "v"), no_execute("a")}));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::stale);
  EXPECT_NE(got->error.find("k=v:NoExecute, a:NoExecute"), std::string::npos) << got->error;
  EXPECT_EQ(methods(), (std::vector<std::string>{"GET"})) << "no condition, no DELETE";
  const auto st = sink.stats();
  EXPECT_EQ(st.fresh_node_checks.at("taint_gone"), 1U);
  EXPECT_EQ(st.failures, 0U) << "a stale cache is not a failure";
  EXPECT_EQ(st.deletions, 0U);
}

TEST_F(fresh_node_test, the_retry_after_the_window_reads_again_and_deletes) {
  server_.push(reply::with(200, node_body("n1", "[]")).match("/api/v1/nodes/"));
  server_.push(
      reply::with(200, node_body("n1", R"([{"key":"k","value":"v","effect":"NoExecute"}])"))
          .match("/api/v1/nodes/"));
  server_.set_fallback(reply::with(200, "{}"));
  auto sink = make_sink();
  EXPECT_EQ(evict(sink, request_for("web-0"))->status, eviction_status::stale);
  EXPECT_EQ(evict(sink, request_for("web-0"))->status, eviction_status::stale)
      << "within the window the answer is reused";
  EXPECT_EQ(node_gets().size(), 1U);
  clock_.advance(1s);
  EXPECT_EQ(evict(sink, request_for("web-0"))->status, eviction_status::deleted);
  EXPECT_EQ(node_gets().size(), 2U);
  EXPECT_EQ(sink.stats().fresh_node_reads, 2U);
  EXPECT_EQ(sink.stats().fresh_node_checks.at("taint_gone"), 2U);
  EXPECT_EQ(sink.stats().fresh_node_checks.at("taint_present"), 1U);
}

TEST_F(fresh_node_test, a_failed_read_goes_on_as_without_the_check) {
  for (int i = 0; i < 3; ++i) {  // enough for the client's retries, if it makes any
    server_.push(
        reply::with(500, status_body(500, "InternalError", "etcd is sad")).match("/api/v1/nodes/"));
  }
  server_.set_fallback(reply::with(200, "{}"));
  auto sink = make_sink();
  const auto got = evict(sink, request_for("web-0"));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted);
  auto sent = methods();
  ASSERT_GE(sent.size(), 3U);
  EXPECT_EQ(sent.front(), "GET");
  EXPECT_EQ(std::vector<std::string>(sent.end() - 2, sent.end()),
            (std::vector<std::string>{"PATCH", "DELETE"}));
  EXPECT_EQ(sink.stats().fresh_node_checks.at("read_failed"), 1U);
  EXPECT_EQ(sink.stats().fresh_node_reads, 1U) << "one read, whatever the client retried";
}

TEST_F(fresh_node_test, an_undecodable_node_counts_as_a_failed_read) {
  server_.push(reply::with(200, R"({"metadata":{"uid":"u"}})").match("/api/v1/nodes/"));
  server_.set_fallback(reply::with(200, "{}"));
  auto sink = make_sink();
  EXPECT_EQ(evict(sink, request_for("web-0"))->status, eviction_status::deleted);
  EXPECT_EQ(sink.stats().fresh_node_checks.at("read_failed"), 1U);
}

TEST_F(fresh_node_test, a_node_that_is_gone_lets_the_delete_go) {
  server_.push(reply::with(404, status_body(404, "NotFound", "nodes \"n1\" not found"))
                   .match("/api/v1/nodes/"));
  server_.set_fallback(reply::with(200, "{}"));
  auto sink = make_sink();
  EXPECT_EQ(evict(sink, request_for("web-0"))->status, eviction_status::deleted);
  EXPECT_EQ(sink.stats().fresh_node_checks.at("node_gone"), 1U);
}

TEST_F(fresh_node_test, the_pods_of_one_node_share_one_read) {
  // The GET's answer is held until every eviction has asked: they all wait for the one read.
  auto sink = sink_with_held_read();
  constexpr int pods = 20;
  std::vector<std::optional<eviction_result>> got(pods);
  for (int i = 0; i < pods; ++i) {
    sink.evict(request_for("web-" + std::to_string(i)),
               [&got, i](eviction_result r) { got[static_cast<std::size_t>(i)] = std::move(r); });
  }
  io_.restart();
  for (int i = 0; i < 50; ++i) {
    io_.poll();  // every eviction starts and reaches the read
  }
  server_.release("node");
  run_until(got.back());
  for (const auto& g : got) {
    run_until(g);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->status, eviction_status::deleted);
  }
  EXPECT_EQ(node_gets(), (std::vector<std::string>{"GET /api/v1/nodes/n1"}));
  EXPECT_EQ(sink.stats().fresh_node_reads, 1U);
  EXPECT_EQ(sink.stats().fresh_node_checks.at("taint_present"), static_cast<std::uint64_t>(pods));
  EXPECT_EQ(sink.stats().deletions, static_cast<std::uint64_t>(pods));
}

TEST_F(fresh_node_test, nothing_to_confirm_without_causes_or_node_and_off_by_default) {
  server_.set_fallback(reply::with(200, "{}"));
  auto sink = make_sink();
  EXPECT_EQ(evict(sink, request_for("web-0", {}))->status, eviction_status::deleted);
  auto no_node = request_for("web-1");
  no_node.node.clear();
  EXPECT_EQ(evict(sink, std::move(no_node))->status, eviction_status::deleted);
  k8s_eviction_sink plain(io_.get_executor(), client_, nullptr);
  EXPECT_EQ(evict(plain, request_for("web-2"))->status, eviction_status::deleted);
  EXPECT_TRUE(node_gets().empty());
  EXPECT_EQ(plain.stats().fresh_node_checks.at("taint_present"), 0U) << "exported at 0";
}

TEST_F(fresh_node_test, evict_mode_is_checked_too) {
  server_.push(reply::with(200, node_body("n1", "[]")).match("/api/v1/nodes/"));
  auto sink = make_sink();
  auto req = request_for("web-0");
  req.method = controller::eviction_method::evict;
  EXPECT_EQ(evict(sink, std::move(req))->status, eviction_status::stale);
  EXPECT_EQ(methods(), (std::vector<std::string>{"GET"})) << "no discovery, no Eviction";
}

TEST_F(fresh_node_test, cancelled_while_the_read_is_in_flight_sends_nothing_more) {
  auto sink = sink_with_held_read();
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto req = request_for("web-0");
  req.cancelled = [cancelled] { return cancelled->load(); };
  std::optional<eviction_result> got;
  sink.evict(std::move(req), [&](eviction_result r) { got = std::move(r); });
  // Drive the client until the server holds the node's GET: one poll() is not enough on a busy
  // machine (the connection may not be up yet, and a cancel before the GET sends nothing at all).
  io_.restart();
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (node_gets().empty() && std::chrono::steady_clock::now() < deadline) {
    io_.run_one_for(10ms);
  }
  ASSERT_EQ(node_gets().size(), 1U) << "the node's GET never reached the server";
  cancelled->store(true);
  server_.release("node");
  run_until(got);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::failed);
  EXPECT_EQ(got->error, "cancelled");
  EXPECT_EQ(methods(), (std::vector<std::string>{"GET"}));
}

}  // namespace
}  // namespace tec::writers

#include "tec/k8sclient/leader_election.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/manual_clock.hpp"

namespace tec::k8sclient {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::fake_http_server;
using testing::reply;

using testing::run_sync;

constexpr const char* lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tec";
constexpr const char* leases_path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
constexpr const char* me = "host-a_0123456789abcdef";

// 2024-05-01T12:00:00.123456Z
const std::chrono::system_clock::time_point lease_wall_start{
    std::chrono::microseconds{1714564800123456}};

std::string lease_body(const std::string& holder, int duration, const std::string& renew,
                       int transitions, const std::string& rv) {
  json lease = {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata", {{"name", "tec"}, {"namespace", "kube-system"}, {"resourceVersion", rv}}},
      {"spec",
       {{"holderIdentity", holder},
        {"leaseDurationSeconds", duration},
        {"acquireTime", "2024-05-01T11:00:00.000000Z"},
        {"renewTime", renew},
        {"leaseTransitions", transitions}}}};
  return lease.dump();
}

class leader_election_test : public ::testing::Test {
protected:
  leader_election_test() : client_(io_.get_executor(), config(), options()) {}

  rest_config config() const { return testing::plain_config(server_); }

  static client_options options() { return testing::quick_options(1); }

  static leader_election_config election_config() {
    leader_election_config cfg;
    cfg.lease_namespace = "kube-system";
    cfg.lease_name = "tec";
    cfg.identity = me;
    return cfg;
  }

  std::shared_ptr<test::manual_clock> manual() { return clock_; }

  bool step(leader_elector& e) {
    auto r = run_sync(io_, e.try_acquire_or_renew());
    EXPECT_TRUE(r) << "step did not complete";
    return r.value_or(false);
  }

  json request_body(std::size_t i) const {
    const auto reqs = server_.requests();
    if (i >= reqs.size()) {
      ADD_FAILURE() << "no request " << i;
      return {};
    }
    return json::parse(reqs[i].body);
  }

  fake_http_server server_;
  asio::io_context io_;
  client client_;
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>(
      std::chrono::steady_clock::time_point{std::chrono::hours{1000}}, lease_wall_start);
};

TEST(leader_identity, is_hostname_underscore_random) {
  const std::string a = default_identity();
  const std::string b = default_identity();
  EXPECT_NE(a, b);
  const auto sep = a.rfind('_');
  ASSERT_NE(sep, std::string::npos);
  EXPECT_EQ(a.size() - sep - 1, 16U);
}

TEST_F(leader_election_test, creates_the_lease_when_there_is_none) {
  server_.push(reply::with(404, R"({"kind":"Status","code":404})"));
  server_.push(reply::with(201, lease_body(me, 15, "x", 0, "1")));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  EXPECT_FALSE(e.is_leader());
  EXPECT_FALSE(e.last_renew_time());
  EXPECT_TRUE(step(e));
  EXPECT_TRUE(e.is_leader());
  EXPECT_EQ(e.last_renew_time(), clock_->now());
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].target, lease_path);
  EXPECT_EQ(reqs[1].method, "POST");
  EXPECT_EQ(reqs[1].target, leases_path);
  const json body = request_body(1);
  EXPECT_EQ(body["kind"], "Lease");
  EXPECT_EQ(body["metadata"]["name"], "tec");
  EXPECT_EQ(body["spec"], json::parse(R"({
    "holderIdentity": "host-a_0123456789abcdef", "leaseDurationSeconds": 15,
    "acquireTime": "2024-05-01T12:00:00.123456Z", "renewTime": "2024-05-01T12:00:00.123456Z",
    "leaseTransitions": 0})"));
}

TEST_F(leader_election_test, waits_out_a_fresh_holder_on_the_local_clock_then_takes_over) {
  // The remote renewTime is far in the past: it must not matter, only what we observed.
  const std::string held = lease_body("other", 15, "2000-01-01T00:00:00.000000Z", 3, "10");
  server_.push(reply::with(200, held));
  server_.push(reply::with(200, held));
  server_.push(reply::with(200, held));
  server_.push(reply::with(200, lease_body(me, 15, "y", 4, "11")));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());

  EXPECT_FALSE(step(e));
  EXPECT_EQ(e.observed_record().holder_identity, "other");
  clock_->advance(14s);
  EXPECT_FALSE(step(e));
  EXPECT_EQ(server_.requests().size(), 2U);  // GETs only.
  clock_->advance(1s);
  EXPECT_TRUE(step(e));
  EXPECT_TRUE(e.is_leader());

  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 4U);
  EXPECT_EQ(reqs[3].method, "PUT");
  EXPECT_EQ(reqs[3].target, lease_path);
  const json put = request_body(3);
  EXPECT_EQ(put["metadata"]["resourceVersion"], "10");
  EXPECT_EQ(put["spec"]["holderIdentity"], me);
  EXPECT_EQ(put["spec"]["leaseTransitions"], 4);
  EXPECT_EQ(put["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(put["spec"]["acquireTime"], "2024-05-01T12:00:15.123456Z");
  EXPECT_EQ(put["spec"]["renewTime"], "2024-05-01T12:00:15.123456Z");
}

TEST_F(leader_election_test, a_holder_that_keeps_renewing_is_never_taken_over) {
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  for (int i = 0; i < 5; ++i) {
    server_.push(reply::with(
        200, lease_body("other", 15, "2024-05-01T12:00:0" + std::to_string(i) + ".000000Z", 0,
                        std::to_string(20 + i))));
    EXPECT_FALSE(step(e)) << i;
    clock_->advance(10s);
  }
  for (const auto& r : server_.requests()) {
    EXPECT_EQ(r.method, "GET");
  }
}

TEST_F(leader_election_test, the_records_own_lease_duration_counts) {
  // A released lease (leaseDurationSeconds 1, holder kept by an old client) expires fast.
  const std::string held = lease_body("other", 1, "r", 0, "5");
  server_.push(reply::with(200, held));
  server_.push(reply::with(200, held));
  server_.push(reply::with(200, lease_body(me, 15, "r2", 1, "6")));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  EXPECT_FALSE(step(e));
  clock_->advance(1s);
  EXPECT_TRUE(step(e));
}

TEST_F(leader_election_test, an_empty_holder_is_taken_at_once_and_a_409_loses_the_race) {
  server_.push(reply::with(200, lease_body("", 1, "r", 7, "30")));
  server_.push(reply::with(409, R"({"kind":"Status","reason":"Conflict","code":409})"));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  EXPECT_FALSE(step(e));
  EXPECT_FALSE(e.is_leader());
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2U);
  EXPECT_EQ(reqs[1].method, "PUT");
  EXPECT_EQ(request_body(1)["spec"]["leaseTransitions"], 8);
}

TEST_F(leader_election_test, renewing_keeps_acquire_time_and_transitions) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, "{}"));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  ASSERT_TRUE(step(e));
  const json created = request_body(1)["spec"];
  json lease = request_body(1);
  lease["metadata"]["resourceVersion"] = "41";
  server_.push(reply::with(200, lease.dump()));
  server_.push(reply::with(200, "{}"));
  clock_->advance(2s);
  ASSERT_TRUE(step(e));
  EXPECT_EQ(e.last_renew_time(), clock_->now());
  const json put = request_body(3);
  EXPECT_EQ(put["metadata"]["resourceVersion"], "41");
  EXPECT_EQ(put["spec"]["acquireTime"], created["acquireTime"]);
  EXPECT_EQ(put["spec"]["leaseTransitions"], created["leaseTransitions"]);
  EXPECT_EQ(put["spec"]["renewTime"], "2024-05-01T12:00:02.123456Z");
}

TEST_F(leader_election_test, another_holder_seen_while_leading_ends_leadership) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, "{}"));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  ASSERT_TRUE(step(e));
  server_.push(reply::with(200, lease_body("other", 15, "z", 1, "50")));
  EXPECT_FALSE(step(e));
  EXPECT_FALSE(e.is_leader());
}

TEST_F(leader_election_test, release_clears_the_holder_and_shortens_the_lease) {
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  EXPECT_EQ(run_sync(io_, e.release()), std::optional<bool>(true));
  EXPECT_TRUE(server_.requests().empty());  // Not ours: nothing to release.

  server_.push(reply::with(200, lease_body("", 1, "r", 2, "60")));
  server_.push(reply::with(200, lease_body(me, 15, "r", 3, "61")));
  ASSERT_TRUE(step(e));
  server_.push(reply::with(200, lease_body("", 1, "r", 3, "62")));
  clock_->advance(5s);
  EXPECT_EQ(run_sync(io_, e.release()), std::optional<bool>(true));
  EXPECT_FALSE(e.is_leader());
  const json put = request_body(2);
  EXPECT_EQ(server_.requests()[2].method, "PUT");
  EXPECT_EQ(put["metadata"]["resourceVersion"], "61");  // From the last write's answer.
  EXPECT_EQ(put["spec"]["holderIdentity"], "");
  EXPECT_EQ(put["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(put["spec"]["leaseTransitions"], 3);
  EXPECT_EQ(put["spec"]["renewTime"], "2024-05-01T12:00:05.123456Z");
}

TEST_F(leader_election_test, bad_answers_are_failed_attempts) {
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  server_.push(reply::with(200, "{not json"));
  EXPECT_FALSE(step(e));
  server_.push(reply::with(200, R"({"spec":{"holderIdentity":5}})"));
  EXPECT_FALSE(step(e));
  server_.push(reply::with(200, R"([1,2,3])"));
  EXPECT_FALSE(step(e));
  server_.push(reply::with(403, R"({"kind":"Status","message":"leases is forbidden"})"));
  EXPECT_FALSE(step(e));
  server_.push(reply::close_now());
  server_.push(reply::close_now());
  EXPECT_FALSE(step(e));
  EXPECT_FALSE(e.is_leader());
}

TEST_F(leader_election_test, health_fails_when_renewal_is_overdue) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, "{}"));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  EXPECT_TRUE(e.healthy(0ms));  // Not leading: nothing to be late for.
  ASSERT_TRUE(step(e));
  clock_->advance(15s);
  EXPECT_TRUE(e.healthy(5s));
  clock_->advance(6s);
  EXPECT_FALSE(e.healthy(5s));
}

// leaseDurationSeconds and leaseTransitions are int32 in the API. Beyond that range they were
// undefined behaviour here (seconds -> nanoseconds overflowed; INT64_MAX wrapped to "expired
// one second ago", so a lease held "forever" was taken over at once).
std::string lease_with_numbers(const std::string& holder, const std::string& duration,
                               const std::string& transitions, const std::string& rv) {
  return R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"tec",)"
         R"("namespace":"kube-system","resourceVersion":")" +
         rv + R"("},"spec":{"holderIdentity":")" + holder + R"(","leaseDurationSeconds":)" +
         duration + R"(,"renewTime":"2024-05-01T11:00:00.000000Z","leaseTransitions":)" +
         transitions + "}}";
}

TEST_F(leader_election_test, lease_numbers_beyond_int32_are_clamped_on_read) {
  constexpr std::int64_t int32_max = 2147483647;
  const std::string held =
      lease_with_numbers("other", "9223372036854775807", "9223372036854775807", "70");
  server_.push(reply::with(200, held));
  server_.push(reply::with(200, held));
  server_.push(reply::with(200, held));
  server_.push(reply::with(200, "{}"));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  EXPECT_FALSE(step(e));
  EXPECT_EQ(e.observed_record().lease_duration_seconds, int32_max);
  EXPECT_EQ(e.observed_record().lease_transitions, int32_max);
  clock_->advance(std::chrono::seconds{int32_max - 1});  // 68 years: still held
  EXPECT_FALSE(step(e));
  clock_->advance(1s);
  EXPECT_TRUE(step(e));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 4U);
  EXPECT_EQ(reqs[3].method, "PUT");
  EXPECT_EQ(request_body(3)["spec"]["leaseTransitions"], int32_max);  // saturated, not +1
  EXPECT_EQ(request_body(3)["spec"]["leaseDurationSeconds"], 15);
}

TEST_F(leader_election_test, lease_numbers_below_int32_or_beyond_int64_are_clamped_too) {
  // Beyond int64 (an unsigned JSON number): the int32 maximum, not a wrapped negative value.
  server_.push(reply::with(200, lease_with_numbers("other", "18446744073709551615", "0", "80")));
  leader_elector e(io_.get_executor(), client_, election_config(), manual());
  EXPECT_FALSE(step(e));
  EXPECT_EQ(e.observed_record().lease_duration_seconds, 2147483647);
  // Far below int32: expired long ago, taken at once.
  server_.push(reply::with(
      200, lease_with_numbers("third", "-9223372036854775808", "-9223372036854775808", "81")));
  server_.push(reply::with(200, "{}"));
  leader_elector f(io_.get_executor(), client_, election_config(), manual());
  EXPECT_TRUE(step(f));
  EXPECT_EQ(request_body(2)["spec"]["leaseTransitions"], 0);  // never negative
}

TEST_F(leader_election_test, a_huge_configured_duration_is_written_as_the_int32_maximum) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, "{}"));
  leader_election_config cfg = election_config();
  cfg.lease_duration = std::chrono::milliseconds::max();
  cfg.renew_deadline = std::chrono::milliseconds::max();
  cfg.retry_period = std::chrono::milliseconds::max();
  leader_elector e(io_.get_executor(), client_, cfg, manual());
  ASSERT_TRUE(step(e));
  EXPECT_EQ(request_body(1)["spec"]["leaseDurationSeconds"], 2147483647);
  clock_->advance(std::chrono::hours{24 * 365 * 60});
  EXPECT_TRUE(e.healthy(std::chrono::milliseconds::max()));
  clock_->advance(std::chrono::hours{24 * 365 * 9});
  EXPECT_FALSE(e.healthy(5s));
}

// --- run(): the loops on real time. The server's script decides the outcome; every deadline
// that must not pass is an hour away, so no test depends on how fast the machine is. ---

class leader_run_test : public leader_election_test {
protected:
  /// Renews every 20-44 ms; the renew deadline is an hour away.
  static leader_election_config fast_config() {
    leader_election_config cfg = election_config();
    cfg.lease_duration = 2h;
    cfg.renew_deadline = 1h;
    cfg.retry_period = 20ms;
    return cfg;
  }
};

TEST_F(leader_run_test, acquires_renews_and_releases_on_stop) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, lease_body(me, 1, "r", 0, "1")));
  server_.set_fallback(reply::with(200, lease_body(me, 1, "r", 0, "2")));  // Accepts all.
  int started = 0;
  int stopped = 0;
  leader_election_config cfg = fast_config();
  leader_elector* self = nullptr;
  cfg.on_started_leading = [&] { ++started; };
  cfg.on_stopped_leading = [&] { ++stopped; };
  leader_elector e(io_.get_executor(), client_, cfg);
  self = &e;
  // Stop once a few renewals went through.
  std::thread stopper([&] {
    EXPECT_TRUE(server_.wait_for_requests(8, 30s));
    self->stop();
  });
  auto r = run_sync(io_, e.run());
  stopper.join();
  ASSERT_TRUE(r);
  EXPECT_TRUE(*r);
  EXPECT_EQ(started, 1);
  EXPECT_EQ(stopped, 1);
  EXPECT_FALSE(e.is_leader());
  const auto reqs = server_.requests();
  ASSERT_GE(reqs.size(), 8U);
  EXPECT_EQ(reqs.back().method, "PUT");
  EXPECT_EQ(json::parse(reqs.back().body)["spec"]["holderIdentity"], "");
}

TEST_F(leader_run_test, huge_durations_do_not_overflow_the_renew_deadline) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, lease_body(me, 1, "r", 0, "1")));
  server_.set_fallback(reply::with(200, lease_body(me, 1, "r", 0, "2")));  // Accepts all.
  leader_election_config cfg = fast_config();
  cfg.lease_duration = std::chrono::milliseconds::max();
  cfg.renew_deadline = std::chrono::milliseconds::max();  // as from a flag of 2562047h
  leader_elector e(io_.get_executor(), client_, cfg);
  std::thread stopper([&] {
    EXPECT_TRUE(server_.wait_for_requests(6, 30s));
    e.stop();
  });
  auto r = run_sync(io_, e.run());
  stopper.join();
  ASSERT_TRUE(r);
  EXPECT_TRUE(*r) << "leadership was lost: the renew deadline overflowed";
}

TEST_F(leader_run_test, loses_leadership_when_renewals_keep_failing) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, "{}"));
  server_.set_fallback(reply::with(403, R"({"kind":"Status","message":"forbidden"})"));
  int stopped = 0;
  leader_election_config cfg = fast_config();
  cfg.renew_deadline = 300ms;  // the outcome: it passes (run_sync bounds the wait)
  cfg.on_stopped_leading = [&] { ++stopped; };
  leader_elector e(io_.get_executor(), client_, cfg);
  auto r = run_sync(io_, e.run());
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  EXPECT_EQ(stopped, 1);
  EXPECT_FALSE(e.is_leader());
  EXPECT_NE(server_.requests().back().method, "PUT");  // No release of a lease we lost.
}

TEST_F(leader_run_test, loses_leadership_at_once_when_the_lease_has_another_holder) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, "{}"));
  server_.set_fallback(reply::with(200, lease_body("other", 15, "r", 1, "9")));
  int stopped = 0;
  leader_election_config cfg = fast_config();  // the renew deadline is an hour away
  cfg.on_stopped_leading = [&] { ++stopped; };
  leader_elector e(io_.get_executor(), client_, cfg);
  auto r = run_sync(io_, e.run());
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  EXPECT_EQ(stopped, 1);
}

TEST_F(leader_run_test, a_hung_renewal_still_loses_leadership_at_the_deadline) {
  server_.push(reply::with(404, "{}"));
  server_.push(reply::with(201, "{}"));
  server_.set_fallback(reply::no_response());
  // The renewal hangs for an hour (the request timeout): only the watchdog can end
  // leadership within run_sync's bound, while the request is still in flight.
  auto opts = options();
  opts.request_timeout = 1h;
  client patient(io_.get_executor(), config(), opts);
  int stopped = 0;
  leader_election_config cfg = fast_config();
  cfg.renew_deadline = 300ms;
  cfg.on_stopped_leading = [&] { ++stopped; };
  leader_elector e(io_.get_executor(), patient, cfg);
  auto r = run_sync(io_, e.run());
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  EXPECT_EQ(stopped, 1);
  patient.shutdown();
}

}  // namespace
}  // namespace tec::k8sclient

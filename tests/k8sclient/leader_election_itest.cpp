// Leader election against the real local kube-apiserver (KUBECONFIG from ctest's cluster
// fixture): two candidates on one Lease, with short periods so the tests take seconds.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

#include "k8sclient/support/run_sync.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/leader_election.hpp"

namespace tec::k8sclient {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using nlohmann::json;

using testing::run_sync;

std::string random_suffix() {
  std::random_device rd;
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

class leader_election_itest : public ::testing::Test {
protected:
  void SetUp() override {
    const char* path = std::getenv("KUBECONFIG");
    if (path == nullptr || *path == '\0') {
      GTEST_SKIP() << "KUBECONFIG is not set: integration tests need the local cluster";
    }
    auto cfg = load_kubeconfig(path);
    ASSERT_TRUE(cfg) << cfg.error().message;
    client_.emplace(io_.get_executor(), cfg.value());
    lease_ = "tec-itest-" + random_suffix();
  }

  void TearDown() override {
    if (client_) {
      request req;
      req.method = http::verb::delete_;
      req.target = "/apis/coordination.k8s.io/v1/namespaces/default/leases/" + lease_;
      run_sync(io_, client_->send(std::move(req)));
    }
  }

  leader_election_config config(const std::string& identity) const {
    leader_election_config cfg;
    cfg.lease_namespace = "default";
    cfg.lease_name = lease_;
    cfg.identity = identity;
    cfg.lease_duration = 3s;
    cfg.renew_deadline = 2s;
    cfg.retry_period = 200ms;
    return cfg;
  }

  json get_lease() {
    request req;
    req.target = "/apis/coordination.k8s.io/v1/namespaces/default/leases/" + lease_;
    auto r = run_sync(io_, client_->send(std::move(req)));
    if (!r || !*r || (*r)->status != 200) {
      ADD_FAILURE() << "GET lease failed";
      return {};
    }
    return json::parse((*r)->body, nullptr, false);
  }

  /// Runs the io_context until `done()` or `limit`; returns done().
  template <class Pred>
  bool run_until(Pred done, std::chrono::milliseconds limit) {
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_until(deadline);
    }
    return done();
  }

  /// Spawns e.run(); `finished` is set when it returns.
  void spawn(leader_elector& e, std::optional<bool>& finished) {
    asio::co_spawn(io_, e.run(), [&finished](const std::exception_ptr& ep, bool clean) {
      EXPECT_FALSE(ep);
      finished = clean;
    });
  }

  asio::io_context io_;
  std::optional<client> client_;
  std::string lease_;
};

TEST_F(leader_election_itest, two_candidates_one_leader_and_a_release_hands_over_fast) {
  int a_started = 0;
  int b_started = 0;
  auto ca = config("itest-a");
  ca.on_started_leading = [&] { ++a_started; };
  auto cb = config("itest-b");
  cb.on_started_leading = [&] { ++b_started; };
  leader_elector a(io_.get_executor(), *client_, ca);
  leader_elector b(io_.get_executor(), *client_, cb);
  std::optional<bool> a_done;
  std::optional<bool> b_done;
  spawn(a, a_done);
  spawn(b, b_done);

  ASSERT_TRUE(run_until([&] { return a.is_leader() || b.is_leader(); }, 20s));
  // For several renew periods, exactly one of them leads.
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until) {
    io_.run_one_for(50ms);
    ASSERT_NE(a.is_leader(), b.is_leader());
  }
  EXPECT_EQ(a_started + b_started, 1);
  leader_elector& leader = a.is_leader() ? a : b;
  leader_elector& other = a.is_leader() ? b : a;
  std::optional<bool>& leader_done = a.is_leader() ? a_done : b_done;
  EXPECT_EQ(get_lease()["spec"]["holderIdentity"], leader.identity());

  // The leader shuts down cleanly: it releases, and the other takes over well within the
  // lease duration (it need not wait for the lease to expire).
  leader.stop();
  ASSERT_TRUE(run_until([&] { return leader_done.has_value(); }, 10s));
  EXPECT_TRUE(*leader_done);
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(run_until([&] { return other.is_leader(); }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - released, 3s);
  EXPECT_EQ(a_started + b_started, 2);
  const json lease = get_lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], other.identity());
  EXPECT_GE(lease["spec"]["leaseTransitions"].get<int>(), 1);

  other.stop();
  ASSERT_TRUE(run_until([&] { return a_done.has_value() && b_done.has_value(); }, 10s));
}

TEST_F(leader_election_itest, a_vanished_leader_is_replaced_after_the_lease_expires) {
  auto ca = config("itest-gone");
  ca.release_on_cancel = false;  // Like a crash: the lease is left as it was.
  leader_elector a(io_.get_executor(), *client_, ca);
  ASSERT_EQ(run_sync(io_, a.try_acquire_or_renew()), std::optional<bool>(true));

  leader_elector b(io_.get_executor(), *client_, config("itest-next"));
  std::optional<bool> b_done;
  const auto t0 = std::chrono::steady_clock::now();
  spawn(b, b_done);
  ASSERT_TRUE(run_until([&] { return b.is_leader(); }, 20s));
  const auto took = std::chrono::steady_clock::now() - t0;
  // b first sees the record at t0 and must wait a full lease duration on its own clock.
  EXPECT_GE(took, 3s);
  EXPECT_LT(took, 3s + 2 * 200ms * 3 + 1s);
  b.stop();
  ASSERT_TRUE(run_until([&] { return b_done.has_value(); }, 10s));
}

}  // namespace
}  // namespace tec::k8sclient

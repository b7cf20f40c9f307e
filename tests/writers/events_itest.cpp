// The event recorder's correlation against the real local kube-apiserver (KUBECONFIG from
// ctest's cluster fixture): the same event becomes one Event whose count the recorder PATCHes,
// an Event deleted on the server is created again, and similar events are aggregated.

#include <gtest/gtest.h>

#include "tec/base/clock.hpp"
#include "tec/base/rfc3339.hpp"

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "k8sclient/support/cluster.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "tec/informers/records.hpp"
#include "tec/writers/event_recorder.hpp"

namespace tec::writers {
namespace {
using base::parse_rfc3339;
using k8sclient::request;
using k8sclient::response;

using base::errc;
using base::make_error_code;
using informers::disruption_state;
using informers::pod_record;
using k8sclient::client;

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using controller::event_kind;
using controller::pod_ref;
using nlohmann::json;

class events_itest : public ::testing::Test {
protected:
  void SetUp() override {
    auto cfg = k8sclient::testing::cluster_config();
    if (!cfg) {
      GTEST_SKIP() << "KUBECONFIG is not set: integration tests need the local cluster";
    }
    client_.emplace(io_.get_executor(), *cfg);
    ns_ = k8sclient::testing::unique_name("tec-events-");
    const auto r =
        call(http::verb::post, "/api/v1/namespaces",
             {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}});
    ASSERT_EQ(r.status, 201U) << r.body;
  }

  void TearDown() override {
    if (!client_) {
      return;
    }
    // No kubelet and no scheduler: the pods are never bound, so they go at once; nothing
    // empties a Terminating namespace without kube-controller-manager: finalize it by hand.
    call(http::verb::delete_, "/api/v1/namespaces/" + ns_ + "/pods");
    call(http::verb::delete_, "/api/v1/namespaces/" + ns_ + "/events");
    call(http::verb::delete_, "/api/v1/namespaces/" + ns_);
    call(http::verb::put, "/api/v1/namespaces/" + ns_ + "/finalize",
         {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", {{"name", ns_}}},
          {"spec", {{"finalizers", json::array()}}}});
  }

  response call(http::verb method, const std::string& target, const json& body = nullptr) {
    request req(method, target, body.is_null() ? std::string() : body.dump());
    auto r = k8sclient::testing::run_sync(io_, client_->send(std::move(req)));
    if (!r || !*r) {
      ADD_FAILURE() << "request " << target << " failed: " << (r ? r->error().message : "hung");
      return {};
    }
    return std::move(r->value());
  }

  /// An unscheduled pod (it stays Pending: nothing runs it).
  pod_ref create_pod(const std::string& name) {
    const json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}}},
        {"spec", {{"containers", {{{"name", "c"}, {"image", "registry.invalid/none"}}}}}}};
    const auto r = call(http::verb::post, "/api/v1/namespaces/" + ns_ + "/pods", pod);
    EXPECT_EQ(r.status, 201U) << r.body;
    const json created = json::parse(r.body, nullptr, false);
    return {ns_, name, created.is_object() ? created["metadata"].value("uid", "") : ""};
  }

  /// The pod's Events, found as `kubectl describe pod` finds them (involvedObject.uid).
  json events_of(const pod_ref& pod) {
    const auto r =
        call(http::verb::get,
             "/api/v1/namespaces/" + ns_ + "/events?fieldSelector=involvedObject.uid%3D" + pod.uid);
    EXPECT_EQ(r.status, 200U) << r.body;
    const json list = json::parse(r.body, nullptr, false);
    return list.is_object() ? list["items"] : json::array();
  }

  /// Runs the io_context until `done()` holds; generous for a loaded machine.
  bool run_until(const std::function<bool()>& done) {
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_until(deadline);
    }
    return done();
  }

  /// Occurrences delivered (in any way) or given up.
  static std::uint64_t settled(const event_recorder& rec) {
    const auto st = rec.stats();
    return st.sent + st.updated + st.aggregated + st.failed;
  }

  /// The real clock, wall() `wall_offset_` ahead (so a test can make minutes pass).
  class offset_clock final : public base::clock {
  public:
    explicit offset_clock(const std::chrono::seconds& offset) : offset_(offset) {}
    time_point now() override { return real_->now(); }
    base::wall_clock::time_point wall() override { return real_->wall() + offset_; }
    std::unique_ptr<alarm> at(const boost::asio::any_io_executor& ex, time_point when,
                              std::function<void()> fire) override {
      return real_->at(ex, when, std::move(fire));
    }

  private:
    std::shared_ptr<base::clock> real_ = base::real_clock();
    const std::chrono::seconds& offset_;
  };

  std::shared_ptr<base::clock> clock() { return std::make_shared<offset_clock>(wall_offset_); }

  asio::io_context io_;
  std::optional<client> client_;
  std::string ns_;
  std::chrono::seconds wall_offset_{0};
};

TEST_F(events_itest, the_same_event_three_times_is_one_event_with_count_3) {
  const pod_ref pod = create_pod("web-0");
  event_recorder rec(io_.get_executor(), *client_, {}, clock());
  rec.start();
  // One at a time, so the second and third are PATCHes of the Event the first created.
  for (std::uint64_t n = 1; n <= 3; ++n) {
    ASSERT_TRUE(rec.record(pod, event_kind::cancelling_deletion));
    ASSERT_TRUE(run_until([&] { return settled(rec) == n; }));
    wall_offset_ += 60s;
  }
  rec.stop();
  const auto st = rec.stats();
  EXPECT_EQ(st.sent, 1U);
  EXPECT_EQ(st.updated, 2U);
  EXPECT_EQ(st.failed, 0U);

  const json items = events_of(pod);
  ASSERT_EQ(items.size(), 1U) << items.dump();
  const json& ev = items[0];
  EXPECT_EQ(ev["count"], 3);
  EXPECT_EQ(ev["type"], "Normal");
  EXPECT_EQ(ev["reason"], "TaintManagerEviction");
  EXPECT_EQ(ev["message"], "Cancelling deletion of Pod " + ns_ + "/web-0");
  EXPECT_EQ(ev["source"]["component"], "taint-eviction-controller");
  EXPECT_EQ(ev["reportingComponent"], "taint-eviction-controller");
  EXPECT_EQ(ev["involvedObject"], json({{"kind", "Pod"},
                                        {"apiVersion", "v1"},
                                        {"namespace", ns_},
                                        {"name", "web-0"},
                                        {"uid", pod.uid}}));
  // kubectl describe shows "x3 over 2m": the two PATCHes moved lastTimestamp 2 minutes on.
  auto first = parse_rfc3339(ev["firstTimestamp"].get<std::string>());
  auto last = parse_rfc3339(ev["lastTimestamp"].get<std::string>());
  ASSERT_TRUE(first && last) << ev.dump();
  EXPECT_GE(*last - *first, 120) << ev.dump();
  EXPECT_LE(*last - *first, 130) << ev.dump();
}

TEST_F(events_itest, many_records_at_once_make_one_event_with_their_count) {
  const pod_ref pod = create_pod("web-1");
  event_recorder rec(io_.get_executor(), *client_, {}, clock());
  rec.start();
  for (int i = 0; i < 20; ++i) {  // Within the spam filter's burst of 25.
    ASSERT_TRUE(rec.record(pod, event_kind::cancelling_deletion));
  }
  ASSERT_TRUE(run_until([&] { return settled(rec) == 20; }));
  rec.stop();
  EXPECT_EQ(rec.stats().failed, 0U);
  const json items = events_of(pod);
  ASSERT_EQ(items.size(), 1U) << items.dump();
  EXPECT_EQ(items[0]["count"], 20);
}

TEST_F(events_itest, an_event_deleted_on_the_server_is_created_again_with_the_full_count) {
  const pod_ref pod = create_pod("web-2");
  event_recorder rec(io_.get_executor(), *client_, {}, clock());
  rec.start();
  ASSERT_TRUE(rec.record(pod, event_kind::cancelling_deletion));
  ASSERT_TRUE(run_until([&] { return settled(rec) == 1; }));
  json items = events_of(pod);
  ASSERT_EQ(items.size(), 1U) << items.dump();
  const std::string name = items[0]["metadata"]["name"];
  // As the API server's --event-ttl does.
  ASSERT_EQ(call(http::verb::delete_, "/api/v1/namespaces/" + ns_ + "/events/" + name).status,
            200U);
  ASSERT_TRUE(rec.record(pod, event_kind::cancelling_deletion));
  ASSERT_TRUE(run_until([&] { return settled(rec) == 2; }));
  rec.stop();
  EXPECT_EQ(rec.stats().sent, 2U);  // The PATCH got 404: created again.
  items = events_of(pod);
  ASSERT_EQ(items.size(), 1U) << items.dump();
  EXPECT_EQ(items[0]["metadata"]["name"], name);
  EXPECT_EQ(items[0]["count"], 2);
}

TEST_F(events_itest, ten_distinct_failures_in_10_minutes_are_combined) {
  const pod_ref pod = create_pod("web-3");
  event_recorder rec(io_.get_executor(), *client_, {}, clock());
  rec.start();
  const auto failure = [](int i) {
    return "admission webhook denied the request (" + std::to_string(i) + ")";
  };
  for (int i = 1; i <= 11; ++i) {
    ASSERT_TRUE(rec.record(pod, event_kind::eviction_failed, failure(i)));
    ASSERT_TRUE(run_until([&] { return settled(rec) == static_cast<std::uint64_t>(i); }));
  }
  rec.stop();
  const auto st = rec.stats();
  EXPECT_EQ(st.sent, 9U);
  EXPECT_EQ(st.aggregated, 2U);
  const json items = events_of(pod);
  ASSERT_EQ(items.size(), 10U) << items.dump();
  std::vector<json> combined;
  for (const auto& ev : items) {
    EXPECT_EQ(ev["type"], "Warning");
    EXPECT_EQ(ev["reason"], "TaintEvictionFailed");
    if (ev["message"].get<std::string>().rfind("(combined from similar events): ", 0) == 0) {
      combined.push_back(ev);
    }
  }
  ASSERT_EQ(combined.size(), 1U) << items.dump();
  EXPECT_EQ(combined[0]["count"], 2);
  EXPECT_EQ(combined[0]["message"],
            "(combined from similar events): Cannot delete Pod " + ns_ + "/web-3: " + failure(11));
}

}  // namespace
}  // namespace tec::writers

#include "tec/informers/informers.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "informers/support/resident_memory.hpp"
#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "k8sclient/support/settle.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/manual_clock.hpp"

namespace tec::informers {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using k8sclient::testing::fake_http_server;
using k8sclient::testing::reply;

std::string node_json(const std::string& name, const std::string& rv,
                      const std::string& taint_key = "") {
  std::string spec = "{}";
  if (!taint_key.empty()) {
    spec = R"({"taints":[{"key":")" + taint_key + R"(","effect":"NoExecute"}]})";
  }
  return R"({"kind":"Node","apiVersion":"v1","metadata":{"name":")" + name + R"(","uid":"uid-)" +
         name + R"(","resourceVersion":")" + rv + R"("},"spec":)" + spec + "}";
}

std::string node_list(const std::vector<std::string>& items, const std::string& rv,
                      const std::string& cont = "") {
  std::string body =
      R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":")" + rv + R"(")";
  if (!cont.empty()) {
    body += R"(,"continue":")" + cont + R"(")";
  }
  body += R"(},"items":[)";
  for (std::size_t i = 0; i < items.size(); ++i) {
    body += (i == 0 ? "" : ",") + items[i];
  }
  return body + "]}";
}

std::string event(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}\n";
}

std::string bookmark(const std::string& rv) {
  return event("BOOKMARK", R"({"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":")" +
                               rv + R"("}})");
}

std::string gone_event() {
  return event(
      "ERROR",
      R"json({"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 5 (20)","reason":"Expired","code":410})json");
}

// Bound on waits for something that happens at once when things work (a loaded 2-core machine
// under a sanitizer can be 10x slower than an idle one). Only the loopback group waits on it.
constexpr auto wait_cap = std::chrono::milliseconds(30s);

/// "add n1", "update n1", "delete n2": what the handlers saw, in order.
///
/// The reflector's client runs on an in-memory transport and a manual clock, client, server and
/// reflector on the test's one io_context: no socket, no thread, no wall-clock wait. Backoffs and
/// the idle guard fire because run_until() moves the clock to the next alarm when nothing else
/// can happen (or because a test moves it by hand).
class informer_test : public ::testing::Test {
protected:
  informer_test() : api_(io_.get_executor(), config(), fast_client()) {}

  k8sclient::rest_config config() const { return k8sclient::testing::plain_config(server_); }

  /// Resends after a network error go out at once (the backoff is the client's own test).
  k8sclient::client_options fast_client() {
    k8sclient::client_options opts;
    opts.qps = 0;
    opts.request_timeout = 60s;
    opts.clock = clock_;
    opts.connector = server_.connector();
    opts.delay = [](k8sclient::wait_reason why, std::chrono::nanoseconds wanted) {
      return why == k8sclient::wait_reason::network_retry ? std::chrono::nanoseconds::zero()
                                                          : wanted;
    };
    return opts;
  }

  /// Short backoffs; the idle guard is far beyond any test (tests of it set a short one).
  k8sclient::reflector_options fast_informer() const {
    k8sclient::reflector_options opts;
    opts.idle_timeout = 1h;
    opts.backoff.initial = 5ms;
    opts.backoff.cap = 20ms;
    opts.short_watch = 0ms;
    opts.seed = 1;
    return opts;
  }

  void start(k8sclient::reflector_options opts) {
    informer_ = std::make_unique<node_informer>(
        api_, store_,
        [this](const node_record* old_node, const node_record* new_node) {
          if (old_node == nullptr) {
            seen_.push_back("add " + new_node->node.name);
          } else if (new_node == nullptr) {
            seen_.push_back("delete " + old_node->node.name);
          } else {
            seen_.push_back("update " + new_node->node.name);
          }
        },
        opts);
    asio::co_spawn(io_, informer_->run(), [this](std::exception_ptr e) {
      finished_ = true;
      if (e) {
        std::rethrow_exception(e);
      }
    });
  }

  /// Runs the io_context until `done` holds, moving the clock to the next alarm (a backoff, a
  /// deadline) whenever nothing else is ready, up to an hour of clock time.
  bool run_until(const std::function<bool()>& done) {
    return k8sclient::testing::settle_advancing(io_, *clock_, done);
  }

  /// Runs what is ready until `done` holds, without moving the clock.
  bool run_ready_until(const std::function<bool()>& done) {
    return k8sclient::testing::settle(io_, done);
  }

  void TearDown() override {
    if (informer_) {
      informer_->stop();
      api_.shutdown();
      EXPECT_TRUE(run_until([this] { return finished_; }));
    }
  }

  std::vector<std::string> targets() const {
    std::vector<std::string> out;
    for (const auto& r : server_.requests()) {
      out.push_back(r.target);
    }
    return out;
  }

  std::size_t requests() const { return server_.requests().size(); }

  asio::io_context io_;
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>();
  fake_http_server server_{io_.get_executor()};
  client api_;
  node_store store_;
  std::unique_ptr<node_informer> informer_;
  std::vector<std::string> seen_;
  bool finished_ = false;
};

TEST_F(informer_test, pages_then_watches_and_resumes_after_a_clean_end) {
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10", "tok/=1")));
  server_.push(reply::with(200, node_list({node_json("n2", "9")}, "10")));
  const std::string added = event("ADDED", node_json("n3", "11"));
  server_.push(reply::chunked(200)
                   .chunk(added.substr(0, 30))
                   .chunk(added.substr(30) + event("MODIFIED", node_json("n1", "12", "t")))
                   .chunk(event("DELETED", node_json("n2", "13")).substr(0, 7))
                   .chunk(event("DELETED", node_json("n2", "13")).substr(7) + bookmark("14"))
                   .end());
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return requests() >= 4; }));
  ASSERT_TRUE(run_until([this] { return seen_.size() >= 5; }));

  EXPECT_TRUE(informer_->has_synced());
  EXPECT_EQ(seen_,
            (std::vector<std::string>{"add n1", "add n2", "add n3", "update n1", "delete n2"}));
  EXPECT_EQ(store_.size(), 2U);
  ASSERT_TRUE(store_.get("n1"));
  EXPECT_EQ(store_.get("n1")->node.taints.size(), 1U);
  EXPECT_FALSE(store_.get("n2"));
  auto t = targets();
  EXPECT_EQ(t[0], "/api/v1/nodes?limit=500&resourceVersion=0");
  EXPECT_EQ(t[1], "/api/v1/nodes?limit=500&continue=tok%2F%3D1");
  EXPECT_EQ(t[2].rfind("/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion=10&"
                       "timeoutSeconds=",
                       0),
            0U)
      << t[2];
  const int timeout_seconds = std::stoi(t[2].substr(t[2].find("timeoutSeconds=") + 15));
  EXPECT_GE(timeout_seconds, 300);
  EXPECT_LT(timeout_seconds, 600);
  EXPECT_NE(t[3].find("resourceVersion=14&"), std::string::npos) << t[3];  // from the bookmark
  EXPECT_EQ(informer_->resource_version(), "14");
  const auto st = informer_->stats();
  EXPECT_EQ(st.lists, 1U);
  EXPECT_EQ(st.relists, 0U);
  EXPECT_EQ(st.watch_restarts, 1U);
  EXPECT_EQ(st.events, 3U);
}

TEST_F(informer_test, in_stream_gone_relists_at_the_last_version_and_delivers_deletions) {
  server_.push(reply::with(200, node_list({node_json("n1", "8"), node_json("n2", "9")}, "10")));
  server_.push(reply::chunked(200)
                   .chunk(event("MODIFIED", node_json("n1", "15")))
                   .chunk(gone_event())
                   .stall());  // the client must not wait for the server to close
  server_.push(reply::with(200, node_list({node_json("n1", "15"), node_json("n4", "18")}, "20")));
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return requests() >= 4; }));
  ASSERT_TRUE(run_until([this] { return seen_.size() >= 5; }));

  // n1 is unchanged in the relist (same record): not delivered again.
  EXPECT_EQ(seen_,
            (std::vector<std::string>{"add n1", "add n2", "update n1", "add n4", "delete n2"}));
  auto t = targets();
  // No limit: the API server answers from its watch cache, at least as fresh (client-go).
  EXPECT_EQ(t[2], "/api/v1/nodes?resourceVersion=15");
  EXPECT_NE(t[3].find("resourceVersion=20&"), std::string::npos) << t[3];
  EXPECT_EQ(store_.size(), 2U);
  const auto st = informer_->stats();
  EXPECT_EQ(st.lists, 2U);
  EXPECT_EQ(st.relists, 1U);
}

// The daemon activates on this event instead of polling has_synced(): it fires once, right
// after the listed objects were delivered and before any watch event, and not on a relist.
TEST_F(informer_test, on_synced_fires_once_after_the_first_list_and_before_watch_events) {
  server_.push(reply::with(200, node_list({node_json("n1", "8"), node_json("n2", "9")}, "10")));
  server_.push(reply::chunked(200)
                   .chunk(event("MODIFIED", node_json("n1", "15")))
                   .chunk(gone_event())
                   .stall());
  server_.push(reply::with(200, node_list({node_json("n1", "15"), node_json("n4", "18")}, "20")));
  server_.push(reply::chunked(200).stall());
  auto opts = fast_informer();
  std::vector<std::string> at_sync;
  int synced_calls = 0;
  bool synced_flag_at_call = false;
  opts.on_synced = [&] {
    ++synced_calls;
    at_sync = seen_;
    synced_flag_at_call = informer_->has_synced();
  };
  start(opts);
  ASSERT_TRUE(run_until([this] { return requests() >= 4 && seen_.size() >= 5; }));

  EXPECT_EQ(synced_calls, 1);
  EXPECT_TRUE(synced_flag_at_call);
  EXPECT_EQ(at_sync, (std::vector<std::string>{"add n1", "add n2"}));
  EXPECT_EQ(informer_->stats().relists, 1U);
}

TEST_F(informer_test, gone_list_at_the_last_version_falls_back_to_the_latest) {
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10")));
  server_.push(reply::with(410, R"({"kind":"Status","code":410,"reason":"Expired"})"));
  server_.push(reply::with(410, R"({"kind":"Status","code":410,"reason":"Expired"})"));
  server_.push(reply::with(200, node_list({}, "30")));
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return requests() >= 5; }));
  ASSERT_TRUE(run_until([this] { return seen_.size() >= 2; }));
  auto t = targets();
  EXPECT_NE(t[1].find("watch=1"), std::string::npos);
  EXPECT_EQ(t[2], "/api/v1/nodes?resourceVersion=10");
  EXPECT_EQ(t[3], "/api/v1/nodes?limit=500&resourceVersion=");
  EXPECT_NE(t[4].find("resourceVersion=30&"), std::string::npos);
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n1", "delete n1"}));
}

// A server that paged a list (no watch cache) keeps getting the limit on relists. If the relist
// at the watch's version comes back at that same version and the watch from there is too old
// again (an API server restarted with a newer watch cache, etcd still holding the version),
// the next list asks for the latest instead of looping list/watch without a pause.
TEST_F(informer_test, relist_that_stays_too_old_to_watch_lists_the_latest) {
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10", "tok")));
  server_.push(reply::with(200, node_list({node_json("n2", "9")}, "10")));
  server_.push(reply::chunked(200).chunk(gone_event()).stall());
  server_.push(reply::with(200, node_list({node_json("n1", "8"), node_json("n2", "9")}, "10")));
  server_.push(reply::chunked(200).chunk(gone_event()).stall());
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "30")));
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return requests() >= 7; }));
  ASSERT_TRUE(run_until([this] { return seen_.size() >= 3; }));
  auto t = targets();
  EXPECT_EQ(t[0], "/api/v1/nodes?limit=500&resourceVersion=0");
  EXPECT_EQ(t[1], "/api/v1/nodes?limit=500&continue=tok");
  EXPECT_NE(t[2].find("watch=1&allowWatchBookmarks=true&resourceVersion=10&"), std::string::npos)
      << t[2];
  EXPECT_EQ(t[3], "/api/v1/nodes?limit=500&resourceVersion=10");
  EXPECT_NE(t[4].find("watch=1&allowWatchBookmarks=true&resourceVersion=10&"), std::string::npos)
      << t[4];
  EXPECT_EQ(t[5], "/api/v1/nodes?limit=500&resourceVersion=");
  EXPECT_NE(t[6].find("resourceVersion=30&"), std::string::npos) << t[6];
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n1", "add n2", "delete n2"}));
  EXPECT_EQ(informer_->stats().relists, 2U);
}

TEST_F(informer_test, expired_continue_token_pages_again_from_the_start) {
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10", "next")));
  server_.push(reply::with(410, R"({"kind":"Status","code":410,"reason":"Expired"})"));
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "12", "again")));
  server_.push(reply::with(200, node_list({node_json("n2", "9")}, "12")));
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return requests() >= 5; }));
  auto t = targets();
  EXPECT_EQ(t[1], "/api/v1/nodes?limit=500&continue=next");
  EXPECT_EQ(t[2], "/api/v1/nodes?limit=500&resourceVersion=0");
  EXPECT_EQ(t[3], "/api/v1/nodes?limit=500&continue=again");
  EXPECT_NE(t[4].find("resourceVersion=12&"), std::string::npos);
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n1", "add n2"}));
  EXPECT_EQ(store_.size(), 2U);
}

TEST_F(informer_test, stalled_watch_is_dropped_by_the_idle_guard_and_resumed) {
  server_.push(reply::with(200, node_list({}, "10")));
  server_.push(reply::chunked(200).chunk(event("ADDED", node_json("n1", "11"))).stall());
  server_.push(reply::chunked(200).chunk(event("ADDED", node_json("n2", "12"))).stall());
  auto opts = fast_informer();
  opts.idle_timeout = 200ms;
  start(opts);
  ASSERT_FALSE(run_ready_until([this] { return requests() >= 3; }));
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n1"}));
  // The watch has been silent for just under the idle timeout: still open.
  clock_->advance(199ms);
  ASSERT_FALSE(run_ready_until([this] { return requests() >= 3; }));
  clock_->advance(1ms);
  ASSERT_TRUE(run_ready_until([this] { return requests() >= 3; }));
  auto t = targets();
  EXPECT_NE(t[2].find("resourceVersion=11&"), std::string::npos) << t[2];
  ASSERT_TRUE(run_until([this] { return seen_.size() >= 2; }));
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n1", "add n2"}));
  const auto st = informer_->stats();
  EXPECT_GE(st.idle_timeouts, 1U);
  EXPECT_EQ(st.relists, 0U);
}

TEST_F(informer_test, watch_errors_back_off_and_rewatch_without_relisting) {
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10")));
  server_.push(reply::with(429, R"({"kind":"Status","code":429})"));  // no Retry-After
  server_.push(reply::with(500, R"({"kind":"Status","code":500})"));
  server_.push(reply::chunked(200).chunk("{not json}\n").stall());
  server_.push(reply::close_now());  // retried inside the client (an idempotent GET)
  server_.push(reply::chunked(200).chunk(event("ADDED", node_json("n2", "11"))).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return seen_.size() >= 2; }));
  auto t = targets();
  ASSERT_GE(t.size(), 6U);
  for (std::size_t i = 1; i < t.size(); ++i) {
    EXPECT_NE(t[i].find("watch=1"), std::string::npos) << t[i];
    EXPECT_NE(t[i].find("resourceVersion=10&"), std::string::npos) << t[i];
  }
  const auto st = informer_->stats();
  EXPECT_EQ(st.lists, 1U);
  EXPECT_EQ(st.errors, 3U);  // 429, 500, malformed event
}

TEST_F(informer_test, list_failures_are_retried) {
  server_.push(reply::with(503, "unavailable"));
  server_.push(reply::with(200, "{not json"));
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10")));
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return informer_->has_synced(); }));
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n1"}));
  EXPECT_GE(informer_->stats().errors, 2U);
}

TEST_F(informer_test, stop_ends_a_backoff_wait_at_once) {
  server_.set_fallback(reply::with(500, "down"));
  auto opts = fast_informer();
  opts.backoff.initial = 1h;  // the clock stands still: only stop() can end the wait
  opts.backoff.cap = 1h;
  start(opts);
  ASSERT_FALSE(run_ready_until([this] { return requests() >= 2; }));
  EXPECT_EQ(requests(), 1U);
  informer_->stop();
  ASSERT_TRUE(run_ready_until([this] { return finished_; }));
  EXPECT_EQ(requests(), 1U);
  EXPECT_FALSE(informer_->has_synced());
}

TEST(pod_informer_test, lists_and_watches_pods) {
  asio::io_context io;
  fake_http_server server(io.get_executor());
  k8sclient::client_options copts;
  copts.qps = 0;
  copts.request_timeout = 60s;
  copts.clock = std::make_shared<test::manual_clock>();
  copts.connector = server.connector();
  client api(io.get_executor(), k8sclient::testing::plain_config(server), copts);
  const auto pod = [](const std::string& name, const std::string& rv, const std::string& node) {
    return R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")" + name +
           R"(","namespace":"default","uid":"uid-)" + name + R"(","resourceVersion":")" + rv +
           R"("},"spec":{"nodeName":")" + node + R"("},"status":{"phase":"Running"}})";
  };
  server.push(reply::with(
      200, R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[)" +
               pod("a", "4", "n1") + "]}"));
  server.push(reply::chunked(200)
                  .chunk(event("ADDED", pod("b", "6", "n1")))
                  .chunk(event("DELETED", pod("a", "7", "n1")))
                  .stall());
  pod_store store;
  std::vector<std::string> seen;
  pod_informer inf(
      api, store,
      [&](const pod_record* o, const pod_record* n) {
        seen.push_back(std::string(o ? "-" + o->pod.name : "") + (n ? "+" + n->pod.name : ""));
      },
      {});
  bool finished = false;
  asio::co_spawn(io, inf.run(), [&](std::exception_ptr) { finished = true; });
  k8sclient::testing::settle(io, [&] { return seen.size() >= 3; });
  EXPECT_EQ(seen, (std::vector<std::string>{"+a", "+b", "-a"}));
  EXPECT_EQ(store.pods_on_node("n1").size(), 1U);
  EXPECT_EQ(server.requests().at(0).target, "/api/v1/pods?limit=500&resourceVersion=0");
  inf.stop();
  api.shutdown();
  EXPECT_TRUE(k8sclient::testing::settle(io, [&] { return finished; }));
}

}  // namespace
}  // namespace tec::informers

namespace tec::informers {
namespace {

// ---- LIST pages decoded as they stream: bounded memory, "too large" never retried -------

using testing::reset_peak_rss;
using testing::sanitized;
using testing::status_kib;

/// A pod item of about 8.5 KB, most of it an annotation the decoder skips (real pods carry
/// managedFields, container specs and status of that size).
std::string bulky_pod(int i) {
  const std::string n = std::to_string(i);
  return R"({"metadata":{"name":"pod-)" + n + R"(","namespace":"bulk","uid":"uid-)" + n +
         R"(","resourceVersion":")" + n + R"(","annotations":{"filler":")" +
         std::string(8192, 'f') +
         R"("}},"spec":{"nodeName":"node-1","tolerations":[{"key":"k","operator":"Exists"}]},)"
         R"("status":{"phase":"Running"}})";
}

// On loopback TCP on purpose (it is about sockets): memory stays bounded only because TCP's flow
// control holds the server back while the client decodes; an in-memory test stream would buffer
// the whole 1 GiB the server writes. The steady clock; the backoff is zero, so no timer runs.
class huge_list_test : public ::testing::Test {
protected:
  huge_list_test()
      : api_(io_.get_executor(), k8sclient::testing::plain_config(server_), options()) {}

  static k8sclient::client_options options() {
    k8sclient::client_options opts;
    opts.qps = 0;
    opts.request_timeout = 60s;
    opts.max_retries = 10;
    return opts;
  }

  /// The page cap of these tests (the default, 16 GiB, would take minutes to reach). Under
  /// sanitizers only time is at stake (memory is not measured): a smaller one.
  static constexpr std::size_t page_cap =
      sanitized ? std::size_t{32} << 20U : std::size_t{256} << 20U;

  /// Runs the informer until it has synced; the first LIST is the huge one, the second a
  /// small good one. Returns the peak resident growth in KiB over the run (-1: not measured).
  long sync_after_a_huge_list() {
    server_.push(
        reply::with(200, R"({"kind":"PodList","metadata":{"resourceVersion":"50"},"items":[)" +
                             bulky_pod(1) + "]}"));
    server_.push(reply::chunked(200).stall());
    k8sclient::reflector_options opts;
    opts.backoff.initial = 0ms;  // no timer: the relist follows the failed one at once
    opts.backoff.cap = 0ms;
    opts.seed = 1;
    opts.max_list_bytes = page_cap;
    informer_ = std::make_unique<pod_informer>(api_, store_, nullptr, opts);
    const long before = status_kib("VmRSS");
    const bool measured = !sanitized && reset_peak_rss() && before > 0;
    bool finished = false;
    asio::co_spawn(io_, informer_->run(), [&](const std::exception_ptr&) { finished = true; });
    // Real TCP: the bound is generous (1 GiB through loopback on a loaded, sanitized machine).
    k8sclient::testing::run_until(
        io_, [this] { return informer_->has_synced(); }, 120s);
    const long peak = status_kib("VmHWM");
    informer_->stop();
    api_.shutdown();
    EXPECT_TRUE(k8sclient::testing::run_until(
        io_, [&] { return finished; }, wait_cap));
    return measured && peak > 0 ? peak - before : -1;
  }

  void expect_one_too_large_then_synced(long growth_kib) {
    EXPECT_TRUE(informer_->has_synced());
    const auto err = informer_->last_list_error();
    EXPECT_EQ(err.code, make_error_code(errc::response_too_large)) << err.message;
    EXPECT_NE(err.message.find("larger than"), std::string::npos) << err.message;
    const auto st = informer_->stats();
    EXPECT_EQ(st.errors, 1U);
    EXPECT_EQ(st.lists, 1U);
    // The huge LIST was sent once: the client did not retry it, the informer backed off and
    // listed again, from etcd in pages (the watch cache answers resourceVersion=0 in one).
    const auto reqs = server_.requests();
    ASSERT_GE(reqs.size(), 2U);
    EXPECT_EQ(reqs[0].target, "/api/v1/pods?limit=500&resourceVersion=0");
    EXPECT_EQ(reqs[1].target, "/api/v1/pods?limit=500&resourceVersion=");
    ASSERT_EQ(store_.size(), 1U);
    if (growth_kib >= 0) {
      std::printf("peak resident growth over the huge LIST: %ld KiB\n", growth_kib);
      EXPECT_LT(growth_kib, 64 * 1024) << "the LIST body must not be buffered";
    }
  }

  fake_http_server server_;
  asio::io_context io_;
  client api_;
  pod_store store_;
  std::unique_ptr<pod_informer> informer_;
};

TEST_F(huge_list_test, one_endless_item_fails_as_too_large_once_in_bounded_memory) {
  // 1 GiB of one string inside the first item, never ending.
  server_.push(reply::chunked(200)
                   .chunk(R"({"kind":"PodList","metadata":{"resourceVersion":"1"},"items":[)"
                          R"({"metadata":{"name":"x","uid":"u","annotations":{"a":")")
                   .repeat(std::string(std::size_t{64} << 10U, 'a'), std::uint64_t{16} << 10U)
                   .end());
  const long growth = sync_after_a_huge_list();
  expect_one_too_large_then_synced(growth);
  EXPECT_NE(informer_->last_list_error().message.find("item 0"), std::string::npos)
      << informer_->last_list_error().message;
}

TEST_F(huge_list_test, many_items_beyond_the_page_cap_fail_as_too_large_once_in_bounded_memory) {
  // About 1 GiB of 8.5 KB items, eight per chunk.
  std::string eight;
  for (int i = 0; i < 8; ++i) {
    eight += "," + bulky_pod(100 + i);
  }
  const std::uint64_t repeats = (std::uint64_t{1} << 30U) / eight.size();
  server_.push(
      reply::chunked(200)
          .chunk(R"({"kind":"PodList","metadata":{"resourceVersion":"1"},"items":[)" + bulky_pod(0))
          .repeat(eight, repeats)
          .chunk("]}")
          .end());
  const long growth = sync_after_a_huge_list();
  expect_one_too_large_then_synced(growth);
  EXPECT_NE(informer_->last_list_error().message.find("the body is larger than"), std::string::npos)
      << informer_->last_list_error().message;
}

TEST_F(huge_list_test, a_list_beyond_the_clients_response_cap_streams_in_one_request) {
  // The watch cache answers resourceVersion=0 with every object in one response (1.2 GB for
  // 150,000 realistic pods): a streamed LIST is bounded by max_list_bytes, not by the cap on
  // the bodies the client buffers. Here 4,000 pods (34 MB) against a 1 MiB client cap.
  client small_cap(io_.get_executor(), k8sclient::testing::plain_config(server_), [] {
    auto o = options();
    o.max_response_bytes = std::size_t{1} << 20U;
    return o;
  }());
  std::string items = bulky_pod(0);
  for (int i = 1; i < 4'000; ++i) {
    items += "," + bulky_pod(i);
  }
  ASSERT_GT(items.size(), std::size_t{32} << 20U);
  server_.push(reply::with(
      200, R"({"kind":"PodList","metadata":{"resourceVersion":"50"},"items":[)" + items + "]}"));
  server_.push(reply::chunked(200).stall());
  k8sclient::reflector_options opts;
  opts.seed = 1;
  informer_ = std::make_unique<pod_informer>(small_cap, store_, nullptr, opts);
  bool finished = false;
  asio::co_spawn(io_, informer_->run(), [&](const std::exception_ptr&) { finished = true; });
  EXPECT_TRUE(k8sclient::testing::run_until(
      io_, [this] { return informer_->has_synced(); }, 120s));
  EXPECT_EQ(store_.size(), 4'000U);
  EXPECT_EQ(informer_->stats().errors, 0U) << informer_->last_list_error().message;
  const auto reqs = server_.requests();
  ASSERT_GE(reqs.size(), 1U);
  EXPECT_EQ(reqs[0].target, "/api/v1/pods?limit=500&resourceVersion=0");
  EXPECT_EQ(
      std::count_if(reqs.begin(), reqs.end(),
                    [](const auto& r) { return r.target.find("watch=1") == std::string::npos; }),
      1);
  informer_->stop();
  small_cap.shutdown();
  EXPECT_TRUE(k8sclient::testing::run_until(
      io_, [&] { return finished; }, wait_cap));
  informer_.reset();  // it borrows small_cap
}

// ---- continue tokens, undecodable objects, server text -------------------------------------

class informer_more_test : public informer_test {};

TEST_F(informer_more_test, a_continue_token_expiring_twice_backs_off_and_pages_from_the_start) {
  const std::string expired = R"({"kind":"Status","code":410,"reason":"Expired"})";
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10", "a")));
  server_.push(reply::with(410, expired));
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10", "b")));
  server_.push(reply::with(410, expired));
  server_.push(reply::with(200, node_list({node_json("n2", "9")}, "12")));
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return requests() >= 6; }));
  const auto t = targets();
  EXPECT_EQ(t[1], "/api/v1/nodes?limit=500&continue=a");
  EXPECT_EQ(t[2], "/api/v1/nodes?limit=500&resourceVersion=0");
  EXPECT_EQ(t[3], "/api/v1/nodes?limit=500&continue=b");
  EXPECT_EQ(t[4], "/api/v1/nodes?limit=500&resourceVersion=0");  // after the backoff
  EXPECT_NE(t[5].find("watch=1"), std::string::npos);
  EXPECT_EQ(informer_->stats().errors, 1U);
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n2"}));
}

TEST_F(informer_more_test, undecodable_list_items_are_skipped_and_counted) {
  const std::string no_name = R"({"kind":"Node","metadata":{"uid":"u","resourceVersion":"3"}})";
  const std::string bad_time =
      R"({"metadata":{"name":"bad2","uid":"u"},"spec":{"taints":[{"key":"k","timeAdded":"x"}]}})";
  server_.push(reply::with(
      200, node_list({node_json("n1", "8"), no_name, bad_time, node_json("n2", "9")}, "10")));
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return informer_->has_synced() && requests() >= 2; }));
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n1", "add n2"}));
  const auto st = informer_->stats();
  EXPECT_EQ(st.decode_errors, 2U);
  EXPECT_EQ(st.errors, 0U);
  EXPECT_EQ(st.lists, 1U);
}

TEST_F(informer_more_test, undecodable_watch_objects_are_skipped_and_counted) {
  server_.push(reply::with(200, node_list({}, "10")));
  server_.push(reply::chunked(200)
                   .chunk(event("ADDED", R"({"metadata":{"uid":"u","resourceVersion":"11"}})"))
                   .chunk(event("ADDED", node_json("n1", "12")))
                   .chunk(R"({"type":"SOMETHING","object":{}})"
                          "\n")
                   .chunk(event("MODIFIED", node_json("n1", "13", "t")))
                   .stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return seen_.size() >= 2; }));
  EXPECT_EQ(seen_, (std::vector<std::string>{"add n1", "update n1"}));
  const auto st = informer_->stats();
  EXPECT_EQ(st.decode_errors, 2U);
  EXPECT_EQ(st.errors, 0U);
  EXPECT_EQ(st.watches, 1U);  // the watch went on
  EXPECT_EQ(informer_->resource_version(), "13");
}

TEST_F(informer_more_test, a_hostile_status_message_is_clipped_and_escaped) {
  const std::string message = "no\n2026-01-01T00:00:00.000Z INFO  watch forged line " +
                              std::string(200'000, 'z') + "\r\nend";
  server_.push(reply::with(500, R"({"kind":"Status","code":500,"message":")" +
                                    std::string(nlohmann::json(message).dump()).substr(1) + "}"));
  server_.push(reply::with(200, node_list({node_json("n1", "8")}, "10")));
  server_.push(reply::chunked(200).stall());
  start(fast_informer());
  ASSERT_TRUE(run_until([this] { return informer_->has_synced(); }));
  const auto err = informer_->last_list_error();
  EXPECT_EQ(err.message.find('\n'), std::string::npos);
  EXPECT_EQ(err.message.find('\r'), std::string::npos);
  EXPECT_NE(err.message.find("no\\n2026-01-01"), std::string::npos) << err.message.substr(0, 100);
  EXPECT_LT(err.message.size(), 1000U);
  EXPECT_NE(err.message.find("clipped"), std::string::npos);
}

}  // namespace
}  // namespace tec::informers

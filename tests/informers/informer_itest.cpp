// Informers against the real local kube-apiserver: creates, updates and deletes of nodes and
// pods, and the 410 path (watch from a version older than the watch cache -> relist at that
// version -> 410 again after an etcd compaction -> list the latest, deletions delivered).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "k8sclient/support/run_sync.hpp"
#include "tec/informers/informers.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/config.hpp"

namespace tec::informers {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using k8sclient::testing::run_sync;

std::string unique_suffix() {
  std::random_device rd;
  return std::to_string(rd() % 1000000U);
}

std::string node_body(const std::string& name) {
  return R"({"kind":"Node","apiVersion":"v1","metadata":{"name":")" + name +
         R"(","labels":{"tec-itest":"true"}}})";
}

/// Runs a shell command; its exit status and stdout.
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return {-1, out};
  }
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) {
    out += buf;
  }
  const int status = ::pclose(pipe);
  return {status, out};
}

/// What a node informer's handler saw: "add n", "update n", "delete n".
struct recorder {
  std::vector<std::string> seen;
  bool contains(const std::string& s) const {
    return std::find(seen.begin(), seen.end(), s) != seen.end();
  }
};

/// The parameter: pods and nodes listed and watched as protobuf (the daemon's default) or JSON.
class informer_itest : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    const char* path = std::getenv("KUBECONFIG");
    if (path == nullptr || *path == '\0') {
      GTEST_SKIP() << "KUBECONFIG is not set (run through ctest, or export it)";
    }
    auto loaded = k8sclient::load_kubeconfig(path);
    ASSERT_TRUE(loaded) << loaded.error().message;
    config_ = loaded.value();
  }

  void connect(const k8sclient::rest_config& cfg) {
    api_ = std::make_unique<client>(io_.get_executor(), cfg);
  }

  result<response> call(http::verb verb, std::string target, std::string body = {},
                        std::string content_type = "application/json") {
    auto out = run_sync(io_, api_->send(request(verb, std::move(target), std::move(body),
                                                std::move(content_type), false)));
    if (!out) {
      return error{make_error_code(errc::timeout), "test limit", 0};
    }
    return std::move(*out);
  }

  void expect_status(const result<response>& res, unsigned status) {
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->status, status) << res->body;
  }

  /// The options of every informer of a test: its Accept header by the parameter.
  static k8sclient::reflector_options with_accept(k8sclient::reflector_options opts = {}) {
    if (GetParam()) {
      opts.accept = protobuf_accept;
    }
    return opts;
  }

  void start_nodes(k8sclient::reflector_options opts = {}) {
    nodes_ = std::make_unique<node_informer>(
        *api_, node_store_,
        [this](const node_record* o, const node_record* n) {
          if (o == nullptr) {
            node_seen_.seen.push_back("add " + n->node.name);
          } else if (n == nullptr) {
            node_seen_.seen.push_back("delete " + o->node.name);
          } else {
            node_seen_.seen.push_back("update " + n->node.name +
                                      (n->node.taints.empty() ? "" : " tainted"));
          }
        },
        with_accept(std::move(opts)));
    asio::co_spawn(io_, nodes_->run(), [this](std::exception_ptr) { ++finished_; });
  }

  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    io_.restart();
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      io_.run_one_for(20ms);
    }
    return true;
  }

  void TearDown() override {
    if (nodes_) {
      nodes_->stop();
    }
    if (pods_) {
      pods_->stop();
    }
    if (api_) {
      api_->shutdown();
      run_until([this] { return finished_ == (nodes_ ? 1 : 0) + (pods_ ? 1 : 0); }, 10s);
    }
  }

  asio::io_context io_;
  k8sclient::rest_config config_;
  std::unique_ptr<client> api_;
  node_store node_store_;
  pod_store pod_store_;
  std::unique_ptr<node_informer> nodes_;
  std::unique_ptr<pod_informer> pods_;
  recorder node_seen_;
  int finished_ = 0;
};

TEST_P(informer_itest, node_create_update_delete) {
  connect(config_);
  start_nodes();
  ASSERT_TRUE(run_until([this] { return nodes_->has_synced(); }));
  const std::string name = "tec-itest-node-" + unique_suffix();

  expect_status(call(http::verb::post, "/api/v1/nodes", node_body(name)), 201);
  ASSERT_TRUE(run_until([&] { return node_seen_.contains("add " + name); }));
  ASSERT_TRUE(node_store_.get(name));

  expect_status(call(http::verb::patch, "/api/v1/nodes/" + name,
                     R"({"spec":{"taints":[{"key":"tec-itest","effect":"NoExecute"}]}})",
                     "application/merge-patch+json"),
                200);
  ASSERT_TRUE(run_until([&] { return node_seen_.contains("update " + name + " tainted"); }));
  EXPECT_EQ(node_store_.get(name)->node.taints.size(), 1U);

  expect_status(call(http::verb::delete_, "/api/v1/nodes/" + name), 200);
  ASSERT_TRUE(run_until([&] { return node_seen_.contains("delete " + name); }));
  EXPECT_FALSE(node_store_.get(name));
  EXPECT_EQ(nodes_->stats().relists, 0U);
}

TEST_P(informer_itest, pod_create_update_delete_indexed_by_node) {
  connect(config_);
  std::vector<std::string> seen;
  pods_ = std::make_unique<pod_informer>(
      *api_, pod_store_,
      [&](const pod_record* o, const pod_record* n) {
        seen.push_back(std::string(o ? "-" + o->pod.name : "") + (n ? "+" + n->pod.name : ""));
      },
      with_accept());
  asio::co_spawn(io_, pods_->run(), [this](std::exception_ptr) { ++finished_; });
  ASSERT_TRUE(run_until([this] { return pods_->has_synced(); }));

  const std::string suffix = unique_suffix();
  const std::string name = "tec-itest-pod-" + suffix;
  const std::string node = "tec-itest-pods-node-" + suffix;
  const std::string pod = R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")" + name +
                          R"("},"spec":{"nodeName":")" + node +
                          R"(","containers":[{"name":"c","image":"busybox"}],)" +
                          R"("tolerations":[{"key":"k","operator":"Exists","effect":"NoExecute",)" +
                          R"("tolerationSeconds":30}]}})";
  expect_status(call(http::verb::post, "/api/v1/namespaces/default/pods", pod), 201);
  ASSERT_TRUE(run_until([&] { return pod_store_.get("default", name).has_value(); }));
  auto on_node = pod_store_.pods_on_node(node);
  ASSERT_EQ(on_node.size(), 1U);
  EXPECT_EQ(on_node[0].name, name);
  ASSERT_FALSE(on_node[0].tolerations.empty());

  expect_status(
      call(http::verb::patch, "/api/v1/namespaces/default/pods/" + name,
           R"({"metadata":{"labels":{"touched":"yes"}}})", "application/merge-patch+json"),
      200);
  ASSERT_TRUE(run_until(
      [&] { return std::count(seen.begin(), seen.end(), "-" + name + "+" + name) >= 1; }));

  expect_status(call(http::verb::delete_, "/api/v1/namespaces/default/pods/" + name,
                     R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})"),
                200);
  ASSERT_TRUE(run_until([&] { return !pod_store_.get("default", name).has_value(); }));
  EXPECT_TRUE(pod_store_.pods_on_node(node).empty());
  EXPECT_EQ(seen.back(), "-" + name);
}

/// A TCP relay on 127.0.0.1:0 to 127.0.0.1:<target>, on its own thread: the informer keeps one
/// address while the API server behind it restarts (cluster.sh may pick a new port then).
class tcp_relay {
public:
  tcp_relay() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    asio::co_spawn(io_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~tcp_relay() {
    io_.stop();
    thread_.join();
  }
  tcp_relay(const tcp_relay&) = delete;
  tcp_relay& operator=(const tcp_relay&) = delete;

  void set_target(unsigned short port) { target_ = port; }
  [[nodiscard]] std::string port() const {
    return std::to_string(acceptor_.local_endpoint().port());
  }

private:
  using tcp = asio::ip::tcp;

  static asio::awaitable<void> pump(std::shared_ptr<tcp::socket> from,
                                    std::shared_ptr<tcp::socket> to) {
    std::array<char, 16384> buf{};
    for (;;) {
      auto [ec, n] =
          co_await from->async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) {
        break;
      }
      auto [wec, wn] = co_await asio::async_write(*to, asio::buffer(buf.data(), n),
                                                  asio::as_tuple(asio::use_awaitable));
      if (wec) {
        break;
      }
    }
    boost::system::error_code ignored;
    from->close(ignored);
    to->close(ignored);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) {
        co_return;
      }
      auto down = std::make_shared<tcp::socket>(std::move(socket));
      auto up = std::make_shared<tcp::socket>(io_);
      auto [cec] = co_await up->async_connect(
          tcp::endpoint(asio::ip::make_address("127.0.0.1"), target_.load()),
          asio::as_tuple(asio::use_awaitable));
      if (cec) {
        continue;  // `down` closes: the client sees the server as unreachable
      }
      asio::co_spawn(io_, pump(down, up), asio::detached);
      asio::co_spawn(io_, pump(up, down), asio::detached);
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::atomic<unsigned short> target_{0};
  std::thread thread_;
};

/// A private cluster (the test restarts it), started with deploy/local/cluster.sh.
class private_cluster {
public:
  private_cluster() {
    const auto repo = std::filesystem::path(TEC_SOURCE_DIR);
    script_ = (repo / "deploy" / "local" / "cluster.sh").string();
    dir_ = (std::filesystem::temp_directory_path() / ("tec-informer-itest-" + unique_suffix()))
               .string();
  }
  ~private_cluster() {
    // TEC_ITEST_KEEP_CLUSTER=1 keeps the stopped cluster's state and logs for a post-mortem.
    const char* keep = std::getenv("TEC_ITEST_KEEP_CLUSTER");
    (void)run(keep != nullptr && std::string(keep) == "1" ? "down" : "down --wipe");
  }
  private_cluster(const private_cluster&) = delete;
  private_cluster& operator=(const private_cluster&) = delete;

  int run(const std::string& args) const {
    auto [status, out] =
        shell("TEC_CLUSTER_DIR='" + dir_ + "' '" + script_ + "' " + args + " 2>&1 </dev/null");
    if (status != 0) {
      std::fprintf(stderr, "cluster.sh %s failed:\n%s\n", args.c_str(), out.c_str());
    }
    return status;
  }
  /// The API server's current port, from the cluster's env file.
  [[nodiscard]] unsigned short api_port() const {
    return static_cast<unsigned short>(std::stoul(
        shell(". '" + dir_ + "/env' && printf %s \"$TEC_CLUSTER_APISERVER_PORT\"").second));
  }
  [[nodiscard]] std::string kubeconfig() const { return dir_ + "/admin.kubeconfig"; }
  [[nodiscard]] std::string etcd_url() const {
    return shell(". '" + dir_ + "/env' && printf %s \"$TEC_CLUSTER_ETCD_URL\"").second;
  }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] bool exists() const { return std::filesystem::exists(script_); }

private:
  std::string script_;
  std::string dir_;
};

TEST_P(informer_itest, watch_gone_after_restart_then_compacted_relist_falls_back_to_latest) {
  if (shell("command -v etcdctl >/dev/null").first != 0) {
    GTEST_SKIP() << "etcdctl is not installed";
  }
  private_cluster cluster;
  ASSERT_TRUE(cluster.exists());
  ASSERT_EQ(cluster.run("up"), 0) << "cluster.sh up failed";
  auto loaded = k8sclient::load_kubeconfig(cluster.kubeconfig());
  ASSERT_TRUE(loaded) << loaded.error().message;
  tcp_relay relay;
  relay.set_target(cluster.api_port());
  k8sclient::rest_config via_relay = loaded.value();
  via_relay.port = relay.port();
  connect(via_relay);

  expect_status(call(http::verb::post, "/api/v1/nodes", node_body("keep")), 201);
  expect_status(call(http::verb::post, "/api/v1/nodes", node_body("doomed")), 201);

  k8sclient::reflector_options opts;
  // The informer retries every 25 s while the relay leads nowhere; the world changes behind
  // its back meanwhile, however long the restart takes on a loaded machine.
  opts.backoff.initial = 25s;
  opts.backoff.cap = 25s;
  opts.backoff.jitter = 0;
  start_nodes(opts);
  ASSERT_TRUE(run_until([this] { return nodes_->has_synced(); }));
  // The first LIST (resourceVersion=0) is served from the watch cache, which may not have
  // caught up with the two creates yet; the watch then brings the missing node.
  ASSERT_TRUE(run_until(
      [this] { return node_seen_.contains("add keep") && node_seen_.contains("add doomed"); }));
  const std::string synced_at = nodes_->resource_version();

  // Any write moves etcd's revision past `synced_at`, so the restarted server's watch cache
  // starts after it and a watch from `synced_at` is "too old" (410).
  expect_status(call(http::verb::post, "/api/v1/namespaces/default/configmaps",
                     R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"bump"}})"),
                201);
  ASSERT_EQ(cluster.run("down"), 0);
  relay.set_target(0);  // unreachable until the delete and the compaction below are done
  ASSERT_TRUE(run_until([this] { return nodes_->stats().errors >= 1; }, 60s));
  ASSERT_EQ(cluster.run("up"), 0);

  // The informer is still backing off: change the world behind its back, then compact etcd
  // so that the relist at `synced_at` is 410 too.
  loaded = k8sclient::load_kubeconfig(cluster.kubeconfig());
  ASSERT_TRUE(loaded) << loaded.error().message;
  client direct(io_.get_executor(), loaded.value());
  auto del = run_sync(io_, direct.send(request(http::verb::delete_, "/api/v1/nodes/doomed")));
  ASSERT_TRUE(del);
  ASSERT_TRUE(*del) << (*del).error().message;
  EXPECT_EQ((*del)->status, 200U);
  auto latest = run_sync(io_, direct.send(request(http::verb::get, "/api/v1/nodes?limit=1")));
  ASSERT_TRUE(latest && *latest);
  const auto pos = (*latest)->body.find("\"resourceVersion\":\"");
  ASSERT_NE(pos, std::string::npos);
  const auto rv_start = pos + 19;
  const std::string revision =
      (*latest)->body.substr(rv_start, (*latest)->body.find('"', rv_start) - rv_start);
  auto compact = shell("ETCDCTL_API=3 etcdctl --endpoints '" + cluster.etcd_url() + "' compact " +
                       revision + " 2>&1");
  ASSERT_EQ(compact.first, 0) << compact.second;
  EXPECT_TRUE(node_seen_.contains("add doomed"));
  EXPECT_FALSE(node_seen_.contains("delete doomed"));  // still waiting
  relay.set_target(cluster.api_port());

  ASSERT_TRUE(run_until([this] { return node_seen_.contains("delete doomed"); }, 120s));
  EXPECT_FALSE(node_store_.get("doomed"));
  EXPECT_TRUE(node_store_.get("keep"));
  const auto st = nodes_->stats();
  EXPECT_EQ(st.relists, 1U);
  EXPECT_GE(st.lists, 2U);
  EXPECT_NE(nodes_->resource_version(), synced_at);
  direct.shutdown();
}

}  // namespace
}  // namespace tec::informers

namespace tec::informers {
namespace {

// LIST pages streamed from etcd in small pages (continue tokens issued by the real server), and
// a continue token that expires between two pages (an etcd compaction) -> paging again from
// the start, not one LIST without a limit.
class informer_paging_itest : public informer_itest {
protected:
  void SetUp() override {
    informer_itest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    // deploy/local/cluster.sh keeps the etcd endpoint next to the admin kubeconfig.
    const auto env = std::filesystem::path(std::getenv("KUBECONFIG")).parent_path() / "env";
    etcd_ =
        shell(". '" + env.string() + "' 2>/dev/null && printf %s \"$TEC_CLUSTER_ETCD_URL\"").second;
    admin_ = std::make_unique<client>(io_.get_executor(), config_);
    suffix_ = unique_suffix();
    for (int i = 0; i < 5; ++i) {
      const std::string name = "tec-paging-" + suffix_ + "-" + std::to_string(i);
      auto res =
          run_sync(io_, admin_->send(request(http::verb::post, "/api/v1/nodes", node_body(name))));
      ASSERT_TRUE(res && *res);
      ASSERT_EQ((*res)->status, 201U) << (*res)->body;
      created_.push_back(name);
    }
  }

  void TearDown() override {
    informer_itest::TearDown();
    for (const auto& name : created_) {
      (void)run_sync(io_, admin_->send(request(http::verb::delete_, "/api/v1/nodes/" + name)));
    }
    if (admin_) {
      admin_->shutdown();
    }
  }

  /// A node informer listing from etcd in pages of 2; `before_request(n)` runs before its
  /// client's n-th request (1-based), on the I/O thread.
  void start_paging(std::function<void(int)> before_request) {
    k8sclient::client_options copts;
    copts.delay = [this, hook = std::move(before_request)](k8sclient::wait_reason why,
                                                           std::chrono::nanoseconds wanted) {
      if (why == k8sclient::wait_reason::rate_limit) {
        hook(++requests_);
      }
      return wanted;
    };
    api_ = std::make_unique<client>(io_.get_executor(), config_, copts);
    k8sclient::reflector_options opts;
    opts.page_size = 2;
    opts.first_list_resource_version = "";
    start_nodes(opts);
  }

  void expect_created_nodes() {
    for (const auto& name : created_) {
      EXPECT_TRUE(node_store_.get(name)) << name;
    }
  }

  std::string etcd_;
  std::string suffix_;
  std::unique_ptr<client> admin_;
  std::vector<std::string> created_;
  int requests_ = 0;
};

TEST_P(informer_paging_itest, pages_from_etcd_are_streamed_and_followed) {
  start_paging([](int) {});
  ASSERT_TRUE(run_until([this] { return nodes_->has_synced(); }));
  expect_created_nodes();
  const auto st = nodes_->stats();
  EXPECT_EQ(st.lists, 1U);
  EXPECT_EQ(st.errors, 0U);
  EXPECT_EQ(st.decode_errors, 0U);
  EXPECT_GE(requests_, 3);  // at least 5 nodes in pages of 2
}

TEST_P(informer_paging_itest, an_expired_continue_token_pages_again_from_the_start) {
  if (etcd_.empty() || shell("command -v etcdctl >/dev/null").first != 0) {
    GTEST_SKIP() << "needs etcdctl and the cluster's etcd endpoint (deploy/local/cluster.sh)";
  }
  const std::string etcdctl = "ETCDCTL_API=3 etcdctl --endpoints '" + etcd_ + "' ";
  std::pair<int, std::string> compacted{-1, "not run"};
  start_paging([&](int n) {
    if (n != 2) {
      return;
    }
    // Before the second page: a write past the first page's revision (a key outside the
    // API server's prefix, removed again), then a compaction there: the token has expired.
    const std::string key = "/tec-paging-itest/" + suffix_;
    const auto put = shell(etcdctl + "put " + key + " x -w json");
    const auto at = put.second.find("\"revision\":");
    if (put.first != 0 || at == std::string::npos) {
      compacted = {-1, "put failed: " + put.second};
      return;
    }
    const auto revision = std::strtoll(put.second.c_str() + at + 11, nullptr, 10);
    (void)shell(etcdctl + "del " + key);
    compacted = shell(etcdctl + "compact " + std::to_string(revision) + " 2>&1");
  });
  ASSERT_TRUE(run_until([this] { return nodes_->has_synced(); }));
  ASSERT_EQ(compacted.first, 0) << compacted.second;
  expect_created_nodes();
  const auto st = nodes_->stats();
  EXPECT_EQ(st.lists, 1U);
  EXPECT_EQ(st.errors, 0U);  // paging again is part of the same list, not a failure
  // Page 1, the expired page 2, then at least 3 pages from the start again (where client-go
  // would send one LIST without a limit: 3 requests in all).
  EXPECT_GE(requests_, 5);
}

const auto encoding_name = [](const ::testing::TestParamInfo<bool>& info) {
  return std::string(info.param ? "protobuf" : "json");
};
INSTANTIATE_TEST_SUITE_P(encodings, informer_itest, ::testing::Bool(), encoding_name);
INSTANTIATE_TEST_SUITE_P(encodings, informer_paging_itest, ::testing::Bool(), encoding_name);

}  // namespace
}  // namespace tec::informers

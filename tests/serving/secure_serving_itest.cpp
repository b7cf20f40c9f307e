// The secure port against the real local kube-apiserver (issue 31): delegated authentication
// (TokenReview) and authorization (SubjectAccessReview) with ServiceAccount tokens from the
// TokenRequest API: no token, a wrong token, a token without RBAC, a token with RBAC; a flood
// of idle and garbage connections does not starve the probe port's /healthz; the review cache
// stays within its bound whatever the tokens.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "k8sclient/support/cluster.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/serving/delegated_auth.hpp"
#include "tec/serving/http_endpoints.hpp"
#include "tec/serving/tls_credentials.hpp"

// A namespace of its own: the module's tests are compiled as one unity file.
namespace tec::serving::secure_serving_itests {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr std::size_t cache_bound = 32;

// Blocking reads and writes of the test's own sockets give up after 10 s (a broken server fails
// the test instead of hanging it).
void bound_blocking_io(tcp::socket& s) {
  const timeval tv{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

class secure_serving_itest : public ::testing::Test {
protected:
  void SetUp() override {
    auto cfg = k8sclient::testing::cluster_config();
    if (!cfg) {
      GTEST_SKIP() << "KUBECONFIG is not set: no cluster";
    }
    k8sclient::client_options copts;
    copts.qps = 0;  // the flood of wrong tokens below is hundreds of reviews
    api_.emplace(io_.get_executor(), *cfg, copts);
    io_thread_ = std::thread([this] { io_.run(); });

    suffix_ = k8sclient::testing::unique_name("");
    reader_ = "tec-ss-reader-" + suffix_;
    norbac_ = "tec-ss-norbac-" + suffix_;
    for (const auto& sa : {reader_, norbac_}) {
      ASSERT_EQ(
          send(http::verb::post, "/api/v1/namespaces/default/serviceaccounts",
               json{{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", sa}}}})
              .status,
          201U);
    }
    const json role{
        {"apiVersion", "rbac.authorization.k8s.io/v1"},
        {"kind", "ClusterRole"},
        {"metadata", {{"name", reader_}}},
        {"rules",
         json::array({{{"nonResourceURLs", {"/metrics", "/debug/*"}}, {"verbs", {"get"}}}})}};
    ASSERT_EQ(
        send(http::verb::post, "/apis/rbac.authorization.k8s.io/v1/clusterroles", role).status,
        201U);
    const json binding{
        {"apiVersion", "rbac.authorization.k8s.io/v1"},
        {"kind", "ClusterRoleBinding"},
        {"metadata", {{"name", reader_}}},
        {"roleRef",
         {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", reader_}}},
        {"subjects",
         json::array({{{"kind", "ServiceAccount"}, {"name", reader_}, {"namespace", "default"}}})}};
    ASSERT_EQ(
        send(http::verb::post, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
            .status,
        201U);
    reader_token_ = token_for(reader_);
    norbac_token_ = token_for(norbac_);
    ASSERT_FALSE(reader_token_.empty());
    ASSERT_FALSE(norbac_token_.empty());

    auto creds = tls_credentials::self_signed({"localhost", "127.0.0.1"});
    ASSERT_TRUE(creds) << creds.error().message;
    authorizer_ = std::make_shared<delegated_authorizer>(
        make_api_review_backend(*api_, io_.get_executor()), api_->clock(),
        review_cache_options{.allowed_ttl = 10s,
                             .denied_ttl = 200ms,
                             .max_entries = cache_bound,
                             .known_ttl = 1h,
                             .unknown_per_second = 2,
                             .unknown_burst = static_cast<double>(4 * cache_bound)});
    secure_.emplace(io_.get_executor(),
                    http_endpoints_options{
                        .bind_address = "127.0.0.1:0", .tls = *creds, .authorizer = authorizer_});
    secure_->handle("/metrics", [] { return http_response{200, "text/plain", "up 1\n"}; });
    secure_->handle("/debug/evictions", [] {
      return http_response{200, "application/json", R"({"evictions":[]})"};
    });
    probes_.emplace(io_.get_executor(), http_endpoints_options{.bind_address = "127.0.0.1:0"});
    probes_->handle_check("/healthz", [] { return check_result{}; });
    auto s = secure_->start();
    ASSERT_TRUE(s && s.value()) << (s ? "disabled" : s.error().message);
    secure_ep_ = *s.value();
    auto p = probes_->start();
    ASSERT_TRUE(p && p.value()) << (p ? "disabled" : p.error().message);
    probe_ep_ = *p.value();
  }

  void TearDown() override {
    if (secure_) {
      secure_->stop();
    }
    if (probes_) {
      probes_->stop();
    }
    if (api_ && !reader_.empty()) {
      send(http::verb::delete_, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/" + reader_,
           {});
      send(http::verb::delete_, "/apis/rbac.authorization.k8s.io/v1/clusterroles/" + reader_, {});
      for (const auto& sa : {reader_, norbac_}) {
        send(http::verb::delete_, "/api/v1/namespaces/default/serviceaccounts/" + sa, {});
      }
    }
    if (api_) {
      api_->shutdown();
    }
    work_.reset();
    if (io_thread_.joinable()) {
      io_thread_.join();
    }
  }

  // A request of the admin client, on the I/O thread; waits for the answer.
  k8sclient::response send(http::verb verb, std::string target, const json& body) {
    k8sclient::request req(verb, std::move(target), body.is_null() ? "" : body.dump());
    auto fut = asio::co_spawn(io_, api_->send(std::move(req)), asio::use_future);
    if (fut.wait_for(30s) != std::future_status::ready) {
      ADD_FAILURE() << "no answer from the API server";
      return {};
    }
    auto r = fut.get();
    if (!r) {
      ADD_FAILURE() << r.error().message;
      return {};
    }
    return *r;
  }

  // A token of the ServiceAccount `name` from the TokenRequest API.
  std::string token_for(const std::string& name) {
    const auto r =
        send(http::verb::post, "/api/v1/namespaces/default/serviceaccounts/" + name + "/token",
             json{{"apiVersion", "authentication.k8s.io/v1"},
                  {"kind", "TokenRequest"},
                  {"spec", {{"expirationSeconds", 3600}}}});
    EXPECT_EQ(r.status, 201U) << r.body;
    try {
      return json::parse(r.body).at("status").at("token").get<std::string>();
    } catch (const json::exception& e) {
      ADD_FAILURE() << e.what() << ": " << r.body;
      return {};
    }
  }

  // One HTTPS GET with an optional bearer token (blocking, on the test's thread); the status, 0
  // when the exchange failed.
  unsigned get(const std::string& target, const std::string& token) {
    asio::io_context client_io;
    ssl::context ctx(ssl::context::tls_client);
    ctx.set_verify_mode(ssl::verify_none);  // the certificate itself is tested in unit tests
    beast::ssl_stream<tcp::socket> stream(client_io, ctx);
    boost::system::error_code ec;
    stream.next_layer().connect(secure_ep_, ec);
    bound_blocking_io(stream.next_layer());
    if (!ec) {
      stream.handshake(ssl::stream_base::client, ec);
    }
    if (ec) {
      ADD_FAILURE() << "cannot connect: " << ec.message();
      return 0;
    }
    http::request<http::string_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "localhost");
    if (!token.empty()) {
      req.set(http::field::authorization, "Bearer " + token);
    }
    http::write(stream, req, ec);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    if (!ec) {
      http::read(stream, buffer, res, ec);
    }
    if (ec) {
      ADD_FAILURE() << target << ": " << ec.message();
      return 0;
    }
    return res.result_int();
  }

  // The status of `target` once it is `want` (RBAC objects reach the authorizer's cache a
  // moment after they are created), or the last status after 20 s.
  unsigned get_until(const std::string& target, const std::string& token, unsigned want) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    unsigned got = get(target, token);
    while (got != want && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(250ms);  // longer than the denied TTL
      got = get(target, token);
    }
    return got;
  }

  std::size_t cached() {
    return asio::post(io_, std::packaged_task<std::size_t()>(
                               [this] { return authorizer_->cached_for_test(); }))
        .get();
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  std::thread io_thread_;
  std::optional<k8sclient::client> api_;
  std::string suffix_, reader_, norbac_, reader_token_, norbac_token_;
  std::shared_ptr<delegated_authorizer> authorizer_;
  std::optional<http_endpoints> secure_;
  std::optional<http_endpoints> probes_;
  tcp::endpoint secure_ep_, probe_ep_;
};

TEST_F(secure_serving_itest, no_token_wrong_token_no_rbac_and_rbac) {
  EXPECT_EQ(get("/metrics", ""), 401U);
  EXPECT_EQ(get("/metrics", "not-a-token"), 401U);
  // A token the API server issued, with a signature of its own: still not authenticated.
  auto forged = reader_token_;
  auto& c = forged.at(forged.size() - 20);  // inside the signature
  c = c == 'A' ? 'B' : 'A';
  EXPECT_EQ(get("/metrics", forged), 401U);
  EXPECT_EQ(get("/metrics", norbac_token_), 403U);
  EXPECT_EQ(get("/debug/evictions", norbac_token_), 403U);
  EXPECT_EQ(get_until("/metrics", reader_token_, 200U), 200U);
  EXPECT_EQ(get_until("/debug/evictions", reader_token_, 200U), 200U);
  // The role names /metrics and /debug/*, nothing else. (Every user may get /healthz:
  // system:public-info-viewer; it is not served on this port, so that is a 404.)
  EXPECT_EQ(get("/healthz", reader_token_), 404U);
  EXPECT_EQ(get("/other", reader_token_), 403U);
  EXPECT_EQ(get("/metricsx", reader_token_), 403U);
}

TEST_F(secure_serving_itest, the_review_cache_stays_within_its_bound) {
  for (std::size_t i = 0; i < 4 * cache_bound; ++i) {
    ASSERT_EQ(get("/metrics", "flood-" + std::to_string(i)), 401U);
    ASSERT_LE(cached(), cache_bound);
  }
  EXPECT_EQ(cached(), cache_bound);
  // The address has spent its burst of unknown tokens (2 a second come back): more are
  // refused without a review, and a reader is still answered.
  bool limited = false;
  for (int i = 0; i < 64 && !limited; ++i) {
    limited = get("/metrics", "extra-" + std::to_string(i)) == 503U;
  }
  EXPECT_TRUE(limited) << "64 more unknown tokens from one address were all reviewed";
  EXPECT_EQ(get_until("/metrics", reader_token_, 200U), 200U);
  EXPECT_LE(cached(), cache_bound);
}

// The probe port is a server of its own: thousands of idle connections and garbage headers
// on both ports leave /healthz answering.
TEST_F(secure_serving_itest, a_flood_of_idle_and_garbage_connections_does_not_starve_healthz) {
  asio::io_context flood_io;
  std::vector<tcp::socket> held;
  int connected = 0;
  const auto open = [&](const tcp::endpoint& ep, std::string_view bytes) {
    tcp::socket s(flood_io);
    boost::system::error_code ec;
    s.connect(ep, ec);
    if (!ec && !bytes.empty()) {
      asio::write(s, asio::buffer(bytes), ec);
    }
    connected += ec ? 0 : 1;
    held.push_back(std::move(s));
  };
  constexpr std::string_view garbage = "GET /metrics HTTP/1.1\r\nX-\x01\x02: \xff\xfe\r\nHost";
  constexpr std::string_view not_tls = "\x16\x03\x01\x00\x05garbage-not-a-hello";
  for (int i = 0; i < 1500; ++i) {
    open(probe_ep_, i % 10 == 0 ? garbage : std::string_view{});
    open(secure_ep_, i % 10 == 0 ? not_tls : std::string_view{});
  }
  EXPECT_GE(connected, 2900) << "the flood did not connect";
  // Each /healthz on a new connection, as kubelet does, while the flood holds its sockets.
  for (int i = 0; i < 20; ++i) {
    tcp::socket s(flood_io);
    const auto start = std::chrono::steady_clock::now();
    s.connect(probe_ep_);
    bound_blocking_io(s);
    const std::string req = "GET /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n";
    asio::write(s, asio::buffer(req));
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(s, buffer, res);
    EXPECT_EQ(res.result_int(), 200U) << "probe " << i;
    EXPECT_EQ(res.body(), "ok");
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "probe " << i;
  }
  // And the secure port still serves a reader.
  EXPECT_EQ(get_until("/metrics", reader_token_, 200U), 200U);
  held.clear();
}

// README "Pending evictions": the API server's service proxy authenticates its caller and drops
// the Authorization header before proxying, so the secure port sees no token and answers 401
// (its own body, passed through), whoever asks. The apiserver proxies only to an address a pod
// has: a stand-in pod (never run: no kubelet) gets this host's address.
TEST_F(secure_serving_itest, the_api_servers_service_proxy_forwards_no_token) {
  std::string host_ip;
  if (FILE* pipe = ::popen("hostname -I 2>/dev/null", "r"); pipe != nullptr) {
    char buf[512] = {};
    const auto n = std::fread(buf, 1, sizeof buf - 1, pipe);
    ::pclose(pipe);
    std::istringstream words(std::string(buf, n));
    for (std::string w; words >> w;) {
      if (w.find(':') == std::string::npos && !w.starts_with("127.")) {
        host_ip = w;
        break;
      }
    }
  }
  if (host_ip.empty()) {
    GTEST_SKIP() << "this host has no non-loopback IPv4 address";
  }
  auto creds = tls_credentials::self_signed({"localhost"});
  ASSERT_TRUE(creds);
  http_endpoints server(io_.get_executor(), http_endpoints_options{.bind_address = host_ip + ":0",
                                                                   .tls = *creds,
                                                                   .authorizer = authorizer_});
  server.handle("/metrics", [] { return http_response{200, "text/plain", "up 1\n"}; });
  auto bound = server.start();
  ASSERT_TRUE(bound && bound.value());
  const auto port = bound.value()->port();
  const std::string name = reader_;  // unique per run
  const std::string ns_path = "/api/v1/namespaces/default";
  ASSERT_EQ(
      send(http::verb::post, ns_path + "/pods",
           json{{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}}},
                {"spec",
                 {{"automountServiceAccountToken", false},
                  {"containers",
                   json::array({{{"name", "pause"}, {"image", "registry.k8s.io/pause:3.9"}}})}}}})
          .status,
      201U);
  k8sclient::request status_patch(
      http::verb::patch, ns_path + "/pods/" + name + "/status",
      json{{"status", {{"podIP", host_ip}, {"podIPs", json::array({{{"ip", host_ip}}})}}}}.dump(),
      "application/merge-patch+json");
  auto patched = asio::co_spawn(io_, api_->send(std::move(status_patch)), asio::use_future).get();
  ASSERT_TRUE(patched && patched->status == 200U) << (patched ? patched->body : "");
  ASSERT_EQ(send(http::verb::post, ns_path + "/services",
                 json{{"apiVersion", "v1"},
                      {"kind", "Service"},
                      {"metadata", {{"name", name}}},
                      {"spec", {{"ports", json::array({{{"name", "metrics"}, {"port", 8443}}})}}}})
                .status,
            201U);
  ASSERT_EQ(
      send(http::verb::post, ns_path + "/endpoints",
           json{{"apiVersion", "v1"},
                {"kind", "Endpoints"},
                {"metadata", {{"name", name}}},
                {"subsets",
                 json::array({{{"addresses", json::array({{{"ip", host_ip},
                                                           {"targetRef",
                                                            {{"kind", "Pod"},
                                                             {"namespace", "default"},
                                                             {"name", name}}}}})},
                               {"ports", json::array({{{"name", "metrics"}, {"port", port}}})}}})}})
          .status,
      201U);
  const auto proxied =
      send(http::verb::get, ns_path + "/services/https:" + name + ":8443/proxy/metrics", {});
  EXPECT_EQ(proxied.status, 401U) << proxied.body;
  EXPECT_EQ(proxied.body, "Unauthorized\n");  // the controller's answer, not the API server's
  server.stop();
  send(http::verb::delete_, ns_path + "/endpoints/" + name, {});
  send(http::verb::delete_, ns_path + "/services/" + name, {});
  send(http::verb::delete_, ns_path + "/pods/" + name + "?gracePeriodSeconds=0", {});
}

}  // namespace
}  // namespace tec::serving::secure_serving_itests

// The HTTP client against the real local kube-apiserver (TLS, client certificates from the
// admin kubeconfig). ctest sets KUBECONFIG to the fixture cluster's admin.kubeconfig.

#include <gtest/gtest.h>

#include <unistd.h>
#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "k8sclient/support/run_sync.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/config.hpp"

namespace tec::k8sclient {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using testing::run_sync;

class client_itest : public ::testing::Test {
protected:
  void SetUp() override {
    const char* path = std::getenv("KUBECONFIG");
    if (path == nullptr || *path == '\0') {
      GTEST_SKIP() << "KUBECONFIG is not set (run through ctest, or export it)";
    }
    auto loaded = load_kubeconfig(path);
    ASSERT_TRUE(loaded) << loaded.error().message;
    config_ = loaded.value();
    ASSERT_TRUE(config_.tls);
  }

  base::result<response> call(client& c, http::verb verb, std::string target,
                              std::string body = {}) {
    auto out = run_sync(io_, c.send(request(verb, std::move(target), std::move(body),
                                            "application/json", verb == http::verb::get)));
    if (!out) {
      ADD_FAILURE() << "request did not complete";
      return base::error{make_error_code(base::errc::timeout), "test limit", 0};
    }
    return std::move(*out);
  }

  asio::io_context io_;
  rest_config config_;
};

TEST_F(client_itest, version_over_verified_tls) {
  client c(io_.get_executor(), config_);
  auto res = call(c, http::verb::get, "/version");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200U);
  EXPECT_NE(res->body.find("\"gitVersion\": \"v1.20.2\""), std::string::npos) << res->body;
}

TEST_F(client_itest, namespaces_list_and_missing_object_status) {
  client c(io_.get_executor(), config_);
  auto res = call(c, http::verb::get, "/api/v1/namespaces");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200U);
  EXPECT_NE(res->body.find("\"kind\":\"NamespaceList\""), std::string::npos);
  EXPECT_NE(res->body.find("\"name\":\"default\""), std::string::npos);
  auto missing = call(c, http::verb::get, "/api/v1/namespaces/default/pods/does-not-exist-xyz");
  ASSERT_TRUE(missing) << missing.error().message;
  EXPECT_EQ(missing->status, 404U);
}

TEST_F(client_itest, many_requests_share_a_small_pool) {
  client_options opts;
  opts.max_connections = 1;
  int exchanges = 0;
  opts.observer = [&](http::verb, unsigned status, std::chrono::nanoseconds) {
    EXPECT_EQ(status, 200U);
    ++exchanges;
  };
  client c(io_.get_executor(), config_, opts);
  for (int i = 0; i < 20; ++i) {
    auto res = call(c, http::verb::get, "/api/v1/namespaces/default");
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->status, 200U);
  }
  EXPECT_EQ(exchanges, 20);
}

TEST_F(client_itest, wrong_server_name_fails_verification) {
  config_.tls_server_name = "not-the-apiserver.example";
  client c(io_.get_executor(), config_);
  auto res = call(c, http::verb::get, "/version");
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, make_error_code(base::errc::connection_failed));
  EXPECT_NE(res.error().message.find("TLS handshake"), std::string::npos) << res.error().message;
}

TEST_F(client_itest, unknown_ca_fails_verification_unless_insecure) {
  config_.ca_pem.clear();  // system roots do not know the local CA
  {
    client c(io_.get_executor(), config_);
    auto res = call(c, http::verb::get, "/version");
    ASSERT_FALSE(res);
    EXPECT_EQ(res.error().code, make_error_code(base::errc::connection_failed));
  }
  config_.insecure_skip_tls_verify = true;
  client c(io_.get_executor(), config_);
  auto res = call(c, http::verb::get, "/version");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200U);
}

TEST_F(client_itest, bad_token_is_401) {
  config_.client_cert_pem.clear();
  config_.client_key_pem.clear();
  config_.bearer_token = "not-a-valid-token";
  client c(io_.get_executor(), config_);
  auto res = call(c, http::verb::get, "/api/v1/namespaces");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 401U);
}

TEST_F(client_itest, watch_streams_until_the_server_timeout) {
  client c(io_.get_executor(), config_);
  std::string got;
  auto out =
      run_sync(io_, c.stream(
                        request(http::verb::get, "/api/v1/namespaces?watch=1&timeoutSeconds=1", {},
                                "application/json", true),
                        [&](std::string_view bytes) {
                          got.append(bytes);
                          return true;
                        },
                        30s));
  ASSERT_TRUE(out);
  ASSERT_TRUE(*out) << (*out).error().message;
  EXPECT_EQ((*out)->status, 200U);
  EXPECT_NE(got.find("{\"type\":\"ADDED\""), std::string::npos) << got;
  EXPECT_EQ(got.back(), '\n');
}

/// metadata.resourceVersion of a list body.
std::string list_version(const std::string& body) {
  const std::string key = "\"resourceVersion\":\"";
  const auto pos = body.find(key);
  if (pos == std::string::npos) {
    return {};
  }
  const auto start = pos + key.size();
  return body.substr(start, body.find('"', start) - start);
}

TEST_F(client_itest, list_at_a_compacted_version_is_gone) {
  const char* kubeconfig = std::getenv("KUBECONFIG");
  const auto env_file = std::filesystem::path(kubeconfig).parent_path() / "env";
  if (!std::filesystem::exists(env_file) || std::system("command -v etcdctl >/dev/null") != 0) {
    GTEST_SKIP() << "needs etcdctl and the cluster's env file next to KUBECONFIG";
  }
  client c(io_.get_executor(), config_);
  auto before = call(c, http::verb::get, "/api/v1/nodes?limit=1");
  ASSERT_TRUE(before && before->status == 200U);
  const std::string old_version = list_version(before->body);
  ASSERT_FALSE(old_version.empty());
  const std::string name = "tec-client-itest-" + std::to_string(::getpid());
  auto bump =
      call(c, http::verb::post, "/api/v1/namespaces/default/configmaps",
           R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":")" + name + R"("}})");
  ASSERT_TRUE(bump) << bump.error().message;
  auto after = call(c, http::verb::get, "/api/v1/nodes?limit=1");
  ASSERT_TRUE(after && after->status == 200U);
  const std::string new_version = list_version(after->body);
  const std::string compact = ". '" + env_file.string() +
                              "' && ETCDCTL_API=3 etcdctl --endpoints \"$TEC_CLUSTER_ETCD_URL\" "
                              "compact " +
                              new_version + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(compact.c_str()), 0) << compact;
  auto gone = call(c, http::verb::get, "/api/v1/nodes?limit=500&resourceVersion=" + old_version);
  ASSERT_TRUE(gone) << gone.error().message;
  EXPECT_EQ(gone->status, 410U) << gone->body;
  (void)call(c, http::verb::delete_, "/api/v1/namespaces/default/configmaps/" + name);
}

}  // namespace
}  // namespace tec::k8sclient

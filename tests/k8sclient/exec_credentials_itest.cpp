// Exec credential plugins against the real local kube-apiserver: a kubeconfig whose user is a
// bash script printing an ExecCredential (v1 and v1beta1) with a token the API server's token
// file accepts (the admin's, from the fixture's admin.kubeconfig), or a client certificate
// signed by the cluster CA (its key is in the state directory's pki/); a rejected token run
// again after the 401; a credential renewed at its expiry (on a manual clock: the API server
// does not care, the client does); a failing plugin. ctest sets KUBECONFIG to the fixture
// cluster's admin.kubeconfig.

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "k8sclient/support/run_sync.hpp"
#include "support/manual_clock.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/exec_authenticator.hpp"

namespace tec::k8sclient {
namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using testing::run_sync;

class exec_itest : public ::testing::Test {
protected:
  void SetUp() override {
    const char* path = std::getenv("KUBECONFIG");
    if (path == nullptr || *path == '\0') {
      GTEST_SKIP() << "KUBECONFIG is not set (run through ctest, or export it)";
    }
    admin_path_ = path;
    auto admin = load_kubeconfig(admin_path_);
    ASSERT_TRUE(admin) << admin.error().message;
    admin_token_ = admin->bearer_token;
    ASSERT_FALSE(admin_token_.empty()) << "the fixture's admin kubeconfig has no token";
    server_ = "https://" + admin->host + ":" + admin->port;
    ca_pem_ = admin->ca_pem;

    std::string pattern = (fs::temp_directory_path() / "tec-exec-itest-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    write("ca.crt", ca_pem_);
    write("admin-token", admin_token_);
  }
  void TearDown() override {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  void write(const std::string& name, const std::string& content) const {
    std::ofstream(dir_ / name, std::ios::trunc) << content;
  }
  [[nodiscard]] int runs() const {
    std::ifstream in(dir_ / "runs");
    int n = 0;
    in >> n;
    return n;
  }

  /// A plugin that counts its runs and prints $DIR/cred-<run>.json if it exists, else
  /// $DIR/cred.json; exits 1 with a message on stderr when $DIR/fail exists.
  std::string plugin() const {
    const fs::path p = dir_ / "plugin";
    std::ofstream(p, std::ios::trunc)
        << "#!/bin/bash\nDIR='" << dir_.string() << "'\n"
        << "n=$(( $(cat \"$DIR/runs\" 2>/dev/null || echo 0) + 1 ))\necho $n >\"$DIR/runs\"\n"
        << "[ -e \"$DIR/fail\" ] && { echo 'error: the identity provider said no' >&2; exit 1; }\n"
        << "f=\"$DIR/cred-$n.json\"; [ -e \"$f\" ] || f=\"$DIR/cred.json\"\ncat \"$f\"\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }

  /// An ExecCredential of `api` with `status`.
  void credential(const std::string& name, const nlohmann::json& status,
                  std::string_view api = exec_api_v1) const {
    write(
        name,
        nlohmann::json{{"apiVersion", api}, {"kind", "ExecCredential"}, {"status", status}}.dump());
  }

  /// A kubeconfig for the fixture's API server whose user is plugin().
  rest_config config(std::string_view api = exec_api_v1) const {
    const std::string text =
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters:\n- name: c\n  cluster:\n    server: " +
        server_ +
        "\n    certificate-authority: ca.crt\n"
        "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
        "users:\n- name: u\n  user:\n    exec:\n      apiVersion: " +
        std::string(api) + "\n      command: ./plugin\n" +
        "      interactiveMode: Never\n      provideClusterInfo: true\n";
    write("kubeconfig", text);
    auto loaded = load_kubeconfig((dir_ / "kubeconfig").string());
    if (!loaded) {
      throw std::runtime_error(loaded.error().message);
    }
    plugin();
    return loaded.value();
  }

  base::result<response> get(client& c, const std::string& target) {
    auto out =
        run_sync(io_, c.send(request(http::verb::get, target, {}, "application/json", true)), 60s);
    if (!out) {
      ADD_FAILURE() << "request did not complete";
      return base::error{make_error_code(base::errc::timeout), "test limit", 0};
    }
    return std::move(*out);
  }

  std::string admin_path_;
  std::string admin_token_;
  std::string server_;
  std::string ca_pem_;
  fs::path dir_;
  boost::asio::io_context io_;
};

TEST_F(exec_itest, v1_and_v1beta1_tokens_authenticate) {
  for (const auto api : {exec_api_v1, exec_api_v1beta1}) {
    fs::remove(dir_ / "runs");
    credential("cred.json", {{"token", admin_token_}}, api);
    client c(io_.get_executor(), config(api));
    for (int i = 0; i < 3; ++i) {
      auto res = get(c, "/api/v1/namespaces/default");
      ASSERT_TRUE(res) << res.error().message;
      EXPECT_EQ(res->status, 200U) << res->body;
    }
    EXPECT_EQ(runs(), 1) << api;  // cached
  }
}

TEST_F(exec_itest, a_rejected_token_runs_the_plugin_again_and_the_request_is_resent) {
  credential("cred-1.json", {{"token", "not-a-token-the-server-knows"}});
  credential("cred.json", {{"token", admin_token_}});
  client c(io_.get_executor(), config());
  auto res = get(c, "/api/v1/namespaces");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200U) << res->body;
  EXPECT_EQ(runs(), 2);
}

TEST_F(exec_itest, a_client_certificate_from_the_plugin_authenticates) {
  const fs::path pki = fs::path(admin_path_).parent_path() / "pki";
  if (!fs::exists(pki / "ca.key")) {
    GTEST_SKIP() << "no cluster CA key at " << (pki / "ca.key");
  }
  // A client certificate of system:masters, signed by the cluster CA (--client-ca-file).
  const std::string cmd =
      "cd '" + dir_.string() +
      "' && openssl req -new -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
      "-subj '/O=system:masters/CN=tec-exec-itest' 2>/dev/null && openssl x509 -req -days 1 "
      "-in client.csr -CA '" +
      (pki / "ca.crt").string() + "' -CAkey '" + (pki / "ca.key").string() +
      "' -CAcreateserial -CAserial client.srl -out client.crt 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;  // NOLINT(concurrency-mt-unsafe)
  auto read = [&](const char* name) {
    std::ifstream in(dir_ / name);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  credential("cred.json", {{"clientCertificateData", read("client.crt")},
                           {"clientKeyData", read("client.key")}});
  client c(io_.get_executor(), config());
  auto res = get(c, "/api/v1/namespaces");  // anonymous would be 403: the certificate is used
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200U) << res->body;
}

TEST_F(exec_itest, an_expired_credential_is_renewed_before_the_next_request) {
  auto cfg = config();
  // The expiry on a manual clock (wall time 2024-01-01T00:00:00Z): the API server ignores it.
  auto clock = std::make_shared<test::manual_clock>();
  cfg.exec = std::make_shared<exec_authenticator>(cfg.exec->config(), exec_limits{}, clock);
  credential("cred.json",
             {{"token", admin_token_}, {"expirationTimestamp", "2024-01-01T00:10:00Z"}});
  client c(io_.get_executor(), cfg);
  auto first = get(c, "/api/v1/namespaces/default");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->status, 200U);
  credential("cred.json",
             {{"token", admin_token_}, {"expirationTimestamp", "2024-01-01T01:00:00Z"}});
  clock->advance(11min);
  auto second = get(c, "/api/v1/namespaces/default");
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->status, 200U);
  EXPECT_EQ(runs(), 2);
}

TEST_F(exec_itest, a_failing_plugin_fails_the_request_with_one_line) {
  write("fail", "");
  client c(io_.get_executor(), config());
  auto res = get(c, "/api/v1/namespaces/default");
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message.find("exited with status 1: error: the identity provider said no"),
            std::string::npos)
      << res.error().message;
  EXPECT_EQ(res.error().message.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace tec::k8sclient

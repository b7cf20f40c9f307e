// Exec credential plugins: the ExecCredential parser, a real run of a small bash script the
// test writes (v1 and v1beta1, token and client certificate, a failing plugin, a missing
// command, a hung one, too much output, invalid output), the authenticator's cache (expiry and
// renewal on a manual clock, a 401, the wait after a failure), the kubeconfig's exec block, and
// the client sending what the plugin gave and running it again after a 401.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/run_sync.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/manual_clock.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/exec_authenticator.hpp"
#include "tec/k8sclient/exec_plugin.hpp"
#include "tec/k8sclient/tls.hpp"

namespace tec::k8sclient {
namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using testing::fake_http_server;
using testing::reply;

// A client certificate and its key (the cluster CA of no cluster): only loaded, never verified.
constexpr const char* exec_cert_pem = R"(-----BEGIN CERTIFICATE-----
MIIBfzCCASWgAwIBAgIUa0X1MWZIGOfxQOJwS1+0q2ACI8swCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKZXhlYy1hZG1pbjAeFw0yNDAxMDEwMDAwMDBaFw0zNDAxMDEw
MDAwMDBaMBUxEzARBgNVBAMMCmV4ZWMtYWRtaW4wWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQ7KpzWf0TOHN7b1ElLkuYB1Vq5kSd6jMxE6vTnGzmPwAgT7uzg6WqN
ld8Rc6mT4xygjHWEeDixJb8LIeT76JKqo1MwUTAdBgNVHQ4EFgQUpXZHCQqmSIjh
pqY/ixO5OxwXmpowHwYDVR0jBBgwFoAUpXZHCQqmSIjhpqY/ixO5OxwXmpowDwYD
VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEA0DbbGvX8eSwHDMF7G7IF
3e7Fz6ZpRvMh4oJ6ezWmC+8CIGw0yKZbDUdBSnuCNu6MMYvkljS3lvKS0ewHA7NP
s1Jy
-----END CERTIFICATE-----
)";

/// A fresh directory for the plugin scripts and their files, removed at the end of the test.
class plugin_dir {
public:
  plugin_dir() {
    std::string pattern = (fs::temp_directory_path() / "tec-exec-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = pattern;
  }
  ~plugin_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  plugin_dir(const plugin_dir&) = delete;
  plugin_dir& operator=(const plugin_dir&) = delete;

  [[nodiscard]] std::string path() const { return path_.string(); }

  void write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name, std::ios::trunc) << content;
  }
  [[nodiscard]] std::string read(const std::string& name) const {
    std::ifstream in(path_ / name);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void remove(const std::string& name) const { fs::remove(path_ / name); }

  /// An executable bash script `name` with `body`; $DIR is this directory. Returns its path.
  std::string script(const std::string& name, const std::string& body) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::trunc) << "#!/bin/bash\nDIR='" << path() << "'\n" << body;
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }

  /// How many times a counting script ran.
  [[nodiscard]] int runs() const {
    const std::string n = read("runs");
    return n.empty() ? 0 : std::stoi(n);
  }

private:
  fs::path path_;
};

/// The body of a plugin that counts its runs in $DIR/runs and prints a token "tok-<run>" (and
/// the expiry in $DIR/expiry, when that file exists), with `api` as apiVersion.
std::string counting_plugin(std::string_view api = exec_api_v1) {
  return "n=$(( $(cat \"$DIR/runs\" 2>/dev/null || echo 0) + 1 ))\n"
         "echo $n >\"$DIR/runs\"\n"
         "[ -e \"$DIR/fail\" ] && { echo \"no credentials today\" >&2; exit 3; }\n"
         "exp=null\n"
         "[ -e \"$DIR/expiry\" ] && exp=\"\\\"$(cat \"$DIR/expiry\")\\\"\"\n"
         "printf '{\"apiVersion\":\"" +
         std::string(api) +
         "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-%s\","
         "\"expirationTimestamp\":%s}}\\n' \"$n\" \"$exp\"\n";
}

exec_config config_for(const std::string& command, std::string_view api = exec_api_v1) {
  exec_config c;
  c.api_version = std::string(api);
  c.command = command;
  c.source = "kubeconfig test: users[0].user.exec";
  return c;
}

void expect_one_line(const std::string& message) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find('\r'), std::string::npos) << message;
}

// ---- parse_exec_credential --------------------------------------------------------------------

TEST(parse_exec_credential, v1_token) {
  auto c = parse_exec_credential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)"
      R"("status":{"token":"abc"}})",
      exec_api_v1);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->token, "abc");
  EXPECT_FALSE(c->expiry);
}

TEST(parse_exec_credential, v1beta1_with_expiry_and_certificate) {
  nlohmann::json doc = {{"apiVersion", exec_api_v1beta1},
                        {"kind", "ExecCredential"},
                        {"status",
                         {{"clientCertificateData", exec_cert_pem},
                          {"clientKeyData",
                           "-----BEGIN EC PRIVATE KEY-----\nx\n"
                           "-----END EC PRIVATE KEY-----\n"},
                          {"expirationTimestamp", "2024-01-01T00:10:00Z"}}}};
  auto c = parse_exec_credential(doc.dump(), exec_api_v1beta1);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->token.empty());
  EXPECT_EQ(c->client_cert_pem, exec_cert_pem);
  ASSERT_TRUE(c->expiry);
  EXPECT_EQ(base::format_rfc3339(*c->expiry), "2024-01-01T00:10:00Z");
}

TEST(parse_exec_credential, invalid_documents_say_why_without_the_secret) {
  const std::string v1 =
      R"("apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential")";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"", "nothing on standard output"},
      {"token: x", "not JSON"},
      {"[1]", "not a JSON object"},
      {"{" + v1 + "}", "no status"},
      {"{" + v1 + R"(,"status":"x"})", "status is not an object"},
      {"{" + v1 + R"(,"status":{}})", "neither a token nor clientCertificateData"},
      {"{" + v1 + R"(,"status":{"clientCertificateData":"x"}})", "only one of"},
      {"{" + v1 + R"(,"status":{"token":7}})", "status.token is not a string"},
      {"{" + v1 + R"(,"status":{"token":"SECRET\nX"}})", "control character"},
      {"{" + v1 + R"(,"status":{"token":"SECRET","expirationTimestamp":"soon"}})",
       "expirationTimestamp \"soon\" is not an RFC 3339 time"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",)"
       R"("status":{"token":"SECRET"}})",
       "apiVersion \"client.authentication.k8s.io/v1beta1\", the kubeconfig wants"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Secret",)"
       R"("status":{"token":"SECRET"}})",
       "kind \"Secret\""},
  };
  for (const auto& [doc, want] : cases) {
    auto c = parse_exec_credential(doc, exec_api_v1);
    ASSERT_FALSE(c) << doc;
    EXPECT_NE(c.error().message.find(want), std::string::npos) << c.error().message;
    EXPECT_EQ(c.error().message.find("SECRET"), std::string::npos) << c.error().message;
    expect_one_line(c.error().message);
  }
}

TEST(exec_info_json, always_says_not_interactive_and_the_cluster_when_asked) {
  auto config = config_for("x");
  auto info = nlohmann::json::parse(exec_info_json(config));
  EXPECT_EQ(info["apiVersion"], exec_api_v1);
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_FALSE(info["spec"].contains("cluster"));
  config.provide_cluster_info = true;
  config.cluster_json = R"({"server":"https://h:6443"})";
  info = nlohmann::json::parse(exec_info_json(config));
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://h:6443");
}

// ---- run_exec_plugin: real processes --------------------------------------------------------

TEST(run_exec_plugin, v1_and_v1beta1_tokens_args_and_environment) {
  plugin_dir dir;
  for (const auto api : {exec_api_v1, exec_api_v1beta1}) {
    dir.remove("runs");
    auto config =
        config_for(dir.script("plugin", counting_plugin(api) +
                                            "printf '%s\\n' \"$@\" >\"$DIR/args\"\n"
                                            "echo \"$GREETING\" >\"$DIR/env\"\n"
                                            "echo \"$KUBERNETES_EXEC_INFO\" >\"$DIR/info\"\n"
                                            "[ -t 0 ] && echo tty >\"$DIR/env\"\n"
                                            "cat >/dev/null\n"),
                   api);
    config.args = {"get-token", "--cluster", "a b"};
    config.env = {{"GREETING", "hello"}};
    auto ran = run_exec_plugin(config, {});
    ASSERT_TRUE(ran) << ran.error().message;
    EXPECT_EQ(ran->credential.token, "tok-1");
    EXPECT_EQ(dir.read("args"), "get-token\n--cluster\na b\n");
    EXPECT_EQ(dir.read("env"), "hello\n");  // and standard input was no terminal (EOF at once)
    auto info = nlohmann::json::parse(dir.read("info"));
    EXPECT_EQ(info["apiVersion"], api);
    EXPECT_EQ(info["spec"]["interactive"], false);
  }
}

TEST(run_exec_plugin, client_certificate) {
  plugin_dir dir;
  dir.write("cred.json", nlohmann::json{{"apiVersion", exec_api_v1},
                                        {"kind", "ExecCredential"},
                                        {"status",
                                         {{"clientCertificateData", exec_cert_pem},
                                          {"clientKeyData",
                                           "-----BEGIN PRIVATE KEY-----\nx\n"
                                           "-----END PRIVATE KEY-----\n"}}}}
                             .dump());
  auto ran = run_exec_plugin(config_for(dir.script("plugin", "cat \"$DIR/cred.json\"\n")), {});
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_TRUE(ran->credential.token.empty());
  EXPECT_EQ(ran->credential.client_cert_pem, exec_cert_pem);
}

TEST(run_exec_plugin, failing_plugin_is_one_line_with_its_stderr) {
  plugin_dir dir;
  auto ran = run_exec_plugin(
      config_for(dir.script("plugin",
                            "echo 'error: token expired' >&2\n"
                            "printf 'run \"aws sso login\"\\r\\n\\n' >&2\nexit 1\n")),
      {});
  ASSERT_FALSE(ran);
  const auto& m = ran.error().message;
  EXPECT_NE(m.find("kubeconfig test: users[0].user.exec: the exec plugin \""), std::string::npos)
      << m;
  EXPECT_NE(m.find("exited with status 1: error: token expired / run \"aws sso login\""),
            std::string::npos)
      << m;
  expect_one_line(m);
}

TEST(run_exec_plugin, missing_command_shows_the_install_hint) {
  auto config = config_for("tec-no-such-exec-plugin");
  config.install_hint = "tec-no-such-exec-plugin is needed:\n  apt-get install tec-plugin\n";
  auto ran = run_exec_plugin(config, {});
  ASSERT_FALSE(ran);
  const auto& m = ran.error().message;
  EXPECT_NE(m.find("\"tec-no-such-exec-plugin\" was not found on PATH; install hint: "
                   "tec-no-such-exec-plugin is needed: / apt-get install tec-plugin"),
            std::string::npos)
      << m;
  expect_one_line(m);
  auto by_path = run_exec_plugin(config_for("/nonexistent/tec-plugin"), {});
  ASSERT_FALSE(by_path);
  EXPECT_NE(by_path.error().message.find("was not found"), std::string::npos);
}

TEST(run_exec_plugin, a_hung_plugin_is_killed_at_the_timeout) {
  plugin_dir dir;
  exec_limits limits;
  limits.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto ran =
      run_exec_plugin(config_for(dir.script("plugin", "echo waiting >&2\nsleep 60\n")), limits);
  ASSERT_FALSE(ran);
  EXPECT_NE(ran.error().message.find("did not finish within 300ms and was killed: waiting"),
            std::string::npos)
      << ran.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);  // not the sleep's 60 s
}

TEST(run_exec_plugin, output_is_bounded) {
  plugin_dir dir;
  exec_limits limits;
  limits.max_output = 1000;
  auto ran = run_exec_plugin(
      config_for(dir.script("plugin", "head -c 100000000 /dev/zero | tr '\\0' a\n")), limits);
  ASSERT_FALSE(ran);
  EXPECT_NE(ran.error().message.find("printed more than 1000 bytes"), std::string::npos)
      << ran.error().message;
}

TEST(run_exec_plugin, invalid_output_is_one_line_without_the_output) {
  plugin_dir dir;
  auto ran =
      run_exec_plugin(config_for(dir.script("plugin", "echo 'SECRET-TOKEN'\necho 'more'\n")), {});
  ASSERT_FALSE(ran);
  EXPECT_NE(ran.error().message.find("printed an invalid ExecCredential: not JSON"),
            std::string::npos)
      << ran.error().message;
  EXPECT_EQ(ran.error().message.find("SECRET"), std::string::npos);
  expect_one_line(ran.error().message);
}

TEST(run_exec_plugin, a_plugin_that_leaves_a_child_behind_is_not_waited_for) {
  plugin_dir dir;
  // The background child keeps the pipes open for a minute; the run ends when the plugin does.
  auto ran =
      run_exec_plugin(config_for(dir.script("plugin", "sleep 60 &\n" + counting_plugin())), {});
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->credential.token, "tok-1");
}

// ---- exec_authenticator ----------------------------------------------------------------------

class exec_authenticator_test : public ::testing::Test {
protected:
  std::unique_ptr<exec_authenticator> make(std::string_view api = exec_api_v1) {
    return std::make_unique<exec_authenticator>(
        config_for(dir_.script("plugin", counting_plugin(api)), api), exec_limits{}, clock_);
  }
  /// Waits (bounded) for the run in flight.
  static void wait_for_run(exec_authenticator& a) {
    auto done = std::make_shared<std::promise<void>>();
    a.when_refreshed([done] { done->set_value(); });
    ASSERT_EQ(done->get_future().wait_for(30s), std::future_status::ready);
  }
  void expire_at(const std::string& rfc3339) const { dir_.write("expiry", rfc3339); }

  plugin_dir dir_;
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>();
};

TEST_F(exec_authenticator_test, caches_a_credential_without_expiry) {
  auto a = make();
  auto first = a->get();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->credential->token, "tok-1");
  EXPECT_EQ(first->generation, 1U);
  clock_->advance(24h);
  auto again = a->current();
  ASSERT_TRUE(again && again.value());
  EXPECT_EQ(again.value()->generation, 1U);
  EXPECT_EQ(dir_.runs(), 1);
}

TEST_F(exec_authenticator_test, renews_before_expiry_and_runs_again_after_it) {
  // The clock's wall time is 2024-01-01T00:00:00Z; the credential lives 10 minutes, so it is
  // renewed in its last fifth: from 00:08:00.
  expire_at("2024-01-01T00:10:00Z");
  auto a = make(exec_api_v1beta1);
  ASSERT_TRUE(a->get());
  clock_->advance(7min + 59s);
  auto fresh = a->current();
  ASSERT_TRUE(fresh && fresh.value());
  wait_for_run(*a);
  EXPECT_EQ(dir_.runs(), 1);  // not due yet: nothing ran

  expire_at("2024-01-01T00:20:00Z");
  clock_->advance(2s);  // 00:08:01
  auto renewing = a->current();
  ASSERT_TRUE(renewing && renewing.value());
  EXPECT_EQ(renewing.value()->credential->token, "tok-1");  // still used while renewed
  wait_for_run(*a);
  EXPECT_EQ(dir_.runs(), 2);
  auto renewed = a->current();
  ASSERT_TRUE(renewed && renewed.value());
  EXPECT_EQ(renewed.value()->credential->token, "tok-2");
  EXPECT_EQ(renewed.value()->generation, 2U);

  // Past its expiry a credential is not used: current() has none while the plugin runs, and
  // get() waits for the run.
  clock_->advance(13min);  // 00:21:01
  expire_at("2024-01-01T01:00:00Z");
  auto expired = a->current();
  ASSERT_TRUE(expired);
  EXPECT_FALSE(expired.value());
  auto got = a->get();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->credential->token, "tok-3");
}

TEST_F(exec_authenticator_test, an_already_expired_credential_is_an_error) {
  expire_at("2023-12-31T23:00:00Z");
  auto a = make();
  auto got = a->get();
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("a credential that expired at 2023-12-31T23:00:00Z (now "
                                     "2024-01-01T00:00:00Z"),
            std::string::npos)
      << got.error().message;
}

TEST_F(exec_authenticator_test, a_401_runs_the_plugin_once_per_credential) {
  auto a = make();
  ASSERT_TRUE(a->get());
  a->rejected(1);
  a->rejected(1);  // the same burst
  wait_for_run(*a);
  a->rejected(1);  // an old credential's late 401
  wait_for_run(*a);
  EXPECT_EQ(dir_.runs(), 2);
  auto now = a->current();
  ASSERT_TRUE(now && now.value());
  EXPECT_EQ(now.value()->credential->token, "tok-2");
  EXPECT_EQ(now.value()->generation, 2U);
}

TEST_F(exec_authenticator_test, after_a_failure_the_next_run_waits) {
  dir_.write("fail", "");
  auto a = make();
  auto first = a->get();
  ASSERT_FALSE(first);
  EXPECT_NE(first.error().message.find("exited with status 3: no credentials today"),
            std::string::npos)
      << first.error().message;
  auto again = a->get();  // within the wait: the same error, no run
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message, first.error().message);
  auto current = a->current();
  ASSERT_FALSE(current);
  EXPECT_EQ(dir_.runs(), 1);

  dir_.remove("fail");
  clock_->advance(2s);  // past the first wait (1 s, stretched by at most half)
  auto works = a->get();
  ASSERT_TRUE(works) << works.error().message;
  EXPECT_EQ(works->credential->token, "tok-2");
  EXPECT_EQ(dir_.runs(), 2);
}

TEST_F(exec_authenticator_test, a_failed_renewal_keeps_the_valid_credential) {
  expire_at("2024-01-01T00:10:00Z");
  auto a = make();
  ASSERT_TRUE(a->get());
  dir_.write("fail", "");
  clock_->advance(9min);
  auto renewing = a->current();
  ASSERT_TRUE(renewing && renewing.value());
  wait_for_run(*a);
  auto kept = a->current();
  ASSERT_TRUE(kept && kept.value());
  EXPECT_EQ(kept.value()->credential->token, "tok-1");
  EXPECT_EQ(dir_.runs(), 2);
}

TEST_F(exec_authenticator_test, an_unusable_certificate_is_refused) {
  dir_.write("cred.json", nlohmann::json{{"apiVersion", exec_api_v1},
                                         {"kind", "ExecCredential"},
                                         {"status",
                                          {{"clientCertificateData", exec_cert_pem},
                                           {"clientKeyData",
                                            "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n"
                                            "-----END PRIVATE KEY-----\n"}}}}
                              .dump());
  exec_authenticator a(config_for(dir_.script("plugin", "cat \"$DIR/cred.json\"\n")), {}, clock_);
  auto got = a.get();
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find(
                "returned a client certificate and key the TLS client cannot use (OpenSSL: "),
            std::string::npos)
      << got.error().message;
  expect_one_line(got.error().message);
}

// ---- the kubeconfig's exec block -------------------------------------------------------------

std::string kubeconfig_with_exec(const std::string& exec_body, const std::string& user_extra = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n"
         "clusters:\n- name: c\n  cluster:\n    server: https://api.example.com:6443\n"
         "    tls-server-name: api.internal\n"
         "    extensions:\n    - name: client.authentication.k8s.io/exec\n"
         "      extension:\n        audience: \"k8s\"\n        ttl: 900\n        region: eu\n"
         "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n"
         "users:\n- name: u\n  user:\n" +
         user_extra + "    exec:\n" + exec_body;
}

TEST(kubeconfig_exec, loads_every_field) {
  plugin_dir dir;
  dir.write("config", kubeconfig_with_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                                           "      command: ./bin/get-token\n"
                                           "      args: [--region, eu]\n"
                                           "      env:\n      - {name: AWS_PROFILE, value: prod}\n"
                                           "      installHint: install it\n"
                                           "      interactiveMode: Never\n"
                                           "      provideClusterInfo: true\n"));
  auto config = load_kubeconfig(dir.path() + "/config");
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_TRUE(config->exec);
  const auto& e = config->exec->config();
  EXPECT_EQ(e.command, dir.path() + "/./bin/get-token");  // relative to the kubeconfig
  EXPECT_EQ(e.args, (std::vector<std::string>{"--region", "eu"}));
  ASSERT_EQ(e.env.size(), 1U);
  EXPECT_EQ(e.env[0].first, "AWS_PROFILE");
  EXPECT_EQ(e.env[0].second, "prod");
  EXPECT_EQ(e.install_hint, "install it");
  EXPECT_EQ(e.interactive_mode, exec_interactive_mode::never);
  auto cluster = nlohmann::json::parse(e.cluster_json);
  EXPECT_EQ(cluster["server"], "https://api.example.com:6443");
  EXPECT_EQ(cluster["tls-server-name"], "api.internal");
  EXPECT_EQ(cluster["config"]["audience"], "k8s");
  EXPECT_EQ(cluster["config"]["ttl"], 900);
  // A copy of the config shares the authenticator: one plugin run for every client.
  const rest_config copy = config.value();
  EXPECT_EQ(copy.exec.get(), config->exec.get());
  EXPECT_FALSE(insecure_settings(config.value()).size() > 0);
}

TEST(kubeconfig_exec, a_command_without_a_slash_is_looked_up_on_path) {
  plugin_dir dir;
  dir.write("config",
            kubeconfig_with_exec("      apiVersion: client.authentication.k8s.io/v1beta1\n"
                                 "      command: aws\n"));
  auto config = load_kubeconfig(dir.path() + "/config");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->exec->config().command, "aws");
  EXPECT_EQ(config->exec->config().interactive_mode, exec_interactive_mode::if_available);
}

TEST(kubeconfig_exec, refusals_are_one_clear_line) {
  plugin_dir dir;
  const std::vector<std::pair<std::string, std::string>> cases{
      {kubeconfig_with_exec("      command: aws\n"), "users[0].user.exec.apiVersion: missing"},
      {kubeconfig_with_exec("      apiVersion: client.authentication.k8s.io/v1alpha1\n"
                            "      command: aws\n"),
       "\"client.authentication.k8s.io/v1alpha1\" is not supported"},
      {kubeconfig_with_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                            "      command: aws\n"),
       "interactiveMode: missing (required by client.authentication.k8s.io/v1"},
      {kubeconfig_with_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                            "      command: aws\n      interactiveMode: Always\n"),
       "interactiveMode: Always needs a terminal"},
      {kubeconfig_with_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                            "      interactiveMode: Never\n"),
       "exec.command: missing"},
      {kubeconfig_with_exec("      apiVersion: client.authentication.k8s.io/v1beta1\n"
                            "      command: aws\n      env: [{name: \"A=B\", value: x}]\n"),
       "env[0].name: must be a variable name"},
      {kubeconfig_with_exec("      apiVersion: client.authentication.k8s.io/v1beta1\n"
                            "      command: aws\n",
                            "    token: static\n"),
       "exec: cannot be combined with token"},
  };
  for (const auto& [text, want] : cases) {
    dir.write("config", text);
    auto config = load_kubeconfig(dir.path() + "/config");
    ASSERT_FALSE(config) << want;
    EXPECT_NE(config.error().message.find(want), std::string::npos) << config.error().message;
    expect_one_line(config.error().message);
  }
}

// ---- the client -----------------------------------------------------------------------------

// The client on an in-memory transport, the plugin a real process: the test's io_context is
// run (bounded) until the request is answered, since the plugin runs on another thread.
class exec_client_test : public ::testing::Test {
protected:
  rest_config config() {
    auto cfg = testing::plain_config(server_);
    cfg.tls = false;
    cfg.exec = std::make_shared<exec_authenticator>(
        config_for(dir_.script("plugin", counting_plugin())), exec_limits{}, clock_);
    return cfg;
  }
  client_options options() {
    auto opts = testing::quick_options(0);
    opts.connector = server_.connector();
    return opts;
  }
  void start_get(client& c, std::optional<base::result<response>>& out) {
    boost::asio::co_spawn(
        io_,
        [](client& to,
           std::optional<base::result<response>>* into) -> boost::asio::awaitable<void> {
          *into = co_await to.send(request(http::verb::get, "/x", {}, "application/json", true));
        }(c, &out),
        boost::asio::detached);
  }

  plugin_dir dir_;
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>();
  boost::asio::io_context io_;
  fake_http_server server_{io_.get_executor()};
};

TEST_F(exec_client_test, sends_the_token_and_runs_the_plugin_again_after_a_401_burst) {
  // Two requests on the first token, both answered 401; the plugin runs once more, and both
  // are sent again with the new token.
  server_.push(reply().hold("both").raw("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"));
  server_.push(reply().hold("both").raw("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"));
  server_.set_fallback(reply::with(200, "ok"));
  client c(io_.get_executor(), config(), options());
  std::optional<base::result<response>> a;
  std::optional<base::result<response>> b;
  start_get(c, a);
  start_get(c, b);
  ASSERT_TRUE(testing::run_until(io_, [&] { return server_.requests().size() == 2; }));
  server_.release("both");
  ASSERT_TRUE(testing::run_until(io_, [&] { return a.has_value() && b.has_value(); }));
  for (const auto* out : {&a, &b}) {
    ASSERT_TRUE(**out) << (**out).error().message;
    EXPECT_EQ((**out)->status, 200U);
  }
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 4U);
  EXPECT_EQ(reqs[0].header("authorization"), "Bearer tok-1");
  EXPECT_EQ(reqs[1].header("authorization"), "Bearer tok-1");
  EXPECT_EQ(reqs[2].header("authorization"), "Bearer tok-2");
  EXPECT_EQ(reqs[3].header("authorization"), "Bearer tok-2");
  EXPECT_EQ(dir_.runs(), 2);
}

TEST_F(exec_client_test, a_failing_plugin_fails_the_request_with_its_line) {
  dir_.write("fail", "");
  client c(io_.get_executor(), config(), options());
  std::optional<base::result<response>> out;
  start_get(c, out);
  ASSERT_TRUE(testing::run_until(io_, [&] { return out.has_value(); }));
  ASSERT_FALSE(*out);
  EXPECT_NE(out->error().message.find("exited with status 3: no credentials today"),
            std::string::npos)
      << out->error().message;
  EXPECT_TRUE(server_.requests().empty());
}

}  // namespace
}  // namespace tec::k8sclient

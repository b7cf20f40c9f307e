#include "tec/k8sclient/config.hpp"

#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include "support/manual_clock.hpp"

namespace tec::k8sclient {
namespace {

namespace fs = std::filesystem;

const fs::path testdata =
    fs::path(TEC_SOURCE_DIR) / "tests" / "k8sclient" / "testdata" / "kubeconfig";

/// A fresh directory under the system temp dir, removed at the end of the test.
class temp_dir {
public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "tec-k8s-config-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  [[nodiscard]] const fs::path& path() const { return path_; }

  fs::path write(const std::string& name, const std::string& content) const {
    const fs::path p = path_ / name;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
    return p;
  }

private:
  fs::path path_;
};

std::string encode_base64(std::string_view in) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const auto n = (static_cast<unsigned>(static_cast<unsigned char>(in[i])) << 16) |
                   (static_cast<unsigned>(static_cast<unsigned char>(in[i + 1])) << 8) |
                   static_cast<unsigned>(static_cast<unsigned char>(in[i + 2]));
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += alphabet[(n >> 6) & 63];
    out += alphabet[n & 63];
  }
  if (i + 1 == in.size()) {
    const auto n = static_cast<unsigned>(static_cast<unsigned char>(in[i])) << 16;
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const auto n = (static_cast<unsigned>(static_cast<unsigned char>(in[i])) << 16) |
                   (static_cast<unsigned>(static_cast<unsigned char>(in[i + 1])) << 8);
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += alphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

const std::string cert_pem =
    "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAj\n"
    "-----END CERTIFICATE-----\n";
const std::string key_pem =
    "-----BEGIN PRIVATE KEY-----\nSECRETKEYMATERIAL0123456789\n-----END PRIVATE KEY-----\n";

/// A one-context kubeconfig with the given cluster and user bodies (YAML, indented 4).
std::string kubeconfig(const std::string& cluster_body, const std::string& user_body) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n"
         "clusters:\n- name: c\n  cluster:\n" +
         cluster_body +
         "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n"
         "users:\n- name: u\n  user:\n" +
         user_body;
}

TEST(parse_server_url, https_with_port_and_path) {
  auto url = parse_server_url("https://api.example.com:6443/k8s/clusters/c-1/");
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->host, "api.example.com");
  EXPECT_EQ(url->port, "6443");
  EXPECT_EQ(url->base_path, "/k8s/clusters/c-1");
}

TEST(parse_server_url, default_ports) {
  auto https = parse_server_url("https://example.com");
  ASSERT_TRUE(https);
  EXPECT_EQ(https->port, "443");
  EXPECT_EQ(https->base_path, "");
  auto http = parse_server_url("HTTP://example.com/");
  ASSERT_TRUE(http);
  EXPECT_FALSE(http->tls);
  EXPECT_EQ(http->port, "80");
  EXPECT_EQ(http->base_path, "");
}

TEST(parse_server_url, ipv6_in_brackets) {
  auto url = parse_server_url("https://[2001:db8::1]:6443");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "2001:db8::1");
  EXPECT_EQ(url->port, "6443");
  auto no_port = parse_server_url("https://[::1]");
  ASSERT_TRUE(no_port);
  EXPECT_EQ(no_port->host, "::1");
  EXPECT_EQ(no_port->port, "443");
}

TEST(parse_server_url, scheme_less_follows_tls_settings) {
  auto tls = parse_server_url("10.0.0.1:6443", true);
  ASSERT_TRUE(tls);
  EXPECT_TRUE(tls->tls);
  auto plain = parse_server_url("10.0.0.1", false);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->tls);
  EXPECT_EQ(plain->port, "80");
}

TEST(parse_server_url, rejects_bad_urls) {
  for (const char* bad : {"ftp://x", "https://", "https://:443", "https://h:0", "https://h:65536",
                          "https://h:12x", "https://2001:db8::1", "https://[::1", "https://[::1]x",
                          "https://h/?a=b", "https://h#f", "https://[host]:1"}) {
    EXPECT_FALSE(parse_server_url(bad)) << bad;
  }
  auto userinfo = parse_server_url("https://admin:hunter2@h");
  ASSERT_FALSE(userinfo);
  EXPECT_EQ(userinfo.error().message.find("hunter2"), std::string::npos);
}

TEST(parse_server_url, boost_url_rules) {
  // Percent-encoded hosts are refused (Go's url.Parse refuses most of them too).
  auto escaped = parse_server_url("https://ex%41mple.com");
  ASSERT_FALSE(escaped);
  EXPECT_NE(escaped.error().message.find("percent-encoded host"), std::string::npos)
      << escaped.error().message;
  // IPvFuture literals are not addresses we can connect to.
  EXPECT_FALSE(parse_server_url("https://[v1.x]:6443"));
  // Characters RFC 3986 does not allow in a host or path are refused, in a one-line message.
  for (const char* bad : {"https://a b", "https://h/a b", "https://h\nX-Evil: 1"}) {
    auto url = parse_server_url(bad);
    ASSERT_FALSE(url) << bad;
    EXPECT_EQ(url.error().message.find('\n'), std::string::npos) << url.error().message;
  }
  // User info in a URL that does not parse is not echoed either.
  auto broken = parse_server_url("https://admin:hunter2@h x");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().message.find("hunter2"), std::string::npos) << broken.error().message;
  // A percent-encoded path prefix is kept as it is: it goes into request targets.
  auto path = parse_server_url("https://h/a%2Fb/");
  ASSERT_TRUE(path) << path.error().message;
  EXPECT_EQ(path->base_path, "/a%2Fb");
  // An empty port means the scheme's default, as in Go.
  auto empty_port = parse_server_url("http://h:");
  ASSERT_TRUE(empty_port) << empty_port.error().message;
  EXPECT_EQ(empty_port->port, "80");
}

TEST(decode_base64, valid_and_invalid) {
  EXPECT_EQ(decode_base64("aGVsbG8="), "hello");
  EXPECT_EQ(decode_base64("aGVsbG8h"), "hello!");
  EXPECT_EQ(decode_base64("aGVs\nbG8="), "hello");
  EXPECT_EQ(decode_base64(""), "");
  EXPECT_EQ(decode_base64("aGk="), "hi");
  EXPECT_EQ(decode_base64("aA=="), "h");
  EXPECT_FALSE(decode_base64("aGVsbG8"));   // missing padding
  EXPECT_FALSE(decode_base64("aGV*bG8="));  // bad character
  EXPECT_FALSE(decode_base64("a==="));      // too much padding
  EXPECT_FALSE(decode_base64("aA==aGk="));  // data after padding
}

TEST(load_kubeconfig, yaml_with_relative_files) {
  auto config = load_kubeconfig((testdata / "files.yaml").string());
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->host, "api.dev.example.com");
  EXPECT_EQ(config->port, "6443");
  EXPECT_TRUE(config->tls);
  EXPECT_EQ(config->base_path, "/prefix");
  EXPECT_NE(config->ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(config->client_cert_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(config->client_key_pem.find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(config->tls_server_name, "kubernetes.default");
  EXPECT_EQ(config->token_file, (testdata / "token").string());
  EXPECT_EQ(config->bearer_token, "");
  EXPECT_EQ(config->namespace_, "team-a");
  EXPECT_FALSE(config->insecure_skip_tls_verify);
  EXPECT_NE(config->source.find("files.yaml"), std::string::npos);
  EXPECT_NE(config->source.find("\"dev\""), std::string::npos);
}

TEST(load_kubeconfig, chosen_context_without_user) {
  auto config = load_kubeconfig((testdata / "files.yaml").string(), "plain");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_FALSE(config->tls);
  EXPECT_EQ(config->host, "127.0.0.1");
  EXPECT_EQ(config->port, "8080");
  EXPECT_EQ(config->ca_pem, "");
  EXPECT_EQ(config->client_cert_pem, "");
  EXPECT_EQ(config->namespace_, "");
}

TEST(load_kubeconfig, json_with_data_and_ipv6) {
  auto config = load_kubeconfig((testdata / "data.json").string());
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->host, "fd00::1");
  EXPECT_EQ(config->port, "6443");
  EXPECT_EQ(config->ca_pem.rfind("-----BEGIN CERTIFICATE-----", 0), 0U);
  EXPECT_EQ(config->bearer_token, "s3cr3t-static-token");
  EXPECT_EQ(config->token_file, "");
}

TEST(load_kubeconfig, data_wins_over_file_and_absolute_paths) {
  temp_dir dir;
  const auto key_path = dir.write("k.pem", key_pem);
  auto path = dir.write(
      "config", kubeconfig("    server: https://h\n    certificate-authority: /nonexistent/ca\n"
                           "    certificate-authority-data: " +
                               encode_base64(cert_pem) + "\n",
                           "    client-certificate-data: " + encode_base64(cert_pem) +
                               "\n    client-key: " + key_path.string() + "\n"));
  auto config = load_kubeconfig(path.string());
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->ca_pem, cert_pem);
  EXPECT_EQ(config->client_cert_pem, cert_pem);
  EXPECT_EQ(config->client_key_pem, key_pem);
}

TEST(load_kubeconfig, insecure) {
  temp_dir dir;
  auto path = dir.write("config", kubeconfig("    server: https://h:8443\n"
                                             "    insecure-skip-tls-verify: true\n",
                                             "    token: abc\n"));
  auto config = load_kubeconfig(path.string());
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->ca_pem, "");
}

void expect_error(const std::string& path, const std::string& context,
                  const std::vector<std::string>& fragments,
                  const std::vector<std::string>& secrets = {}) {
  auto config = load_kubeconfig(path, context);
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code, make_error_code(base::errc::config_invalid));
  for (const auto& f : fragments) {
    EXPECT_NE(config.error().message.find(f), std::string::npos)
        << "message: " << config.error().message << "\nwanted: " << f;
  }
  for (const auto& s : secrets) {
    EXPECT_EQ(config.error().message.find(s), std::string::npos) << config.error().message;
  }
}

TEST(load_kubeconfig, missing_context) {
  const std::string path = (testdata / "files.yaml").string();
  expect_error(path, "foo", {"kubeconfig " + path + ": context \"foo\" not found"});
}

TEST(load_kubeconfig, no_current_context) {
  temp_dir dir;
  auto path = dir.write("config", "clusters: []\ncontexts: []\nusers: []\n");
  expect_error(path.string(), "", {"no current-context"});
}

TEST(load_kubeconfig, missing_file) {
  expect_error("/nonexistent/dir/config", "", {"/nonexistent/dir/config", "No such file"});
}

TEST(load_kubeconfig, a_fifo_or_a_device_is_refused_without_waiting_for_a_writer) {
  // Opened without O_NONBLOCK, a FIFO with no writer blocks open() forever (issue 29: it was
  // accepted silently). A kubeconfig, and a file it names, must be regular files.
  temp_dir dir;
  const auto fifo = (dir.path() / "config").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error(fifo, "", {fifo, "not a regular file"});
  expect_error("/dev/null", "", {"/dev/null", "not a regular file"});
  const auto ca_fifo = (dir.path() / "ca.crt").string();
  ASSERT_EQ(::mkfifo(ca_fifo.c_str(), 0600), 0);
  const auto path = dir.write("with-ca", kubeconfig("    server: https://h\n"
                                                    "    certificate-authority: ca.crt\n",
                                                    "    token: abc\n"));
  expect_error(path.string(), "", {"certificate-authority", "ca.crt", "not a regular file"});
}

TEST(load_kubeconfig, bad_base64_names_the_field_not_the_secret) {
  temp_dir dir;
  auto path =
      dir.write("config", kubeconfig("    server: https://h\n",
                                     "    client-certificate-data: " + encode_base64(cert_pem) +
                                         "\n    client-key-data: TOPSECRET!!!\n"));
  expect_error(path.string(), "", {path.string(), "users[0].user.client-key-data: invalid base64"},
               {"TOPSECRET"});
}

TEST(load_kubeconfig, missing_server) {
  temp_dir dir;
  auto path = dir.write("config", kubeconfig("    insecure-skip-tls-verify: true\n", "    {}\n"));
  expect_error(path.string(), "", {"clusters[0].cluster.server: missing"});
}

TEST(load_kubeconfig, bad_server) {
  temp_dir dir;
  auto path = dir.write("config", kubeconfig("    server: https://h:99999\n", "    {}\n"));
  expect_error(path.string(), "", {"clusters[0].cluster.server", "invalid port"});
}

TEST(load_kubeconfig, missing_cluster_and_user_entries) {
  temp_dir dir;
  auto path = dir.write(
      "config", "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: nope\n");
  expect_error(path.string(), "", {"cluster \"nope\" not found"});
  auto path2 = dir.write("config2",
                         "current-context: x\nclusters:\n- name: c\n  cluster:\n    server: "
                         "http://h\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: "
                         "ghost\n");
  expect_error(path2.string(), "", {"user \"ghost\" not found"});
}

TEST(load_kubeconfig, a_token_with_a_line_break_or_control_character_is_refused) {
  // It would end the Authorization header early (and could smuggle in another header).
  temp_dir dir;
  expect_error(dir.write("crlf", kubeconfig("    server: https://h\n",
                                            "    token: \"s3cret\\r\\nX-Evil: 1\"\n"))
                   .string(),
               "", {"users[0].user.token: the token contains a line break"}, {"s3cret", "Evil"});
  expect_error(
      dir.write("trailing", kubeconfig("    server: https://h\n", "    token: \"s3cret\\n\"\n"))
          .string(),
      "", {"users[0].user.token: the token contains a line break"}, {"s3cret"});
  expect_error(dir.write("tab", kubeconfig("    server: https://h\n", "    token: \"s3c\\tret\"\n"))
                   .string(),
               "", {"users[0].user.token: the token contains a control character"}, {"s3c"});

  dir.write("token-file", "s3cret\nX-Evil: 1\n");
  expect_error(
      dir.write("file", kubeconfig("    server: https://h\n", "    tokenFile: token-file\n"))
          .string(),
      "", {"users[0].user.tokenFile", "token-file", "line break"}, {"s3cret", "Evil"});

  // The usual trailing newline (also CRLF) of a token file is trimmed, as before.
  dir.write("token-file", "s3cret\r\n");
  auto ok = load_kubeconfig(
      dir.write("ok", kubeconfig("    server: https://h\n", "    tokenFile: token-file\n"))
          .string());
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(token_source(ok->bearer_token, ok->token_file).current().value(), "s3cret");
}

TEST(load_kubeconfig, missing_files_name_the_field) {
  temp_dir dir;
  auto path = dir.write("config", kubeconfig("    server: https://h\n"
                                             "    certificate-authority: missing-ca.crt\n",
                                             "    token: abc\n"));
  expect_error(path.string(), "",
               {"clusters[0].cluster.certificate-authority", "missing-ca.crt", "No such file"});
  auto path2 =
      dir.write("config2", kubeconfig("    server: https://h\n", "    tokenFile: no-token-here\n"));
  expect_error(path2.string(), "", {"users[0].user.tokenFile", "no-token-here"});
}

TEST(load_kubeconfig, cert_without_key) {
  temp_dir dir;
  auto path = dir.write(
      "config", kubeconfig("    server: https://h\n",
                           "    client-certificate-data: " + encode_base64(cert_pem) + "\n"));
  expect_error(path.string(), "", {"users[0].user", "needs a client key"});
}

TEST(load_kubeconfig, not_pem) {
  temp_dir dir;
  auto path = dir.write("config", kubeconfig("    server: https://h\n"
                                             "    certificate-authority-data: " +
                                                 encode_base64("hello") + "\n",
                                             "    {}\n"));
  expect_error(path.string(), "", {"certificate-authority-data: not a PEM certificate"});
}

TEST(load_kubeconfig, insecure_with_ca_is_refused) {
  temp_dir dir;
  auto path = dir.write("config", kubeconfig("    server: https://h\n"
                                             "    insecure-skip-tls-verify: true\n"
                                             "    certificate-authority-data: " +
                                                 encode_base64(cert_pem) + "\n",
                                             "    {}\n"));
  expect_error(path.string(), "", {"insecure-skip-tls-verify is not allowed"});
}

TEST(load_kubeconfig, unsupported_auth_is_an_error) {
  temp_dir dir;
  auto path = dir.write(
      "config", kubeconfig("    server: https://h\n", "    auth-provider:\n      name: gcp\n"));
  expect_error(path.string(), "", {"users[0].user.auth-provider", "not supported"});
  auto path2 = dir.write(
      "config2", kubeconfig("    server: https://h\n", "    username: a\n    password: hunter2\n"));
  expect_error(path2.string(), "", {"not supported"}, {"hunter2"});
}

TEST(load_kubeconfig, wrong_shapes) {
  temp_dir dir;
  expect_error(dir.write("a", "- just\n- a list\n").string(), "", {"top level must be a map"});
  expect_error(dir.write("b", "").string(), "", {"empty file"});
  expect_error(dir.write("c", "{\"current-context\": \"x\", ").string(), "",
               {"not valid YAML or JSON", "line"});
  expect_error(dir.write("deep", std::string(100000, '[')).string(), "",
               {"not valid YAML or JSON"});
  expect_error(dir.write("d", "current-context: x\ncontexts: {a: b}\n").string(), "",
               {"contexts: must be a list"});
  expect_error(dir.write("e", kubeconfig("    server: [a, b]\n", "    {}\n")).string(), "",
               {"clusters[0].cluster.server: must be a string"});
  expect_error(dir.write("f", kubeconfig("    server: https://h\n"
                                         "    insecure-skip-tls-verify: maybe\n",
                                         "    {}\n"))
                   .string(),
               "", {"insecure-skip-tls-verify: must be true or false"});
  expect_error(dir.write("g",
                         "current-context: x\ncontexts:\n- name: x\n  context: {}\n- name: "
                         "x\n  context: {}\n")
                   .string(),
               "", {"contexts[1].name: duplicate name \"x\""});
}

TEST(load_in_cluster, reads_the_service_account) {
  temp_dir dir;
  dir.write("token", "  sa-token-xyz\n");
  dir.write("ca.crt", cert_pem);
  dir.write("namespace", "kube-system\n");
  std::map<std::string, std::string> env{{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                         {"KUBERNETES_SERVICE_PORT", "443"}};
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto config = load_in_cluster(dir.path().string(), lookup);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->host, "10.96.0.1");
  EXPECT_EQ(config->port, "443");
  EXPECT_TRUE(config->tls);
  EXPECT_EQ(config->ca_pem, cert_pem);
  EXPECT_EQ(config->token_file, (dir.path() / "token").string());
  EXPECT_EQ(config->bearer_token, "");
  EXPECT_EQ(config->namespace_, "kube-system");

  env["POD_NAMESPACE"] = "override";
  env["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  config = load_in_cluster(dir.path().string(), lookup);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->namespace_, "override");
  EXPECT_EQ(config->host, "fd00::1");
  env["KUBERNETES_SERVICE_HOST"] = "[fd00::1]";
  config = load_in_cluster(dir.path().string(), lookup);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->host, "fd00::1");
}

TEST(load_in_cluster, errors) {
  temp_dir dir;
  std::map<std::string, std::string> env{{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto missing_env = load_in_cluster(dir.path().string(), lookup);
  ASSERT_FALSE(missing_env);
  EXPECT_NE(missing_env.error().message.find("KUBERNETES_SERVICE_PORT"), std::string::npos);

  env["KUBERNETES_SERVICE_PORT"] = "https";
  EXPECT_FALSE(load_in_cluster(dir.path().string(), lookup));
  env["KUBERNETES_SERVICE_PORT"] = "443";

  auto no_token = load_in_cluster(dir.path().string(), lookup);
  ASSERT_FALSE(no_token);
  EXPECT_NE(no_token.error().message.find("token"), std::string::npos);

  dir.write("token", "\n");
  auto empty_token = load_in_cluster(dir.path().string(), lookup);
  ASSERT_FALSE(empty_token);
  EXPECT_NE(empty_token.error().message.find("empty"), std::string::npos);

  dir.write("token", "s3cret\r\nX-Evil: 1\n");
  auto split_token = load_in_cluster(dir.path().string(), lookup);
  ASSERT_FALSE(split_token);
  EXPECT_NE(split_token.error().message.find("line break"), std::string::npos)
      << split_token.error().message;
  EXPECT_EQ(split_token.error().message.find("s3cret"), std::string::npos);

  env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1/evil";
  auto bad_host = load_in_cluster(dir.path().string(), lookup);
  ASSERT_FALSE(bad_host);
  EXPECT_NE(bad_host.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos)
      << bad_host.error().message;
  env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";

  dir.write("token", "t");
  auto no_ca = load_in_cluster(dir.path().string(), lookup);
  ASSERT_FALSE(no_ca);
  EXPECT_NE(no_ca.error().message.find("ca.crt"), std::string::npos);

  dir.write("ca.crt", cert_pem);
  auto ok = load_in_cluster(dir.path().string(), lookup);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->namespace_, "default");  // no namespace file
}

TEST(token_source, static_token) {
  test::manual_clock clock;
  token_source source("static", "", std::chrono::seconds{50}, clock);
  EXPECT_EQ(source.current().value(), "static");
  source.invalidate();
  EXPECT_EQ(source.current().value(), "static");
  token_source none("", "", std::chrono::seconds{50}, clock);
  EXPECT_EQ(none.current().value(), "");
}

TEST(token_source, rereads_after_period_and_after_invalidate) {
  temp_dir dir;
  const auto file = dir.write("token", "one\n");
  test::manual_clock clock;
  token_source source("", file.string(), std::chrono::seconds{50}, clock);
  EXPECT_EQ(source.current().value(), "one");

  dir.write("token", "two\n");
  clock.advance(std::chrono::seconds{49});
  EXPECT_EQ(source.current().value(), "one");  // still cached
  clock.advance(std::chrono::seconds{1});
  EXPECT_EQ(source.current().value(), "two");  // 50 s old: re-read

  dir.write("token", "three");
  EXPECT_EQ(source.current().value(), "two");
  source.invalidate();  // a 401
  EXPECT_EQ(source.current().value(), "three");
}

TEST(token_source, keeps_cached_token_when_file_breaks) {
  temp_dir dir;
  const auto file = dir.write("token", "good");
  test::manual_clock clock;
  token_source source("", file.string(), std::chrono::seconds{50}, clock);
  EXPECT_EQ(source.current().value(), "good");
  fs::remove(file);
  clock.advance(std::chrono::minutes{5});
  EXPECT_EQ(source.current().value(), "good");
  EXPECT_EQ(source.last_error().code, make_error_code(base::errc::config_invalid));
  dir.write("token", "better");
  EXPECT_EQ(source.current().value(), "better");
  EXPECT_FALSE(source.last_error());
}

TEST(token_source, a_reread_token_with_a_line_break_is_refused_and_the_cached_one_kept) {
  temp_dir dir;
  const auto file = dir.write("token", "good\n");
  test::manual_clock clock;
  token_source source("", file.string(), std::chrono::seconds{50}, clock);
  EXPECT_EQ(source.current().value(), "good");
  dir.write("token", "s3cret\nX-Evil: 1\n");
  source.invalidate();
  EXPECT_EQ(source.current().value(), "good");
  EXPECT_EQ(source.last_error().code, make_error_code(base::errc::config_invalid));
  EXPECT_NE(source.last_error().message.find("line break"), std::string::npos);
  EXPECT_EQ(source.last_error().message.find("s3cret"), std::string::npos);
  dir.write("token", "s3cret\x01\n");
  clock.advance(std::chrono::minutes{5});
  EXPECT_EQ(source.current().value(), "good");
  EXPECT_NE(source.last_error().message.find("control character"), std::string::npos);

  token_source never_good("", file.string(), std::chrono::seconds{50}, clock);
  auto none = never_good.current();
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find(file.string()), std::string::npos);
}

TEST(token_source, a_static_token_with_a_line_break_is_never_sent) {
  // A rest_config made by hand, not by a loader.
  test::manual_clock clock;
  token_source source("s3cret\r\nX-Evil: 1", "", std::chrono::seconds{50}, clock);
  auto token = source.current();
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code, make_error_code(base::errc::config_invalid));
  EXPECT_NE(token.error().message.find("line break"), std::string::npos);
  EXPECT_EQ(token.error().message.find("s3cret"), std::string::npos);

  // With a token file, the file is what counts.
  temp_dir dir;
  const auto file = dir.write("token", "from-file");
  token_source with_file("bad\ntoken", file.string(), std::chrono::seconds{50}, clock);
  EXPECT_EQ(with_file.current().value(), "from-file");
}

/// Collects what the "client" logger writes while it lives ("<level> <message>" lines).
class captured_client_log {
public:
  captured_client_log() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)) {
    sink_->set_pattern("%l %v");
    previous_ = spdlog::get("client");
    spdlog::drop("client");
    auto logger = std::make_shared<spdlog::logger>("client", sink_);
    logger->set_level(spdlog::level::trace);
    spdlog::register_logger(logger);
  }
  ~captured_client_log() {
    spdlog::drop("client");
    if (previous_) {
      spdlog::register_logger(previous_);
    }
  }
  captured_client_log(const captured_client_log&) = delete;
  captured_client_log& operator=(const captured_client_log&) = delete;

  [[nodiscard]] std::vector<std::string> lines() const {
    auto out = sink_->last_formatted();
    for (auto& line : out) {
      if (!line.empty() && line.back() == '\n') {
        line.pop_back();
      }
    }
    return out;
  }

private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(token_source, a_failed_reread_is_logged_once_per_failure_streak) {
  captured_client_log log;
  temp_dir dir;
  const auto file = dir.write("token", "s3cret-one");
  test::manual_clock clock;
  token_source source("", file.string(), std::chrono::seconds{50}, clock);
  EXPECT_EQ(source.current().value(), "s3cret-one");
  EXPECT_TRUE(log.lines().empty());

  fs::remove(file);
  clock.advance(std::chrono::minutes{5});
  for (int i = 0; i < 5; ++i) {  // every request re-reads the file while it is broken
    EXPECT_EQ(source.current().value(), "s3cret-one");
  }
  dir.write("token", "s3cret\ntwo");  // broken differently: the same streak
  EXPECT_EQ(source.current().value(), "s3cret-one");
  auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_EQ(lines[0].rfind("warning ", 0), 0U) << lines[0];
  EXPECT_NE(lines[0].find(file.string()), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("No such file"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("keeping the cached token"), std::string::npos) << lines[0];

  dir.write("token", "s3cret-three\n");
  EXPECT_EQ(source.current().value(), "s3cret-three");
  EXPECT_EQ(source.current().value(), "s3cret-three");
  lines = log.lines();
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[1], "info token file " + file.string() + " is readable again");

  fs::remove(file);  // a new streak warns again
  clock.advance(std::chrono::minutes{5});
  EXPECT_EQ(source.current().value(), "s3cret-three");
  lines = log.lines();
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(lines[2].rfind("warning ", 0), 0U) << lines[2];
  for (const auto& line : lines) {
    EXPECT_EQ(line.find("s3cret"), std::string::npos) << line;
  }
}

TEST(token_source, error_without_any_token) {
  test::manual_clock clock;
  token_source source("", "/nonexistent/token", std::chrono::seconds{50}, clock);
  auto token = source.current();
  ASSERT_FALSE(token);
  EXPECT_NE(token.error().message.find("/nonexistent/token"), std::string::npos);
}

TEST(token_source, static_token_is_initial_value_of_file) {
  temp_dir dir;
  const auto file = dir.write("token", "from-file");
  test::manual_clock clock;
  rest_config config;
  config.bearer_token = "from-config";
  config.token_file = file.string();
  auto source =
      token_source(config.bearer_token, config.token_file, std::chrono::seconds{50}, clock);
  EXPECT_EQ(source.current().value(), "from-config");
  clock.advance(std::chrono::seconds{50});
  EXPECT_EQ(source.current().value(), "from-file");
}

TEST(token_source, concurrent_use) {
  temp_dir dir;
  const auto file = dir.write("token", "tok");
  test::manual_clock clock;
  token_source source("", file.string(), std::chrono::seconds{0}, clock);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        EXPECT_EQ(source.current().value(), "tok");
        source.invalidate();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
}

}  // namespace
}  // namespace tec::k8sclient

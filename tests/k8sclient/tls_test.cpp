#include "tec/k8sclient/tls.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tec/k8sclient/config.hpp"

namespace tec::k8sclient {
namespace {

namespace fs = std::filesystem;

const fs::path kubeconfig_dir =
    fs::path(TEC_SOURCE_DIR) / "tests" / "k8sclient" / "testdata" / "kubeconfig";

std::string read(const std::string& name) {
  std::ifstream in(kubeconfig_dir / name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The good material of testdata/kubeconfig (a CA, a client certificate it signed, its key).
rest_config good_config() {
  auto loaded = load_kubeconfig((kubeconfig_dir / "files.yaml").string());
  EXPECT_TRUE(loaded) << loaded.error().message;
  return loaded ? loaded.value() : rest_config{};
}

void expect_unusable(const rest_config& config, const std::string& what,
                     const std::string& fields) {
  const base::error e = check_tls_material(config);
  ASSERT_TRUE(e) << "accepted: " << what;
  EXPECT_EQ(e.code, make_error_code(base::errc::config_invalid));
  EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
  EXPECT_EQ(e.message.rfind(config.source + ": ", 0), 0U) << e.message;
  EXPECT_NE(e.message.find(what), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(fields), std::string::npos) << e.message;
  // Never any material in the message.
  EXPECT_EQ(e.message.find("BEGIN"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find(config.client_key_pem.substr(31, 20)), std::string::npos) << e.message;
}

TEST(check_tls_material, good_material_from_the_testdata_kubeconfig_passes) {
  const rest_config config = good_config();
  ASSERT_TRUE(config.tls);
  ASSERT_FALSE(config.ca_pem.empty());
  ASSERT_FALSE(config.client_key_pem.empty());
  const base::error e = check_tls_material(config);
  EXPECT_FALSE(e) << e.message;
}

TEST(check_tls_material, a_corrupt_ca_bundle_is_named) {
  rest_config config = good_config();
  config.ca_pem =
      "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";
  expect_unusable(config, "the CA bundle", "certificate-authority");
  // One good certificate does not excuse a corrupt one after it.
  config.ca_pem = read("ca.crt") + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  expect_unusable(config, "the CA bundle", "certificate-authority");
  config.ca_pem = "no PEM here at all";
  expect_unusable(config, "the CA bundle", "certificate-authority");
  // In a pod, the file is the service account's ca.crt.
  config.source = "in-cluster config (/var/run/secrets/kubernetes.io/serviceaccount)";
  expect_unusable(config, "the CA bundle", "ca.crt");
}

TEST(check_tls_material, a_key_that_does_not_belong_to_the_certificate_is_named) {
  rest_config config = good_config();
  config.client_key_pem = read("other.key");  // same type (EC P-256), another key
  expect_unusable(config, "the client key", "client-key");
  config.client_key_pem = read("other_rsa.key");  // another type altogether
  expect_unusable(config, "the client key", "client-key");
  config.client_key_pem = "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n";
  expect_unusable(config, "the client key", "client-key");
}

TEST(check_tls_material, a_corrupt_client_certificate_is_named) {
  rest_config config = good_config();
  config.client_cert_pem =
      "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n";
  expect_unusable(config, "the client certificate", "client-certificate");
}

TEST(check_tls_material, nothing_to_check_without_tls_or_material) {
  rest_config plain;
  plain.tls = false;
  plain.ca_pem = "ignored over http";
  EXPECT_FALSE(check_tls_material(plain));
  rest_config system_roots;  // TLS with the system's roots, no client certificate
  EXPECT_FALSE(check_tls_material(system_roots));
  rest_config insecure;
  insecure.insecure_skip_tls_verify = true;
  EXPECT_FALSE(check_tls_material(insecure));
}

TEST(insecure_settings, one_line_per_insecure_setting) {
  rest_config config = good_config();
  EXPECT_TRUE(insecure_settings(config).empty());  // a token over https is fine

  config.ca_pem.clear();
  config.insecure_skip_tls_verify = true;
  auto warnings = insecure_settings(config);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_NE(warnings[0].find("insecure-skip-tls-verify"), std::string::npos) << warnings[0];

  rest_config plain;
  plain.tls = false;
  plain.host = "10.0.0.1";
  plain.port = "8080";
  EXPECT_TRUE(insecure_settings(plain).empty());  // no credentials to leak
  plain.token_file = "/var/run/token";
  warnings = insecure_settings(plain);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_NE(warnings[0].find("plain http to 10.0.0.1:8080"), std::string::npos) << warnings[0];
  plain.token_file.clear();
  plain.bearer_token = "s3cr3t";
  warnings = insecure_settings(plain);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_EQ(warnings[0].find("s3cr3t"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace tec::k8sclient

// The webhook certificate keeper on a fake cluster: the first replica fills the empty Secret
// and the caBundle, a second reuses what is there, a conflict (another replica wrote first)
// ends with the other's certificate served and nothing written, a renewal is due on the
// manual clock, and the failures are retried sooner. Also the JSON of the Secret and the
// webhook configuration.

#include "tec/admission/webhook_cert_keeper.hpp"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "k8sclient/support/run_sync.hpp"
#include "serving/support/served_certificate.hpp"
#include "support/manual_clock.hpp"
#include "tec/serving/tls_credentials.hpp"

// A namespace of its own: the module's tests are compiled as one unity file.
namespace tec::admission::webhook_cert_keeper_tests {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using json = nlohmann::json;

// The Secret and the webhook configuration, in memory, with resourceVersions.
struct fake_cluster final : webhook_cert_backend {
  bool secret_exists = true;
  webhook_tls secret;
  int secret_rv = 1;
  int gets = 0;
  int puts = 0;
  // Runs before each PUT is judged: a test writes "another replica's" update here.
  std::function<void()> before_put;
  bool config_exists = true;
  std::string ca_bundle;
  int patches = 0;
  std::optional<base::error> fail_get;

  asio::awaitable<base::result<webhook_secret>> get_secret() override {
    ++gets;
    if (fail_get) {
      co_return *fail_get;
    }
    if (!secret_exists) {
      co_return base::make_error(base::errc::not_found, "GET Secret: 404 Not Found");
    }
    co_return webhook_secret{std::to_string(secret_rv), secret, "{}"};
  }
  asio::awaitable<base::result<secret_write>> update_secret(const webhook_secret& read,
                                                            const webhook_tls& tls) override {
    ++puts;
    if (before_put) {
      std::exchange(before_put, nullptr)();
    }
    if (read.resource_version != std::to_string(secret_rv)) {
      co_return secret_write::conflict;
    }
    secret = tls;
    ++secret_rv;
    co_return secret_write::written;
  }
  asio::awaitable<base::result<ca_bundle_sync>> sync_ca_bundle(std::string ca_pem) override {
    if (!config_exists) {
      co_return ca_bundle_sync::missing;
    }
    if (ca_bundle == ca_pem) {
      co_return ca_bundle_sync::unchanged;
    }
    ca_bundle = std::move(ca_pem);
    ++patches;
    co_return ca_bundle_sync::patched;
  }
};

webhook_cert_keeper_options keeper_options() {
  return {.secret_namespace = "tec",
          .secret_name = "tec-webhook-tls",
          .webhook_configuration = "tec",
          .policy = {.dns_names = {"svc.tec.svc", "svc.tec.svc.cluster.local"}},
          .check_interval = 1h,
          .retry_interval = 1min};
}

// The certificate the credentials hand a new connection, as PEM.
std::string served_pem(serving::tls_credentials& creds) {
  return serving::testing::served_certificate_pem(*creds.current());
}

class webhook_cert_keeper_test : public ::testing::Test {
protected:
  // A replica: its own credentials (self-signed at start) and keeper, on the shared cluster.
  struct replica {
    std::shared_ptr<serving::tls_credentials> creds;
    std::unique_ptr<webhook_cert_keeper> keeper;
  };
  replica start_replica() {
    auto creds = serving::tls_credentials::self_signed({"localhost"});
    EXPECT_TRUE(creds);
    replica r{*creds, nullptr};
    r.keeper = std::make_unique<webhook_cert_keeper>(cluster_, r.creds, clock_, keeper_options());
    return r;
  }
  webhook_cert_check check(replica& r) {
    auto got = k8sclient::testing::run_sync(io_, r.keeper->check());
    EXPECT_TRUE(got);
    return got ? *got : webhook_cert_check{};
  }

  asio::io_context io_;
  test::manual_clock clock_;
  std::shared_ptr<fake_cluster> cluster_ = std::make_shared<fake_cluster>();
};

TEST_F(webhook_cert_keeper_test, the_first_replica_fills_the_empty_secret_and_the_ca_bundle) {
  auto a = start_replica();
  const auto first = check(a);
  EXPECT_TRUE(first.ok);
  EXPECT_TRUE(first.wrote);
  EXPECT_TRUE(first.swapped);
  EXPECT_EQ(first.ca_bundle, ca_bundle_sync::patched);
  EXPECT_EQ(first.next_check, 1h);
  EXPECT_FALSE(cluster_->secret.empty());
  EXPECT_EQ(cluster_->ca_bundle, cluster_->secret.ca_crt);
  EXPECT_EQ(served_pem(*a.creds), cluster_->secret.tls_crt);
  EXPECT_EQ(check_webhook_tls(cluster_->secret, keeper_options().policy, clock_.wall()).action,
            webhook_tls_action::keep);

  // The next check changes nothing.
  const auto written = cluster_->secret;
  const auto again = check(a);
  EXPECT_TRUE(again.ok);
  EXPECT_FALSE(again.wrote);
  EXPECT_FALSE(again.swapped);
  EXPECT_EQ(again.ca_bundle, ca_bundle_sync::unchanged);
  EXPECT_EQ(cluster_->secret, written);
  EXPECT_EQ(cluster_->puts, 1);

  // A second replica (or a restart) reuses the Secret: the same certificate, no write.
  auto b = start_replica();
  const auto second = check(b);
  EXPECT_TRUE(second.ok);
  EXPECT_FALSE(second.wrote);
  EXPECT_TRUE(second.swapped);
  EXPECT_EQ(served_pem(*b.creds), written.tls_crt);
  EXPECT_EQ(cluster_->puts, 1);
  EXPECT_EQ(cluster_->patches, 1);
}

TEST_F(webhook_cert_keeper_test, on_a_conflict_the_other_replicas_certificate_is_used) {
  auto a = start_replica();
  // Another replica writes first, between a's read and a's update.
  auto theirs =
      renew_webhook_tls({}, webhook_tls_action::renew_all, keeper_options().policy, clock_.wall());
  ASSERT_TRUE(theirs);
  cluster_->before_put = [this, &theirs] {
    cluster_->secret = *theirs;
    ++cluster_->secret_rv;
  };
  const auto got = check(a);
  EXPECT_TRUE(got.ok);
  EXPECT_TRUE(got.conflicted);
  EXPECT_FALSE(got.wrote);
  EXPECT_EQ(cluster_->puts, 1);  // a's, refused
  EXPECT_EQ(cluster_->gets, 2);  // read again after the conflict
  EXPECT_EQ(cluster_->secret, *theirs);
  EXPECT_EQ(served_pem(*a.creds), theirs->tls_crt);
  EXPECT_EQ(cluster_->ca_bundle, theirs->ca_crt);
}

TEST_F(webhook_cert_keeper_test, a_due_serving_certificate_is_renewed_under_the_same_ca) {
  auto a = start_replica();
  ASSERT_TRUE(check(a).wrote);
  const auto first = cluster_->secret;
  // Eight and a half months on: inside the renewal window (the last third of a year).
  clock_.advance(std::chrono::hours(24 * 255));
  const auto renewed = check(a);
  EXPECT_TRUE(renewed.ok);
  EXPECT_TRUE(renewed.wrote);
  EXPECT_TRUE(renewed.swapped);
  EXPECT_EQ(renewed.ca_bundle, ca_bundle_sync::unchanged);  // the same CA
  EXPECT_EQ(cluster_->secret.ca_crt, first.ca_crt);
  EXPECT_NE(cluster_->secret.tls_crt, first.tls_crt);
  EXPECT_EQ(served_pem(*a.creds), cluster_->secret.tls_crt);
}

TEST_F(webhook_cert_keeper_test, an_emptied_secret_gets_back_what_the_replica_serves) {
  auto a = start_replica();
  ASSERT_TRUE(check(a).wrote);
  const auto served = cluster_->secret;
  // `kubectl apply -k deploy/` again: the shipped Secret's empty values overwrite the data.
  cluster_->secret = {};
  ++cluster_->secret_rv;
  const auto got = check(a);
  EXPECT_TRUE(got.ok);
  EXPECT_TRUE(got.wrote);
  EXPECT_FALSE(got.swapped);
  EXPECT_EQ(cluster_->secret, served);
  EXPECT_EQ(got.ca_bundle, ca_bundle_sync::unchanged);  // the same CA: nothing to patch
}

TEST_F(webhook_cert_keeper_test, the_next_check_comes_no_later_than_the_renewal) {
  auto a = start_replica();
  ASSERT_TRUE(check(a).ok);
  const auto renew_at =
      check_webhook_tls(cluster_->secret, keeper_options().policy, clock_.wall()).renew_at;
  clock_.advance(renew_at - clock_.wall() - 10min);
  EXPECT_EQ(check(a).next_check, 10min);
  clock_.advance(9min + 30s);
  EXPECT_EQ(check(a).next_check, 1min);  // never sooner than the retry interval
}

TEST_F(webhook_cert_keeper_test, failures_are_retried_after_the_retry_interval) {
  auto a = start_replica();
  const auto self_signed = served_pem(*a.creds);
  cluster_->secret_exists = false;
  auto missing = check(a);
  EXPECT_FALSE(missing.ok);
  EXPECT_EQ(missing.next_check, 1min);
  EXPECT_FALSE(missing.ca_bundle);
  EXPECT_EQ(served_pem(*a.creds), self_signed);  // the self-signed one stays

  cluster_->secret_exists = true;
  cluster_->fail_get = base::make_error(base::errc::forbidden, "GET Secret: 403 Forbidden");
  EXPECT_FALSE(check(a).ok);
  cluster_->fail_get.reset();

  // No webhook configuration: the certificate is served all the same; looked for again soon.
  cluster_->config_exists = false;
  const auto no_config = check(a);
  EXPECT_FALSE(no_config.ok);
  EXPECT_TRUE(no_config.swapped);
  EXPECT_EQ(no_config.ca_bundle, ca_bundle_sync::missing);
  EXPECT_EQ(no_config.next_check, 1min);
  cluster_->config_exists = true;
  const auto found = check(a);
  EXPECT_TRUE(found.ok);
  EXPECT_EQ(found.ca_bundle, ca_bundle_sync::patched);
}

TEST_F(webhook_cert_keeper_test, a_secret_that_changes_under_every_write_gives_up_for_now) {
  auto a = start_replica();
  std::function<void()> bump = [this, &bump] {
    ++cluster_->secret_rv;
    cluster_->before_put = bump;
  };
  cluster_->before_put = bump;
  const auto got = check(a);
  EXPECT_FALSE(got.ok);
  EXPECT_TRUE(got.conflicted);
  EXPECT_EQ(cluster_->puts, 3);
  EXPECT_EQ(got.next_check, 1min);
  cluster_->before_put = nullptr;
}

// The bodies.

std::string b64(const std::string& s) {
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

TEST(webhook_json, the_secret_is_read_and_written_back_with_its_other_keys) {
  const json secret = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"type", "kubernetes.io/tls"},
      {"metadata", {{"name", "s"}, {"resourceVersion", "42"}, {"labels", {{"a", "b"}}}}},
      {"data", {{"tls.crt", b64("CRT")}, {"tls.key", ""}, {"ca.crt", "!!"}, {"other", "eA=="}}}};
  auto read = webhook_json::parse_secret(secret.dump());
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->resource_version, "42");
  EXPECT_EQ(read->tls.tls_crt, "CRT");
  EXPECT_EQ(read->tls.tls_key, "");
  EXPECT_EQ(read->tls.ca_crt, "");  // not base64: empty, so renewed
  EXPECT_EQ(read->tls.ca_key, "");

  auto body = webhook_json::secret_update(*read, {"CA", "CAKEY", "NEW", "KEY"});
  ASSERT_TRUE(body) << body.error().message;
  const json put = json::parse(*body);
  EXPECT_EQ(put["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(put["metadata"]["labels"]["a"], "b");
  EXPECT_EQ(put["type"], "kubernetes.io/tls");
  EXPECT_EQ(put["data"]["ca.crt"], b64("CA"));
  EXPECT_EQ(put["data"]["ca.key"], b64("CAKEY"));
  EXPECT_EQ(put["data"]["tls.crt"], b64("NEW"));
  EXPECT_EQ(put["data"]["tls.key"], b64("KEY"));
  EXPECT_EQ(put["data"]["other"], "eA==");

  // An empty Secret (no data at all) is all empty.
  auto empty = webhook_json::parse_secret(R"({"metadata":{"resourceVersion":"1"}})");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->tls.empty());
}

TEST(webhook_json, bad_bodies_are_bounded_errors) {
  for (const std::string& bad : {std::string("not json"), std::string("[]"),
                                 std::string(R"({"metadata":{}})"), std::string(100000, '{')}) {
    auto s = webhook_json::parse_secret(bad);
    ASSERT_FALSE(s) << bad.substr(0, 20);
    EXPECT_LT(s.error().message.size(), 400U);
    EXPECT_EQ(s.error().message.find('\n'), std::string::npos);
    auto p = webhook_json::ca_bundle_patch(bad, "CA");
    ASSERT_FALSE(p);
    EXPECT_LT(p.error().message.size(), 400U);
  }
  EXPECT_FALSE(webhook_json::ca_bundle_patch(
      R"({"metadata":{"resourceVersion":"1"},"webhooks":[{"name":"x"}]})", "CA"));
  EXPECT_FALSE(
      webhook_json::ca_bundle_patch(R"({"metadata":{"resourceVersion":"1"},"webhooks":7})", "CA"));
}

TEST(webhook_json, the_ca_bundle_patch_sets_what_differs_under_the_resource_version) {
  const json config = {{"metadata", {{"name", "tec"}, {"resourceVersion", "7"}}},
                       {"webhooks",
                        {{{"name", "a"}, {"clientConfig", {{"service", {{"name", "s"}}}}}},
                         {{"name", "b"}, {"clientConfig", {{"caBundle", b64("CA")}}}},
                         {{"name", "c"}, {"clientConfig", {{"caBundle", b64("OLD")}}}}}}};
  auto patch = webhook_json::ca_bundle_patch(config.dump(), "CA");
  ASSERT_TRUE(patch) << patch.error().message;
  ASSERT_TRUE(*patch);
  const json ops = json::parse(**patch);
  ASSERT_EQ(ops.size(), 3U);
  EXPECT_EQ(ops[0],
            json({{"op", "replace"}, {"path", "/metadata/resourceVersion"}, {"value", "7"}}));
  EXPECT_EQ(ops[1]["path"], "/webhooks/0/clientConfig/caBundle");
  EXPECT_EQ(ops[1]["value"], b64("CA"));
  EXPECT_EQ(ops[2]["path"], "/webhooks/2/clientConfig/caBundle");

  const json current = {
      {"metadata", {{"resourceVersion", "8"}}},
      {"webhooks", {{{"name", "b"}, {"clientConfig", {{"caBundle", b64("CA")}}}}}}};
  auto none = webhook_json::ca_bundle_patch(current.dump(), "CA");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

}  // namespace
}  // namespace tec::admission::webhook_cert_keeper_tests

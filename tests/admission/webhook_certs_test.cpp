// The webhook's certificates: what a new CA and serving certificate say (names, validity, who
// signed them), when the texts of the Secret are kept or renewed (on injected times), and the
// secure port's switch to new credentials without a restart.

#include "tec/admission/webhook_certs.hpp"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <gtest/gtest.h>

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "tec/serving/tls_credentials.hpp"

// A namespace of its own: the module's tests are compiled as one unity file.
namespace tec::admission::webhook_certs_tests {
namespace {

using namespace std::chrono_literals;
using base::wall_clock;

// 2024-01-01T00:00:00Z.
const wall_clock::time_point t0{std::chrono::seconds{1'704'067'200}};
constexpr auto day = std::chrono::hours(24);

struct x509_free {
  void operator()(X509* x) const { X509_free(x); }
};
using cert_ptr = std::unique_ptr<X509, x509_free>;

// The certificates of a PEM text, in order.
std::vector<cert_ptr> certs_of(const std::string& pem) {
  std::vector<cert_ptr> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    out.emplace_back(x);
  }
  BIO_free(bio);
  return out;
}

std::time_t seconds_of(const ASN1_TIME* t) {
  std::tm tm{};
  ASN1_TIME_to_tm(t, &tm);
  return ::timegm(&tm);
}

std::time_t at(wall_clock::time_point t) {
  return wall_clock::to_time_t(t);
}

webhook_cert_policy policy() {
  return {.dns_names = {"tec-webhook.tec.svc", "tec-webhook.tec.svc.cluster.local"}};
}

webhook_tls issue(wall_clock::time_point now, const webhook_cert_policy& p = policy()) {
  auto tls = renew_webhook_tls({}, webhook_tls_action::renew_all, p, now);
  EXPECT_TRUE(tls) << tls.error().message;
  return tls ? *tls : webhook_tls{};
}

bool names(X509* cert, const std::string& host) {
  return X509_check_host(cert, host.data(), host.size(), X509_CHECK_FLAG_NO_WILDCARDS, nullptr) ==
         1;
}

TEST(webhook_certs, a_new_ca_signs_a_serving_certificate_for_the_service_names) {
  const auto tls = issue(t0);
  const auto cas = certs_of(tls.ca_crt);
  const auto leaf = certs_of(tls.tls_crt);
  ASSERT_EQ(cas.size(), 1U);
  ASSERT_EQ(leaf.size(), 1U);
  X509* ca = cas[0].get();
  X509* cert = leaf[0].get();

  EXPECT_EQ(X509_check_ca(ca), 1);
  EXPECT_EQ(X509_check_ca(cert), 0);
  EXPECT_EQ(X509_check_issued(ca, cert), X509_V_OK);
  EXPECT_EQ(X509_verify(cert, X509_get0_pubkey(ca)), 1);
  EXPECT_TRUE(names(cert, "tec-webhook.tec.svc"));
  EXPECT_TRUE(names(cert, "tec-webhook.tec.svc.cluster.local"));
  EXPECT_FALSE(names(cert, "tec-webhook.other.svc"));
  EXPECT_FALSE(names(cert, "tec-webhook"));

  // Valid from an hour before the time of issue; the CA 10 years, the serving certificate 1.
  EXPECT_EQ(seconds_of(X509_get0_notBefore(cert)), at(t0 - 1h));
  EXPECT_EQ(seconds_of(X509_get0_notAfter(cert)), at(t0 + 365 * day));
  EXPECT_EQ(seconds_of(X509_get0_notBefore(ca)), at(t0 - 1h));
  EXPECT_EQ(seconds_of(X509_get0_notAfter(ca)), at(t0 + 3652 * day));

  // The keys match their certificates, and a verifier that trusts ca.crt accepts tls.crt.
  auto creds = serving::tls_credentials::from_pem(tls.tls_crt, tls.tls_key);
  ASSERT_TRUE(creds) << creds.error().message;
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert, nullptr);
  X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), at(t0 + day));
  X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), "tec-webhook.tec.svc", 0);
  EXPECT_EQ(X509_verify_cert(ctx), 1)
      << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx));
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
}

// A namespace of up to 63 characters makes the Service's name longer than X.509 allows for a
// commonName (64): the certificate is still issued, with every name in full in its
// subjectAltNames (which TLS clients match), and a commonName that fits.
TEST(webhook_certs, a_service_name_longer_than_a_common_name_allows_is_still_issued) {
  const std::string ns(63, 'n');
  const std::string service = "taint-eviction-controller-metrics." + ns + ".svc";
  ASSERT_GT(service.size(), 64U);
  const auto tls = issue(t0, {.dns_names = {service, service + ".cluster.local"}});
  const auto leaf = certs_of(tls.tls_crt);
  ASSERT_EQ(leaf.size(), 1U);
  X509* cert = leaf[0].get();
  EXPECT_TRUE(names(cert, service));
  EXPECT_TRUE(names(cert, service + ".cluster.local"));
  char cn[128] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  EXPECT_STREQ(cn, "taint-eviction-controller-metrics");
}

TEST(webhook_certs, fresh_certificates_are_kept_until_the_last_third_of_their_lifetime) {
  const auto tls = issue(t0);
  const auto kept = check_webhook_tls(tls, policy(), t0);
  EXPECT_EQ(kept.action, webhook_tls_action::keep) << kept.reason;
  EXPECT_EQ(kept.reason, "");
  EXPECT_EQ(kept.serving_not_after, wall_clock::from_time_t(at(t0 + 365 * day)));
  // The lifetime counts from notBefore (an hour back): a third of 365 days and an hour.
  const auto window = std::chrono::duration_cast<std::chrono::seconds>(365 * day + 1h) / 3;
  EXPECT_EQ(kept.renew_at, wall_clock::from_time_t(at(t0 + 365 * day - window)));

  EXPECT_EQ(check_webhook_tls(tls, policy(), kept.renew_at - 1s).action, webhook_tls_action::keep);
  const auto due = check_webhook_tls(tls, policy(), kept.renew_at);
  EXPECT_EQ(due.action, webhook_tls_action::renew_serving);
  EXPECT_NE(due.reason.find("tls.crt expires at 2024-12-31T00:00:00Z"), std::string::npos)
      << due.reason;
  // Expired: the same.
  EXPECT_EQ(check_webhook_tls(tls, policy(), t0 + 400 * day).action,
            webhook_tls_action::renew_serving);
}

TEST(webhook_certs, a_short_lived_certificate_is_renewed_within_min_remaining) {
  auto p = policy();
  p.serving_lifetime = 3 * day;
  auto short_lived = issue(t0, p);
  // Two days and 23 hours left of three days and an hour: not yet in the last third, but less
  // than the 7 days every certificate keeps.
  const auto v = check_webhook_tls(short_lived, policy(), t0 + 1h);
  EXPECT_EQ(v.action, webhook_tls_action::renew_serving) << v.reason;
  p.min_remaining = 1h;
  EXPECT_EQ(check_webhook_tls(short_lived, p, t0 + 1h).action, webhook_tls_action::keep);
}

TEST(webhook_certs, renewing_the_serving_certificate_keeps_the_ca) {
  const auto tls = issue(t0);
  const auto later = t0 + 300 * day;
  ASSERT_EQ(check_webhook_tls(tls, policy(), later).action, webhook_tls_action::renew_serving);
  auto renewed = renew_webhook_tls(tls, webhook_tls_action::renew_serving, policy(), later);
  ASSERT_TRUE(renewed) << renewed.error().message;
  EXPECT_EQ(renewed->ca_crt, tls.ca_crt);
  EXPECT_EQ(renewed->ca_key, tls.ca_key);
  EXPECT_NE(renewed->tls_crt, tls.tls_crt);
  EXPECT_NE(renewed->tls_key, tls.tls_key);
  EXPECT_EQ(check_webhook_tls(*renewed, policy(), later).action, webhook_tls_action::keep);
  const auto leaf = certs_of(renewed->tls_crt);
  ASSERT_EQ(leaf.size(), 1U);
  EXPECT_EQ(seconds_of(X509_get0_notAfter(leaf[0].get())), at(later + 365 * day));
}

TEST(webhook_certs, a_ca_that_a_new_serving_certificate_would_outlive_is_renewed_with_overlap) {
  const auto tls = issue(t0);
  const auto nine_years = t0 + 3652 * day - 365 * day + day;
  const auto v = check_webhook_tls(tls, policy(), nine_years);
  EXPECT_EQ(v.action, webhook_tls_action::renew_all);
  EXPECT_NE(v.reason.find("the CA expires at"), std::string::npos) << v.reason;
  auto renewed = renew_webhook_tls(tls, v.action, policy(), nine_years);
  ASSERT_TRUE(renewed) << renewed.error().message;
  // The new CA first, then the previous one, still valid for a while: the caBundle trusts
  // both, so replicas still serving the previous certificate are not refused meanwhile.
  const auto cas = certs_of(renewed->ca_crt);
  ASSERT_EQ(cas.size(), 2U);
  EXPECT_EQ(X509_cmp(cas[1].get(), certs_of(tls.ca_crt)[0].get()), 0);
  const auto leaf = certs_of(renewed->tls_crt);
  EXPECT_EQ(X509_verify(leaf[0].get(), X509_get0_pubkey(cas[0].get())), 1);
  EXPECT_EQ(check_webhook_tls(*renewed, policy(), nine_years).action, webhook_tls_action::keep);
  // Only the CA that signed is carried on to the next renewal: the one before it goes.
  auto again =
      renew_webhook_tls(*renewed, webhook_tls_action::renew_all, policy(), t0 + 3653 * day);
  ASSERT_TRUE(again);
  EXPECT_EQ(certs_of(again->ca_crt).size(), 2U);  // the new one and the nine-year one
  EXPECT_EQ(X509_cmp(certs_of(again->ca_crt)[1].get(), cas[0].get()), 0);
}

TEST(webhook_certs, empty_or_broken_texts_are_renewed_with_a_reason) {
  const auto good = issue(t0);
  const auto other = issue(t0);
  struct bad_case {
    const char* what;
    webhook_tls tls;
    webhook_tls_action action;
    const char* reason;
  };
  auto with = [&good](std::string webhook_tls::*member, std::string text) {
    webhook_tls t = good;
    t.*member = std::move(text);
    return t;
  };
  webhook_tls foreign_leaf = good;
  foreign_leaf.tls_crt = other.tls_crt;
  foreign_leaf.tls_key = other.tls_key;
  const std::vector<bad_case> cases = {
      {"empty", {}, webhook_tls_action::renew_all, "the Secret holds no certificate yet"},
      {"ca garbage", with(&webhook_tls::ca_crt, "garbage"), webhook_tls_action::renew_all,
       "ca.crt: no PEM certificate"},
      {"ca key of another", with(&webhook_tls::ca_key, other.ca_key), webhook_tls_action::renew_all,
       "ca.key does not match"},
      {"a leaf as the CA", with(&webhook_tls::ca_crt, good.tls_crt), webhook_tls_action::renew_all,
       "ca.key does not match"},
      {"huge", with(&webhook_tls::ca_crt, std::string(65 * 1024, 'A')),
       webhook_tls_action::renew_all, "ca.crt is larger than 64 KiB"},
      {"leaf garbage", with(&webhook_tls::tls_crt, "-----BEGIN CERTIFICATE-----\nxx\n"),
       webhook_tls_action::renew_serving, "tls.crt: "},
      {"no key", with(&webhook_tls::tls_key, ""), webhook_tls_action::renew_serving,
       "tls.key: no PEM private key"},
      {"key of another", with(&webhook_tls::tls_key, other.tls_key),
       webhook_tls_action::renew_serving, "tls.key does not match tls.crt"},
      {"signed by another CA", foreign_leaf, webhook_tls_action::renew_serving,
       "the CA in ca.crt did not sign tls.crt"},
  };
  for (const auto& c : cases) {
    const auto v = check_webhook_tls(c.tls, policy(), t0);
    EXPECT_EQ(v.action, c.action) << c.what << ": " << v.reason;
    EXPECT_NE(v.reason.find(c.reason), std::string::npos) << c.what << ": " << v.reason;
    EXPECT_LT(v.reason.size(), 400U) << c.what;
    if (v.action == webhook_tls_action::renew_serving) {
      auto renewed = renew_webhook_tls(c.tls, v.action, policy(), t0);
      ASSERT_TRUE(renewed) << c.what << ": " << renewed.error().message;
      EXPECT_EQ(check_webhook_tls(*renewed, policy(), t0).action, webhook_tls_action::keep)
          << c.what;
    }
  }
}

TEST(webhook_certs, a_new_service_name_renews_the_serving_certificate) {
  const auto tls = issue(t0);
  auto renamed = policy();
  renamed.dns_names = {"new.tec.svc"};
  const auto v = check_webhook_tls(tls, renamed, t0);
  EXPECT_EQ(v.action, webhook_tls_action::renew_serving);
  EXPECT_EQ(v.reason, "tls.crt does not name new.tec.svc");
}

TEST(webhook_certs, the_secure_port_switches_to_new_credentials_for_new_connections) {
  auto creds = serving::tls_credentials::self_signed({"localhost"});
  ASSERT_TRUE(creds) << creds.error().message;
  const auto before = (*creds)->current();
  const auto tls = issue(t0);
  ASSERT_TRUE((*creds)->use_pem(tls.tls_crt, tls.tls_key));
  const auto after = (*creds)->current();
  EXPECT_NE(before, after);  // a connection holding `before` keeps it
  EXPECT_EQ(
      X509_cmp(SSL_CTX_get0_certificate(after->native_handle()), certs_of(tls.tls_crt)[0].get()),
      0);
  EXPECT_EQ((*creds)->reloads(), 1U);
  // A pair that does not load keeps the one in use.
  const auto other = issue(t0);
  EXPECT_FALSE((*creds)->use_pem(tls.tls_crt, other.tls_key));
  EXPECT_FALSE((*creds)->use_pem("garbage", tls.tls_key));
  EXPECT_EQ((*creds)->current(), after);
  EXPECT_EQ((*creds)->reloads(), 1U);
}

}  // namespace
}  // namespace tec::admission::webhook_certs_tests

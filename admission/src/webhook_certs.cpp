#include "tec/admission/webhook_certs.hpp"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cassert>
#include <ctime>
#include <utility>

#include "tec/base/rfc3339.hpp"
#include "tec/serving/x509_util.hpp"

namespace tec::admission {

namespace {

using base::wall_clock;

// A Secret value longer than this is not one of ours (a certificate is under 1 KiB).
constexpr std::size_t max_pem_text = std::size_t{64} * 1024;
constexpr std::size_t max_ca_certificates = 8;

std::time_t to_time_t(wall_clock::time_point t) {
  return wall_clock::to_time_t(t);
}

std::string at(std::time_t t) {
  return base::format_rfc3339(wall_clock::from_time_t(t));
}

base::result<std::vector<serving::detail::x509_ptr>> read_certs(const std::string& pem,
                                                                const char* key,
                                                                std::size_t limit) {
  if (pem.size() > max_pem_text) {
    return base::make_error(base::errc::config_invalid,
                            std::string(key) + " is larger than 64 KiB");
  }
  auto certs = serving::detail::read_certificates(pem, limit);
  if (!certs) {
    return base::make_error(base::errc::config_invalid,
                            std::string(key) + ": " + certs.error().message);
  }
  return certs;
}

base::result<serving::detail::pkey_ptr> read_key(const std::string& pem, const char* key) {
  if (pem.size() > max_pem_text) {
    return base::make_error(base::errc::config_invalid,
                            std::string(key) + " is larger than 64 KiB");
  }
  auto k = serving::detail::read_private_key(pem);
  if (!k) {
    return base::make_error(base::errc::config_invalid,
                            std::string(key) + ": " + k.error().message);
  }
  return k;
}

// When a certificate from `not_before` to `not_after` is renewed.
std::time_t renewal_time(std::time_t not_before, std::time_t not_after,
                         const webhook_cert_policy& policy) {
  const std::time_t lifetime = std::max<std::time_t>(not_after - not_before, 0);
  const std::time_t window =
      std::max<std::time_t>(lifetime / 3, static_cast<std::time_t>(policy.min_remaining.count()));
  return not_after - window;
}

webhook_tls_verdict renew(webhook_tls_action action, std::string reason) {
  return {.action = action, .reason = std::move(reason)};
}

// The CA certificate and key of `tls`, or why they cannot sign.
struct signing_ca {
  serving::detail::x509_ptr cert;
  serving::detail::pkey_ptr key;
};
base::result<signing_ca> read_ca(const webhook_tls& tls) {
  auto certs = read_certs(tls.ca_crt, "ca.crt", max_ca_certificates);
  if (!certs) {
    return certs.error();
  }
  auto key = read_key(tls.ca_key, "ca.key");
  if (!key) {
    return key.error();
  }
  signing_ca ca{std::move(certs->front()), std::move(*key)};
  if (X509_check_private_key(ca.cert.get(), ca.key.get()) != 1) {
    return serving::detail::openssl_error("ca.key does not match the first certificate of ca.crt");
  }
  if (X509_check_ca(ca.cert.get()) < 1) {
    return base::make_error(base::errc::config_invalid,
                            "the first certificate of ca.crt is not a CA");
  }
  return ca;
}

// A serving certificate and key for `policy`'s names, signed by `ca`.
base::result<std::pair<std::string, std::string>> issue_serving(const signing_ca& ca,
                                                                const webhook_cert_policy& policy,
                                                                std::time_t now) {
  auto key = serving::detail::new_ec_key();
  if (!key) {
    return key.error();
  }
  // Never beyond the CA: a certificate outliving its issuer fails verification anyway.
  const std::time_t not_after =
      std::min(now + static_cast<std::time_t>(policy.serving_lifetime.count()),
               serving::detail::not_after(ca.cert.get()));
  auto cert = serving::detail::make_certificate(
      {.common_name = policy.dns_names.front(),
       .hosts = policy.dns_names,
       .is_ca = false,
       .not_before = now - static_cast<std::time_t>(policy.backdate.count()),
       .not_after = not_after},
      key->get(), ca.cert.get(), ca.key.get());
  if (!cert) {
    return cert.error();
  }
  return std::pair{serving::detail::to_pem(cert->get()), serving::detail::to_pem(key->get())};
}

}  // namespace

webhook_tls_verdict check_webhook_tls(const webhook_tls& tls, const webhook_cert_policy& policy,
                                      wall_clock::time_point now_point) {
  assert(!policy.dns_names.empty());
  const std::time_t now = to_time_t(now_point);
  if (tls.empty()) {
    return renew(webhook_tls_action::renew_all, "the Secret holds no certificate yet");
  }
  auto ca = read_ca(tls);
  if (!ca) {
    return renew(webhook_tls_action::renew_all, ca.error().message);
  }
  const std::time_t ca_not_after = serving::detail::not_after(ca->cert.get());
  if (ca_not_after < now + static_cast<std::time_t>(policy.serving_lifetime.count())) {
    return renew(webhook_tls_action::renew_all,
                 "the CA expires at " + at(ca_not_after) +
                     ", before a serving certificate issued now would");
  }
  auto serving = read_certs(tls.tls_crt, "tls.crt", max_ca_certificates);
  if (!serving) {
    return renew(webhook_tls_action::renew_serving, serving.error().message);
  }
  X509* leaf = serving->front().get();
  auto key = read_key(tls.tls_key, "tls.key");
  if (!key) {
    return renew(webhook_tls_action::renew_serving, key.error().message);
  }
  if (X509_check_private_key(leaf, key->get()) != 1) {
    ERR_clear_error();
    return renew(webhook_tls_action::renew_serving, "tls.key does not match tls.crt");
  }
  if (X509_check_issued(ca->cert.get(), leaf) != X509_V_OK ||
      X509_verify(leaf, X509_get0_pubkey(ca->cert.get())) != 1) {
    ERR_clear_error();
    return renew(webhook_tls_action::renew_serving, "the CA in ca.crt did not sign tls.crt");
  }
  for (const auto& name : policy.dns_names) {
    if (X509_check_host(leaf, name.data(), name.size(), X509_CHECK_FLAG_NO_WILDCARDS, nullptr) !=
        1) {
      return renew(webhook_tls_action::renew_serving, "tls.crt does not name " + name);
    }
  }
  const std::time_t not_before = serving::detail::not_before(leaf);
  const std::time_t not_after = serving::detail::not_after(leaf);
  const std::time_t renew_at = renewal_time(not_before, not_after, policy);
  if (now >= renew_at) {
    return renew(
        webhook_tls_action::renew_serving,
        "tls.crt expires at " + at(not_after) + ", its renewal was due from " + at(renew_at));
  }
  return {.action = webhook_tls_action::keep,
          .reason = {},
          .serving_not_after = wall_clock::from_time_t(not_after),
          .renew_at = wall_clock::from_time_t(renew_at)};
}

base::result<webhook_tls> renew_webhook_tls(const webhook_tls& current, webhook_tls_action action,
                                            const webhook_cert_policy& policy,
                                            wall_clock::time_point now_point) {
  assert(action != webhook_tls_action::keep);
  assert(!policy.dns_names.empty());
  const std::time_t now = to_time_t(now_point);
  webhook_tls out;
  signing_ca ca;
  if (action == webhook_tls_action::renew_serving) {
    auto read = read_ca(current);
    if (!read) {
      return read.error();
    }
    ca = std::move(*read);
    out.ca_crt = current.ca_crt;
    out.ca_key = current.ca_key;
  } else {
    auto key = serving::detail::new_ec_key();
    if (!key) {
      return key.error();
    }
    auto cert = serving::detail::make_certificate(
        {.common_name = "taint-eviction-controller-webhook-ca@" + std::to_string(now),
         .hosts = {},
         .is_ca = true,
         .not_before = now - static_cast<std::time_t>(policy.backdate.count()),
         .not_after = now + static_cast<std::time_t>(policy.ca_lifetime.count())},
        key->get(), nullptr, nullptr);
    if (!cert) {
      return cert.error();
    }
    ca = {std::move(*cert), std::move(*key)};
    out.ca_crt = serving::detail::to_pem(ca.cert.get());
    out.ca_key = serving::detail::to_pem(ca.key.get());
    if (auto previous = read_certs(current.ca_crt, "ca.crt", max_ca_certificates);
        previous && serving::detail::not_after(previous->front().get()) > now &&
        X509_check_ca(previous->front().get()) >= 1) {
      out.ca_crt += serving::detail::to_pem(previous->front().get());
    }
  }
  auto serving = issue_serving(ca, policy, now);
  if (!serving) {
    return serving.error();
  }
  out.tls_crt = std::move(serving->first);
  out.tls_key = std::move(serving->second);
  return out;
}

}  // namespace tec::admission

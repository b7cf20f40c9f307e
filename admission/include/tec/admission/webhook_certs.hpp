#pragma once

// The admission webhook's certificates without cert-manager: a CA of our own and a TLS
// serving certificate it signs for the webhook Service's DNS names, as PEM texts kept in a
// Secret; whether the texts in the Secret can still be served or must be renewed, and the
// renewed texts. Pure functions of the texts and `now` (OpenSSL, no I/O, no clock): the
// keeper (webhook_cert_keeper.hpp) reads and writes the Secret and decides when to ask.
//
// Lifetimes (webhook_cert_policy's defaults), as kubeadm chooses them for its CA and leaf
// certificates: the CA 10 years, the serving certificate 1 year. The CA is trusted only through
// the caBundle of our own webhook configuration, which the keeper rewrites itself, so a long
// CA costs nothing in reach and keeps the caBundle still (each change of it is a moment in which
// an API server holding the old one rejects the new certificate; failurePolicy Ignore then
// drops a warning, nothing more). The serving certificate is renewed in the last third of its
// lifetime (about 4 months before it expires with the defaults: months of hourly checks to get
// it written), or when it has less than min_remaining left whatever its lifetime; the CA when a
// serving certificate issued now would outlive it. A renewed CA keeps the previous one in
// ca.crt (and so in the caBundle) while that is valid, so the replicas still serving the
// previous certificate until their next check are trusted meanwhile.

#include <chrono>
#include <string>
#include <vector>

#include "tec/base/clock.hpp"
#include "tec/base/result.hpp"

namespace tec::admission {

/// The PEM texts the webhook's Secret holds, by key.
struct webhook_tls {
  /// ca.crt: the CA that signs tls.crt first, then the previous CA while it is valid (the
  /// caBundle carries the whole text).
  std::string ca_crt;
  /// ca.key: the CA's private key (PKCS#8), so every replica can renew the serving certificate
  /// under the same CA. It lets no one do more than tls.key already does: the CA is trusted
  /// only by our own webhook configuration's caBundle.
  std::string ca_key;
  std::string tls_crt;  ///< tls.crt: the serving certificate (EC P-256).
  std::string tls_key;  ///< tls.key: its private key (PKCS#8).

  bool operator==(const webhook_tls&) const = default;
  [[nodiscard]] bool empty() const {
    return ca_crt.empty() && ca_key.empty() && tls_crt.empty() && tls_key.empty();
  }
};

/// What the certificates name and how long they live.
struct webhook_cert_policy {
  /// The serving certificate's DNS names (subjectAltNames; the first is also the common
  /// name), e.g. SERVICE.NAMESPACE.svc and SERVICE.NAMESPACE.svc.cluster.local. At least one.
  std::vector<std::string> dns_names;
  std::chrono::seconds ca_lifetime = std::chrono::hours(24 * 3652);
  std::chrono::seconds serving_lifetime = std::chrono::hours(24 * 365);
  /// A serving certificate with less than this left is renewed whatever its lifetime.
  std::chrono::seconds min_remaining = std::chrono::hours(24 * 7);
  /// notBefore is this long before the time of issue (clocks of the API servers that lag).
  std::chrono::seconds backdate = std::chrono::hours(1);
};

enum class webhook_tls_action : unsigned char {
  keep,           ///< Serve it.
  renew_serving,  ///< A new serving certificate under the CA in the Secret.
  renew_all,      ///< A new CA (the previous one kept in ca.crt while valid) and serving cert.
};

/// check_webhook_tls's answer.
struct webhook_tls_verdict {
  webhook_tls_action action = webhook_tls_action::renew_all;
  /// Why it is renewed (one line an operator can act on); empty for keep.
  std::string reason;
  /// keep: when the serving certificate expires, and when it enters its renewal window.
  base::wall_clock::time_point serving_not_after{};
  base::wall_clock::time_point renew_at{};
};

/// Whether `tls` (the Secret's texts) can be served at `now` under `policy`: renew_all when
/// the texts are empty, the CA or its key does not parse, they do not match, it is not a CA,
/// or a serving certificate issued now would outlive it; renew_serving when the serving
/// certificate or its key does not parse or match, the CA did not sign it, it does not name
/// every DNS name of the policy, or it is in its renewal window (the last third of its
/// lifetime, or less than min_remaining left); otherwise keep. Each PEM text is bounded
/// (64 KiB; ca.crt and tls.crt at most 8 certificates): beyond, it is invalid.
webhook_tls_verdict check_webhook_tls(const webhook_tls& tls, const webhook_cert_policy& policy,
                                      base::wall_clock::time_point now);

/// The texts to write for `action` (not keep): renew_serving keeps ca.crt and ca.key and issues
/// a serving certificate they sign; renew_all issues a new CA (ca.crt: it, then the first
/// certificate of `current.ca_crt` if that parses, is a CA and is valid at `now`) and a serving
/// certificate. Both valid from `now` - backdate; the serving certificate never beyond its CA.
/// Error: OpenSSL failed, or renew_serving with a CA that does not parse.
base::result<webhook_tls> renew_webhook_tls(const webhook_tls& current, webhook_tls_action action,
                                            const webhook_cert_policy& policy,
                                            base::wall_clock::time_point now);

}  // namespace tec::admission

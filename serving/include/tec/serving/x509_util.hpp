#pragma once

// OpenSSL's X.509 pieces, shared by serving/ and admission/: owning pointers, an error value
// carrying OpenSSL's reason, EC P-256 keys, building and signing a certificate, PEM in and out.
// The self-signed serving certificate (tls_credentials) and the webhook's CA and serving
// certificate (admission/'s webhook_certs) are built by the one function here.

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"

namespace tec::serving::detail {

struct x509_deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using x509_ptr = std::unique_ptr<X509, x509_deleter>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_deleter>;

/// config_invalid with `what` and OpenSSL's first queued reason (the queue is cleared).
base::error openssl_error(std::string what);

/// A new EC P-256 key.
base::result<pkey_ptr> new_ec_key();

/// A commonName for `name` that X.509 allows (at most 64 characters): the name itself, else
/// its first DNS label (`svc.a-long-namespace.svc` -> `svc`), else its first 64 characters.
std::string fitting_common_name(std::string_view name);

/// What a certificate says.
struct cert_spec {
  /// The subject's commonName, shortened by fitting_common_name where X.509 needs it.
  std::string common_name;
  /// subjectAltNames: DNS names or IP literals (IP literals become IP entries).
  std::vector<std::string> hosts;
  /// A CA (basicConstraints CA:TRUE, pathlen 0; keyCertSign) or a TLS server certificate
  /// (CA:FALSE; digitalSignature; extendedKeyUsage serverAuth).
  bool is_ca = false;
  std::time_t not_before = 0;
  std::time_t not_after = 0;
};

/// A version 3 certificate for `subject_key` with a random 127-bit serial, signed (SHA-256) by
/// `issuer_key`, its issuer `issuer` (nullptr: self-signed, by `subject_key`).
base::result<x509_ptr> make_certificate(const cert_spec& spec, EVP_PKEY* subject_key, X509* issuer,
                                        EVP_PKEY* issuer_key);

/// PEM texts ("CERTIFICATE", PKCS#8 "PRIVATE KEY").
std::string to_pem(X509* cert);
std::string to_pem(EVP_PKEY* key);

/// Every certificate in `pem`, in order; at most `limit` (more is an error), none an error.
base::result<std::vector<x509_ptr>> read_certificates(std::string_view pem, std::size_t limit);
/// The first private key in `pem`.
base::result<pkey_ptr> read_private_key(std::string_view pem);

/// notBefore and notAfter as time_t (UTC).
std::time_t not_before(const X509* cert);
std::time_t not_after(const X509* cert);

}  // namespace tec::serving::detail

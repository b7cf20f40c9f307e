#include "tec/serving/x509_util.hpp"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <climits>
#include <utility>

namespace tec::serving::detail {

namespace {

struct ext_deleter {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
struct bn_deleter {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct bio_deleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using bio_ptr = std::unique_ptr<BIO, bio_deleter>;

bool is_ip_literal(const std::string& host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(host, ec);
  return !ec;
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

// No pass phrase: an encrypted key is an error, never a prompt on the terminal.
int no_passphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) {
  return 0;
}

bio_ptr read_bio(std::string_view pem) {
  return bio_ptr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::time_t to_time_t(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) {
    return 0;
  }
  return ::timegm(&tm);
}

}  // namespace

base::error openssl_error(std::string what) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code != 0) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    what += ": ";
    what += text;
  }
  return base::make_error(base::errc::config_invalid, std::move(what));
}

base::result<pkey_ptr> new_ec_key() {
  ERR_clear_error();
  pkey_ptr key(EVP_EC_gen("P-256"));
  if (!key) {
    return openssl_error("cannot generate an EC P-256 key");
  }
  return key;
}

std::string fitting_common_name(std::string_view name) {
  // X.509's upper bound for a commonName is 64 characters (RFC 5280, ub-common-name); OpenSSL
  // refuses a longer one. TLS clients match the subjectAltNames, which hold every name in full.
  constexpr std::size_t max_length = ub_common_name;  // OpenSSL's name for 64
  if (name.size() <= max_length) {
    return std::string(name);
  }
  const auto dot = name.find('.');
  if (dot != std::string_view::npos && dot > 0 && dot <= max_length) {
    return std::string(name.substr(0, dot));
  }
  return std::string(name.substr(0, max_length));
}

base::result<x509_ptr> make_certificate(const cert_spec& spec, EVP_PKEY* subject_key, X509* issuer,
                                        EVP_PKEY* issuer_key) {
  ERR_clear_error();
  x509_ptr cert(X509_new());
  const std::unique_ptr<BIGNUM, bn_deleter> serial(BN_new());
  if (!cert || !serial || X509_set_version(cert.get(), 2) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      ASN1_TIME_set(X509_getm_notBefore(cert.get()), spec.not_before) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), spec.not_after) == nullptr ||
      X509_set_pubkey(cert.get(), subject_key) != 1) {
    return openssl_error("cannot build a certificate");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  const std::string common_name = fitting_common_name(spec.common_name);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name) !=
          1) {
    return openssl_error("cannot name the certificate");
  }
  std::string alt_names;
  for (const auto& host : spec.hosts) {
    alt_names += alt_names.empty() ? "" : ",";
    alt_names += (is_ip_literal(host) ? "IP:" : "DNS:") + host;
  }
  X509V3_CTX v3{};
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, issuer != nullptr ? issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, std::string>> extensions;
  if (spec.is_ca) {
    extensions = {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                  {NID_key_usage, "critical,digitalSignature,keyCertSign,cRLSign"},
                  {NID_subject_key_identifier, "hash"}};
  } else {
    extensions = {{NID_basic_constraints, "critical,CA:FALSE"},
                  {NID_key_usage, "critical,digitalSignature"},
                  {NID_ext_key_usage, "serverAuth"}};
    if (issuer != nullptr) {
      extensions.emplace_back(NID_authority_key_identifier, "keyid:always");
    }
  }
  extensions.emplace_back(NID_subject_alt_name, alt_names);
  for (const auto& [nid, value] : extensions) {
    if (value.empty()) {
      continue;
    }
    const std::unique_ptr<X509_EXTENSION, ext_deleter> ext(
        X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str()));
    if (!ext || X509_add_ext(cert.get(), ext.get(), -1) != 1) {
      return openssl_error("cannot add the extension \"" + value + "\"");
    }
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : subject_key, EVP_sha256()) == 0) {
    return openssl_error("cannot sign the certificate");
  }
  return cert;
}

std::string to_pem(X509* cert) {
  const bio_ptr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return {};
  }
  return bio_text(bio.get());
}

std::string to_pem(EVP_PKEY* key) {
  const bio_ptr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return {};
  }
  return bio_text(bio.get());
}

base::result<std::vector<x509_ptr>> read_certificates(std::string_view pem, std::size_t limit) {
  ERR_clear_error();
  if (pem.size() > static_cast<std::size_t>(INT_MAX)) {
    return base::make_error(base::errc::config_invalid, "too large");
  }
  const bio_ptr bio = read_bio(pem);
  std::vector<x509_ptr> certs;
  while (true) {
    x509_ptr cert(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
    if (!cert) {
      break;
    }
    if (certs.size() == limit) {
      return base::make_error(base::errc::config_invalid,
                              "more than " + std::to_string(limit) + " certificates");
    }
    certs.push_back(std::move(cert));
  }
  // The end of the text reads as "no start line"; anything else is a broken block.
  const unsigned long last = ERR_peek_last_error();
  const bool clean_end = last == 0 || ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  if (certs.empty() || !clean_end) {
    return openssl_error(certs.empty() ? "no PEM certificate" : "a broken PEM certificate");
  }
  ERR_clear_error();
  return certs;
}

base::result<pkey_ptr> read_private_key(std::string_view pem) {
  ERR_clear_error();
  if (pem.size() > static_cast<std::size_t>(INT_MAX)) {
    return base::make_error(base::errc::config_invalid, "too large");
  }
  const bio_ptr bio = read_bio(pem);
  pkey_ptr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  if (!key) {
    return openssl_error("no PEM private key");
  }
  return key;
}

std::time_t not_before(const X509* cert) {
  return to_time_t(X509_get0_notBefore(cert));
}

std::time_t not_after(const X509* cert) {
  return to_time_t(X509_get0_notAfter(cert));
}

}  // namespace tec::serving::detail

#include "tec/ops/tls_credentials.hpp"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <fstream>
#include <iterator>
#include <utility>

#include "tec/base/logger.hpp"

namespace tec::ops {

namespace ssl = boost::asio::ssl;

namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("http");
  return log;
}

// A certificate or key file larger than this is not one (a chain of a few certificates is a
// few KiB).
constexpr std::streamsize max_pem_bytes = 1 << 20;

struct x509_deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct ext_deleter {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
struct bn_deleter {
  void operator()(BIGNUM* b) const { BN_free(b); }
};

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

// A server context: TLS 1.2 and later only, no compression or renegotiation.
std::shared_ptr<ssl::context> new_server_context() {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::no_compression);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_RENEGOTIATION);
  return ctx;
}

base::result<std::string> read_pem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return base::make_error(base::errc::config_invalid,
                            std::string("cannot read the ") + what + " file " + path);
  }
  std::string data(static_cast<std::size_t>(max_pem_bytes) + 1, '\0');
  in.read(data.data(), max_pem_bytes + 1);
  if (in.gcount() > max_pem_bytes) {
    return base::make_error(base::errc::config_invalid,
                            std::string("the ") + what + " file " + path + " is larger than 1 MiB");
  }
  data.resize(static_cast<std::size_t>(in.gcount()));
  return data;
}

// The pair in the files as a server context, or what is wrong with it.
base::result<std::shared_ptr<ssl::context>> load_pair(const std::string& cert_file,
                                                      const std::string& key_file) {
  auto cert = read_pem(cert_file, "certificate");
  if (!cert) {
    return cert.error();
  }
  auto key = read_pem(key_file, "private key");
  if (!key) {
    return key.error();
  }
  auto ctx = new_server_context();
  boost::system::error_code ec;
  ctx->use_certificate_chain(boost::asio::buffer(*cert), ec);
  if (ec) {
    return base::make_error(base::errc::config_invalid,
                            "no PEM certificate in " + cert_file + ": " + ec.message());
  }
  ctx->use_private_key(boost::asio::buffer(*key), ssl::context::pem, ec);
  if (ec && ec.category() == boost::asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
    return base::make_error(
        base::errc::config_invalid,
        "the private key in " + key_file + " does not match the certificate in " + cert_file);
  }
  if (ec) {
    return base::make_error(base::errc::config_invalid,
                            "no PEM private key in " + key_file + ": " + ec.message());
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return openssl_error("the private key in " + key_file + " does not match the certificate in " +
                         cert_file);
  }
  return ctx;
}

bool is_ip_literal(const std::string& host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

tls_credentials::tls_credentials(std::shared_ptr<ssl::context> ctx, std::string cert_file,
                                 std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)), context_(std::move(ctx)) {}

tls_credentials::~tls_credentials() = default;

tls_credentials::file_stamp tls_credentials::stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return {};
  }
  return {
      .mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
      .size = static_cast<std::int64_t>(st.st_size),
      .inode = static_cast<std::uint64_t>(st.st_ino)};
}

base::result<std::shared_ptr<tls_credentials>> tls_credentials::self_signed(
    const std::vector<std::string>& hosts) {
  ERR_clear_error();
  const std::unique_ptr<EVP_PKEY, pkey_deleter> key(EVP_EC_gen("P-256"));
  if (!key) {
    return openssl_error("cannot generate an EC P-256 key");
  }
  const std::unique_ptr<X509, x509_deleter> cert(X509_new());
  const std::unique_ptr<BIGNUM, bn_deleter> serial(BN_new());
  if (!cert || !serial || X509_set_version(cert.get(), 2) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600) == nullptr ||
      X509_set_pubkey(cert.get(), key.get()) != 1) {
    return openssl_error("cannot build a self-signed certificate");
  }
  const std::string common_name = hosts.empty() ? "localhost" : hosts.front();
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_issuer_name(cert.get(), name) != 1) {
    return openssl_error("cannot name the self-signed certificate");
  }
  std::string alt_names;
  for (const auto& host : hosts) {
    alt_names += alt_names.empty() ? "" : ",";
    alt_names += (is_ip_literal(host) ? "IP:" : "DNS:") + host;
  }
  X509V3_CTX v3{};
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, cert.get(), cert.get(), nullptr, nullptr, 0);
  const std::pair<int, std::string> extensions[] = {
      {NID_basic_constraints, "critical,CA:FALSE"},
      {NID_key_usage, "critical,digitalSignature"},
      {NID_ext_key_usage, "serverAuth"},
      {NID_subject_alt_name, alt_names},
  };
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
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return openssl_error("cannot sign the self-signed certificate");
  }
  auto ctx = new_server_context();
  if (SSL_CTX_use_certificate(ctx->native_handle(), cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx->native_handle(), key.get()) != 1) {
    return openssl_error("cannot use the self-signed certificate");
  }
  return std::shared_ptr<tls_credentials>(new tls_credentials(std::move(ctx), {}, {}));
}

base::result<std::shared_ptr<tls_credentials>> tls_credentials::from_files(std::string cert_file,
                                                                           std::string key_file) {
  const auto cert_stamp = stamp_of(cert_file);
  const auto key_stamp = stamp_of(key_file);
  auto ctx = load_pair(cert_file, key_file);
  if (!ctx) {
    return ctx.error();
  }
  std::shared_ptr<tls_credentials> creds(
      new tls_credentials(std::move(*ctx), std::move(cert_file), std::move(key_file)));
  creds->cert_stamp_ = cert_stamp;
  creds->key_stamp_ = key_stamp;
  return creds;
}

std::shared_ptr<ssl::context> tls_credentials::current() {
  const std::scoped_lock lock(mu_);
  if (cert_file_.empty()) {
    return context_;
  }
  const auto cert_stamp = stamp_of(cert_file_);
  const auto key_stamp = stamp_of(key_file_);
  if (cert_stamp == cert_stamp_ && key_stamp == key_stamp_) {
    return context_;
  }
  cert_stamp_ = cert_stamp;
  key_stamp_ = key_stamp;
  auto ctx = load_pair(cert_file_, key_file_);
  if (!ctx) {
    logger()->error("keeping the serving certificate in use: the changed files do not load: {}",
                    ctx.error().message);
    return context_;
  }
  context_ = std::move(*ctx);
  ++reloads_;
  logger()->info("serving certificate reloaded from {} and {}", cert_file_, key_file_);
  return context_;
}

std::uint64_t tls_credentials::reloads() const {
  const std::scoped_lock lock(mu_);
  return reloads_;
}

}  // namespace tec::ops

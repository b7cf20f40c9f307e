#include "tec/serving/tls_credentials.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cassert>
#include <ctime>
#include <fstream>
#include <iterator>
#include <utility>

#include "tec/base/logger.hpp"
#include "tec/serving/x509_util.hpp"

namespace tec::serving {

namespace ssl = boost::asio::ssl;
using detail::openssl_error;

namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("http");
  return log;
}

// A certificate or key file larger than this is not one (a chain of a few certificates is a
// few KiB).
constexpr std::streamsize max_pem_bytes = 1 << 20;

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

// A certificate chain and its key as a server context, or what is wrong with them (`cert_where`
// and `key_where` name where they come from: "in FILE").
base::result<std::shared_ptr<ssl::context>> pair_context(std::string_view cert,
                                                         std::string_view key,
                                                         const std::string& cert_where,
                                                         const std::string& key_where) {
  auto ctx = new_server_context();
  boost::system::error_code ec;
  ctx->use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()), ec);
  if (ec) {
    return base::make_error(base::errc::config_invalid,
                            "no PEM certificate " + cert_where + ": " + ec.message());
  }
  ctx->use_private_key(boost::asio::buffer(key.data(), key.size()), ssl::context::pem, ec);
  if (ec && ec.category() == boost::asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
    return base::make_error(
        base::errc::config_invalid,
        "the private key " + key_where + " does not match the certificate " + cert_where);
  }
  if (ec) {
    return base::make_error(base::errc::config_invalid,
                            "no PEM private key " + key_where + ": " + ec.message());
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return openssl_error("the private key " + key_where + " does not match the certificate " +
                         cert_where);
  }
  return ctx;
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
  return pair_context(*cert, *key, "in " + cert_file, "in " + key_file);
}

base::result<std::shared_ptr<ssl::context>> context_from_pem(std::string_view cert,
                                                             std::string_view key) {
  return pair_context(cert, key, "in the PEM text given", "in the PEM text given");
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
  auto key = detail::new_ec_key();
  if (!key) {
    return key.error();
  }
  const std::time_t now = std::time(nullptr);
  auto cert = detail::make_certificate({.common_name = hosts.empty() ? "localhost" : hosts.front(),
                                        .hosts = hosts,
                                        .is_ca = false,
                                        .not_before = now - 3600,
                                        .not_after = now + 365L * 24 * 3600},
                                       key->get(), nullptr, nullptr);
  if (!cert) {
    return base::make_error(base::errc::config_invalid,
                            "cannot build a self-signed certificate: " + cert.error().message);
  }
  auto ctx = new_server_context();
  if (SSL_CTX_use_certificate(ctx->native_handle(), cert->get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx->native_handle(), key->get()) != 1) {
    return openssl_error("cannot use the self-signed certificate");
  }
  return std::shared_ptr<tls_credentials>(new tls_credentials(std::move(ctx), {}, {}));
}

base::result<std::shared_ptr<tls_credentials>> tls_credentials::from_pem(
    std::string_view cert_chain_pem, std::string_view key_pem) {
  auto ctx = context_from_pem(cert_chain_pem, key_pem);
  if (!ctx) {
    return ctx.error();
  }
  return std::shared_ptr<tls_credentials>(new tls_credentials(std::move(*ctx), {}, {}));
}

base::result<void> tls_credentials::use_pem(std::string_view cert_chain_pem,
                                            std::string_view key_pem) {
  assert(cert_file_.empty());
  auto ctx = context_from_pem(cert_chain_pem, key_pem);
  if (!ctx) {
    return ctx.error();
  }
  const std::scoped_lock lock(mu_);
  context_ = std::move(*ctx);
  ++reloads_;
  return {};
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

}  // namespace tec::serving

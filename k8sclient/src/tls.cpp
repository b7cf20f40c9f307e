// TLS material checks and the client's TLS context. See tls.hpp and tls_context.hpp.

#include "tec/k8sclient/tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ssl/error.hpp>
#include <string_view>
#include <utility>

#include "tls_context.hpp"

namespace tec::k8sclient {

using base::error;

namespace detail {

namespace {

namespace ssl = boost::asio::ssl;

error unusable(const rest_config& config, std::string_view what, const std::string& fields,
               std::string_view why) {
  return base::make_error(base::errc::config_invalid, config.source + ": the " + std::string(what) +
                                                          " (" + fields +
                                                          ") is unusable: " + std::string(why));
}

}  // namespace

base::result<ssl::context> make_tls_context(const rest_config& config) {
  ssl::context ctx(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                  ec);
  if (config.insecure_skip_tls_verify) {
    ctx.set_verify_mode(ssl::verify_none, ec);
  } else {
    ctx.set_verify_mode(ssl::verify_peer, ec);
    if (!config.ca_pem.empty()) {
      // Every certificate of the bundle must parse, and there must be one (Asio stops at the
      // first bad PEM block; a bundle without any certificate is an error too).
      ctx.add_certificate_authority(boost::asio::buffer(config.ca_pem), ec);
      if (ec) {
        // Named as the kubeconfig fields, or the in-cluster file, it came from.
        const bool in_cluster = config.source.starts_with("in-cluster");
        return unusable(
            config, "CA bundle",
            in_cluster ? "ca.crt" : "certificate-authority or certificate-authority-data",
            "OpenSSL: " + ec.message());
      }
    } else {
      ctx.set_default_verify_paths(ec);
    }
  }
  if (!config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
    const std::string cert_fields = "client-certificate or client-certificate-data";
    const std::string key_fields = "client-key or client-key-data";
    ctx.use_certificate_chain(boost::asio::buffer(config.client_cert_pem), ec);
    if (ec) {
      return unusable(config, "client certificate", cert_fields, "OpenSSL: " + ec.message());
    }
    constexpr std::string_view mismatch = "it does not belong to the client certificate";
    ctx.use_private_key(boost::asio::buffer(config.client_key_pem), ssl::context::pem, ec);
    if (ec) {
      // OpenSSL refuses a key of the certificate's type that does not match it right here.
      const bool wrong_key =
          ec.category() == boost::asio::error::get_ssl_category() &&
          ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
      return unusable(config, "client key", key_fields,
                      wrong_key ? std::string(mismatch) : "OpenSSL: " + ec.message());
    }
    // A key of another type is only caught here.
    if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
      return unusable(config, "client key", key_fields, mismatch);
    }
  }
  return ctx;
}

}  // namespace detail

error check_tls_material(const rest_config& config) {
  if (!config.tls) {
    return {};
  }
  auto ctx = detail::make_tls_context(config);
  if (!ctx) {
    return ctx.error();
  }
  return {};
}

std::vector<std::string> insecure_settings(const rest_config& config) {
  std::vector<std::string> out;
  const std::string where = config.source.empty() ? std::string() : config.source + ": ";
  if (config.tls && config.insecure_skip_tls_verify) {
    out.push_back(where +
                  "insecure-skip-tls-verify is set: the API server's certificate is not "
                  "verified, so anyone on the network path can impersonate it");
  }
  if (!config.tls && (!config.bearer_token.empty() || !config.token_file.empty() || config.exec)) {
    out.push_back(where + "a bearer token is sent over plain http to " + config.host + ":" +
                  config.port + ": anyone on the network path can read and reuse it");
  }
  return out;
}

}  // namespace tec::k8sclient

#pragma once

// The certificate a server context presents, as PEM: what a test compares with the PEM text it
// expects the secure port to serve.

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <cstddef>
#include <string>

namespace tec::serving::testing {

inline std::string served_certificate_pem(boost::asio::ssl::context& ctx) {
  X509* cert = SSL_CTX_get0_certificate(ctx.native_handle());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return out;
}

}  // namespace tec::serving::testing

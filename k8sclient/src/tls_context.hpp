#pragma once

// The TLS client context of a rest_config, private to kube: the client builds its
// connections with it and check_tls_material() (tls.hpp) checks the same steps at start.

#include <boost/asio/ssl/context.hpp>

#include "tec/base/result.hpp"
#include "tec/k8sclient/rest_config.hpp"

namespace tec::k8sclient::detail {

/// A TLS 1.2+ client context: peer verification (unless insecure-skip-tls-verify) against the
/// CA bundle or the system roots, and the client certificate chain and key when set (their
/// match checked). Errors are errc::config_invalid naming config.source and the field.
base::result<boost::asio::ssl::context> make_tls_context(const rest_config& config);

}  // namespace tec::k8sclient::detail

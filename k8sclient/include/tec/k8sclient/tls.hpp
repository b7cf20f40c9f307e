#pragma once

// Checks of the connection settings the daemon runs once at start, so broken TLS material is
// one clear error and exit 1 instead of a failure logged on every request (README: "1 for a
// broken configuration"), and insecure settings are said once.

#include <string>
#include <vector>

#include "tec/base/error.hpp"
#include "tec/k8sclient/rest_config.hpp"

namespace tec::k8sclient {

/// Loads the TLS material of `config` exactly as the client will (a TLS 1.2+ client context)
/// and checks it: the CA bundle yields at least one certificate and every certificate in it
/// parses; the client certificate chain and the client key parse, and the key belongs to the
/// certificate. Nothing to check for plain http or without material. Returns an empty error
/// when usable, else errc::config_invalid with a one-line message naming config.source, the
/// field and OpenSSL's reason; never any key or certificate bytes. Pure, thread-safe.
base::error check_tls_material(const rest_config& config);

/// One line per insecure setting, to be logged as a warning at start:
/// insecure-skip-tls-verify (the server is not authenticated) and a bearer token or token file
/// or an exec plugin's credentials over plain http (the token crosses the network in clear
/// text). Empty when there is none.
std::vector<std::string> insecure_settings(const rest_config& config);

}  // namespace tec::k8sclient

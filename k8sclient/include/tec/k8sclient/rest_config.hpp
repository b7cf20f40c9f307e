#pragma once

// How to reach and authenticate to one API server; produced by the kubeconfig and in-cluster
// loaders (config.hpp), consumed by the HTTP transport.

#include <memory>
#include <string>

namespace tec::k8sclient {

class exec_authenticator;  // exec_authenticator.hpp

struct rest_config {
  std::string host;       ///< Host name or IP of the API server, no scheme, no port.
  std::string port;       ///< Port as text ("443" when the URL had none and the scheme was https).
  bool tls = true;        ///< https (true) or plain http (false).
  std::string base_path;  ///< Path prefix from the server URL, usually empty.
  std::string ca_pem;     ///< PEM bundle to verify the server; empty = system default roots.
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  ///< SNI / verification name override; empty = host.
  std::string client_cert_pem;  ///< Client certificate (PEM), for mutual TLS.
  std::string client_key_pem;   ///< Its private key (PEM). Secret: never logged.
  std::string bearer_token;     ///< Static token. Secret: never logged.
  std::string token_file;       ///< Token file, re-read about every 50 s and after a 401.
  /// The user's exec credential plugin (kubeconfig users[].user.exec); null: none. Shared by
  /// every copy of this config, so that all the clients made from it run the plugin once.
  /// Exclusive with bearer_token, token_file and the client certificate (the loader checks).
  std::shared_ptr<exec_authenticator> exec;
  std::string namespace_;  ///< The context's (or the pod's) namespace; may be empty.
  std::string source;      ///< Where this came from, e.g. "kubeconfig /x context y".
};

}  // namespace tec::k8sclient

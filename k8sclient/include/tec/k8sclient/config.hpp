#pragma once

// Where the API server is and how to authenticate to it: the kubeconfig and in-cluster
// loaders (client-go's clientcmd and rest.InClusterConfig, in our words), the bearer-token
// source that follows kubelet token rotation.
//
// Nothing here does network I/O. Error messages name the file and the field that is wrong and
// never contain a secret (tokens, keys, certificate data).

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "tec/base/clock.hpp"
#include "tec/base/result.hpp"
#include "tec/k8sclient/rest_config.hpp"

namespace tec::k8sclient {

/// The scheme, host, port and path prefix of a `server` URL.
struct server_url {
  bool tls = true;
  std::string host;       ///< IPv6 literals without their brackets ("::1").
  std::string port;       ///< Always set: the URL's port, else "443" (https) or "80" (http).
  std::string base_path;  ///< "/prefix" without a trailing slash; empty for none or "/".
};

/// Parses a kubeconfig `server` value: `https://host[:port][/path]`, `http://...`, IPv6 in
/// brackets. Like client-go, a value without a scheme gets `https://` when `default_tls`
/// (the cluster has a CA, a client certificate or insecure-skip-tls-verify) and `http://`
/// otherwise. Query strings, fragments and user info are rejected.
base::result<server_url> parse_server_url(std::string_view text, bool default_tls = true);

/// Decodes standard base64 with padding; CR and LF are ignored (as Go's decoder does).
/// nullopt when the text is not valid base64.
std::optional<std::string> decode_base64(std::string_view text);

/// Loads one context of a kubeconfig file (YAML or JSON). `context` empty means the file's
/// current-context. Relative file paths inside the file (certificate-authority,
/// client-certificate, client-key, tokenFile) are resolved against the file's directory.
/// Certificate and key files are read now; a tokenFile is read once to validate it and is
/// re-read later through token_source. An exec credential plugin (users[].user.exec, v1 or
/// v1beta1) is checked and becomes rest_config::exec; it is not run here (nothing here runs a
/// process or does network I/O): exec_authenticator runs it when a credential is first wanted.
/// auth-provider plugins, basic auth, impersonation and proxy-url are not supported and are
/// reported as errors rather than silently ignored. Thread-safe (no shared state).
base::result<rest_config> load_kubeconfig(const std::string& path, const std::string& context = "");

/// Looks up an environment variable; nullopt when unset. Injected for tests.
using env_lookup = std::function<std::optional<std::string>(const std::string& name)>;

/// The process environment (std::getenv). Not safe against concurrent setenv.
std::optional<std::string> process_env(const std::string& name);

inline constexpr std::string_view default_service_account_dir =
    "/var/run/secrets/kubernetes.io/serviceaccount";

/// The configuration of a pod's service account: needs both KUBERNETES_SERVICE_HOST and
/// KUBERNETES_SERVICE_PORT, `<root>/token` (read once to validate; token_file is set so that it
/// is re-read), `<root>/ca.crt`, and takes the namespace from `<root>/namespace` (as clientcmd
/// does: POD_NAMESPACE wins when set, "default" when neither exists).
base::result<rest_config> load_in_cluster(
    const std::string& root = std::string(default_service_account_dir),
    const env_lookup& env = process_env);

/// The bearer token to send, following kubelet token rotation: a static token, or a token
/// file that is re-read when the cached copy is older than `period` (client-go: 1 minute
/// cache; we use 50 s by default) or after invalidate() (call it after a 401).
/// When both are given, the static token is the initial cached value of the file.
/// If a re-read fails while a token is cached, the cached token is kept (client-go does the
/// same) and last_error() tells why; the first failure of a streak logs a warning (logger
/// "client") naming the file and the reason, and the first success after it an info line.
/// A token (static or read) containing a line break or another control character is refused:
/// it would corrupt the Authorization header. A token file's surrounding whitespace
/// (its trailing newline) is trimmed.
/// Thread-safe: current() and invalidate() may be called from any thread.
class token_source {
public:
  /// `clock` (its now()) must outlive the source.
  token_source(std::string static_token, std::string token_file,
               std::chrono::seconds period = std::chrono::seconds{50},
               base::clock& clock = *base::real_clock());

  /// The token to send; empty when there is no token authentication at all. An error only
  /// when the token file cannot be read and no token was ever cached.
  base::result<std::string> current();

  /// Forces the next current() to re-read the token file (after a 401).
  void invalidate();

  /// Why the last re-read failed (empty message when it succeeded).
  [[nodiscard]] base::error last_error() const;

private:
  const std::string file_;
  const std::chrono::seconds period_;
  base::clock& clock_;
  mutable std::mutex mutex_;
  std::string token_;
  bool have_token_ = false;
  bool stale_ = false;
  std::chrono::steady_clock::time_point fetched_{};
  base::error last_error_;    ///< Of the last re-read; set while a failure streak lasts.
  base::error static_error_;  ///< Why the static token was refused.
};

}  // namespace tec::k8sclient

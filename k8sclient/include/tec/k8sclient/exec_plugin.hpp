#pragma once

// Exec credential plugins (client-go's plugin/pkg/client/auth/exec, in our words): the
// kubeconfig's `users[].user.exec` block, the ExecCredential a plugin prints, and one bounded
// run of the plugin. exec_authenticator.hpp caches what a run returns and decides when to run
// again.
//
// A run is bounded in every way a plugin could hang or flood us: its wall time
// (exec_limits::timeout, then SIGKILL), its standard output (exec_limits::max_output, then
// SIGKILL) and the standard error kept (the rest is read and dropped). It never gets a
// terminal: standard input is /dev/null, so `interactiveMode: Always` is refused at load time
// and IfAvailable and Never run alike. Every error is one line, escaped (base::printable), and
// never contains what the plugin printed on standard output (a token, a key).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tec/base/clock.hpp"
#include "tec/base/result.hpp"

namespace tec::k8sclient {

inline constexpr std::string_view exec_api_v1 = "client.authentication.k8s.io/v1";
inline constexpr std::string_view exec_api_v1beta1 = "client.authentication.k8s.io/v1beta1";

/// The kubeconfig's exec.interactiveMode.
enum class exec_interactive_mode : std::uint8_t { never, if_available, always };

/// The kubeconfig's `users[].user.exec`, checked by the loader (load_kubeconfig).
struct exec_config {
  std::string api_version;  ///< exec_api_v1 or exec_api_v1beta1.
  /// The command: looked up on PATH when it holds no '/', else a path (a relative one was
  /// resolved against the kubeconfig's directory by the loader, as client-go does).
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  ///< Added to (or replacing) ours.
  std::string install_hint;  ///< Shown when the command cannot be found.
  /// v1 requires it in the kubeconfig; v1beta1 defaults to IfAvailable. Never always (refused).
  exec_interactive_mode interactive_mode = exec_interactive_mode::if_available;
  /// provideClusterInfo: KUBERNETES_EXEC_INFO then carries spec.cluster.
  bool provide_cluster_info = false;
  /// spec.cluster of KUBERNETES_EXEC_INFO as a JSON object (server, tls-server-name,
  /// insecure-skip-tls-verify, certificate-authority-data, config); set by the loader.
  std::string cluster_json = "{}";
  /// Where it came from, for messages: "kubeconfig /x: users[0].user.exec".
  std::string source;
};

/// What a plugin returned (ExecCredential.status).
struct exec_credential {
  std::string token;            ///< Bearer token. Secret: never logged.
  std::string client_cert_pem;  ///< With client_key_pem: the TLS client certificate.
  std::string client_key_pem;   ///< Secret: never logged.
  /// status.expirationTimestamp; none: valid until the API server answers 401.
  std::optional<base::wall_clock::time_point> expiry;

  [[nodiscard]] bool same_secret(const exec_credential& other) const {
    return token == other.token && client_cert_pem == other.client_cert_pem &&
           client_key_pem == other.client_key_pem;
  }
};

struct exec_limits {
  std::chrono::milliseconds timeout{30'000};             ///< The plugin's whole run.
  std::size_t max_output = std::size_t{1} << 20U;        ///< Standard output (the ExecCredential).
  std::size_t max_stderr_kept = std::size_t{16} << 10U;  ///< Standard error kept for messages.
};

/// One successful run: the credential and what the plugin wrote on standard error (capped).
struct exec_run {
  exec_credential credential;
  std::string stderr_text;
};

/// Parses the ExecCredential a plugin printed: JSON with apiVersion equal to `api_version`,
/// kind ExecCredential and a status with a token, or clientCertificateData and clientKeyData
/// (PEM; both), or all three; status.expirationTimestamp an RFC 3339 time when set. A token
/// with a line break or another control character is refused (it would corrupt the header).
/// The error says what is wrong without quoting a secret. Pure; any thread.
base::result<exec_credential> parse_exec_credential(std::string_view output,
                                                    std::string_view api_version);

/// The value of KUBERNETES_EXEC_INFO for `config`: apiVersion, kind ExecCredential,
/// spec.interactive false (we never hand the plugin a terminal) and spec.cluster when
/// provide_cluster_info. Pure; any thread.
std::string exec_info_json(const exec_config& config);

/// Runs the plugin once, blocking the calling thread for at most limits.timeout (plus the
/// time to reap it): our environment plus config.env plus KUBERNETES_EXEC_INFO, standard input
/// /dev/null, no other descriptor inherited. Errors (errc::config_invalid), each one line
/// naming config.source and the command: not found (with the install hint), cannot be started,
/// killed after the timeout, more output than allowed, exit status or signal (with the end of
/// its standard error, escaped), an invalid ExecCredential. When `stop` becomes true the plugin
/// is killed and the run ends with errc::shutting_down. Any thread.
base::result<exec_run> run_exec_plugin(const exec_config& config, const exec_limits& limits,
                                       const std::atomic<bool>* stop = nullptr);

}  // namespace tec::k8sclient

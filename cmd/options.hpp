#pragma once

// The daemon's command line: kube-controller-manager's flag names and defaults, parsed and
// validated without side effects (no files opened except the service-account namespace file,
// which is injected), so that tests can drive it.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/duration.hpp"
#include "tec/base/result.hpp"
#include "tec/controller/policy.hpp"

namespace tec::cmd {

enum class log_format : unsigned char { text, json };

/// The log level of component-base's verbosity (-v/--v, klog's V levels): 0 to 3 info (klog's
/// V(2) "steady state" and V(3) "changes" lines are what our info level says already), 4 and 5
/// debug (V(4): debug), 6 and above trace (V(6) and up: each request, which our trace level
/// logs as its stages). `verbosity` is not negative.
[[nodiscard]] std::string_view level_for_verbosity(int verbosity);

/// Every setting the daemon takes from its command line, validated.
struct options {
  std::string kubeconfig;  ///< Empty: in-cluster configuration.
  std::string context;     ///< Empty: the kubeconfig's current-context.
  double kube_api_qps = 20.0;
  int kube_api_burst = 30;
  /// HTTP/1.1 connections to the API server (two hold the watches; the rest carry writes).
  int kube_api_connections = 128;
  int workers = 8;
  bool leader_elect = true;
  /// --kube-api-content-type: pods and nodes are listed and watched as protobuf (as
  /// kube-controller-manager's default) or JSON.
  bool protobuf = true;
  /// --metrics-secure: HTTPS and delegated authentication/authorization (TokenReview,
  /// SubjectAccessReview) on the metrics server; false: plain HTTP for anyone.
  bool metrics_secure = true;
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  /// The Lease's namespace: the flag, else the pod's namespace, else kube-system.
  std::string lease_namespace;
  std::string lease_name = "taint-eviction-controller";
  /// /metrics and /debug/*; "0" disables the server.
  std::string metrics_bind_address = ":8443";
  /// --tls-cert-file, --tls-private-key-file: the serving certificate of the secure metrics
  /// server (PEM, re-read when they change); both empty: self-signed at start.
  std::string tls_cert_file;
  std::string tls_private_key_file;
  std::string health_probe_bind_address = ":8081";  ///< "0" disables the probe server.
  bool disruption_condition = true;
  /// Confirm on a GET of the node, not the cache, that it still carries a taint that makes
  /// the eviction right before writing anything (writers::eviction_sink_options).
  /// Off by default: it adds one GET to a single eviction's latency (BENCHMARKS.md, "The
  /// fresh node check": +1.3 ms at the fastest, +24% at the median, on the local API server).
  bool fresh_node_check = false;
  /// trace, debug, info, warn, error, critical, off: --log-level, or -v/--v mapped by
  /// level_for_verbosity().
  std::string log_level = "info";
  log_format format = log_format::text;  ///< --logging-format (or its alias --log-format).
  /// --policy: the EvictionPolicy file (empty: none, upstream's behaviour), re-read when it
  /// changes; `policy` is what it held at start, validated.
  std::string policy_file;
  controller::eviction_policy policy;
  /// --policy-configmap ([NAMESPACE/]NAME; the namespace defaults to the Lease's): the
  /// ConfigMap --policy's file comes from. Each load or reload records an Event on it
  /// (PolicyApplied, PolicyRejected). Empty name: no Events.
  std::string policy_configmap_namespace;
  std::string policy_configmap_name;
  /// The SHA-256 (hex) of --policy's file as read at start (the policy_info metric).
  std::string policy_sha256;
  /// --dry-run: decide everything, write nothing, whatever the policy file says.
  bool dry_run = false;
  /// --shadow: dry-run plus a comparison with the built-in taint manager (README "Shadow
  /// mode"); --shadow-window: how far apart two evictions of a pod may be and still agree,
  /// and how long an unmatched one waits before it is reported (1s..1h).
  bool shadow = false;
  std::chrono::milliseconds shadow_window{30'000};
  /// --deadlines-from-taint-time: when this process starts acting (a restart, a leader
  /// failover), count the tolerations of pods already on tainted nodes from the taints'
  /// timeAdded (and the pods' bind time) instead of from now.
  bool deadlines_from_taint_time = true;
  /// --scheduled-events: a Normal TaintEvictionScheduled event on a pod when its eviction is
  /// scheduled for a later time (its toleration's tolerationSeconds).
  bool scheduled_events = true;
  /// --webhook-cert-secret ([NAMESPACE/]NAME; the namespace defaults to the Lease's): the
  /// kubernetes.io/tls Secret the admission webhook's CA and serving certificate are kept in
  /// (README "Certificates"): the secure port serves its certificate and the caBundle of
  /// --webhook-configuration is kept equal to its CA. Empty name: off (the secure port's
  /// certificate is --tls-cert-file's or self-signed, as before); off too with --tls-cert-file.
  std::string webhook_cert_secret_namespace;
  std::string webhook_cert_secret_name;
  /// --webhook-configuration: the ValidatingWebhookConfiguration whose caBundle is kept.
  std::string webhook_configuration = "taint-eviction-controller";
  /// --webhook-service ([NAMESPACE/]NAME; the namespace defaults to the Secret's): the
  /// Service the API server calls the webhook through; the certificate names
  /// NAME.NAMESPACE.svc and NAME.NAMESPACE.svc.cluster.local.
  std::string webhook_service_namespace;
  std::string webhook_service_name = "taint-eviction-controller-metrics";
  /// --webhook-cert-check-interval: how often the Secret and the caBundle are checked
  /// (10s..24h; also at start, and after a failed check again within a minute).
  std::chrono::milliseconds webhook_cert_check_interval{3'600'000};
  /// --history-size: the eviction outcomes /debug/history keeps (README "Eviction history");
  /// 0: no history (no record, no log line, no endpoint).
  int history_size = 1000;

  /// The policy to apply: `file_policy` (the file's, at start or reloaded) with --dry-run;
  /// --shadow implies dry-run, which no reload can turn off.
  [[nodiscard]] controller::eviction_policy effective_policy(
      controller::eviction_policy file_policy) const {
    file_policy.dry_run = file_policy.dry_run || dry_run || shadow;
    return file_policy;
  }
};

/// What main() should do after parsing.
struct parse_result {
  /// The options to run with; nullopt when the process should exit with `exit_code` at once
  /// (--help, --version, or a bad flag).
  std::optional<options> opts;
  int exit_code = 0;  ///< 0 for --help/--version, 2 for a bad flag or value.
  std::string out;    ///< Text for stdout (help, version).
  std::string err;    ///< Text for stderr (what is wrong).
};

/// Looks up an environment variable; nullopt when unset.
using env_fn = std::function<std::optional<std::string>(const std::string&)>;
/// Reads a whole file; nullopt when it cannot be read.
using read_file_fn = std::function<std::optional<std::string>(const std::string&)>;

/// Reads the policy file: its content, or an error naming it.
using read_policy_fn = std::function<base::result<std::string>(const std::string&)>;

/// The process environment and the real file system.
std::optional<std::string> real_env(const std::string& name);
std::optional<std::string> real_read_file(const std::string& path);

inline constexpr const char* service_account_namespace_file =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Parses `args` (without the program name). The default Lease namespace is POD_NAMESPACE
/// from `env`, else the content of service_account_namespace_file, else "kube-system".
/// `version` is what --version prints after the program name. --policy FILE is read through
/// `read_policy` (empty: policy::read_policy_text, bounded and regular files only) and
/// validated: a bad file is exit 2 with one line naming every problem ("--policy:
/// FILE:LINE:COLUMN: field: what; ...", at most 20 and "... and N more").
/// --check-policy FILE reads FILE the same way and returns at once: exit 0 with what the
/// policy does on `out`, or exit 1 with each problem on a line of `err`.
parse_result parse_options(const std::vector<std::string>& args, std::string_view version,
                           const env_fn& env = real_env,
                           const read_file_fn& read_file = real_read_file,
                           const read_policy_fn& read_policy = {});

/// Go durations (tec/base/duration.hpp), as the flags spell them.
using base::format_duration;
using base::parse_go_duration;

}  // namespace tec::cmd

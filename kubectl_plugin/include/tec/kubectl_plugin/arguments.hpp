#pragma once

// The plugin's command line, as kubectl's conventions have it: verbs (preview, pending,
// explain, shadow), --kubeconfig, --context, -n/--namespace, -A, -o table|wide|json|yaml, -l, -h.
// Bad usage is exit code 2 with one line on stderr ("error: ..."), as kubectl prints it.
// Pure: no I/O; any thread.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/controller/model.hpp"

namespace tec::kubectl_plugin {

/// Exit codes, as kubectl's: 0 ok, 1 an error talking to the cluster (or an object not
/// found), 2 bad usage.
inline constexpr int exit_ok = 0;
inline constexpr int exit_cluster_error = 1;
inline constexpr int exit_usage = 2;

enum class verb : std::uint8_t { preview, pending, explain, shadow };
enum class output_format : std::uint8_t { table, wide, json, yaml };

/// Where the cluster and the controller are.
struct cluster_flags {
  std::string kubeconfig;  ///< --kubeconfig; empty: $KUBECONFIG's first file, else ~/.kube/config.
  std::string context;     ///< --context; empty: the kubeconfig's current-context.
  /// --controller-namespace: the controller's namespace (its Lease and policy ConfigMap).
  std::string controller_namespace = "taint-eviction-controller";
  /// --policy-configmap: the ConfigMap holding the policy (key policy.yaml) in that namespace.
  std::string policy_configmap = "taint-eviction-controller-policy";
  /// --lease: the Lease naming the acting replica, in that namespace.
  std::string lease = "taint-eviction-controller";
  /// --controller-url: the acting replica's secure port reached some other way (e.g. your own
  /// port-forward): no Lease lookup, no port-forward.
  std::string controller_url;
  /// --request-timeout, per request, as kubectl takes it ("30s", "1m", a bare integer of
  /// seconds); 0: no timeout (then request_wait() is a day).
  std::chrono::milliseconds request_timeout{30'000};

  /// How long one request (or the port-forward's start) may take: request_timeout, or a day
  /// when it is 0, kubectl's "no timeout" (a bound all the same: nothing waits forever).
  [[nodiscard]] std::chrono::milliseconds request_wait() const {
    return request_timeout.count() == 0 ? std::chrono::milliseconds{std::chrono::hours{24}}
                                        : request_timeout;
  }
};

/// One parsed command line.
struct invocation {
  verb what = verb::preview;
  cluster_flags cluster;
  output_format output = output_format::table;
  // preview
  std::vector<std::string> nodes;  ///< NODE... (in order, duplicates removed).
  std::string node_selector;       ///< -l/--selector (instead of NODE...).
  controller::taint taint;         ///< --taint, effect NoExecute.
  std::string policy_file;         ///< --policy FILE instead of the ConfigMap.
  // pending, explain, shadow
  std::string namespace_;  ///< -n; empty: the kubeconfig context's, else "default" (shadow: every
                           ///< namespace).
  bool all_namespaces = false;  ///< -A (pending).
  std::string node;             ///< --node (pending).
  std::string pod;              ///< POD (explain).
  bool history = false;         ///< --history (shadow): the built-in's evictions, not the verdict.
};

/// What parse_arguments() decided: an invocation to run, or an exit code with what to print
/// (help on `out`, the one error line on `err`).
struct parse_outcome {
  std::optional<invocation> inv;
  int exit_code = exit_ok;
  std::string out;
  std::string err;
};

/// Parses the arguments after the program name.
[[nodiscard]] parse_outcome parse_arguments(const std::vector<std::string>& args);

/// --request-timeout's value as kubectl reads it (client-go's clientcmd.ParseTimeout): a bare
/// non-negative integer is seconds, else a Go duration ("500ms", "30s", "1m30s"); "0" (or "0s")
/// means no timeout. Refused: a negative one, one longer than 24h, anything else. Pure.
[[nodiscard]] std::optional<std::chrono::milliseconds> parse_request_timeout(std::string_view text);

/// "KEY[=VALUE]:NoExecute" as `kubectl taint` takes it: KEY a qualified name (an optional DNS
/// subdomain prefix and '/', then at most 63 characters of [A-Za-z0-9-_.] starting and ending
/// alphanumeric), VALUE at most 63 such characters (may be empty). Any other effect is refused
/// (only a NoExecute taint evicts). The error message is one escaped line.
[[nodiscard]] base::result<controller::taint> parse_taint(std::string_view text);

}  // namespace tec::kubectl_plugin

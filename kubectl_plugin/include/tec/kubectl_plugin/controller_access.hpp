#pragma once

// Reaching the acting replica's secure port (/debug/evictions, /debug/history) from a
// workstation. The API server's service and pod proxies drop the caller's Authorization header
// (README "Pending evictions"), and the port wants a bearer token (TokenReview +
// SubjectAccessReview), so the plugin does what the README's recipe does by hand: the Lease
// names the acting replica (holderIdentity "<pod name>_<random>"), a child `kubectl
// port-forward` (same --kubeconfig and --context) reaches that pod's port 8443, and the
// kubeconfig user's bearer token (token, tokenFile or what its exec plugin gives) goes with
// each request. A user that authenticates with a client certificate has no token to send: the
// port cannot authenticate it, and the caller falls back (see pending and explain).
//
// Thread/ownership: one per command, on the caller's thread; the port-forward child lives as
// long as the object (terminated and reaped by the destructor).

#include <sys/types.h>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tec/base/result.hpp"
#include "tec/kubectl_plugin/arguments.hpp"
#include "tec/kubectl_plugin/cluster.hpp"

namespace tec::kubectl_plugin {

/// The pod name in a holderIdentity "<pod name>_<random>" (everything before the last '_');
/// nullopt when it has no '_' or the name part is empty.
[[nodiscard]] std::optional<std::string> holder_pod(std::string_view holder_identity);

/// The port of a `kubectl port-forward` line "Forwarding from 127.0.0.1:43211 -> 8443";
/// nullopt for any other line.
[[nodiscard]] std::optional<std::string> forwarded_port(std::string_view line);

class controller_access {
public:
  /// Opens the way to the acting replica: `flags.controller_url` when set, else the Lease and
  /// a port-forward to the pod's port 8443 (as deploy/ runs it; the child gets --kubeconfig
  /// and --context when they were given, else the environment's KUBECONFIG). An error says why it
  /// cannot be reached, in a few words for the fallback line ("no Lease
  /// taint-eviction-controller/taint-eviction-controller", "the kubeconfig user has no bearer token
  /// (client certificate users cannot read the port)").
  static base::result<std::unique_ptr<controller_access>> open(cluster_reader& cluster,
                                                               const cluster_flags& flags);
  ~controller_access();
  controller_access(const controller_access&) = delete;
  controller_access& operator=(const controller_access&) = delete;

  /// GET `target` on the port: the body of a 2xx; 401/403/404 and others as errors whose
  /// message says what the port answered.
  base::result<std::string> get(const std::string& target);

  /// What was reached, for messages: "pod taint-eviction-controller/x" or the URL.
  [[nodiscard]] const std::string& description() const noexcept { return description_; }

private:
  controller_access(std::unique_ptr<cluster_reader> port, std::string description, pid_t child,
                    int child_out);

  std::unique_ptr<cluster_reader> port_;
  std::string description_;
  pid_t child_ = -1;    ///< The port-forward process, or -1.
  int child_out_ = -1;  ///< Its output (kept open: a closed pipe would kill it on a write).
};

}  // namespace tec::kubectl_plugin

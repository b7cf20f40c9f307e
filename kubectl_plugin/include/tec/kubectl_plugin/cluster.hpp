#pragma once

// Reading the cluster, synchronously, for one plugin command: GETs on the project's HTTP client
// (k8sclient), decoded with the informers' decoders (pods, nodes, namespaces) and, for the few
// other kinds the plugin reads (ConfigMap, PodDisruptionBudget, Lease, Event), with small
// nlohmann readers here. Read-only: it sends only GETs.
//
// Thread/ownership: one cluster_reader per command, used from one thread; it owns its
// io_context and runs it only inside its calls. Errors are values: a transport failure, a
// status the call does not expect (anything but 2xx and, where it says so, 404) or a body of
// the wrong shape, with a message naming what was read.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/controller/model.hpp"
#include "tec/controller/policy.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/rest_config.hpp"

namespace tec::kubectl_plugin {

/// A PodDisruptionBudget: which pods it covers and how many may go now.
struct pdb_view {
  std::string namespace_;
  std::string name;
  controller::label_selector selector;
  /// An empty selector: policy/v1 selects every pod of the namespace, policy/v1beta1 none.
  bool selects_all = false;
  std::int64_t disruptions_allowed = 0;  ///< status.disruptionsAllowed.
};

/// A TaintEvictionScheduled Event, as the pending fallback shows it.
struct event_view {
  std::string namespace_;
  std::string pod;  ///< involvedObject.name.
  std::string pod_uid;
  std::string message;
  std::string last_seen;  ///< lastTimestamp (or eventTime, or firstTimestamp).
};

/// Where the kubeconfig is: `flag` when set, else the first file of `kubeconfig_env`
/// ($KUBECONFIG, ':'-separated, as kubectl reads its first file), else `home`/.kube/config.
[[nodiscard]] std::string kubeconfig_path(const std::string& flag,
                                          const std::optional<std::string>& kubeconfig_env,
                                          const std::optional<std::string>& home);

/// True when `pdb` covers a pod of `namespace_` with `labels` (pod_view::labels).
[[nodiscard]] bool covers(const pdb_view& pdb, std::string_view namespace_,
                          std::string_view labels);

/// Decoders of the kinds above (pure; exposed for the unit tests). `source` names the body in
/// messages.
[[nodiscard]] base::result<std::vector<pdb_view>> decode_pdb_list(std::string_view body, bool v1);
[[nodiscard]] base::result<std::vector<event_view>> decode_event_list(std::string_view body);
/// The ConfigMap's data[key], nullopt when it has no such key.
[[nodiscard]] base::result<std::optional<std::string>> decode_configmap_value(std::string_view body,
                                                                              std::string_view key);
/// The Lease's spec.holderIdentity (empty when none).
[[nodiscard]] base::result<std::string> decode_lease_holder(std::string_view body);

class cluster_reader {
public:
  /// Talks to the server `config` names; each request may take `timeout` (cluster_flags::
  /// request_wait()).
  cluster_reader(k8sclient::rest_config config, std::chrono::milliseconds timeout);
  ~cluster_reader();
  cluster_reader(const cluster_reader&) = delete;
  cluster_reader& operator=(const cluster_reader&) = delete;

  /// One GET of `target` (path and query); any status is returned, errors are transport ones.
  base::result<k8sclient::response> get(const std::string& target);

  /// Every node (label_selector empty) or those it selects; all pages.
  base::result<std::vector<controller::node_view>> nodes(std::string_view label_selector = {});
  /// One node; nullopt when it does not exist.
  base::result<std::optional<controller::node_view>> node(std::string_view name);
  /// The pods of `namespace_` (empty: every namespace) matching `field_selector`; all pages.
  /// Labels are kept (the policy's podSelector, PodDisruptionBudgets).
  base::result<std::vector<controller::pod_view>> pods(std::string_view namespace_,
                                                       std::string_view field_selector);
  /// One pod; nullopt when it does not exist.
  base::result<std::optional<controller::pod_view>> pod(std::string_view namespace_,
                                                        std::string_view name);
  /// The namespaces with the opt-out annotation.
  base::result<std::vector<std::string>> opted_out_namespaces();
  /// data[key] of a ConfigMap; nullopt when the ConfigMap or the key does not exist.
  base::result<std::optional<std::string>> configmap_value(std::string_view namespace_,
                                                           std::string_view name,
                                                           std::string_view key);
  /// Every PodDisruptionBudget: policy/v1, else (404: before 1.21) policy/v1beta1.
  base::result<std::vector<pdb_view>> pdbs();
  /// The Lease's holderIdentity; nullopt when there is no Lease.
  base::result<std::optional<std::string>> lease_holder(std::string_view namespace_,
                                                        std::string_view name);
  /// Events of `namespace_` (empty: all) with `reason`.
  base::result<std::vector<event_view>> events(std::string_view namespace_,
                                               std::string_view reason);

  [[nodiscard]] const k8sclient::rest_config& config() const noexcept { return config_; }

private:
  /// GET of one object: its body, nullopt on 404, an error for any other failure.
  base::result<std::optional<std::string>> get_object(const std::string& target,
                                                      std::string_view what);
  template <class Record, class Decode>
  base::result<std::vector<Record>> list(const std::string& path, std::string_view query,
                                         Decode decode);

  k8sclient::rest_config config_;
  std::chrono::milliseconds timeout_;
  boost::asio::io_context io_;
  std::unique_ptr<k8sclient::client> client_;
};

}  // namespace tec::kubectl_plugin

#pragma once

// The eviction policy an operator configures (the EvictionPolicy file, see README "Policy"),
// as the controller uses it: plain values, already validated. A default-constructed policy is
// "no policy": exactly upstream's behaviour.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tec::controller {

/// Limits on how fast evictions are issued (0 = unlimited, for each field).
struct rate_limit_policy {
  /// Evictions started per second, cluster-wide (a token bucket on the controller's clock,
  /// separate from the API client's QPS).
  double evictions_per_second = 0;
  /// Evictions that may start at once after a quiet period; 0 = max(1, ceil(evictions_per_second)).
  std::uint32_t burst = 0;
  /// Evictions in flight (started, not yet finished) per node and per namespace.
  std::uint32_t max_in_flight_per_node = 0;
  std::uint32_t max_in_flight_per_namespace = 0;

  [[nodiscard]] bool unlimited() const {
    return evictions_per_second <= 0 && max_in_flight_per_node == 0 &&
           max_in_flight_per_namespace == 0;
  }
  friend bool operator==(const rate_limit_policy&, const rate_limit_policy&) = default;
};

/// Pauses every eviction while too many nodes carry NoExecute taints.
struct storm_breaker_policy {
  /// Opens when more than this share of nodes (0-100) is tainted; 0 = off.
  double max_tainted_nodes_percent = 0;
  /// ... and at least this many nodes are.
  std::uint32_t min_tainted_nodes = 0;
  /// Closes again below max_tainted_nodes_percent - hysteresis_percent.
  double hysteresis_percent = 0;
  /// Only NoExecute taints with these keys count (exact keys); empty = every NoExecute taint.
  std::vector<std::string> taint_keys;
  /// Settling time (0 = off): while the breaker is enabled, an eviction caused by a NoExecute
  /// taint younger than this waits until the taint has this age (README "Storm breaker").
  std::uint32_t settle_seconds = 0;

  [[nodiscard]] bool enabled() const { return max_tainted_nodes_percent > 0; }
  friend bool operator==(const storm_breaker_policy&, const storm_breaker_policy&) = default;
};

/// One requirement of a label selector (metav1.LabelSelectorRequirement).
struct label_requirement {
  enum class op : std::uint8_t { in, not_in, exists, does_not_exist };
  std::string key;
  op operator_ = op::in;
  std::vector<std::string> values;  ///< In / NotIn only (non-empty there).

  friend bool operator==(const label_requirement&, const label_requirement&) = default;
};

/// A metav1.LabelSelector: every matchLabels pair and every requirement must hold. Unlike a
/// PDB's, an empty selector selects nothing here (the policy file's `podSelector: {}` is the
/// default, "no pod is excluded").
struct label_selector {
  std::vector<std::pair<std::string, std::string>> match_labels;
  std::vector<label_requirement> match_expressions;

  [[nodiscard]] bool empty() const { return match_labels.empty() && match_expressions.empty(); }
  friend bool operator==(const label_selector&, const label_selector&) = default;
};

/// Pods the controller never evicts (each skip is counted by reason; see skip_reason).
struct exclude_policy {
  std::vector<std::string> namespaces;  ///< Exact namespace names.
  label_selector pod_selector;          ///< Empty: selects no pod.
  bool mirror_pods = false;             ///< Pods with the kubernetes.io/config.mirror annotation.
  bool terminal_pods = false;           ///< Phase Succeeded or Failed.
  bool daemon_set_pods = false;         ///< Controlled by a DaemonSet.

  [[nodiscard]] bool empty() const {
    return namespaces.empty() && pod_selector.empty() && !mirror_pods && !terminal_pods &&
           !daemon_set_pods;
  }
  friend bool operator==(const exclude_policy&, const exclude_policy&) = default;
};

enum class taint_action : std::uint8_t {
  evict,   ///< The taint evicts as upstream's does (with the rule's floor and cap, if any).
  ignore,  ///< The taint is ignored: as if the node did not carry it.
};

/// A per-taint-key rule. The first rule whose key matches a taint applies to it.
struct taint_rule {
  /// An exact taint key, or a prefix when `prefix` is set (written "example.com/*" in the
  /// file; "*" alone matches every key).
  std::string key;
  bool prefix = false;
  taint_action action = taint_action::evict;
  /// Floor on the tolerationSeconds a pod gets for this taint (0 = none). A pod that does not
  /// tolerate the taint, or tolerates it for <= 0 s, also waits this long.
  std::int64_t min_toleration_seconds = 0;
  /// Cap on a finite tolerationSeconds (0 = none). A toleration without tolerationSeconds
  /// (tolerate forever) is not capped.
  std::int64_t max_toleration_seconds = 0;
  /// Evict mode: overrides eviction_policy::fallback_after for this taint (0 = never);
  /// nullopt = the global value.
  std::optional<std::chrono::milliseconds> fallback_after;

  [[nodiscard]] bool matches(std::string_view taint_key) const {
    return prefix ? taint_key.starts_with(key) : taint_key == key;
  }
  friend bool operator==(const taint_rule&, const taint_rule&) = default;
};

/// How an eviction removes the pod.
enum class eviction_mode : std::uint8_t {
  delete_pod,  ///< DisruptionTarget condition + DELETE, as upstream's taint manager.
  /// The Eviction API (pods/eviction), which honours PodDisruptionBudgets: a refusal (429) is
  /// retried with backoff, and after fallback_after the pod is deleted as in delete_pod.
  evict,
};

/// The admission webhook's deny mode (admission/; the controller itself never reads it). Off by
/// default: the webhook only warns. When on, it refuses adding a NoExecute taint that would
/// evict more than deny_evicting_more_than pods (now and later) or open the storm breaker,
/// unless the Node carries the acknowledgement annotation.
struct admission_policy {
  /// Refuse a taint that evicts more pods than this; nullopt = no such limit (0 refuses any
  /// taint that evicts a pod).
  std::optional<std::uint32_t> deny_evicting_more_than;
  /// Refuse a taint that would open the storm breaker (stormBreaker must be set).
  bool deny_if_breaker_opens = false;

  [[nodiscard]] bool deny_mode() const {
    return deny_evicting_more_than.has_value() || deny_if_breaker_opens;
  }
  friend bool operator==(const admission_policy&, const admission_policy&) = default;
};

struct eviction_policy {
  /// Decide everything, write nothing: "would delete" in the logs, decisions in the metrics.
  bool dry_run = false;
  eviction_mode mode = eviction_mode::delete_pod;
  /// Evict mode: how long an eviction may stay refused by a disruption budget before the pod
  /// is deleted anyway (0 = never). A taint rule's fallback_after overrides it for its taint.
  std::chrono::milliseconds fallback_after{0};
  rate_limit_policy rate_limit;
  storm_breaker_policy storm_breaker;
  exclude_policy exclude;
  std::vector<taint_rule> taints;
  /// The hold-until annotation (README "Holds") never keeps an eviction waiting longer than
  /// this past the time it was due.
  std::chrono::milliseconds max_hold = std::chrono::hours(1);
  admission_policy admission;

  friend bool operator==(const eviction_policy&, const eviction_policy&) = default;
};

}  // namespace tec::controller

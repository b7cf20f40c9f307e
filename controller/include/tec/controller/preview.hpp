#pragma once

// "What if": what a NoExecute taint would do before it is on (the kubectl plugin's `preview`
// and the admission webhook's warnings). Computed by the code that decides (plan_for: the
// opt-out annotations, the policy's exclude and taint rules, then decide()), on the pods and
// nodes the caller read, under the policy the caller passes. No state, no I/O, any thread.
//
// The times are what a controller acting now would do with the taint added now: a pod's
// countdown for the new taint set starts now (a countdown the node's earlier taints already
// started is not moved back: `already_tainted` says when the node had NoExecute taints).
// Given the wall time (preview_input::now_unix), a hold-until annotation in force on the pod or
// its node makes an eviction that would come sooner wait until the hold ends, at most maxHold
// past its own time, as the controller does (README "Holds"). The storm breaker's settling
// time (stormBreaker.settleSeconds) is previewed as the controller applies it: an eviction
// waits until each taint causing it is settleSeconds old; the taint being added is new, the
// node's other taints are as old as their timeAdded says (given now_unix: the node lifecycle
// controller's taints have one) and taken as settled without one (only the running controller
// knows when it first saw a taint `kubectl taint` put on).
// Admission control is summarised, not simulated per pod: the rate limit as the time the
// immediate evictions take at the configured rate, the storm breaker as the share of nodes
// that would carry a taint it counts.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/controller/controller.hpp"
#include "tec/controller/model.hpp"
#include "tec/controller/policy.hpp"

namespace tec::controller {

/// What would happen to one pod.
struct pod_preview {
  enum class outcome : std::uint8_t {
    now,    ///< Evicted at once (an untolerated taint, or tolerationSeconds <= 0).
    after,  ///< Evicted after `seconds`.
    never,  ///< Tolerated forever, or left alone (skip).
  };
  std::string namespace_;
  std::string name;
  std::string node;
  outcome what = outcome::never;
  std::int64_t seconds = 0;  ///< after: how long the pod may stay (> 0).
  /// The scoping rule that leaves it alone (the opt-out annotations, exclude, taint_ignored).
  std::optional<skip_reason> skip;
  /// The taint that set its time (after; now: the first untolerated one) and, when one of its
  /// tolerations matched, that toleration.
  std::optional<taint> by_taint;
  std::optional<toleration> used;
  /// A taint rule changed the time its tolerations gave (floor or cap): that rule's key.
  std::optional<std::string> rule;
  /// A hold-until annotation (the pod's or its node's) moved its time: when the hold makes it
  /// go (seconds since the Unix epoch; the hold's end, or the eviction's own time + maxHold
  /// when that is sooner). `seconds` then counts to it.
  std::optional<std::int64_t> held_until_unix;
  /// The storm breaker's settling time moved its time (to settleSeconds from now).
  bool settling = false;
  /// One line: why ("no toleration for dedicated=x:NoExecute", "tolerates
  /// node.kubernetes.io/unreachable for 300s", "excluded: namespace kube-system", ...).
  std::string why;
};

/// What the storm breaker and the rate limit would do.
struct storm_preview {
  std::size_t nodes = 0;          ///< The nodes the caller knows.
  std::size_t tainted_now = 0;    ///< ... carrying a NoExecute taint the breaker counts.
  std::size_t tainted_after = 0;  ///< ... once the taint is on.
  bool breaker_enabled = false;   ///< The policy sets stormBreaker.
  bool breaker_open_now = false;  ///< The share is over the threshold already.
  bool breaker_opens = false;     ///< ... would be once the taint is on.
  double threshold_percent = 0;   ///< stormBreaker.maxTaintedNodesPercent.
  /// The settling time (stormBreaker.settleSeconds; 0: off) and how many pods wait for it.
  std::int64_t settle_seconds = 0;
  std::size_t settling = 0;
  /// The rate limit (evictionsPerSecond; 0: none) and how long the immediate evictions would
  /// take at it after its burst, in seconds (0 without a rate limit): those evicted now and
  /// those that go together once the settling time is over.
  double evictions_per_second = 0;
  double immediate_seconds = 0;
};

struct preview_result {
  taint added;                       ///< The taint previewed.
  std::vector<std::string> targets;  ///< The nodes it goes on, in the caller's order.
  /// Target nodes that already carried a NoExecute taint (countdowns may have started).
  std::vector<std::string> already_tainted;
  std::vector<pod_preview> pods;  ///< Every pod on the targets (terminating ones left out).
  storm_preview storm;
  std::size_t evicted_now = 0;
  std::size_t evicted_later = 0;
  std::int64_t latest_seconds = 0;  ///< The longest "after" among the pods (0: none).
  std::size_t never = 0;            ///< Tolerated forever.
  std::size_t skipped = 0;          ///< Left alone by a scoping rule.
  std::size_t namespaces_now = 0;   ///< Distinct namespaces of the pods evicted now.
};

/// What preview() reads.
struct preview_input {
  /// The taint to add (effect NoExecute; the caller validated it). It replaces a taint of the
  /// same key and effect on a target, as `kubectl taint --overwrite` does.
  taint added;
  /// The nodes it goes on (their current taints).
  std::vector<node_view> targets;
  /// Every node of the cluster, the targets included (the storm breaker's denominator).
  std::vector<node_view> all_nodes;
  /// The pods bound to the targets (pod_view::node_name). Labels are needed when the policy
  /// excludes by podSelector.
  std::vector<pod_view> pods;
  /// The policy in force (a default-constructed one: none, upstream's behaviour).
  eviction_policy policy;
  /// Namespaces that carry the opt-out annotation.
  std::vector<std::string> opted_out_namespaces;
  /// The wall time now, seconds since the Unix epoch, to judge the pods' and nodes'
  /// hold-until annotations (pod_view::hold, node_view::hold); nullopt: holds are not looked
  /// at.
  std::optional<std::int64_t> now_unix;
};

/// See the file comment. Pods in `pods` whose node is not a target are ignored.
[[nodiscard]] preview_result preview(const preview_input& in);

/// The decision for one pod on a node with `node_taints` (all of them; only NoExecute ones
/// count) under `policy`, now: what `explain` shows as the fresh decision. A node without
/// NoExecute taints gives never with why "the node has no NoExecute taints".
[[nodiscard]] pod_preview decide_pod(const pod_view& pod, const std::vector<taint>& node_taints,
                                     const eviction_policy& policy, bool namespace_opted_out);

/// The node's taints with `added` put on (replacing one of the same key and effect).
[[nodiscard]] std::vector<taint> with_taint(const std::vector<taint>& taints, const taint& added);

/// A taint's effect and a toleration's operator as the API spells them ("NoExecute",
/// "Exists"; "Unknown" for `unknown`).
[[nodiscard]] std::string_view to_string(taint_effect effect) noexcept;
[[nodiscard]] std::string_view to_string(toleration_operator op) noexcept;

/// "key=value:NoExecute" ("key:NoExecute" without a value), as kubectl prints a taint.
[[nodiscard]] std::string taint_string(const taint& t);

/// The one-line summary the webhook returns as a warning and the plugin prints under its
/// table, e.g. "tainting node-7 with dedicated=x:NoExecute evicts 37 pods now (12
/// namespaces), 5 more within 300s; 3 tolerate it forever; 55% of nodes would carry NoExecute
/// taints: the storm breaker opens at 50%".
[[nodiscard]] std::string summary(const preview_result& r);

}  // namespace tec::controller

#pragma once

// The taint/toleration model the controller decides on: compact views of what the informers
// deliver, with only the fields the decision needs. No Kubernetes client types.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tec::controller {

enum class taint_effect : std::uint8_t { no_schedule, prefer_no_schedule, no_execute, unknown };

struct taint {
  std::string key;
  std::string value;
  taint_effect effect = taint_effect::no_execute;
  /// timeAdded, seconds since the Unix epoch; 0 when absent. Read only when a controller
  /// starts acting (controller_options::deadlines_from_taint_time).
  std::int64_t time_added_unix = 0;

  friend bool operator==(const taint&, const taint&) = default;
};

enum class toleration_operator : std::uint8_t { equal, exists, lt, gt, unknown };

struct toleration {
  std::string key;
  toleration_operator op = toleration_operator::equal;  ///< An empty operator means Equal.
  std::string value;
  /// Empty (nullopt) matches every effect.
  std::optional<taint_effect> effect;
  /// tolerationSeconds; nullopt means "tolerate forever".
  std::optional<std::int64_t> seconds;

  friend bool operator==(const toleration&, const toleration&) = default;
};

/// The annotation (on a pod or its namespace) that opts out of eviction, and its value.
inline constexpr std::string_view opt_out_annotation = "taint-eviction-controller/exclude";
inline constexpr std::string_view opt_out_value = "true";

/// The annotation (on a pod or a node) that makes due evictions wait until the time it names
/// (README "Holds"), and the most bytes of its value a view keeps.
inline constexpr std::string_view hold_annotation = "taint-eviction-controller/hold-until";
inline constexpr std::size_t max_hold_value = 64;

/// The hold-until annotation as the informers found it.
/// The latest time a hold-until annotation may name (2200-01-01T00:00:00Z, far past any
/// maxHold): past it a time does not fit the wall clock's nanoseconds (2262), and a later one is
/// refused rather than reported as another time.
inline constexpr std::int64_t latest_hold_unix = 7'258'118'400;

struct hold_mark {
  /// The value, for messages and "once per distinct value"; a value longer than
  /// max_hold_value is clipped there and ends in "..." (it is malformed anyway).
  std::string value;
  /// The time it names, seconds since the Unix epoch (a fraction dropped); nullopt when the
  /// value is not an RFC 3339 time, or names one after latest_hold_unix (too_late).
  std::optional<std::int64_t> until_unix;
  /// An RFC 3339 time after latest_hold_unix.
  bool too_late = false;

  [[nodiscard]] bool malformed() const { return !until_unix.has_value(); }
  friend bool operator==(const hold_mark&, const hold_mark&) = default;
};

/// The hold_mark of an annotation value. Pure; any thread.
[[nodiscard]] hold_mark parse_hold(std::string_view value);

enum class pod_phase : std::uint8_t { pending, running, succeeded, failed, unknown };

/// What the controller knows of a pod.
struct pod_view {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node_name;  ///< spec.nodeName; empty when unscheduled.
  std::vector<toleration> tolerations;
  pod_phase phase = pod_phase::unknown;
  bool terminating = false;  ///< metadata.deletionTimestamp is set.
  std::string owner_kind;    ///< Kind of the controller owner reference, if any.
  bool mirror = false;       ///< Has the kubernetes.io/config.mirror annotation.
  /// When the pod was bound to its node, seconds since the Unix epoch: the lastTransitionTime
  /// of a True PodScheduled condition, else metadata.creationTimestamp; 0 when unknown.
  std::int64_t bound_unix = 0;
  /// Has the annotation taint-eviction-controller/exclude: "true" (opted out of eviction).
  bool opted_out = false;
  /// metadata.labels as "key=value" lines joined by '\n', in the object's order (label keys
  /// and values cannot contain '=' or '\n'). Kept only when the daemon may need them (a
  /// policy file is configured; see informers::keep_pod_labels); empty otherwise.
  std::string labels;
  /// The hold-until annotation, when the pod has it.
  std::optional<hold_mark> hold;

  friend bool operator==(const pod_view&, const pod_view&) = default;
};

/// What the controller knows of a node.
struct node_view {
  std::string name;
  std::vector<taint> taints;  ///< All taints, in the node's order.
  /// The hold-until annotation, when the node has it.
  std::optional<hold_mark> hold;

  friend bool operator==(const node_view&, const node_view&) = default;
};

}  // namespace tec::controller

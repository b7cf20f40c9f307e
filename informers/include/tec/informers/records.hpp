#pragma once

// Compact records of the objects the informers cache: the controller's own views (handed over
// without conversion) plus what the informers and writers need beside them. Everything else in a
// Pod or Node is dropped while decoding (decode.hpp).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tec/controller/model.hpp"

namespace tec::informers {

/// The DisruptionTarget condition the taint manager adds before deleting a pod (upstream's
/// type, reason and message, so Jobs' podFailurePolicy rules keep matching).
inline constexpr std::string_view disruption_target_type = "DisruptionTarget";
inline constexpr std::string_view taint_manager_reason = "DeletionByTaintManager";
inline constexpr std::string_view taint_manager_message =
    "Taint manager: deleting due to NoExecute taint";

/// What a pod's DisruptionTarget condition (the first one in status.conditions) says, reduced
/// to what the eviction's status patch needs to follow upstream's UpdatePodCondition: skip the
/// patch when the condition is already ours, keep lastTransitionTime when only the reason or
/// message change. One byte per cached pod (most pods have no such condition).
enum class disruption_state : std::uint8_t {
  absent,      ///< No DisruptionTarget condition.
  not_true,    ///< Its status is not "True" (False, Unknown, anything else).
  true_other,  ///< True with another reason or message (another component's).
  true_ours,   ///< True with taint_manager_reason and taint_manager_message.
};

/// A pod as cached: the controller's pod_view plus metadata.resourceVersion and its
/// DisruptionTarget condition. A plain value type (copyable, not synchronised).
struct pod_record {
  controller::pod_view pod;
  std::string resource_version;
  disruption_state disruption = disruption_state::absent;
  /// metadata.generation (0 when absent): the DisruptionTarget condition's observedGeneration
  /// on servers whose schema has that field (pod_writer).
  std::int64_t generation = 0;

  friend bool operator==(const pod_record&, const pod_record&) = default;
};

/// A node as cached: the controller's node_view (all taints, any effect, in order) plus
/// metadata.resourceVersion. A plain value type.
struct node_record {
  controller::node_view node;
  std::string resource_version;

  friend bool operator==(const node_record&, const node_record&) = default;
};

/// "NoSchedule", "PreferNoSchedule", "NoExecute"; anything else is `unknown`.
controller::taint_effect parse_taint_effect(std::string_view text) noexcept;

/// "" and "Equal" -> equal, "Exists", "Lt", "Gt"; anything else is `unknown`.
controller::toleration_operator parse_toleration_operator(std::string_view text) noexcept;

/// "Pending", "Running", "Succeeded", "Failed"; anything else (including "Unknown") is
/// `unknown`.
controller::pod_phase parse_pod_phase(std::string_view text) noexcept;

}  // namespace tec::informers

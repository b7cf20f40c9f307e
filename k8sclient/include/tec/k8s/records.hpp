#pragma once

// Compact records of the objects the informers cache: the controller's own views (so they are
// handed over without conversion) plus the resourceVersion the informer needs to resume.
// Everything else in a Pod or Node (managedFields, containers, status conditions, ...) is
// dropped while decoding (decode.hpp) and never retained.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tec/controller/model.hpp"

namespace tec::k8s {

/// A pod as cached: the controller's pod_view plus metadata.resourceVersion.
/// A plain value type (copyable, not synchronised).
struct pod_record {
  controller::pod_view pod;
  std::string resource_version;

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

/// An RFC 3339 timestamp ("2024-05-01T12:34:56Z", optional fraction, "Z" or "+hh:mm")
/// as seconds since the Unix epoch (fraction dropped); nullopt when malformed.
std::optional<std::int64_t> parse_rfc3339(std::string_view text) noexcept;

}  // namespace tec::k8s

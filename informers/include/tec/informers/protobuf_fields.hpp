#pragma once

// The protobuf field numbers the informers read, named as in Kubernetes' generated.proto
// (k8s.io/api/core/v1, k8s.io/apimachinery/pkg/apis/meta/v1 and pkg/runtime; field numbers of a
// released API never change), with the wire types they are read with. Only the fields read are
// listed.

#include <cstdint>

namespace tec::informers::pb {

/// Protobuf wire types.
namespace wire {
inline constexpr std::uint32_t varint = 0;
inline constexpr std::uint32_t fixed64 = 1;
inline constexpr std::uint32_t length_delimited = 2;
inline constexpr std::uint32_t fixed32 = 5;
}  // namespace wire

/// runtime.Unknown: the envelope after the "k8s\0" magic.
namespace unknown {
inline constexpr std::uint32_t raw = 2;
inline constexpr std::uint32_t content_encoding = 3;
}  // namespace unknown

/// metav1.WatchEvent.
namespace watch_event {
inline constexpr std::uint32_t type = 1;
inline constexpr std::uint32_t object = 2;
}  // namespace watch_event

/// runtime.RawExtension (WatchEvent.object).
namespace raw_extension {
inline constexpr std::uint32_t raw = 1;
}  // namespace raw_extension

/// metav1.ListMeta.
namespace list_meta {
inline constexpr std::uint32_t resource_version = 2;
inline constexpr std::uint32_t continue_token = 3;  // `continue`, a C++ keyword
}  // namespace list_meta

/// v1.PodList and v1.NodeList.
namespace list {
inline constexpr std::uint32_t metadata = 1;
inline constexpr std::uint32_t items = 2;
}  // namespace list

/// metav1.ObjectMeta.
namespace object_meta {
inline constexpr std::uint32_t name = 1;
inline constexpr std::uint32_t namespace_name = 3;  // `namespace`, a C++ keyword
inline constexpr std::uint32_t uid = 5;
inline constexpr std::uint32_t resource_version = 6;
inline constexpr std::uint32_t generation = 7;
inline constexpr std::uint32_t creation_timestamp = 8;
inline constexpr std::uint32_t deletion_timestamp = 9;
inline constexpr std::uint32_t labels = 11;
inline constexpr std::uint32_t annotations = 12;
inline constexpr std::uint32_t owner_references = 13;
}  // namespace object_meta

/// A map<string, string> entry (ObjectMeta.labels, .annotations).
namespace map_entry {
inline constexpr std::uint32_t key = 1;
inline constexpr std::uint32_t value = 2;
}  // namespace map_entry

/// metav1.OwnerReference.
namespace owner_reference {
inline constexpr std::uint32_t kind = 1;
inline constexpr std::uint32_t controller = 6;
}  // namespace owner_reference

/// metav1.Time (as google.protobuf.Timestamp).
namespace time {
inline constexpr std::uint32_t seconds = 1;
}  // namespace time

/// v1.Pod.
namespace pod {
inline constexpr std::uint32_t metadata = 1;
inline constexpr std::uint32_t spec = 2;
inline constexpr std::uint32_t status = 3;
}  // namespace pod

/// v1.PodSpec.
namespace pod_spec {
inline constexpr std::uint32_t node_name = 10;
inline constexpr std::uint32_t tolerations = 22;
}  // namespace pod_spec

/// v1.Toleration.
namespace toleration {
inline constexpr std::uint32_t key = 1;
inline constexpr std::uint32_t op = 2;  // `operator`, a C++ keyword
inline constexpr std::uint32_t value = 3;
inline constexpr std::uint32_t effect = 4;
inline constexpr std::uint32_t toleration_seconds = 5;
}  // namespace toleration

/// v1.PodStatus.
namespace pod_status {
inline constexpr std::uint32_t phase = 1;
inline constexpr std::uint32_t conditions = 2;
}  // namespace pod_status

/// v1.PodCondition.
namespace pod_condition {
inline constexpr std::uint32_t type = 1;
inline constexpr std::uint32_t status = 2;
inline constexpr std::uint32_t last_transition_time = 4;
inline constexpr std::uint32_t reason = 5;
inline constexpr std::uint32_t message = 6;
}  // namespace pod_condition

/// v1.Node.
namespace node {
inline constexpr std::uint32_t metadata = 1;
inline constexpr std::uint32_t spec = 2;
}  // namespace node

/// v1.NodeSpec.
namespace node_spec {
inline constexpr std::uint32_t taints = 5;
}  // namespace node_spec

/// v1.Taint.
namespace taint {
inline constexpr std::uint32_t key = 1;
inline constexpr std::uint32_t value = 2;
inline constexpr std::uint32_t effect = 3;
inline constexpr std::uint32_t time_added = 4;
}  // namespace taint

/// metav1.Status.
namespace status {
inline constexpr std::uint32_t status = 2;
inline constexpr std::uint32_t message = 3;
inline constexpr std::uint32_t reason = 4;
inline constexpr std::uint32_t code = 6;
}  // namespace status

}  // namespace tec::informers::pb

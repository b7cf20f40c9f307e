#pragma once

// Internal to informers: the rules that turn the fields of a Pod or a Node into its record,
// written once and fed by both wire formats, the JSON walker (json_walk.hpp) and the protobuf
// reader (protobuf.cpp). A reader hands over the fields it found, in document order (strings as
// views into its input, times already in seconds since the Unix epoch, 0 when unset), then
// calls finish(). What is read, and every check of the input's shape, stays with the reader.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tec/informers/decode.hpp"
#include "tec/informers/records.hpp"

namespace tec::informers {

/// The annotation of a static pod's mirror (the kubelet's): such pods are never evicted.
inline constexpr std::string_view mirror_annotation = "kubernetes.io/config.mirror";

/// One element of status.conditions, as read.
struct condition_fields {
  std::string_view type;
  std::string_view status;
  std::string_view reason;
  std::string_view message;
  std::int64_t last_transition_unix = 0;
};

/// One element of spec.tolerations, as read (absent strings are empty).
struct toleration_fields {
  std::string_view key;
  std::string_view operator_;
  std::string_view value;
  std::string_view effect;
  std::optional<std::int64_t> seconds;
};

/// One element of a node's spec.taints, as read.
struct taint_fields {
  std::string_view key;
  std::string_view value;
  std::string_view effect;
  std::int64_t time_added_unix = 0;
};

/// A pod_record, built field by field. Not thread-safe; one per object.
class pod_builder {
public:
  /// Labels are kept when keep_pod_labels() is on when the builder is made.
  pod_builder() : keep_labels_(keeping_pod_labels()) {}

  /// Whether label() keeps anything (a reader need not even read the labels otherwise).
  [[nodiscard]] bool keeps_labels() const noexcept { return keep_labels_; }
  /// Whether annotation() uses the annotation `key` (a reader may skip the others).
  static bool reads_annotation(std::string_view key) noexcept {
    return key == mirror_annotation || key == controller::opt_out_annotation ||
           key == controller::hold_annotation;
  }

  void name(std::string_view v) { r_.pod.name = v; }
  void namespace_name(std::string_view v) { r_.pod.namespace_ = v; }
  void uid(std::string_view v) { r_.pod.uid = v; }
  void resource_version(std::string_view v) { r_.resource_version = v; }
  void generation(std::int64_t v) noexcept { r_.generation = v; }
  /// metadata.creationTimestamp: the bind time unless a PodScheduled condition gives one.
  void created(std::int64_t unix_seconds) noexcept { created_ = unix_seconds; }
  /// metadata.deletionTimestamp is set (whatever its value).
  void deleting() noexcept { r_.pod.terminating = true; }
  /// One of metadata.labels, kept as "key=value" lines when keeps_labels().
  void label(std::string_view key, std::string_view value);
  void annotation(std::string_view key, std::string_view value);
  void owner_reference(std::string_view kind, bool controller);
  void node_name(std::string_view v) { r_.pod.node_name = v; }
  void toleration(const toleration_fields& t);
  void phase(std::string_view v) noexcept { r_.pod.phase = parse_pod_phase(v); }
  void condition(const condition_fields& c);

  /// The record so far (for the name in an error message).
  [[nodiscard]] const pod_record& record() const noexcept { return r_; }
  /// The first required field missing ("metadata.name", "metadata.uid"), or "".
  [[nodiscard]] std::string_view missing() const noexcept;
  /// The record; the builder is spent.
  pod_record finish();

private:
  pod_record r_;
  std::int64_t created_ = 0;
  std::int64_t scheduled_ = 0;  // the first True PodScheduled condition's lastTransitionTime
  bool have_controller_ = false;
  bool keep_labels_;
};

/// A node_record, built field by field. Not thread-safe; one per object.
class node_builder {
public:
  void name(std::string_view v) { r_.node.name = v; }
  void resource_version(std::string_view v) { r_.resource_version = v; }
  void taint(const taint_fields& t);
  /// Whether annotation() uses the annotation `key` (a reader may skip the others).
  static bool reads_annotation(std::string_view key) noexcept {
    return key == controller::hold_annotation;
  }
  void annotation(std::string_view key, std::string_view value);

  [[nodiscard]] const node_record& record() const noexcept { return r_; }
  /// "metadata.name" when missing, or "".
  [[nodiscard]] std::string_view missing() const noexcept {
    return r_.node.name.empty() ? "metadata.name" : "";
  }
  node_record finish() { return std::move(r_); }

private:
  node_record r_;
};

}  // namespace tec::informers

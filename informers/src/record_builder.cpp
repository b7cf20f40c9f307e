#include "record_builder.hpp"

namespace tec::informers {

void pod_builder::label(std::string_view key, std::string_view value) {
  if (!keep_labels_) {
    return;
  }
  std::string& labels = r_.pod.labels;
  if (!labels.empty()) {
    labels.push_back('\n');
  }
  labels.append(key).push_back('=');
  labels.append(value);
}

void pod_builder::annotation(std::string_view key, std::string_view value) {
  if (key == mirror_annotation) {
    r_.pod.mirror = true;
  } else if (key == controller::opt_out_annotation) {
    r_.pod.opted_out = value == controller::opt_out_value;
  } else if (key == controller::hold_annotation) {
    r_.pod.hold = controller::parse_hold(value);
  }
}

void pod_builder::owner_reference(std::string_view kind, bool controller) {
  // The first owner reference with controller=true is the controller (GetControllerOf).
  if (controller && !have_controller_) {
    r_.pod.owner_kind = kind;
    have_controller_ = true;
  }
}

void pod_builder::toleration(const toleration_fields& t) {
  controller::toleration& out = r_.pod.tolerations.emplace_back();
  out.key = t.key;
  out.op = parse_toleration_operator(t.operator_);
  out.value = t.value;
  if (!t.effect.empty()) {  // empty: every effect
    out.effect = parse_taint_effect(t.effect);
  }
  out.seconds = t.seconds;
}

void pod_builder::condition(const condition_fields& c) {
  const bool is_true = c.status == "True";
  // The bind time: the first True PodScheduled condition's lastTransitionTime, else (finish())
  // the creationTimestamp.
  if (c.type == "PodScheduled" && is_true && c.last_transition_unix != 0 && scheduled_ == 0) {
    scheduled_ = c.last_transition_unix;
  }
  // The first DisruptionTarget condition counts (upstream's GetPodCondition).
  if (c.type == disruption_target_type && r_.disruption == disruption_state::absent) {
    r_.disruption = !is_true ? disruption_state::not_true
                    : c.reason == taint_manager_reason && c.message == taint_manager_message
                        ? disruption_state::true_ours
                        : disruption_state::true_other;
  }
}

std::string_view pod_builder::missing() const noexcept {
  if (r_.pod.name.empty()) {
    return "metadata.name";
  }
  if (r_.pod.uid.empty()) {
    return "metadata.uid";
  }
  return "";
}

pod_record pod_builder::finish() {
  r_.pod.bound_unix = scheduled_ != 0 ? scheduled_ : created_;
  return std::move(r_);
}

void node_builder::taint(const taint_fields& t) {
  controller::taint& out = r_.node.taints.emplace_back();
  out.key = t.key;
  out.value = t.value;
  // Absent or unknown: `unknown` (the model's default is NoExecute; such a taint must not evict).
  out.effect = parse_taint_effect(t.effect);
  out.time_added_unix = t.time_added_unix;
}

void node_builder::annotation(std::string_view key, std::string_view value) {
  if (key == controller::hold_annotation) {
    r_.node.hold = controller::parse_hold(value);
  }
}

}  // namespace tec::informers

#include "tec/informers/records.hpp"

namespace tec::informers {
controller::taint_effect parse_taint_effect(std::string_view text) noexcept {
  using controller::taint_effect;
  if (text == "NoExecute") {
    return taint_effect::no_execute;
  }
  if (text == "NoSchedule") {
    return taint_effect::no_schedule;
  }
  if (text == "PreferNoSchedule") {
    return taint_effect::prefer_no_schedule;
  }
  return taint_effect::unknown;
}

controller::toleration_operator parse_toleration_operator(std::string_view text) noexcept {
  using controller::toleration_operator;
  if (text.empty() || text == "Equal") {
    return toleration_operator::equal;
  }
  if (text == "Exists") {
    return toleration_operator::exists;
  }
  if (text == "Lt") {
    return toleration_operator::lt;
  }
  if (text == "Gt") {
    return toleration_operator::gt;
  }
  return toleration_operator::unknown;
}

controller::pod_phase parse_pod_phase(std::string_view text) noexcept {
  using controller::pod_phase;
  if (text == "Running") {
    return pod_phase::running;
  }
  if (text == "Pending") {
    return pod_phase::pending;
  }
  if (text == "Succeeded") {
    return pod_phase::succeeded;
  }
  if (text == "Failed") {
    return pod_phase::failed;
  }
  return pod_phase::unknown;
}

}  // namespace tec::informers

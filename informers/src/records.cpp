#include "tec/informers/records.hpp"

#include <initializer_list>
#include <utility>

namespace tec::informers {
namespace {

/// The value `text` names in `names`, or `otherwise`.
template <class E>
E lookup(std::string_view text, std::initializer_list<std::pair<std::string_view, E>> names,
         E otherwise) noexcept {
  for (const auto& [name, value] : names) {
    if (name == text) {
      return value;
    }
  }
  return otherwise;
}

}  // namespace

controller::taint_effect parse_taint_effect(std::string_view text) noexcept {
  using enum controller::taint_effect;
  return lookup(text,
                {{"NoExecute", no_execute},
                 {"NoSchedule", no_schedule},
                 {"PreferNoSchedule", prefer_no_schedule}},
                unknown);
}

controller::toleration_operator parse_toleration_operator(std::string_view text) noexcept {
  using enum controller::toleration_operator;
  return lookup(text, {{"", equal}, {"Equal", equal}, {"Exists", exists}, {"Lt", lt}, {"Gt", gt}},
                unknown);
}

controller::pod_phase parse_pod_phase(std::string_view text) noexcept {
  using enum controller::pod_phase;
  return lookup(
      text,
      {{"Running", running}, {"Pending", pending}, {"Succeeded", succeeded}, {"Failed", failed}},
      unknown);
}

}  // namespace tec::informers

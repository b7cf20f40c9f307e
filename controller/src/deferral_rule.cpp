#include "deferral_rule.hpp"

#include <algorithm>

namespace tec::controller::detail {

std::vector<taint> settling_causes(std::span<const taint> taints,
                                   std::span<const toleration> tolerations,
                                   std::span<const taint_rule> rules,
                                   std::span<const std::string> settle_keys) {
  std::vector<taint> out = evicting_taints(taints, tolerations, rules);
  if (!settle_keys.empty()) {
    std::erase_if(out, [&](const taint& t) {
      return std::find(settle_keys.begin(), settle_keys.end(), t.key) == settle_keys.end();
    });
  }
  return out;
}

deferral_verdict defer(const deferral_input& in) {
  deferral_verdict out;
  if (in.hold_left) {
    const wait_duration cap = in.own + in.max_hold;
    const bool cut = *in.hold_left > cap;
    const wait_duration until = cut ? cap : *in.hold_left;
    if (until > in.own) {
      out = {deferral_verdict::reason::hold, until, until, cut};
    }
  }
  if (in.settle <= wait_duration::zero()) {
    return out;
  }
  for (const wait_duration age : in.cause_ages) {
    const wait_duration end = in.settle - std::max(age, wait_duration::zero());
    if (end > in.own && (out.why == deferral_verdict::reason::none || end > out.wait)) {
      out.why = deferral_verdict::reason::settle;
      out.wait = end;
    }
  }
  return out;
}

}  // namespace tec::controller::detail

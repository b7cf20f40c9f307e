#include "deferrals.hpp"
#include "deferral_rule.hpp"
#include "tec/base/duration.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/controller/matching.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <span>
#include <string>

namespace tec::controller::detail {

using timedqueue::time_point;

std::optional<hold_in_force> eviction_deferrals::judge(std::string_view key, const pod_view& pod) {
  const wall_time wall = clock_.wall();
  const hold_verdict v = pod_holds_.see(key, pod.hold, wall);
  if (v.ignored) {
    const std::string detail = event_detail("\"" + pod.hold->value + "\" is " + *v.ignored +
                                            "; evictions go as scheduled");
    log_->warn("ignoring the hold-until annotation pod=\"{}\" uid={}: {}", key, pod.uid, detail);
    outlet_.record(pod_ref{pod.namespace_, pod.name, pod.uid}, event_kind::hold_ignored, detail);
  }
  std::optional<hold_in_force> out;
  if (v.until) {
    out = hold_in_force{*v.until, false};
  }
  if (!pod.node_name.empty()) {
    if (const auto n = node_holds_.in_force(pod.node_name, wall); n && (!out || *n > out->until)) {
      out = hold_in_force{*n, true};
    }
  }
  return out;
}

// The deferral of an eviction of `pod` due at `due` (driver's clock): defer() of the hold in
// force and of the settling causes (settling_causes() under the scoping rules), each counted
// from its timeAdded, else from when this process first saw it on the node.
timedqueue::deferral eviction_deferrals::deferral_for(const pod_view& pod,
                                                      const std::vector<taint>& taints,
                                                      const std::optional<hold_in_force>& hold,
                                                      time_point due, time_point now,
                                                      const eviction_policy* scope) const {
  const auto settle = policy_.settle();
  if (!hold && settle.count() == 0) {
    return {};
  }
  const wall_time wall = clock_.wall();
  deferral_input in;
  in.own = due - now;
  if (hold) {
    in.hold_left = std::chrono::duration_cast<wait_duration>(hold->until - wall);
  }
  in.max_hold = policy_.max_hold();
  in.settle = settle;
  std::vector<wait_duration> ages;
  if (settle.count() != 0) {
    const std::vector<std::string> keys = policy_.settle_keys();
    const std::span<const taint_rule> rules = scope != nullptr
                                                  ? std::span<const taint_rule>(scope->taints)
                                                  : std::span<const taint_rule>();
    for (const taint& t : settling_causes(taints, pod.tolerations, rules, keys)) {
      if (t.time_added_unix != 0) {
        ages.push_back(
            std::chrono::duration_cast<wait_duration>(wall - wall_of_unix(t.time_added_unix)));
      } else if (const auto seen = tainted_.first_seen_own(pod.node_name, t)) {
        ages.push_back(now - *seen);
      } else {
        ages.push_back(wait_duration::zero());
      }
    }
  }
  in.cause_ages = ages;
  const deferral_verdict v = defer(in);
  switch (v.why) {
    case deferral_verdict::reason::hold:
      return {now + v.wait, hold_tag};
    case deferral_verdict::reason::settle:
      return {now + v.wait, settle_tag};
    case deferral_verdict::reason::none:
      break;
  }
  return {};
}

void eviction_deferrals::note_held(const pod_view& pod, const hold_in_force& hold,
                                   timedqueue::deferral d, time_point due, time_point now) {
  const wall_time wall = clock_.wall();
  const auto at = [&](time_point t) {
    return base::format_rfc3339(wall + std::chrono::duration_cast<wall_time::duration>(t - now));
  };
  std::string detail = "due at " + at(due) + ", waits until " + at(d.until) +
                       " for the hold-until annotation of " +
                       (hold.node ? "node " + pod.node_name : std::string("the pod")) + " (" +
                       base::format_rfc3339(hold.until);
  const bool cut =
      d.until == due + policy_.max_hold() &&
      hold.until > wall + std::chrono::duration_cast<wall_time::duration>(d.until - now);
  detail += cut ? ", cut at maxHold " + base::format_duration(policy_.max_hold()) + ")" : ")";
  log_->info("eviction held pod=\"{}/{}\" uid={}: {}", pod.namespace_, pod.name, pod.uid, detail);
  outlet_.record(pod_ref{pod.namespace_, pod.name, pod.uid}, event_kind::eviction_held, detail);
}

}  // namespace tec::controller::detail

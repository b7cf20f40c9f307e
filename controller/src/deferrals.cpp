#include "deferrals.hpp"
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

// The deferral of an eviction of `pod` due at `due` (driver's clock): the hold in force, cut
// at due + maxHold, and the settling time of the NoExecute taints that cause the eviction
// (those no rule ignores and the pod does not tolerate forever: the first toleration
// matching each, as decide() takes it), each counted from its timeAdded, else from when this
// process first saw it on the node; the later of the two, when it is later than `due`.
timedqueue::deferral eviction_deferrals::deferral_for(const pod_view& pod,
                                                      const std::vector<taint>& taints,
                                                      const std::optional<hold_in_force>& hold,
                                                      time_point due, time_point now,
                                                      const eviction_policy* scope) const {
  timedqueue::deferral out;
  const auto settle = policy_.settle();
  if (!hold && settle.count() == 0) {
    return out;
  }
  const wall_time wall = clock_.wall();
  if (hold) {
    const auto left = hold->until - wall;
    const time_point cap = due + policy_.max_hold();
    const time_point until =
        left >= cap - now ? cap : now + std::chrono::duration_cast<timedqueue::duration>(left);
    if (until > due) {
      out = timedqueue::deferral{until, hold_tag};
    }
  }
  if (settle.count() == 0) {
    return out;
  }
  const std::span<const taint_rule> rules =
      scope != nullptr ? std::span<const taint_rule>(scope->taints) : std::span<const taint_rule>();
  for (const taint& t : taints) {
    const auto rule = std::find_if(rules.begin(), rules.end(),
                                   [&](const taint_rule& r) { return r.matches(t.key); });
    if (rule != rules.end() && rule->action == taint_action::ignore) {
      continue;
    }
    const auto tol = std::find_if(pod.tolerations.begin(), pod.tolerations.end(),
                                  [&](const toleration& c) { return tolerates(c, t); });
    if ((tol != pod.tolerations.end() && !tol->seconds) || !policy_.settles(t.key)) {
      continue;
    }
    time_point since = now;
    if (t.time_added_unix != 0) {
      const auto age = wall - wall_of_unix(t.time_added_unix);
      since = age > wall_time::duration::zero()
                  ? now - std::chrono::duration_cast<timedqueue::duration>(age)
                  : now;
    } else if (const auto seen = tainted_.first_seen_own(pod.node_name, t)) {
      since = *seen;
    }
    const time_point end = since + settle;
    if (end > due && end > out.until) {
      out = timedqueue::deferral{end, settle_tag};
    }
  }
  return out;
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

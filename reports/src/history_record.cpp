#include "tec/reports/history_record.hpp"

#include "tec/base/duration.hpp"
#include "tec/controller/preview.hpp"

#include <chrono>
#include <utility>

namespace tec::reports {

namespace {

// A duration as the policy file writes one ("2.1s", "1m0s"), to the tenth of a second.
std::string seconds_text(std::chrono::nanoseconds d) {
  const auto tenths = std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 100;
  return base::format_duration(std::chrono::milliseconds(tenths * 100));
}

}  // namespace

std::vector<std::string> policy_lines(const controller::eviction_outcome& o) {
  std::vector<std::string> lines;
  if (o.rule) {
    const controller::rule_effect& r = *o.rule;
    const bool lowered = r.own_seconds && *r.own_seconds > r.seconds;
    lines.push_back("taint rule " + r.rule + (lowered ? " lowered" : " raised") +
                    " tolerationSeconds " +
                    (r.own_seconds ? std::to_string(*r.own_seconds) : std::string("untolerated")) +
                    " -> " + std::to_string(r.seconds));
  }
  // Below a tenth of a second, what it "waited" is the timer's and the thread's latency.
  if (o.deferred >= std::chrono::milliseconds(100)) {
    lines.push_back("waited " + seconds_text(o.deferred) +
                    (o.deferred_why.empty() ? std::string() : ": " + o.deferred_why));
  }
  if (o.waited >= std::chrono::milliseconds(100)) {
    lines.push_back("waited " + seconds_text(o.waited) +
                    (o.waited_why.empty() ? std::string() : ": " + o.waited_why));
  }
  if (o.refusals > 0) {
    lines.push_back("Evict mode: refused " + std::to_string(o.refusals) +
                    (o.refusals == 1 ? " time" : " times") + " by a PodDisruptionBudget");
  }
  if (o.result == controller::outcome_result::deleted_after_fallback) {
    lines.push_back("deleted after fallbackAfter " + seconds_text(o.fallback_after));
  }
  return lines;
}

history_record history_record_of(const controller::eviction_outcome& o,
                                 const base::clock_bridge& clock) {
  history_record rec;
  rec.pod = o.pod.namespace_ + "/" + o.pod.name;
  rec.uid = o.pod.uid;
  rec.node = o.node;
  rec.taints.reserve(o.taints.size());
  for (const controller::taint& t : o.taints) {
    rec.taints.push_back(controller::describe_taint(t));
  }
  if (o.used) {
    const controller::toleration& t = *o.used;
    rec.toleration = history_toleration{
        t.key, std::string(controller::to_string(t.op)), t.value,
        t.effect ? std::string(controller::to_string(*t.effect)) : std::string(), t.seconds};
  }
  rec.scheduled_at = clock.wall(o.scheduled_at);
  rec.due = clock.wall(o.due);
  rec.done = clock.wall(o.done);
  rec.attempts = o.attempts;
  rec.policy = policy_lines(o);
  rec.result = std::string(controller::to_string(o.result));
  rec.last_error = o.last_error;
  return rec;
}

}  // namespace tec::reports

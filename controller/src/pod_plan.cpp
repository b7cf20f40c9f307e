#include "pod_plan.hpp"

#include <algorithm>

namespace tec::controller::detail {

std::optional<skip_reason> skipped(
    const pod_view& pod, const eviction_policy* scope,
    const std::function<bool(std::string_view)>& namespace_opted_out) {
  if (pod.opted_out) {
    return skip_reason::annotation;
  }
  if (namespace_opted_out && namespace_opted_out(pod.namespace_)) {
    return skip_reason::namespace_annotation;
  }
  if (scope == nullptr) {
    return std::nullopt;
  }
  const exclude_policy& ex = scope->exclude;
  if (std::find(ex.namespaces.begin(), ex.namespaces.end(), pod.namespace_) !=
      ex.namespaces.end()) {
    return skip_reason::namespace_;
  }
  if (ex.mirror_pods && pod.mirror) {
    return skip_reason::mirror;
  }
  if (ex.terminal_pods && (pod.phase == pod_phase::succeeded || pod.phase == pod_phase::failed)) {
    return skip_reason::terminal;
  }
  if (ex.daemon_set_pods && pod.owner_kind == "DaemonSet") {
    return skip_reason::daemon_set;
  }
  if (selects(ex.pod_selector, pod.labels)) {
    return skip_reason::pod_selector;
  }
  return std::nullopt;
}

pod_plan plan_for(const pod_view& pod, const std::vector<taint>& taints,
                  const eviction_policy* scope,
                  const std::function<bool(std::string_view)>& namespace_opted_out) {
  pod_plan plan;
  if (const auto skip = skipped(pod, scope, namespace_opted_out)) {
    plan.skip = skip;
    plan.decision = pod_decision{false, toleration_time::never()};
  } else {
    const ruled_decision rd = decide(taints, pod.tolerations,
                                     scope != nullptr ? std::span<const taint_rule>(scope->taints)
                                                      : std::span<const taint_rule>());
    if (rd.all_ignored) {
      plan.skip = skip_reason::taint_ignored;
    }
    plan.decision = rd.decision;
    plan.overridden = rd.overridden;
    plan.rule = rd.rule;
  }
  return plan;
}

std::optional<countdown> resume_countdown(const pod_view& pod, const std::vector<taint>& taints,
                                          timedqueue::time_point now,
                                          std::chrono::system_clock::time_point wall,
                                          timedqueue::time_point& created_at,
                                          timedqueue::time_point& fire_at,
                                          std::span<const taint_rule> rules) {
  const std::int64_t now_unix =
      std::chrono::duration_cast<std::chrono::seconds>(wall.time_since_epoch()).count();
  std::optional<countdown> c =
      countdown_since(taints, pod.tolerations, pod.bound_unix, now_unix, rules);
  if (!c || c->start_unix >= now_unix) {
    return std::nullopt;
  }
  const auto elapsed = std::chrono::duration_cast<timedqueue::duration>(
      wall - std::chrono::system_clock::time_point(std::chrono::seconds(c->start_unix)));
  created_at = now - elapsed;
  fire_at = created_at + c->time.delay();
  return c;
}

const taint& setting_taint(const std::vector<taint>& taints,
                           const std::vector<toleration>& tolerations, std::int64_t seconds) {
  for (const taint& t : taints) {
    const auto tol =
        std::find_if(tolerations.begin(), tolerations.end(),
                     [&](const toleration& candidate) { return tolerates(candidate, t); });
    // As decide() reads it: a negative tolerationSeconds is 0 (evicted at once).
    if (tol != tolerations.end() && tol->seconds &&
        std::max<std::int64_t>(*tol->seconds, 0) == seconds) {
      return t;
    }
  }
  return taints.front();
}

eviction_outcome staged_outcome(const pod_view& pod, const std::vector<taint>& taints,
                                const pod_plan& plan, const toleration_time& time,
                                timedqueue::time_point created_at, timedqueue::time_point fire_at) {
  eviction_outcome out;
  out.pod = pod_ref{pod.namespace_, pod.name, pod.uid};
  out.node = pod.node_name;
  out.taints = taints;
  out.scheduled_at = created_at;
  out.due = fire_at;
  const std::int64_t seconds = time.is_now() ? 0 : time.seconds.count();
  const taint* matched = nullptr;
  if (plan.overridden != nullptr) {
    matched = plan.overridden;
  } else if (!plan.decision.untolerated && !taints.empty()) {
    matched = &setting_taint(taints, pod.tolerations, seconds);
  }
  if (matched == nullptr) {
    return out;  // untolerated: evicted at once, no toleration had a say
  }
  out.matched = *matched;
  const auto tol = std::find_if(pod.tolerations.begin(), pod.tolerations.end(),
                                [&](const toleration& t) { return tolerates(t, *matched); });
  if (tol != pod.tolerations.end()) {
    out.used = *tol;
  }
  if (plan.rule != nullptr) {
    out.rule = rule_effect{plan.rule->key + (plan.rule->prefix ? "*" : ""),
                           out.used ? out.used->seconds : std::nullopt, seconds};
  }
  return out;
}

}  // namespace tec::controller::detail

#include "tec/controller/preview.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "deferral_rule.hpp"
#include "pod_plan.hpp"
#include "tec/base/duration.hpp"
#include "tec/base/rfc3339.hpp"

namespace tec::controller {

namespace {

using detail::deferral_input;
using detail::deferral_verdict;
using detail::settling_causes;
using detail::wait_duration;

std::string skip_text(skip_reason reason, const pod_view& pod) {
  switch (reason) {
    case skip_reason::annotation:
      return fmt::format("excluded: the pod has {}: \"true\"", opt_out_annotation);
    case skip_reason::namespace_annotation:
      return fmt::format("excluded: namespace {} has {}: \"true\"", pod.namespace_,
                         opt_out_annotation);
    case skip_reason::namespace_:
      return fmt::format("excluded: policy exclude.namespaces lists {}", pod.namespace_);
    case skip_reason::pod_selector:
      return "excluded: policy exclude.podSelector selects it";
    case skip_reason::mirror:
      return "excluded: a mirror pod (policy exclude.mirrorPods)";
    case skip_reason::terminal:
      return "excluded: it has finished (policy exclude.terminalPods)";
    case skip_reason::daemon_set:
      return "excluded: a DaemonSet pod (policy exclude.daemonSetPods)";
    case skip_reason::taint_ignored:
      return "a taint rule ignores every NoExecute taint of the node";
  }
  return "excluded";
}

std::string rule_name(const taint_rule& r) {
  return r.prefix ? r.key + "*" : r.key;
}

const toleration* first_tolerating(const std::vector<toleration>& tolerations, const taint& t) {
  const auto it = std::find_if(tolerations.begin(), tolerations.end(),
                               [&](const toleration& tol) { return tolerates(tol, t); });
  return it == tolerations.end() ? nullptr : &*it;
}

std::string seconds_text(std::int64_t s) {
  return fmt::format("{}s", s);
}

std::string unix_text(std::int64_t s) {
  return base::format_rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(s)));
}

/// A hold in force at `now` (a valid value naming a later time), or nullopt.
std::optional<std::int64_t> in_force(const std::optional<hold_mark>& hold, std::int64_t now) {
  if (!hold || hold->malformed() || *hold->until_unix <= now) {
    return std::nullopt;
  }
  return hold->until_unix;
}

/// Moves the time of `p` (evicted now or after p.seconds) as defer() says: to the end of the
/// hold in force on `pod` or `node` (the later; only when `now` is known), cut at maxHold past
/// its own time, or to when the last taint causing it that the storm breaker counts is
/// settleSeconds old: `added` is new now; another taint is as old as its timeAdded says (given
/// `now`), and taken as settled without one.
void apply_deferral(pod_preview& p, const pod_view& pod, const node_view& node,
                    const std::vector<taint>& node_taints, const taint& added,
                    const eviction_policy& policy, std::optional<std::int64_t> now) {
  if (p.what == pod_preview::outcome::never) {
    return;
  }
  using std::chrono::seconds;
  const std::int64_t own = p.what == pod_preview::outcome::after ? p.seconds : 0;
  deferral_input in;
  in.own = seconds(own);
  std::optional<std::int64_t> pod_hold;
  std::optional<std::int64_t> node_hold;
  if (now) {
    pod_hold = in_force(pod.hold, *now);
    node_hold = in_force(node.hold, *now);
  }
  const bool by_node = node_hold && (!pod_hold || *node_hold > *pod_hold);
  const std::optional<std::int64_t> hold_until = by_node ? node_hold : pod_hold;
  if (hold_until) {
    in.hold_left = seconds(*hold_until - *now);
  }
  in.max_hold = std::chrono::duration_cast<seconds>(policy.max_hold);
  const storm_breaker_policy& sb = policy.storm_breaker;
  std::vector<wait_duration> ages;
  if (sb.enabled() && sb.settle_seconds > 0) {
    in.settle = seconds(sb.settle_seconds);
    for (const taint& t :
         settling_causes(node_taints, pod.tolerations, policy.taints, sb.taint_keys)) {
      if (t.key == added.key && t.value == added.value && t.effect == added.effect) {
        ages.push_back(wait_duration::zero());
      } else if (t.time_added_unix != 0 && now) {
        ages.push_back(seconds(*now - t.time_added_unix));
      }
    }
  }
  in.cause_ages = ages;
  const deferral_verdict v = defer(in);
  if (v.why == deferral_verdict::reason::none) {
    return;
  }
  p.what = pod_preview::outcome::after;
  p.seconds = std::chrono::duration_cast<seconds>(v.wait).count();
  if (v.held) {
    p.held_until_unix = *now + std::chrono::duration_cast<seconds>(*v.held).count();
    p.why += fmt::format("; hold until {} ({}{})", unix_text(*hold_until),
                         by_node ? "node " + node.name : std::string("the pod"),
                         v.cut ? ", cut at maxHold " + base::format_duration(policy.max_hold) : "");
  }
  if (v.why != deferral_verdict::reason::settle) {
    return;
  }
  p.settling = true;
  p.why +=
      fmt::format("; settling: waits until its taints are {}s old (stormBreaker.settleSeconds)",
                  sb.settle_seconds);
}

}  // namespace

std::string_view to_string(taint_effect effect) noexcept {
  switch (effect) {
    case taint_effect::no_schedule:
      return "NoSchedule";
    case taint_effect::prefer_no_schedule:
      return "PreferNoSchedule";
    case taint_effect::no_execute:
      return "NoExecute";
    case taint_effect::unknown:
      break;
  }
  return "Unknown";
}

std::string_view to_string(toleration_operator op) noexcept {
  switch (op) {
    case toleration_operator::equal:
      return "Equal";
    case toleration_operator::exists:
      return "Exists";
    case toleration_operator::lt:
      return "Lt";
    case toleration_operator::gt:
      return "Gt";
    case toleration_operator::unknown:
      break;
  }
  return "Unknown";
}

std::string taint_string(const taint& t) {
  if (t.value.empty()) {
    return fmt::format("{}:{}", t.key, to_string(t.effect));
  }
  return fmt::format("{}={}:{}", t.key, t.value, to_string(t.effect));
}

std::vector<taint> with_taint(const std::vector<taint>& taints, const taint& added) {
  std::vector<taint> out;
  out.reserve(taints.size() + 1);
  bool replaced = false;
  for (const taint& t : taints) {
    if (t.key == added.key && t.effect == added.effect) {
      if (!replaced) {
        out.push_back(added);
        replaced = true;
      }
      continue;
    }
    out.push_back(t);
  }
  if (!replaced) {
    out.push_back(added);
  }
  return out;
}

pod_preview decide_pod(const pod_view& pod, const std::vector<taint>& node_taints,
                       const eviction_policy& policy, bool namespace_opted_out) {
  pod_preview p;
  p.namespace_ = pod.namespace_;
  p.name = pod.name;
  p.node = pod.node_name;
  const std::vector<taint> taints = no_execute_taints(node_taints);
  if (taints.empty()) {
    p.why = "the node has no NoExecute taints";
    return p;
  }
  const std::function<bool(std::string_view)> opted = [&](std::string_view) {
    return namespace_opted_out;
  };
  const detail::pod_plan plan = detail::plan_for(pod, taints, &policy, opted);
  if (plan.skip) {
    p.skip = plan.skip;
    p.why = skip_text(*plan.skip, pod);
    return p;
  }
  const std::span<const taint_rule> rules(policy.taints);
  // The taint that set the pod's time: the first whose own decision (that taint alone, under
  // the same rules) is the pod's. decide() takes the minimum over the taints, so one exists.
  const auto alone = [&](const taint& t) {
    return decide(std::span<const taint>(&t, 1), pod.tolerations, rules);
  };
  const pod_decision& d = plan.decision;
  for (const taint& t : taints) {
    const ruled_decision one = alone(t);
    if (one.all_ignored) {
      continue;
    }
    const bool same = d.untolerated ? one.decision.untolerated
                                    : !one.decision.untolerated && one.decision.time == d.time;
    if (same) {
      p.by_taint = t;
      if (const toleration* tol = first_tolerating(pod.tolerations, t)) {
        p.used = *tol;
      }
      if (one.rule != nullptr) {
        p.rule = rule_name(*one.rule);
      }
      break;
    }
  }
  const std::string by = p.by_taint ? taint_string(*p.by_taint) : std::string("its taints");
  // What the pod's own toleration gave, for a time a taint rule changed.
  const std::string own = !p.used ? fmt::format("no toleration for {}", by)
                          : p.used->seconds
                              ? fmt::format("tolerates {} for {}s", by, *p.used->seconds)
                              : fmt::format("tolerates {} forever", by);
  const auto ruled = [&](std::string_view result) {
    return fmt::format("{}, taint rule {} makes it {}", own, *p.rule, result);
  };
  if (d.untolerated || d.time.is_now()) {
    p.what = pod_preview::outcome::now;
    p.why = p.rule ? ruled("now") : own;
  } else if (d.time.is_forever()) {
    p.what = pod_preview::outcome::never;
    p.why = taints.size() == 1 ? own : "tolerates every NoExecute taint of the node forever";
  } else {
    p.what = pod_preview::outcome::after;
    p.seconds = d.time.seconds.count();
    p.why = p.rule ? ruled(seconds_text(p.seconds)) : own;
  }
  return p;
}

preview_result preview(const preview_input& in) {
  preview_result r;
  r.added = in.added;
  const std::set<std::string, std::less<>> opted(in.opted_out_namespaces.begin(),
                                                 in.opted_out_namespaces.end());
  std::set<std::string, std::less<>> namespaces_now;
  std::set<std::string, std::less<>> target_names;
  for (const node_view& n : in.targets) {
    r.targets.push_back(n.name);
    target_names.insert(n.name);
    if (!no_execute_taints(n.taints).empty()) {
      r.already_tainted.push_back(n.name);
    }
    const std::vector<taint> after = with_taint(n.taints, in.added);
    for (const pod_view& pod : in.pods) {
      if (pod.node_name != n.name || pod.terminating) {
        continue;
      }
      pod_preview p = decide_pod(pod, after, in.policy, opted.contains(pod.namespace_));
      apply_deferral(p, pod, n, no_execute_taints(after), in.added, in.policy, in.now_unix);
      if (p.settling) {
        ++r.storm.settling;
      }
      switch (p.what) {
        case pod_preview::outcome::now:
          ++r.evicted_now;
          namespaces_now.insert(p.namespace_);
          break;
        case pod_preview::outcome::after:
          ++r.evicted_later;
          r.latest_seconds = std::max(r.latest_seconds, p.seconds);
          break;
        case pod_preview::outcome::never:
          ++(p.skip ? r.skipped : r.never);
          break;
      }
      r.pods.push_back(std::move(p));
    }
  }
  r.namespaces_now = namespaces_now.size();

  // The storm breaker counts the nodes with a NoExecute taint of its keys (all: every key).
  const storm_breaker_policy& sb = in.policy.storm_breaker;
  const auto counted = [&](const std::vector<taint>& taints) {
    return std::any_of(taints.begin(), taints.end(), [&](const taint& t) {
      return t.effect == taint_effect::no_execute &&
             (sb.taint_keys.empty() ||
              std::find(sb.taint_keys.begin(), sb.taint_keys.end(), t.key) != sb.taint_keys.end());
    });
  };
  const bool added_counts = counted({in.added});
  storm_preview& s = r.storm;
  for (const node_view& n : in.all_nodes) {
    ++s.nodes;
    const bool now = counted(n.taints);
    if (now) {
      ++s.tainted_now;
    }
    if (now || (target_names.contains(n.name) && added_counts)) {
      ++s.tainted_after;
    }
  }
  s.breaker_enabled = sb.enabled();
  s.threshold_percent = sb.max_tainted_nodes_percent;
  s.settle_seconds = sb.enabled() ? std::int64_t{sb.settle_seconds} : 0;
  if (s.breaker_enabled && s.nodes > 0) {
    const auto opens = [&](std::size_t tainted) {
      const double share = 100.0 * static_cast<double>(tainted) / static_cast<double>(s.nodes);
      return share > sb.max_tainted_nodes_percent && tainted >= sb.min_tainted_nodes;
    };
    s.breaker_open_now = opens(s.tainted_now);
    s.breaker_opens = opens(s.tainted_after);
  }
  const rate_limit_policy& rl = in.policy.rate_limit;
  s.evictions_per_second = rl.evictions_per_second;
  if (rl.evictions_per_second > 0) {
    const double burst = rl.burst > 0 ? static_cast<double>(rl.burst)
                                      : std::max(1.0, std::ceil(rl.evictions_per_second));
    s.immediate_seconds = std::max(0.0, static_cast<double>(r.evicted_now + s.settling) - burst) /
                          rl.evictions_per_second;
  }
  return r;
}

std::string summary(const preview_result& r) {
  std::string nodes;
  if (r.targets.size() <= 3) {
    for (const std::string& n : r.targets) {
      nodes += nodes.empty() ? n : ", " + n;
    }
  } else {
    nodes = fmt::format("{} nodes", r.targets.size());
  }
  const auto pods = [](std::size_t n) {
    return n == 1 ? std::string("1 pod") : fmt::format("{} pods", n);
  };
  std::string out = fmt::format("tainting {} with {} evicts {} now", nodes, taint_string(r.added),
                                pods(r.evicted_now));
  if (r.evicted_now > 0) {
    out += fmt::format(" ({} namespace{})", r.namespaces_now, r.namespaces_now == 1 ? "" : "s");
  }
  if (r.evicted_later > 0) {
    out += fmt::format(", {} more within {}s", r.evicted_later, r.latest_seconds);
  }
  if (r.never > 0) {
    out += fmt::format("; {} tolerate{} it forever", r.never, r.never == 1 ? "s" : "");
  }
  if (r.skipped > 0) {
    out += fmt::format("; {} excluded", r.skipped);
  }
  const auto held = std::count_if(r.pods.begin(), r.pods.end(), [](const pod_preview& p) {
    return p.held_until_unix.has_value();
  });
  if (held > 0) {
    out += fmt::format("; {} held by hold-until", held);
  }
  if (r.storm.settling > 0) {
    out += fmt::format("; {} wait{} {}s for the storm breaker's settling time", r.storm.settling,
                       r.storm.settling == 1 ? "s" : "", r.storm.settle_seconds);
  }
  const storm_preview& s = r.storm;
  if (s.nodes > 0) {
    const auto percent = static_cast<long>(
        std::lround(100.0 * static_cast<double>(s.tainted_after) / static_cast<double>(s.nodes)));
    out += fmt::format("; {}% of nodes would carry NoExecute taints", percent);
    if (s.breaker_enabled) {
      if (s.breaker_open_now) {
        out += ": the storm breaker is open already";
      } else if (s.breaker_opens) {
        out += fmt::format(": the storm breaker opens at {}%", s.threshold_percent);
      } else {
        out += fmt::format(" (the storm breaker opens above {}%)", s.threshold_percent);
      }
    }
  }
  if (s.evictions_per_second > 0 && r.evicted_now + s.settling > 0) {
    if (s.immediate_seconds > 0) {
      out += fmt::format("; at {}/s the immediate evictions take {:.0f}s", s.evictions_per_second,
                         std::ceil(s.immediate_seconds));
    } else {
      out += "; the rate limit's burst lets them all start at once";
    }
  }
  return out;
}

}  // namespace tec::controller

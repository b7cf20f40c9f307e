#pragma once

// The pure part of a decision (docs/behaviour.md §6): what a pod on a node with NoExecute
// taints is due, from the pod, the taints, the policy's scoping rules and the clocks, before
// the queue is looked at. No state, no lock, no I/O.

#include "tec/controller/controller.hpp"
#include "tec/controller/matching.hpp"
#include "tec/controller/outcome.hpp"
#include "tec/controller/policy.hpp"
#include "tec/timedqueue/timed_queue.hpp"

#include <span>

namespace tec::controller::detail {

/// What a pod on a tainted node is due.
struct pod_plan {
  pod_decision decision;
  /// Set when a scoping rule leaves the pod alone (then the decision never evicts it).
  std::optional<skip_reason> skip;
  /// The taint whose time a policy rule's floor or cap set, and that rule; else null.
  const taint* overridden = nullptr;
  const taint_rule* rule = nullptr;
};

/// Why `pod` is left alone whatever its tolerations say, if it is: the opt-out annotations
/// (`namespace_opted_out` may be empty), then the exclude rules of `scope` (may be null).
[[nodiscard]] std::optional<skip_reason> skipped(
    const pod_view& pod, const eviction_policy* scope,
    const std::function<bool(std::string_view)>& namespace_opted_out);

/// The plan for `pod` on a node with the NoExecute `taints` (not empty), with the policy's
/// scoping rules `scope` (null: none). Pointers in it point into `taints` and `*scope`.
[[nodiscard]] pod_plan plan_for(const pod_view& pod, const std::vector<taint>& taints,
                                const eviction_policy* scope,
                                const std::function<bool(std::string_view)>& namespace_opted_out);

/// The replay found `pod` on a node with `taints` and no eviction scheduled: when its
/// countdown started before `wall` (countdown_since), moves `created_at` and `fire_at` back to
/// where an uninterrupted controller would have them, counted from `now` on the driver's clock
/// (a fire time already past fires at once). nullopt (and nothing moved) when it counts from
/// now.
[[nodiscard]] std::optional<countdown> resume_countdown(
    const pod_view& pod, const std::vector<taint>& taints, timedqueue::time_point now,
    std::chrono::system_clock::time_point wall, timedqueue::time_point& created_at,
    timedqueue::time_point& fire_at, std::span<const taint_rule> rules);

/// The taint whose toleration set a pod's time of `seconds`: the first of `taints` whose first
/// matching toleration has that tolerationSeconds as decide() reads it (a negative one is 0;
/// the smallest, which decide() took); the
/// first taint when none has (not for a decision decide() made from these taints).
[[nodiscard]] const taint& setting_taint(const std::vector<taint>& taints,
                                         const std::vector<toleration>& tolerations,
                                         std::int64_t seconds);

/// The history record of an eviction of `pod` about to be scheduled (created_at, fire_at) on a
/// node with `taints` after `plan` gave it `time`: the toleration that set the time and the
/// taint it matched (none when untolerated), and the taint rule that changed it, if any.
[[nodiscard]] eviction_outcome staged_outcome(const pod_view& pod, const std::vector<taint>& taints,
                                              const pod_plan& plan, const toleration_time& time,
                                              timedqueue::time_point created_at,
                                              timedqueue::time_point fire_at);

}  // namespace tec::controller::detail

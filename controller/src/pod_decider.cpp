#include "pod_decider.hpp"
#include "common.hpp"
#include "pod_plan.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <span>
#include <utility>

namespace tec::controller::detail {

using timedqueue::time_point;

namespace {

// A per-thread buffer for "namespace/name", so the hot path does not allocate keys.
std::string& key_buffer() {
  thread_local std::string buffer;
  return buffer;
}

}  // namespace

pod_decider::pod_decider(const pod_index& pods, timedqueue::driver& drv, tainted_nodes& tainted,
                         queue_entries& entries, const event_outlet& outlet,
                         const policy_state& policy, counters& ctr,
                         std::shared_ptr<spdlog::logger> log, decider_options options)
    : pods_(pods),
      drv_(drv),
      tainted_(tainted),
      entries_(entries),
      outlet_(outlet),
      policy_(policy),
      ctr_(ctr),
      log_(std::move(log)),
      deadlines_from_taint_time_(options.deadlines_from_taint_time),
      scheduled_events_(options.scheduled_events),
      clock_(options.clock),
      namespace_opted_out_(std::move(options.namespace_opted_out)),
      deferrals_(options.node_holds, tainted, policy, outlet, options.clock, log_) {}

// Section 4.
void pod_decider::node_changed(const std::string& name, std::optional<std::vector<taint>> taints,
                               bool replay) {
  if (log_->should_log(spdlog::level::trace)) {
    log_->trace("stage=worker node=\"{}\" t_us={}", name, trace_us());
  }
  tainted_.set(name, taints, drv_.now());
  if (!taints) {
    log_->debug("node deleted node=\"{}\"", name);
    return;  // Upstream keeps the evictions already scheduled for its pods.
  }
  const std::vector<pod_view> on_node = pods_.pods_on_node(name);
  if (on_node.empty()) {
    return;
  }
  const std::vector<taint>* current = taints->empty() ? nullptr : &*taints;
  const time_point now = drv_.now();
  std::string& key = key_buffer();
  for (const pod_view& p : on_node) {
    set_key(key, p.namespace_, p.name);
    std::lock_guard key_guard(key_lock(key));
    // The snapshot is used as is unless an entry made for another UID shows it may be
    // stale; then the pod is read again (under the key lock) and decided from that.
    if (p.node_name != name ||
        decide_locked(key, p, current, true, now, false, replay) == verdict::reread) {
      reconcile_locked(key, p.namespace_, p.name, name, current, true, now, replay);
    }
  }
}

// Section 5.
void pod_decider::pod_changed(std::string_view node, std::string_view key) {
  const auto [ns, name] = split_key(key);
  const std::vector<taint>* taints = tainted_.find_own(node);
  std::lock_guard key_guard(key_lock(key));
  reconcile_locked(key, ns, name, node, taints, false, drv_.now());
}

// Decides for the pod known under `key` as seen from `node` (the item's node), with
// `taints` that node's NoExecute taints (null: not tainted), reading the pod's current
// state. `from_node`: called for a node update, where an untainted node cancels its pods'
// evictions (docs/behaviour.md §4); for a pod update an untainted node does nothing
// (docs/behaviour.md §5). Caller holds the key lock.
void pod_decider::reconcile_locked(std::string_view key, std::string_view ns, std::string_view name,
                                   std::string_view node, const std::vector<taint>* taints,
                                   bool from_node, time_point now, bool replay) {
  const std::optional<pod_view> pod = pods_.get_pod(ns, name);
  if (!pod) {
    deferrals_.forget(key);
    // Section 5.1, upstream's event included (it names the UID the eviction was for).
    const auto entry = entries_.lookup(key);
    if (entry && entries_.cancel(key, outcome_result::pod_gone, /*pod_stays=*/false)) {
      bump(ctr_.cancellations);
      pod_ref ref{std::string(ns), std::string(name), entry->payload};
      outlet_.record(ref, event_kind::cancelling_deletion);
      log_->info("cancelled eviction of deleted pod pod=\"{}\" uid={}", key, entry->payload);
      outlet_.note_cancelled(std::move(ref), cancel_reason::pod_gone, entry->fire_at);
    }
    return;
  }
  if (pod->node_name.empty() || pod->node_name != node) {
    // A stale item: the item for its current node decides. An entry left by a pod that had
    // this name before is dropped here all the same.
    const auto entry = entries_.lookup(key);
    if (entry && entry->payload != pod->uid) {
      entries_.drop_foreign(key, entry->payload, pod->uid);
    }
    return;
  }
  decide_locked(key, *pod, taints, from_node, now, true, replay);
}

// `pod` is not to be evicted (no NoExecute taint, or all tolerated forever): an eviction of it
// waiting is cancelled with upstream's event when `cancel` (a decision on a tainted node, or a
// node update), else kept (docs/behaviour.md §5: a pod update on an untainted node cancels
// nothing); an entry of another UID is stale (dropped, or the pod read again unless `verified`).
pod_decider::verdict pod_decider::leave_alone(std::string_view key, const pod_view& pod,
                                              bool cancel, bool verified) {
  const auto entry = entries_.lookup(key);
  if (!entry) {
    return verdict::done;
  }
  if (entry->payload != pod.uid) {
    if (!verified) {
      return verdict::reread;
    }
    entries_.drop_foreign(key, entry->payload, pod.uid);
    return verdict::done;
  }
  if (cancel) {
    entries_.cancel_with_event(key, pod, cancel_reason::untainted);
  }
  return verdict::done;
}

// Sections 4.3 and 6 for `pod`, which is on the node whose taints are `taints`. `verified`:
// `pod` was read under the key lock, so an entry for another UID is stale and is dropped;
// otherwise (a pods_on_node snapshot) such an entry asks the caller to read the pod again.
// Caller holds the key lock.
pod_decider::verdict pod_decider::decide_locked(std::string_view key, const pod_view& pod,
                                                const std::vector<taint>* taints, bool from_node,
                                                time_point now, bool verified, bool replay) {
  const std::optional<hold_in_force> hold = deferrals_.judge(key, pod);
  std::optional<pod_plan> plan;
  std::shared_ptr<const eviction_policy> scope;
  if (taints != nullptr) {
    bump(ctr_.decisions);
    scope = policy_.scope();
    plan = plan_for(pod, *taints, scope.get(), namespace_opted_out_);
    if (plan->skip) {
      note_skip(key, *plan->skip);
    }
  }
  const pod_decision* d = plan ? &plan->decision : nullptr;
  if (!d || (!d->untolerated && d->time.is_forever())) {
    return leave_alone(key, pod, d != nullptr || from_node, verified);
  }
  // A dry run (shadow mode included) decides a terminating pod as upstream does: it deletes
  // nothing, so the pod is terminating because someone else deleted it (in shadow mode, the
  // built-in taint manager, usually first), and what it reports is our decision as if we
  // were the only one acting.
  if (pod.terminating && !policy_.dry_run()) {
    return leave_terminating(key, pod, verified);
  }
  // Section 6: schedule first; only when an entry already exists is it looked at.
  time_point created_at = now;
  time_point fire_at = d->untolerated ? now : now + d->time.delay();
  std::optional<countdown> resumed;
  if (replay && deadlines_from_taint_time_ && !d->untolerated && !d->time.is_now()) {
    resumed = resume_countdown(
        pod, *taints, now, clock_.wall(), created_at, fire_at,
        scope ? std::span<const taint_rule>(scope->taints) : std::span<const taint_rule>());
  }
  // A new entry is told of (resumed countdown, policy override, its Scheduled event).
  const auto deferral_at = [&](time_point due) {
    return deferrals_.deferral_for(pod, *taints, hold, due, now, scope.get());
  };
  const auto schedule_new = [&] {
    const timedqueue::deferral wait = deferral_at(fire_at);
    if (!entries_.schedule(key, pod, created_at, fire_at, *taints, *plan,
                           resumed ? resumed->time : d->time, wait)) {
      return false;
    }
    note_resumed(key, pod, resumed, now, fire_at);
    note_override(key, pod, plan->overridden, plan->rule, now, fire_at);
    announce(pod, *taints, resumed ? resumed->time : d->time, now, fire_at, plan->overridden);
    if (wait.tag == hold_tag) {
      deferrals_.note_held(pod, *hold, wait, fire_at, now);
    }
    return true;
  };
  if (schedule_new()) {
    return verdict::done;
  }
  const auto entry = entries_.lookup(key);
  if (!entry) {
    return verdict::done;  // It completed just now: the pod was evicted, or shut down.
  }
  if (entry->payload != pod.uid) {
    if (!verified) {
      return verdict::reread;
    }
    entries_.drop_foreign(key, entry->payload, pod.uid);
    schedule_new();
    return verdict::done;
  }
  // An eviction of this very pod exists and keeps its fire time, unless the pod is no
  // longer tolerated and it is still waiting for a later time: then cancel and evict now.
  // One already due, running or retrying is left alone (no duplicate eviction).
  if (d->untolerated && entry->state == timedqueue::entry_state::pending && entry->fire_at > now) {
    // No note for this cancel: the scheduled note that follows replaces the old due time.
    entries_.cancel_with_event(key, pod, cancel_reason::none);
    const timedqueue::deferral wait = deferral_at(now);
    if (entries_.schedule(key, pod, now, now, *taints, *plan, d->time, wait) &&
        wait.tag == hold_tag) {
      deferrals_.note_held(pod, *hold, wait, now, now);
    }
    return verdict::done;
  }
  // One that has not started gets the deferral its holds and taints ask for now (README
  // "Holds": a hold added, moved or removed while it waits).
  if (entry->state == timedqueue::entry_state::pending ||
      entry->state == timedqueue::entry_state::held) {
    const timedqueue::deferral wait = deferral_at(entry->fire_at);
    if (!(wait == entry->deferred) && entries_.defer(key, entry->generation, wait) &&
        wait.tag == hold_tag && entry->deferred.tag != hold_tag) {
      deferrals_.note_held(pod, *hold, wait, entry->fire_at, now);
    }
  }
  return verdict::done;
}

// `pod` would be evicted, but it is terminating already (docs/design.md, "A terminating pod is
// not deleted again"): nothing is scheduled, an eviction still waiting is cancelled with upstream's
// event when queue_entries::cancel says so (as for a pod deleted before its time,
// docs/behaviour.md §5.1), and an attempt running is left to finish (its own DELETE is what
// usually made the pod terminating). Caller holds the key lock; `verified` as for
// decide_locked.
pod_decider::verdict pod_decider::leave_terminating(std::string_view key, const pod_view& pod,
                                                    bool verified) {
  const auto entry = entries_.lookup(key);
  if (entry && entry->payload != pod.uid) {
    if (!verified) {
      return verdict::reread;
    }
    entries_.drop_foreign(key, entry->payload, pod.uid);
  } else if (entry && entry->state == timedqueue::entry_state::running) {
    return verdict::done;
  } else if (entry) {
    if (entries_.cancel(key, outcome_result::pod_gone, /*pod_stays=*/false)) {
      bump(ctr_.cancellations);
      pod_ref ref{pod.namespace_, pod.name, pod.uid};
      outlet_.record(ref, event_kind::cancelling_deletion);
      outlet_.note_cancelled(std::move(ref), cancel_reason::pod_gone, entry->fire_at);
    }
    bump(ctr_.terminating);
    log_->info("cancelled eviction of terminating pod pod=\"{}\" uid={}", key, pod.uid);
    return verdict::done;
  }
  bump(ctr_.terminating);
  if (log_->should_log(spdlog::level::debug)) {
    log_->debug("not evicting pod=\"{}\" uid={} reason=terminating", key, pod.uid);
  }
  return verdict::done;
}

void pod_decider::note_resumed(std::string_view key, const pod_view& pod,
                               const std::optional<countdown>& c, time_point now,
                               time_point fire_at) {
  if (!c) {
    return;
  }
  bump(ctr_.from_taint_time);
  const auto due_in = std::chrono::duration_cast<std::chrono::milliseconds>(fire_at - now);
  log_->info(
      "eviction deadline from taint time pod=\"{}\" uid={} taint=\"{}\" counted_from={} "
      "toleration={}s due_in={}ms",
      key, pod.uid, c->started_by != nullptr ? c->started_by->key : std::string(), c->start_unix,
      c->time.seconds.count(), std::max<std::int64_t>(due_in.count(), 0));
}

void pod_decider::note_skip(std::string_view key, skip_reason reason) {
  bump(ctr_.skipped_by[static_cast<std::size_t>(reason)]);
  if (log_->should_log(spdlog::level::debug)) {
    log_->debug("not evicting pod=\"{}\" reason={}", key, to_string(reason));
  }
}

// A taint rule's floor or cap set the time of the eviction just scheduled: a deviation from
// the pod's spec, logged once per scheduled eviction.
void pod_decider::note_override(std::string_view key, const pod_view& pod, const taint* t,
                                const taint_rule* r, time_point now, time_point fire_at) {
  if (t == nullptr || r == nullptr) {
    return;
  }
  bump(ctr_.overrides);
  const auto it = std::find_if(pod.tolerations.begin(), pod.tolerations.end(),
                               [&](const toleration& tol) { return tolerates(tol, *t); });
  std::string own = "untolerated";
  if (it != pod.tolerations.end()) {
    own = it->seconds ? std::to_string(*it->seconds) + "s" : std::string("forever");
  }
  const auto due_in = std::chrono::duration_cast<std::chrono::milliseconds>(fire_at - now);
  log_->info(
      "eviction time set by policy, not by the pod's toleration pod=\"{}\" uid={} taint=\"{}\" "
      "rule=\"{}{}\" toleration={} minTolerationSeconds={} maxTolerationSeconds={} "
      "due_in={}ms",
      key, pod.uid, t->key, r->key, r->prefix ? "*" : "", own, r->min_toleration_seconds,
      r->max_toleration_seconds, std::max<std::int64_t>(due_in.count(), 0));
}

// A new entry for `pod` fires at `fire_at` after the pod's toleration of `time` on a node
// with `taints`: when that is later than `now`, a TaintEvictionScheduled event says when and
// why (controller_options::scheduled_events).
// `set_by`: the taint a policy rule set the time for (named in the event), else null.
void pod_decider::announce(const pod_view& pod, const std::vector<taint>& taints,
                           const toleration_time& time, time_point now, time_point fire_at,
                           const taint* set_by) {
  if (!scheduled_events_ || fire_at <= now || time.what != toleration_time::kind::after) {
    return;
  }
  const auto wall = clock_.wall();
  const auto due =
      wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(fire_at - now);
  const taint& t =
      set_by != nullptr ? *set_by : setting_taint(taints, pod.tolerations, time.seconds.count());
  outlet_.record(pod_ref{pod.namespace_, pod.name, pod.uid}, event_kind::eviction_scheduled,
                 scheduled_event_detail(due, t, time.seconds.count()));
}

}  // namespace tec::controller::detail

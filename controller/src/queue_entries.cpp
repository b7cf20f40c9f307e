#include "queue_entries.hpp"
#include "common.hpp"

#include <spdlog/spdlog.h>

namespace tec::controller::detail {

namespace {

std::optional<outcome_result> outcome_of(cancel_reason reason) {
  switch (reason) {
    case cancel_reason::untainted:
      return outcome_result::cancelled_untainted;
    case cancel_reason::pod_gone:
      return outcome_result::pod_gone;
    case cancel_reason::replaced:
      return outcome_result::replaced;
    case cancel_reason::none:
      break;
  }
  return std::nullopt;
}

}  // namespace

bool queue_entries::schedule(std::string_view key, const pod_view& pod,
                             timedqueue::time_point created_at, timedqueue::time_point fire_at,
                             const std::vector<taint>& taints, const pod_plan& plan,
                             const toleration_time& time, timedqueue::deferral deferred) {
  if (log_->should_log(spdlog::level::trace)) {
    log_->trace("stage=decided pod=\"{}\" t_us={}", key, trace_us());
  }
  if (ledger_.on()) {
    ledger_.open(key, staged_outcome(pod, taints, plan, time, created_at, fire_at));
  }
  // Groups for the in-flight caps: the pod's node and namespace.
  const auto r =
      queue_.schedule(key, created_at, fire_at, pod.uid, {pod.node_name, pod.namespace_}, deferred);
  if (r != timedqueue::schedule_result::scheduled) {
    ledger_.discard(key, {pod.uid, fire_at});
    return false;
  }
  bump(ctr_.scheduled);
  if (outlet_.observed()) {
    decision_note note;
    note.kind = decision_kind::scheduled;
    note.pod = pod_ref{pod.namespace_, pod.name, pod.uid};
    note.node = pod.node_name;
    note.taints = taints;
    note.at = created_at;
    note.due = fire_at;
    outlet_.note(note);
  }
  if (log_->should_log(spdlog::level::debug)) {
    log_->debug(
        "scheduled eviction pod=\"{}\" uid={} in={}ms", key, pod.uid,
        std::chrono::duration_cast<std::chrono::milliseconds>(fire_at - created_at).count());
  }
  return true;
}

bool queue_entries::cancel(std::string_view key, std::optional<outcome_result> ended_as,
                           bool pod_stays) {
  // The callers hold the key lock: no other entry of `key` can come between.
  std::optional<timedqueue::entry_info> entry;
  if (ledger_.on()) {
    entry = queue_.lookup(key);
  }
  const bool was_pending = queue_.cancel(key);
  // A blocked eviction, or one announced and backing off, is still to happen as far as the
  // pod's events tell: its cancel gets the "Cancelling deletion" event a pending one gets.
  const bool was_announced = runner_.forget_cancelled(key, pod_stays);
  if (entry) {
    ledger_.cancelled(key, {entry->payload, entry->fire_at}, ended_as);
  }
  return was_pending || was_announced;
}

void queue_entries::cancel_with_event(std::string_view key, const pod_view& pod,
                                      cancel_reason reason) {
  std::optional<timedqueue::entry_info> entry;
  if (outlet_.observed() && reason != cancel_reason::none) {
    entry = queue_.lookup(key);
  }
  if (cancel(key, outcome_of(reason))) {
    bump(ctr_.cancellations);
    pod_ref ref{pod.namespace_, pod.name, pod.uid};
    outlet_.record(ref, event_kind::cancelling_deletion);
    log_->info("cancelled eviction pod=\"{}\"", key);
    if (entry) {
      outlet_.note_cancelled(std::move(ref), reason, entry->fire_at);
    }
  }
}

void queue_entries::drop_foreign(std::string_view key, std::string_view old_uid,
                                 std::string_view uid) {
  std::optional<timedqueue::entry_info> entry;
  if (outlet_.observed()) {
    entry = queue_.lookup(key);
  }
  if (cancel(key, outcome_result::replaced) && entry) {
    const auto [ns, name] = split_key(key);
    outlet_.note_cancelled(pod_ref{std::string(ns), std::string(name), std::string(old_uid)},
                           cancel_reason::replaced, entry->fire_at);
  }
  bump(ctr_.stale);
  log_->info("dropped eviction made for replaced pod pod=\"{}\" old_uid={} uid={}", key, old_uid,
             uid);
}

bool queue_entries::eviction_waits(const pod_view& pod) const {
  std::string key;
  set_key(key, pod.namespace_, pod.name);
  const auto entry = queue_.lookup(key);
  return entry && entry->payload == pod.uid && entry->state != timedqueue::entry_state::running;
}

}  // namespace tec::controller::detail

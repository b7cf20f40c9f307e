#include "eviction_runner.hpp"
#include "tec/base/rfc3339.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <utility>

namespace tec::controller::detail {

namespace {

// A duration for messages: "20s", or "20.3s" when not whole seconds (tenths, rounded down).
std::string seconds_text(std::chrono::nanoseconds d) {
  const auto tenths = std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 100;
  std::string out = std::to_string(tenths / 10);
  if (tenths % 10 != 0) {
    out += '.';
    out += static_cast<char>('0' + tenths % 10);
  }
  out += 's';
  return out;
}

}  // namespace

eviction_runner::eviction_runner(const pod_index& pods, eviction_sink& sink,
                                 timedqueue::driver& drv, const event_outlet& outlet,
                                 const policy_state& policy, const tainted_nodes& tainted,
                                 counters& ctr, std::shared_ptr<spdlog::logger> log,
                                 runner_options options)
    : pods_(pods),
      sink_(sink),
      drv_(drv),
      outlet_(outlet),
      policy_(policy),
      tainted_(tainted),
      ctr_(ctr),
      log_(std::move(log)),
      options_(std::move(options)) {}

struct eviction_runner::pending_done {
  explicit pending_done(timedqueue::completion c) : done(std::move(c)) {}
  timedqueue::completion done;
  std::atomic<bool> called{false};
};

void eviction_runner::run(const timedqueue::run_info& info, timedqueue::completion done) {
  if (log_->should_log(spdlog::level::trace)) {
    log_->trace("stage=fired pod=\"{}\" t_us={}", info.key, trace_us());
  }
  std::optional<timedqueue::completion> slot(std::move(done));
  try {
    start(info, slot);
  } catch (const std::exception& e) {
    // A throwing pod_index or sink: this attempt failed and is retried with backoff. Once
    // the completion was handed to the sink (slot empty), the sink's callback owns it, and
    // info.key may no longer be valid (it lives as long as the completion).
    if (slot) {
      log_->error("eviction attempt failed pod=\"{}\" uid={}: {}", info.key, info.payload,
                  e.what());
      options_.ledger.attempt_failed(info.key, {info.payload, info.fire_at}, e.what());
      const auto [ns, name] = split_key(info.key);
      const pod_ref ref{std::string(ns), std::string(name), std::string(info.payload)};
      attempt_failed(info.key, info.generation, info.attempt, ref, e.what(),
                     [&slot] { return slot->cancelled(); });
      ended_undone(info.key, info.generation, ref);
      slot->complete(timedqueue::outcome::failure(e.what()));
    } else {
      log_->error("eviction sink threw after taking the request: {}", e.what());
    }
  }
}

void eviction_runner::start(const timedqueue::run_info& info,
                            std::optional<timedqueue::completion>& slot) {
  if (slot->cancelled()) {
    slot->complete(timedqueue::outcome::failure("cancelled"));
    slot.reset();
    return;
  }
  const entry_id id{info.payload, info.fire_at};
  note_attempt_started(info, id);
  const auto [ns, name] = split_key(info.key);
  const std::optional<pod_view> pod = pods_.get_pod(ns, name);
  pod_ref ref{std::string(ns), std::string(name), std::string(info.payload)};
  if (ended_before_sending(info, id, pod, ref)) {
    settle(slot);
    return;
  }
  const way w = way_for(info, *pod, ref);
  const bool stuck = info.attempt > options_.stuck_after;
  // From here on a cancel is announced (the pod stays: "Cancelling deletion") unless the pod is
  // deleted; a cancel that came first ends the attempt with nothing announced or sent.
  if (!marked_.start(info.key, info.generation, info.payload, info.attempt,
                     [&slot] { return slot->cancelled(); })) {
    slot->complete(timedqueue::outcome::failure("cancelled"));
    slot.reset();
    return;
  }
  announce_attempt(info, ref, w.method, stuck || w.blocked);
  auto holder = std::make_shared<pending_done>(std::move(*slot));
  slot.reset();
  // The check must not own the completion: a sink may keep the request after calling done,
  // and a completion kept alive would make the queue's shutdown wait for it forever. Once
  // the attempt is over (holder gone) nothing more may be sent for it.
  eviction_request request{ref,
                           [weak = std::weak_ptr<pending_done>(holder)] {
                             const auto h = weak.lock();
                             return !h || h->called.load() || h->done.cancelled();
                           },
                           stuck,
                           w.method,
                           pod->node_name,
                           causes_for(*pod)};
  // The callback uses `this` only before complete(): until then the queue's shutdown, and
  // so the controller's, waits for this run. A second call returns before touching it.
  sink_.evict(std::move(request),
              [this, holder, ref = std::move(ref), key = std::string(info.key),
               generation = info.generation, attempt = info.attempt, fire_at = info.fire_at,
               method = w.method, fallback = w.fallback](eviction_result result) {
                if (holder->called.exchange(true)) {
                  return;  // A sink calling `done` twice: the first call counts.
                }
                finish_attempt(*holder, key, generation, attempt, fire_at, ref, std::move(result),
                               method, fallback);
              });
}

// The ledger's record of the wait from due to admitted: its deferral's part first (when it had
// one), the rest admission's.
void eviction_runner::note_attempt_started(const timedqueue::run_info& info, const entry_id& id) {
  if (!options_.ledger.on()) {
    return;
  }
  const auto span = [](time_point from, time_point to) {
    return std::max(std::chrono::nanoseconds::zero(),
                    std::chrono::duration_cast<std::chrono::nanoseconds>(to - from));
  };
  const bool deferred = info.deferral_ended_at != time_point{};
  const time_point held_from = deferred ? info.deferral_ended_at : info.due_at;
  options_.ledger.attempt_started(
      info.key, id, info.attempt, span(held_from, info.admitted_at),
      info.held_by == timedqueue::hold_reason::none ? std::string_view()
                                                    : why_held(info.held_by, info.held_group),
      deferred ? span(info.due_at, info.deferral_ended_at) : std::chrono::nanoseconds::zero(),
      deferred ? why_held(timedqueue::hold_reason::deferred, 0, info.deferral_tag)
               : std::string_view());
}

// True when the attempt ends here, before the sink, as a success for the queue (the caller
// settles it): the pod gone or replaced since the decision, terminating (not in a dry run), or
// a dry run (the whole decision ran; nothing is written). Each is counted, forgotten, recorded
// in the ledger and noted.
bool eviction_runner::ended_before_sending(const timedqueue::run_info& info, const entry_id& id,
                                           const std::optional<pod_view>& pod, const pod_ref& ref) {
  if (!pod || pod->uid != info.payload) {
    // Gone or replaced since the decision: nothing to delete (and the DELETE would fail
    // its UID precondition anyway). No Marking event for a pod we do not delete.
    bump(ctr_.skipped);
    forget(info.key, info.generation);
    options_.ledger.ended(info.key, id, pod ? outcome_result::replaced : outcome_result::pod_gone);
    outlet_.note_cancelled(ref, pod ? cancel_reason::replaced : cancel_reason::pod_gone,
                           info.fire_at);
    return true;
  }
  if (pod->terminating && !policy_.dry_run()) {
    // It became terminating after the decision (someone else deleted it, or an earlier
    // attempt of ours was accepted although it reported a failure): deleting it again would
    // change nothing. No Marking event, no request (see leave_terminating).
    bump(ctr_.terminating);
    forget(info.key, info.generation);
    log_->info("pod is already terminating, not deleting it again pod=\"{}\" uid={}", info.key,
               info.payload);
    options_.ledger.ended(info.key, id, outcome_result::pod_gone);
    outlet_.note_cancelled(ref, cancel_reason::pod_gone, info.fire_at);
    return true;
  }
  if (info.held && options_.on_waited) {
    options_.on_waited(
        std::chrono::duration_cast<std::chrono::nanoseconds>(info.admitted_at - info.due_at));
  }
  if (!policy_.dry_run()) {
    return false;
  }
  bump(ctr_.dry_run);
  forget(info.key, info.generation);
  log_->info("dry run: would delete pod=\"{}\" uid={}", info.key, info.payload);
  options_.ledger.ended(info.key, id, outcome_result::would_delete);
  if (outlet_.observed()) {
    decision_note note;
    note.kind = decision_kind::would_delete;
    note.pod = ref;
    note.at = drv_.now();
    note.due = info.fire_at;
    outlet_.note(note);
  }
  return true;
}

// How this attempt goes: a DELETE, or in Evict mode an eviction, falling back to a DELETE once
// a disruption budget has refused it for fallbackAfter (told once).
eviction_runner::way eviction_runner::way_for(const timedqueue::run_info& info, const pod_view& pod,
                                              const pod_ref& ref) {
  way w;
  if (!policy_.evict_mode()) {
    return w;
  }
  w.method = eviction_method::evict;
  w.fallback = fallback_for(pod);
  if (const auto b = blocked_.lookup(info.key); b && b->generation == info.generation) {
    w.blocked = true;
    const time_point now = drv_.now();
    if (w.fallback.count() > 0 && now - b->since >= w.fallback) {
      w.method = eviction_method::delete_pod;
      if (blocked_.fall_back_once(info.key, info.generation)) {
        fall_back(ref, now - b->since, w.fallback);
      }
    }
  }
  return w;
}

// The first attempt's "Marking for deletion" event and log line; a retry's log line (once
// stuck or blocked, at debug: its warnings come with its events, at most every
// stuck_event_interval, and a blocked one logged its first refusal at info).
void eviction_runner::announce_attempt(const timedqueue::run_info& info, const pod_ref& ref,
                                       eviction_method method, bool quiet) {
  if (info.attempt == 1) {
    bump(ctr_.started);
    log_->info("{} pod pod=\"{}\" uid={}",
               method == eviction_method::evict ? "evicting" : "deleting", info.key, info.payload);
    outlet_.record(ref, event_kind::marking_for_deletion);
    return;
  }
  bump(ctr_.retries);
  log_->log(quiet ? spdlog::level::debug : spdlog::level::info,
            "retrying deletion pod=\"{}\" uid={} attempt={}", info.key, info.payload, info.attempt);
}

// Evict mode: the fallbackAfter that applies to `pod` on its node now (see fallback_after()).
std::chrono::milliseconds eviction_runner::fallback_for(const pod_view& pod) const {
  const std::optional<std::vector<taint>> taints = tainted_.lookup(pod.node_name);
  if (!taints || taints->empty()) {
    return std::chrono::milliseconds{0};
  }
  return policy_.fallback_for(*taints, pod.tolerations);
}

// The NoExecute taints the cache shows on `pod`'s node that make its eviction right (for the
// sink's fresh read of the node, eviction_request::causes).
std::vector<taint> eviction_runner::causes_for(const pod_view& pod) const {
  const std::optional<std::vector<taint>> taints = tainted_.lookup(pod.node_name);
  if (!taints || taints->empty()) {
    return {};
  }
  return policy_.evicting_taints(*taints, pod.tolerations);
}

// Evict mode: an eviction refused for `blocked_for` (>= `fallback`) is done by DELETE.
void eviction_runner::fall_back(const pod_ref& pod, timedqueue::duration blocked_for,
                                std::chrono::milliseconds fallback) {
  bump(ctr_.fallbacks);
  const std::string detail = "after its eviction was refused for " + seconds_text(blocked_for) +
                             " (fallbackAfter " + seconds_text(fallback) + ")";
  log_->warn("deleting pod=\"{}/{}\" uid={} {}", pod.namespace_, pod.name, pod.uid, detail);
  outlet_.record(pod, event_kind::eviction_fallback, detail);
}

// Evict mode: the Eviction API refused an attempt (a disruption budget). Not a failure to
// report as stuck: the blocked gauge and a Warning event (one Event, its count raised at each
// refusal) show it. Retried with the queue's backoff, and at the fallback time at the latest.
void eviction_runner::attempt_blocked(pending_done& holder, std::string_view key,
                                      std::uint64_t generation, const pod_ref& pod,
                                      std::string message, std::chrono::milliseconds fallback) {
  stuck_.done(key, generation);  // an answer, not a failure in a row
  const time_point now = drv_.now();
  const auto [rec, first] = blocked_.refused(key, generation, now, fallback,
                                             [&holder] { return holder.done.cancelled(); });
  std::string detail = message;
  if (!detail.empty() && detail.back() != '.') {
    detail += '.';
  }
  if (rec.fallback_at) {
    const auto wall = options_.clock.wall();
    const auto at = wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                               *rec.fallback_at - now);
    detail += " Retrying; deleting it anyway at " + base::format_rfc3339(at) + " (fallbackAfter " +
              seconds_text(fallback) + ").";
  } else {
    detail += " Retrying until it is allowed (no fallbackAfter).";
  }
  log_->log(first ? spdlog::level::info : spdlog::level::debug,
            "eviction refused pod=\"{}\" uid={}: {}", key, pod.uid, detail);
  outlet_.record(pod, event_kind::eviction_blocked, detail);
  holder.done.complete(rec.fallback_at
                           ? timedqueue::outcome::failure(std::move(message), *rec.fallback_at)
                           : timedqueue::outcome::failure(std::move(message)));
}

void eviction_runner::finish_attempt(pending_done& holder, std::string_view key,
                                     std::uint64_t generation, std::uint32_t attempt,
                                     time_point fire_at, const pod_ref& pod, eviction_result result,
                                     eviction_method method, std::chrono::milliseconds fallback) {
  const entry_id id{pod.uid, fire_at};
  switch (result.status) {
    case eviction_status::deleted:
    case eviction_status::gone:
      bump(ctr_.succeeded);
      forget(key, generation);
      // In Evict mode (fallback set) a DELETE is the fallback's.
      options_.ledger.ended(key, id,
                            result.status == eviction_status::gone ? outcome_result::pod_gone
                            : method == eviction_method::evict     ? outcome_result::evicted
                            : fallback.count() > 0 ? outcome_result::deleted_after_fallback
                                                   : outcome_result::deleted);
      // Only a DELETE of ours that was accepted is a deletion for the histogram.
      if (result.status == eviction_status::deleted && options_.on_deleted) {
        options_.on_deleted(
            std::max(std::chrono::nanoseconds::zero(),
                     std::chrono::duration_cast<std::chrono::nanoseconds>(drv_.now() - fire_at)));
      }
      holder.done.complete(timedqueue::outcome::success());
      return;
    case eviction_status::blocked:
      if (method != eviction_method::evict) {
        result.status = eviction_status::failed;  // a sink's bug: only an eviction is refused
        finish_attempt(holder, key, generation, attempt, fire_at, pod, std::move(result), method,
                       fallback);
        return;
      }
      options_.ledger.attempt_failed(key, id, result.error, true, fallback);
      ended_undone(key, generation, pod);
      if (holder.done.cancelled()) {
        holder.done.complete(timedqueue::outcome::failure(std::move(result.error)));
        return;
      }
      bump(ctr_.blocked);
      attempt_blocked(holder, key, generation, pod, std::move(result.error), fallback);
      return;
    case eviction_status::stale:
      // The node no longer carries the taint on the server: nothing was written. Retried
      // within stale_retry (the removal's watch event usually cancels it first); not a
      // failure in a row.
      log_->debug("eviction deferred pod=\"{}\" uid={}: {}", key, pod.uid, result.error);
      ended_undone(key, generation, pod);
      holder.done.complete(
          timedqueue::outcome::failure(std::move(result.error), drv_.now() + stale_retry));
      return;
    case eviction_status::failed:
      options_.ledger.attempt_failed(key, id, result.error);
      ended_undone(key, generation, pod);
      if (holder.done.cancelled()) {
        // Withdrawn (cancelled, or shutting down): not retried, not a failure to report.
        holder.done.complete(timedqueue::outcome::failure(std::move(result.error)));
        return;
      }
      bump(ctr_.failed);
      attempt_failed(key, generation, attempt, pod, result.error,
                     [&holder] { return holder.done.cancelled(); });
      holder.done.complete(timedqueue::outcome::failure(std::move(result.error)));
      return;
  }
}

// A failed attempt, before its completion is called: reports the eviction as stuck when
// it is due (see controller_options::stuck_after).
void eviction_runner::attempt_failed(std::string_view key, std::uint64_t generation,
                                     std::uint32_t attempt, const pod_ref& pod,
                                     std::string_view error,
                                     const std::function<bool()>& cancelled) {
  if (!stuck_.failed(key, generation, attempt, options_.stuck_after, drv_.now(),
                     options_.stuck_event_interval, cancelled)) {
    return;
  }
  bump(ctr_.stuck_reports);
  const std::string detail = event_detail(error);
  log_->warn("eviction is stuck pod=\"{}\" uid={}: {} attempts failed in a row, still retrying: {}",
             key, pod.uid, attempt, detail);
  outlet_.record(pod, event_kind::eviction_failed, detail);
}

void eviction_runner::ended_undone(std::string_view key, std::uint64_t generation,
                                   const pod_ref& pod) {
  if (!marked_.ended_undone(key, generation)) {
    return;
  }
  // Cancelled while this attempt ran, and nothing was deleted: the pod stays, and says so.
  bump(ctr_.cancellations);
  outlet_.record(pod, event_kind::cancelling_deletion);
  sink_.eviction_cancelled(pod);
  log_->info("cancelled eviction pod=\"{}\" (its attempt ended without a deletion)", key);
}

bool eviction_runner::forget_cancelled(std::string_view key, bool pod_stays) {
  stuck_.cancelled(key);
  if (blocked_.cancelled(key)) {
    marked_.cancelled(key);  // announced now, not again when a running attempt ends
    return true;
  }
  if (!pod_stays) {
    marked_.cancelled(key);
    return false;
  }
  const std::optional<std::string> uid = marked_.cancel(key);
  if (!uid) {
    return false;
  }
  // Announced, backing off, and the pod stays: what the sink wrote for it is withdrawn.
  const auto [ns, name] = split_key(key);
  sink_.eviction_cancelled(pod_ref{std::string(ns), std::string(name), *uid});
  return true;
}

void eviction_runner::forget(std::string_view key, std::uint64_t generation) {
  stuck_.done(key, generation);
  blocked_.done(key, generation);
  marked_.done(key, generation);
}

void eviction_runner::settle(std::optional<timedqueue::completion>& slot) {
  slot->complete(timedqueue::outcome::success());
  slot.reset();
}

}  // namespace tec::controller::detail

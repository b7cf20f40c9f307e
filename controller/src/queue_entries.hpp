#pragma once

#include "common.hpp"
#include "event_outlet.hpp"
#include "eviction_runner.hpp"
#include "outcome_ledger.hpp"
#include "pod_plan.hpp"
#include "tec/controller/controller.hpp"
#include "tec/timedqueue/timed_queue.hpp"

#include <spdlog/logger.h>

namespace tec::controller::detail {

/// The timed queue's entries as the decisions make and drop them: every schedule and every
/// cancel goes through here, with its counters, log lines, events and decision notes, and a
/// cancel also takes the eviction out of the runner's stuck and blocked tables. Called from
/// the workers under the pod's key lock (pod_decider) and, for eviction_waits(), from intake
/// threads; holds no lock of its own. Borrows everything it is given.
class queue_entries {
public:
  queue_entries(timedqueue::timed_queue& queue, eviction_runner& runner, const event_outlet& outlet,
                outcome_ledger& ledger, counters& ctr, std::shared_ptr<spdlog::logger> log)
      : queue_(queue),
        runner_(runner),
        outlet_(outlet),
        ledger_(ledger),
        ctr_(ctr),
        log_(std::move(log)) {}

  [[nodiscard]] std::optional<timedqueue::entry_info> lookup(std::string_view key) const {
    return queue_.lookup(key);
  }

  /// A new entry for `pod`, due at `fire_at`, on a node with `taints` (for the note), after
  /// `plan` gave it `time` (for the history record), deferred by `deferred`. True when it was
  /// created (false when one exists, and after shutdown, when the queue holds nothing).
  bool schedule(std::string_view key, const pod_view& pod, timedqueue::time_point created_at,
                timedqueue::time_point fire_at, const std::vector<taint>& taints,
                const pod_plan& plan, const toleration_time& time,
                timedqueue::deferral deferred = {});

  /// Replaces the deferral of the entry of `key` with generation `generation` (see
  /// timed_queue::defer).
  bool defer(std::string_view key, std::uint64_t generation, timedqueue::deferral d) {
    return queue_.defer(key, generation, d);
  }

  /// Cancels the entry of `key`: true when it was pending, held or blocked, or announced
  /// ("Marking for deletion") and backing off (its cancel is announced with upstream's
  /// "Cancelling deletion" event; a running one is announced when its attempt ends without a
  /// deletion). `ended_as`: what the history records (nullopt: nothing, the pod is scheduled
  /// again at once). `pod_stays` false (the pod is gone or terminating): an announced eviction
  /// is not said to be cancelled, the pod goes.
  bool cancel(std::string_view key, std::optional<outcome_result> ended_as, bool pod_stays = true);

  /// Cancels the entry of `key`, made for `pod`, with the event when it was waiting.
  /// `reason` none: no note (the caller reschedules at once).
  void cancel_with_event(std::string_view key, const pod_view& pod, cancel_reason reason);

  /// Drops the entry of `key` made for the pod with `old_uid`, which the pod with `uid`
  /// replaced: no event (that pod no longer exists; this one never had an eviction).
  void drop_foreign(std::string_view key, std::string_view old_uid, std::string_view uid);

  /// True when an eviction of `pod` (its UID) waits in the queue and has not started: then
  /// the update that makes it terminating is decided (leave_terminating), not ignored.
  [[nodiscard]] bool eviction_waits(const pod_view& pod) const;

private:
  timedqueue::timed_queue& queue_;
  eviction_runner& runner_;
  const event_outlet& outlet_;
  outcome_ledger& ledger_;
  counters& ctr_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace tec::controller::detail

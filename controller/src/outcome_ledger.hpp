#pragma once

#include "common.hpp"
#include "tec/controller/outcome.hpp"
#include "tec/timedqueue/timed_queue.hpp"

#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tec::controller::detail {

/// Which queue entry a call is about: its pod UID (the payload) and fire_at, as run_info and
/// entry_info give them. Two entries of one key with the same two are the same eviction as far
/// as the history can tell.
struct entry_id {
  std::string_view uid;
  timedqueue::time_point fire_at;
};

/// The open records of the eviction history (controller_options::on_outcome): one per queue
/// entry, opened when the entry is scheduled, completed by its attempts, and handed to the
/// observer once, by whichever of the eviction work and a cancel ends the entry first. A
/// cancel that finds an attempt in flight leaves the record to that attempt, which knows
/// whether the pod went (the sink may have sent the request before it saw the cancel).
///
/// Off (no observer): every call returns at once and nothing is kept. Thread-safe: one mutex
/// guards the table; the observer is called without it, from the thread that ended the entry
/// (a worker, under the pod's key lock, or the driver's / the sink's thread). Records of
/// entries that end by the queue's shutdown are never handed out (and go with the ledger).
/// Memory: one record per queue entry.
class outcome_ledger {
public:
  outcome_ledger(timedqueue::driver& drv, std::function<void(const eviction_outcome&)> observer)
      : drv_(drv), observer_(std::move(observer)) {}

  [[nodiscard]] bool on() const { return static_cast<bool>(observer_); }

  /// Opens the record of an entry about to be scheduled for `key` (before the schedule: its
  /// work may end it before the schedule returns). `staged` holds what is known then; its
  /// pod.uid and due are the entry's id.
  void open(std::string_view key, eviction_outcome staged);
  /// The schedule did not create the entry: drops the record open() opened last for `id`.
  void discard(std::string_view key, const entry_id& id);

  /// An attempt (`attempt`, from 1) starts, after its deferral made it wait `deferred`
  /// (`deferred_why`: "hold" or "settling", or "") and then admission control held it for
  /// `waited` (`why`: eviction_view::why's words, or "").
  void attempt_started(std::string_view key, const entry_id& id, std::uint32_t attempt,
                       std::chrono::nanoseconds waited, std::string_view why,
                       std::chrono::nanoseconds deferred = {}, std::string_view deferred_why = {});
  /// An attempt failed with `error` (`refused`: a disruption budget refused it, with
  /// `fallback` the fallbackAfter then in force). When the entry was cancelled meanwhile, this
  /// ends it as the cancel said.
  void attempt_failed(std::string_view key, const entry_id& id, std::string_view error,
                      bool refused = false, std::chrono::milliseconds fallback = {});
  /// The eviction work ended the entry with `result`.
  void ended(std::string_view key, const entry_id& id, outcome_result result);
  /// The entry was cancelled: `result` what that means for the pod (nullopt: no record, the
  /// decision schedules the pod again at once). With an attempt in flight, that attempt ends
  /// it.
  void cancelled(std::string_view key, const entry_id& id, std::optional<outcome_result> result);

  /// Tests: records open now.
  [[nodiscard]] std::size_t open_count_for_test() const;

private:
  struct open_record {
    eviction_outcome rec;
    bool in_flight = false;
    std::optional<outcome_result> cancel;  // set by a cancel that found an attempt in flight
  };
  using records = std::vector<open_record>;

  // The first record of `key` matching `id`, or null; requires mu_. `it` is set to its list.
  open_record* find(
      std::string_view key, const entry_id& id,
      std::unordered_map<std::string, records, string_hash, std::equal_to<>>::iterator& it);
  // Removes `r` (in the list `it`) and returns it; requires mu_.
  eviction_outcome take(
      std::unordered_map<std::string, records, string_hash, std::equal_to<>>::iterator it,
      open_record* r);
  // Hands `rec` to the observer, ended now with `result`; without mu_.
  void publish(eviction_outcome rec, outcome_result result) const;

  // What a step did to a record: nothing more (end false), or ended it, handed to the
  // observer with `result` (none: dropped).
  struct step_result {
    bool end = false;
    std::optional<outcome_result> result;
  };
  // Runs `step(open_record&) -> step_result` on the record of `key` matching `id` under mu_
  // (nothing when off or none matches), and ends it as the step says.
  template <class Step>
  void apply(std::string_view key, const entry_id& id, Step&& step);

  timedqueue::driver& drv_;
  const std::function<void(const eviction_outcome&)> observer_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, records, string_hash, std::equal_to<>> open_;
};

}  // namespace tec::controller::detail

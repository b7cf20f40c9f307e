#pragma once

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "tec/base/clock.hpp"
#include "tec/controller/ports.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/metrics/table.hpp"
#include "tec/writers/event_recorder.hpp"

namespace tec::writers {

struct eviction_sink_options {
  /// Add the DisruptionTarget condition before deleting (upstream does, since 1.26).
  bool disruption_condition = true;
  /// The pod cache (read only), so the condition patch is skipped when the cached pod with
  /// the eviction's UID already carries our condition, and keeps the pod's lastTransitionTime
  /// when it carries another True one. Null: every attempt patches, with lastTransitionTime
  /// now. Must outlive the sink.
  const informers::pod_store* pods = nullptr;
  /// How many UIDs whose condition patch succeeded (and whose eviction is not over) the sink
  /// remembers, so a retry after a failed DELETE does not re-patch before the watch has shown
  /// the condition. The oldest are forgotten first; forgetting one costs at most one
  /// redundant patch. About 100 bytes each.
  std::size_t remembered_patches = 4096;
  /// Whether dry-run is in force, asked at each step (the controller's, controller::dry_run():
  /// one switch for both); empty: never. In dry-run no PATCH or DELETE is sent and no event
  /// recorded: an attempt logs "dry run: would delete", counts in dry_run_deletions and
  /// reports `gone` (done, nothing deleted); an attempt already past its last check sends
  /// what it was sending. The controller does not hand evictions over in dry-run at all: this
  /// is the writer's own guard, for an attempt handed over just before the switch. Called on
  /// any thread; must be cheap and thread-safe.
  std::function<bool()> dry_run{};
  /// --fresh-node-check: before it writes anything for an eviction, the sink GETs the pod's
  /// node from the API server and goes on only when the node still carries one of the
  /// request's causes (eviction_request::causes, same key, value and effect); else it
  /// answers `stale` and writes nothing (k/k#119862). A 404 (the node is gone) and a failed
  /// read go on as without the check. See evict().
  bool fresh_node_check = false;
  /// A node's answer is reused by the checks that start within this long of when its GET was
  /// sent (and a check waits for a GET of its node in flight): one GET per node per window.
  std::chrono::milliseconds fresh_node_window{1000};
  /// Bound on one fresh read, retries included; past it the read counts as failed.
  std::chrono::milliseconds fresh_node_timeout{5000};
  /// The clock of fresh_node_window; null: the client's. Must outlive the sink.
  base::clock* clock = nullptr;
};

/// What the fresh reads of the node said, one per eviction attempt checked (the result labels
/// of fresh_node_checks_total).
inline constexpr std::array<std::string_view, 4> fresh_node_results = {
    "taint_present", "taint_gone", "node_gone", "read_failed"};

/// Counters for metrics; a consistent snapshot.
struct eviction_sink_stats {
  std::uint64_t deletions = 0;     ///< DELETE accepted (2xx).
  std::uint64_t evictions = 0;     ///< Eviction API calls accepted (2xx): the pod was deleted.
  std::uint64_t blocked = 0;       ///< Eviction API calls refused (429: a disruption budget).
  std::uint64_t already_gone = 0;  ///< Done without a delete: 404 or UID mismatch.
  std::uint64_t failures = 0;      ///< Attempts reported as failed (not counting cancelled ones).
  /// Condition patches that failed permanently (403, 422, any other 4xx): the DELETE went on.
  std::uint64_t condition_failures = 0;
  std::uint64_t conditions_patched = 0;  ///< Condition patches sent and accepted.
  /// Condition patches not sent: the pod (this UID) already carries our condition.
  std::uint64_t conditions_unchanged = 0;
  std::uint64_t cancelled = 0;  ///< Attempts stopped because the eviction was cancelled.
  /// Our DisruptionTarget conditions set to False on pods whose eviction was cancelled.
  std::uint64_t conditions_withdrawn = 0;
  /// Withdrawals that failed (logged; not retried: 1.26+'s disruption controller clears a
  /// stale condition after 2 minutes).
  std::uint64_t condition_withdrawal_failures = 0;
  /// Attempts ended without a write because dry-run was on ("would delete").
  std::uint64_t dry_run_deletions = 0;
  /// Events not handed to the recorder because dry-run was on.
  std::uint64_t dry_run_events = 0;
  /// Permanent condition patch failures, by error_reason() (the DELETE went ahead). Holds
  /// every condition_failure_reasons key from the start, at 0.
  std::map<std::string, std::uint64_t> condition_failures_by_reason;
  /// Failed attempts, by error_reason(). Holds every deletion_failure_reasons key from the
  /// start, at 0, so /metrics has those series before the first failure (Prometheus's advice:
  /// a series that appears only when it first counts breaks rate() and absent() alerts).
  std::map<std::string, std::uint64_t> failures_by_reason;
  /// --fresh-node-check: attempts checked, by what the read said (every fresh_node_results
  /// key from the start, at 0); "taint_gone" attempts wrote nothing and answered `stale`.
  std::map<std::string, std::uint64_t> fresh_node_checks;
  /// --fresh-node-check: GETs of a node sent (the other checks shared or reused one).
  std::uint64_t fresh_node_reads = 0;
  std::size_t in_flight = 0;
};

/// The error_reason() values exported at 0 before any failure: what an attempt fails with when
/// the API server refuses or is unreachable (other reasons appear when they first happen).
inline constexpr std::array<std::string_view, 6> deletion_failure_reasons = {
    "unauthorized", "forbidden", "too_many_requests",
    "server_error", "timeout",   "connection_failed"};
/// Likewise for a condition patch's permanent failures (403, 422).
inline constexpr std::array<std::string_view, 2> condition_failure_reasons = {"forbidden",
                                                                              "http_422"};

/// The controller's eviction_sink on the API client: each evict() becomes an optional
/// DisruptionTarget status patch then a DELETE with the pod's UID as precondition (or, for
/// eviction_method::evict, a POST to the Eviction API; docs/behaviour.md §8), run as a
/// coroutine so the caller never waits. Events go to an event_recorder.
///
/// Thread/ownership: evict(), record_event(), stats() and stop() may be called from any thread
/// and return at once; the work runs as coroutines on `executor`, which must be the client's
/// executor. `done` is called exactly once, on that executor. `client` (and `events`, if
/// given) must outlive every eviction in flight: call stop(), shut the client down and let the
/// executor run until idle before destroying them. The in-flight coroutines share the sink's
/// state, so destroying the sink object itself while they run is safe.
class k8s_eviction_sink final : public controller::eviction_sink {
public:
  k8s_eviction_sink(boost::asio::any_io_executor executor, k8sclient::client& c,
                    event_recorder* events, eviction_sink_options options = {});
  ~k8s_eviction_sink() override;
  k8s_eviction_sink(const k8s_eviction_sink&) = delete;
  k8s_eviction_sink& operator=(const k8s_eviction_sink&) = delete;

  /// Condition patch (if enabled and needed) then DELETE with preconditions.uid. Reports
  /// `deleted` for a 2xx DELETE, `gone` for a pod already gone (404 on either request) or
  /// replaced (409 on the DELETE, 422/409 naming metadata.uid on the patch), and `failed`
  /// with the error message otherwise.
  ///
  /// The condition follows upstream's UpdatePodCondition: no patch when the pod already has
  /// DisruptionTarget=True with our reason and message (from the cache, or this sink's own
  /// earlier patch for this UID); with another True one, a patch that keeps its
  /// lastTransitionTime; else a patch with lastTransitionTime now. A patch that fails
  /// transiently (429 or 5xx after the client's retries, a timeout, a broken connection, 401,
  /// 409) fails the attempt without a DELETE, so the queue retries it with backoff: Jobs with
  /// a podFailurePolicy must see the condition on a pod we delete. One the API refuses for
  /// good (403, 422 other than the UID cause, another 4xx) is logged, counted by reason, and
  /// the DELETE goes ahead (the condition must not block an eviction forever).
  ///
  /// With options.fresh_node_check, first of all (in both methods): a GET of the request's
  /// node, shared with the other attempts for that node (see fresh_node_window). None of
  /// request.causes on it: `stale` with a message naming them, nothing written (an info line,
  /// fresh_node_checks["taint_gone"]); the controller retries it shortly, and the watch event
  /// that removed the taint usually cancels it first. A 404 goes on: the node is gone and, as
  /// without the check, the evictions of its pods stay (docs/behaviour.md §4). A failed read
  /// (timeout, 429 or 5xx after the client's retries, an undecodable body) goes on too, as
  /// without the check: the check must not stop evictions while the API server is struggling,
  /// and the writes that follow fail and are retried the same way if it is down. An empty
  /// request.node or request.causes: no check.
  ///
  /// A request whose `cancelled()` turns true before its PATCH or DELETE is sent sends
  /// nothing more: `failed` with "cancelled", no warning, not counted as a failure.
  void evict(controller::eviction_request request,
             std::function<void(controller::eviction_result)> done) override;

  /// Hands the event to the recorder (never blocks); dropped when there is none, or in
  /// dry-run (counted in dry_run_events; eviction_sink_options::dry_run).
  void record_event(const controller::pod_ref& pod, controller::event_kind kind,
                    std::string_view detail) override;
  /// A Node event (hold_ignored): in the "default" namespace, as the kubelet's node events.
  /// Withdraws our DisruptionTarget condition from `pod` (status False, reason and message
  /// removed) when this sink added it (remembered by UID) or the cached pod shows ours; nothing
  /// in dry-run, without --disruption-condition, or once stopped. Sent in the background
  /// (counted in in_flight, so wait_idle() waits for it).
  void eviction_cancelled(const controller::pod_ref& pod) override;
  void record_node_event(std::string_view node, controller::event_kind kind,
                         std::string_view detail) override;

  /// Refuses new evictions from now on (done() is called with failed, "shutting down").
  void stop();

  /// Blocks until no eviction is in flight, or for `budget` at most; true when none is. Wakes
  /// as the last one completes (no polling), so a shutdown waits no longer than it must.
  /// Never call it on the executor (the evictions complete there). Any other thread.
  [[nodiscard]] bool wait_idle(std::chrono::milliseconds budget) const;

  [[nodiscard]] eviction_sink_stats stats() const;
  /// What the sink counts, for registry::publish(): pod_deletions_total (DELETEs and
  /// evictions), pod_evictions_total, pod_deletion_failures_total, disruption_condition_
  /// failures_total, fresh_node_checks_total, fresh_node_reads_total, and its share of
  /// dry_run_pod_deletions_total (declared by the controller). The rows read this sink: it
  /// must outlive their use. Any thread.
  [[nodiscard]] metrics::table metric_table() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace tec::writers

#pragma once

// The NoExecute taint manager: decides, for every pod on a node with NoExecute taints, whether
// and when it is evicted, and drives those evictions through a timed_queue and an
// eviction_sink. No I/O of its own: the informers feed it, the sink acts.
//
// Pipeline: node_updated()/pod_updated() filter out irrelevant updates and put the rest on one
// of N coalescing per-worker queues, chosen by shard_of(node name), so a node and all of its
// pods are handled by the same worker, in order (its node updates before each pod update). A
// node has at most one waiting update and a pod at most one per node name, so memory is
// bounded by the nodes and pods and a busy worker never blocks the others (upstream's blocking
// channel send stalls every worker).
//
// Semantics: upstream's (kubernetes pkg/controller/tainteviction; docs/behaviour.md), with the
// differences docs/design.md lists ("Where we differ from upstream"): UID preconditions on
// every queue entry, durable retry, generation tokens, saturating tolerationSeconds, no second
// delete of a terminating pod (terminating_pods_skipped_total). Two more: an untolerated
// taint found while this pod's eviction already runs or backs off leaves it alone (no cancel +
// duplicate eviction), and decisions for one pod key are made under a striped lock, so two
// workers (old and new node of a re-created pod) never interleave lookup and cancel.
//
// Threading: node_updated(), pod_updated(), stats(), tainted_taints() and the other readers may
// be called from any thread, concurrently. In threaded mode start() spawns the worker threads;
// in manual mode nothing runs until run_until_idle_for_test(). The eviction work runs on the
// timed queue's driver (driver::post); sink callbacks may come from any thread.
//
// Errors: a pod_index or sink that throws (std::exception) never takes a thread down. In the
// eviction work the attempt counts as failed and is retried; in a worker the update is logged
// and dropped, and the next update for that node or pod decides from the latest state.
//
// Ownership: the pod_index, eviction_sink and driver are borrowed and must outlive the
// controller. shutdown() (also run by the destructor) stops the workers and shuts the timed
// queue down, which waits for evictions in flight: the sink must eventually call (or drop)
// every `done` callback it holds.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/clock.hpp"
#include "tec/controller/matching.hpp"
#include "tec/controller/model.hpp"
#include "tec/controller/outcome.hpp"
#include "tec/controller/policy.hpp"
#include "tec/controller/ports.hpp"
#include "tec/metrics/table.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::controller {

/// 32-bit FNV-1a of `s` (the hash upstream shards by).
[[nodiscard]] std::uint32_t fnv1a_32(std::string_view s) noexcept;

/// The worker a node (and every pod on it) is handled by. `workers` must be > 0.
[[nodiscard]] std::size_t shard_of(std::string_view node_name, std::size_t workers) noexcept;

/// The NoExecute taints of `taints`, in order.
[[nodiscard]] std::vector<taint> no_execute_taints(const std::vector<taint>& taints);

/// The most bytes of an API error message a TaintEvictionFailed event carries.
inline constexpr std::size_t max_event_detail = 1024;

/// `text` made fit for an Event message: control characters (a forged log line, a terminal
/// escape) become spaces and it is clipped to `max_event_detail` bytes, at a UTF-8 character
/// boundary, with "..." marking the cut.
[[nodiscard]] std::string event_detail(std::string_view text);

/// Where a node update comes from.
enum class update_origin : std::uint8_t {
  watch,   ///< A change the informer saw.
  replay,  ///< The replay of the caches when this process starts acting (leader, synced).
};

/// What a decision observer (controller_options::on_decision) is told.
enum class decision_kind : std::uint8_t {
  scheduled,     ///< An eviction was scheduled (`due`: when it fires; now when untolerated).
  would_delete,  ///< Dry-run: an eviction fired and would have deleted the pod (`at`).
  cancelled,     ///< A pending eviction was cancelled (`reason`), or found the pod gone.
};

/// Why a pending eviction was cancelled.
enum class cancel_reason : std::uint8_t {
  none,       ///< Not a cancellation.
  untainted,  ///< The node lost its NoExecute taints, or the pod now tolerates them forever.
  pod_gone,   ///< The pod was deleted (at intake, or found gone when its eviction fired).
  replaced,   ///< The name now belongs to another pod (another UID): the entry was dropped.
};

/// Why a pod on a tainted node is not evicted although its tolerations would let it go: the
/// policy's `exclude` and `taints` rules and the opt-out annotation (README "Scoping").
enum class skip_reason : std::uint8_t {
  annotation,            ///< The pod has taint-eviction-controller/exclude: "true".
  namespace_annotation,  ///< Its namespace has that annotation.
  namespace_,            ///< exclude.namespaces lists its namespace.
  pod_selector,          ///< exclude.podSelector selects it.
  mirror,                ///< exclude.mirrorPods and it is a mirror pod.
  terminal,              ///< exclude.terminalPods and it has succeeded or failed.
  daemon_set,            ///< exclude.daemonSetPods and a DaemonSet controls it.
  taint_ignored,         ///< Every NoExecute taint of its node has a rule with action Ignore.
};
inline constexpr std::size_t skip_reason_count = 8;

/// "annotation", "namespace_annotation", "namespace", "pod_selector", "mirror", "terminal",
/// "daemonset", "taint_ignored" (the metric's label values).
[[nodiscard]] std::string_view to_string(skip_reason reason) noexcept;

/// "scheduled", "would_delete", "cancelled"; "untainted", "pod_gone", "replaced", "none".
[[nodiscard]] std::string_view to_string(decision_kind kind) noexcept;
[[nodiscard]] std::string_view to_string(cancel_reason reason) noexcept;

/// One decision, as the observer sees it. Times are on the driver's clock.
struct decision_note {
  decision_kind kind = decision_kind::scheduled;
  pod_ref pod;  ///< The pod (its UID: the one the eviction was made for).
  /// The pod's node and that node's NoExecute taints (scheduled only; empty otherwise).
  std::string node;
  std::vector<taint> taints;
  timedqueue::time_point at{};   ///< When the decision was taken (the driver's now).
  timedqueue::time_point due{};  ///< scheduled: when it fires; cancelled: when it would have.
  cancel_reason reason = cancel_reason::none;
};

struct controller_options {
  /// Number of workers (upstream: 8). 0 is treated as 1.
  std::size_t workers = 8;
  /// true: start() runs one std::thread per worker. false (tests): nothing runs until
  /// run_until_idle_for_test() is called.
  bool threaded = true;
  /// Backoff of failed evictions (durable retry).
  timedqueue::retry_policy retry{};
  /// Called after each accepted DELETE (eviction_status::deleted) with the time from when it
  /// was due to when it was accepted (the deletion-duration histogram). From the sink's thread.
  std::function<void(std::chrono::nanoseconds)> on_deleted;
  /// An eviction whose attempts failed this many times in a row is stuck: it is still retried,
  /// and it is made visible (a Warning TaintEvictionFailed event with the last error, a
  /// warning in the log, controller_stats::stuck_evictions). 0 is treated as 1.
  std::uint32_t stuck_after = 5;
  /// While a stuck eviction keeps failing, its event and warning are repeated at most this
  /// often (on the driver's clock).
  timedqueue::duration stuck_event_interval = std::chrono::minutes(10);
  /// Called when an eviction starts after admission control held it (rate limit, in-flight
  /// caps, storm breaker), with how long it waited since it was due. From the queue's thread.
  std::function<void(std::chrono::nanoseconds)> on_waited;
  /// Called when the storm breaker opens or closes (see storm_breaker_policy), with the
  /// tainted and total node counts that decided it. From the thread that delivered the node
  /// update or the policy; must be quick and must not call back into the controller.
  std::function<void(bool open, std::size_t tainted_nodes, std::size_t nodes)> on_breaker;
  /// Decision observer (shadow mode; see decision_kind). Called from a worker or the driver's
  /// thread, possibly under a per-pod lock: must be quick, must not throw and must not call
  /// back into the controller. Empty: nothing is built.
  std::function<void(const decision_note&)> on_decision;
  /// Outcome observer (the eviction history; see eviction_outcome): called once for each
  /// queue entry that ends, except by shutdown. From a worker (a cancel, under the pod's key
  /// lock), the driver's thread or the sink's: must be quick, must not throw and must not
  /// call back into the controller. Empty: no record is kept or built.
  std::function<void(const eviction_outcome&)> on_outcome;
  /// Record a Normal TaintEvictionScheduled event (not upstream's) once per queue entry
  /// scheduled for a later time, naming the taint, the tolerationSeconds used and the due time
  /// (clock->wall() + the delay). None in dry-run (no event is).
  bool scheduled_events = true;
  /// The policy to start with (set_policy() replaces it later). Default: none (upstream).
  eviction_policy policy;
  /// The replay (update_origin::replay) counts a newly scheduled eviction's toleration from
  /// when an uninterrupted controller would have started it (countdown_since()) instead of from
  /// now, so a restart or failover does not restart every countdown. Other updates count from
  /// now.
  bool deadlines_from_taint_time = true;
  /// The wall clock of countdown_since() and of the due times in events; its now() should be
  /// the driver's. Empty: base::real_clock().
  std::shared_ptr<base::clock> clock;
  /// True when the namespace carries the opt-out annotation (taint-eviction-controller/
  /// exclude: "true"): its pods are never evicted. Called from the workers, concurrently:
  /// must be thread-safe, quick, must not throw and must not call back into the controller.
  /// When it changes its answer for a namespace, call redecide_all(). Empty: none opts out.
  std::function<bool(std::string_view namespace_)> namespace_opted_out;
};

/// One eviction the timed queue holds, as controller::evictions() lists it.
struct eviction_view {
  pod_ref pod;       ///< Namespace and name (the queue key); uid: the one it was made for.
  std::string node;  ///< The pod's node when it was scheduled.
  /// That node's NoExecute taints now (tainted_taints()); empty when it is no longer tainted.
  std::vector<taint> taints;
  timedqueue::time_point due{};  ///< When it was (or is) due, on the driver's clock.
  /// "pending", "waiting" (due, held by the policy), "running", "retrying" (backing off) or
  /// "blocked" (Evict mode: the Eviction API refuses it). Both point at string literals.
  std::string_view state;
  /// Why it waits: "" (it does not), "rate_limit", "in_flight_limit_node",
  /// "in_flight_limit_namespace", "storm_breaker", "hold" (a hold-until annotation),
  /// "settling" (the storm breaker's settleSeconds) (waiting), "backoff" (retrying) or "pdb"
  /// (blocked: a PodDisruptionBudget).
  std::string_view why;
  std::uint32_t attempts = 0;  ///< Attempts started so far.
  std::string last_error;      ///< The last failed attempt's error, as the API gave it.
  /// Blocked: since the first refusal, and when the pod is deleted anyway (none: never).
  std::optional<timedqueue::time_point> blocked_since;
  std::optional<timedqueue::time_point> fallback_at;
};

/// What controller::evictions() returns.
struct eviction_list {
  std::size_t total = 0;                 ///< Evictions in the queue, listed or not.
  std::vector<eviction_view> evictions;  ///< The first ones in due order.
};

/// The controller's state now, for log lines and tests; what it counts it publishes
/// (controller::metric_table()).
struct controller_stats {
  std::size_t tainted_nodes = 0;
  /// The storm breaker: open or not, the nodes carrying a NoExecute taint it counts, and the
  /// nodes it knows.
  bool breaker_open = false;
  std::size_t breaker_tainted_nodes = 0;
  std::size_t nodes = 0;
  /// Evictions that failed at least `stuck_after` (5) times in a row and are still retried:
  /// one leaves it as soon as it succeeds or is cancelled.
  std::size_t stuck_evictions = 0;
  /// Evict mode: evictions the Eviction API refuses right now (a disruption budget), still
  /// retried.
  std::size_t blocked_evictions = 0;
  /// Evictions due and waiting for a hold-until annotation (README "Holds"), and for the
  /// storm breaker's settling time.
  std::size_t held_evictions = 0;
  std::size_t settling_evictions = 0;
  std::vector<std::size_t> worker_queue_depth;  ///< Updates waiting, per worker.
  timedqueue::queue_stats queue;
};

/// See the file comment.
class controller {
public:
  /// Builds the controller and its timed queue on `drv`. Does not start threads.
  controller(const pod_index& pods, eviction_sink& sink, timedqueue::driver& drv,
             controller_options options = {});
  ~controller();
  controller(const controller&) = delete;
  controller& operator=(const controller&) = delete;

  /// Threaded mode: starts the worker threads (once). Manual mode: no-op.
  void start();
  /// Stops the workers (updates still waiting are dropped), then shuts the timed queue down
  /// (waits for evictions in flight). Idempotent; must not be called from a worker, from the
  /// eviction work, nor from a thread that has to deliver a pending `done` (e.g. the only
  /// thread running the HTTP requests the sink made): that would deadlock.
  void shutdown();

  /// A node was added (old_node null), updated, or deleted (new_node null). Returns true when
  /// the update was enqueued, false when ignored (NoExecute taints and hold-until annotation
  /// unchanged, only the annotation changed on a node without NoExecute taints, both null, or
  /// after shutdown). `origin` replay: the update is part of the replay when this process
  /// starts acting (see controller_options::deadlines_from_taint_time). Any thread.
  bool node_updated(const node_view* old_node, const node_view* new_node,
                    update_origin origin = update_origin::watch);
  /// A pod was added (old_pod null), updated, or deleted (new_pod null). Ignored when its UID,
  /// nodeName, tolerations, opt-out and hold-until annotation (under a scoping policy also labels,
  /// phase and owner) are unchanged (becoming terminating counts only while an eviction of it
  /// waits), or when it is unscheduled (unless it replaced a scheduled pod of that name, whose
  /// eviction is then dropped). Returns true when enqueued. Any thread.
  bool pod_updated(const pod_view* old_pod, const pod_view* new_pod);

  /// Tests, manual mode only: processes waiting updates on the calling thread until none is
  /// left (each worker's node updates before its pod updates). Returns how many were handled.
  std::size_t run_until_idle_for_test();
  /// Threaded mode: waits (bounded) until every enqueued update has been handled. Returns
  /// false on timeout. Evictions the handling started may still be running on the driver.
  bool wait_idle(std::chrono::milliseconds timeout);

  /// Replaces the policy (a reload): admission limits apply to what is held at once, the
  /// storm breaker is re-evaluated, dry-run applies to the next eviction that starts. When
  /// `exclude` or `taints` changed, redecide_all() (evictions already scheduled keep their
  /// time). Any thread.
  void set_policy(const eviction_policy& policy);
  /// Decides every pod on every tainted node again, as a node update would (the update is
  /// merged into one already waiting for that node). Any thread.
  void redecide_all();
  [[nodiscard]] eviction_policy policy() const;
  /// Whether dry-run is in force (the policy's dry_run): the one switch, which the eviction
  /// sink and the daemon's Events read too. Lock-free: any thread, also from the controller's
  /// own callbacks (on_breaker).
  [[nodiscard]] bool dry_run() const noexcept;

  /// The NoExecute taints recorded for `node`, or nullopt when it is not in the tainted
  /// table. Any thread.
  [[nodiscard]] std::optional<std::vector<taint>> tainted_taints(std::string_view node) const;
  [[nodiscard]] controller_stats stats() const;
  /// What the controller counts, each counter declared beside the counting, and its gauges
  /// (tainted_nodes, stuck_evictions, evictions_waiting, held_evictions, settling_evictions,
  /// storm_breaker_open, evictions_blocked), for registry::publish() and tests
  /// (metrics::read()). The rows read this controller: it must outlive their use. Any thread.
  [[nodiscard]] metrics::table metric_table() const;
  /// Tests: the timed queue (lookup() by "namespace/name" shows a pod's eviction). Any thread.
  [[nodiscard]] const timedqueue::timed_queue& queue_for_test() const;
  /// The evictions the queue holds (at most `limit` of them, in due order, from one
  /// timed_queue::snapshot()), each with its node's NoExecute taints now. No I/O; copies
  /// everything. Any thread.
  [[nodiscard]] eviction_list evictions(std::size_t limit) const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tec::controller

#pragma once

// The controller's two seams to the outside world. The informers implement pod_index; the
// daemon implements eviction_sink on top of the API client. Tests substitute fakes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/controller/model.hpp"

namespace tec::controller {

/// Read-only view of the pod cache. Called from the controller's worker threads, concurrently:
/// implementations must be thread-safe. Returns copies so no lock is held by the caller.
class pod_index {
public:
  virtual ~pod_index() = default;
  /// Pods whose spec.nodeName is `node`.
  [[nodiscard]] virtual std::vector<pod_view> pods_on_node(std::string_view node) const = 0;
  /// The pod known under namespace/name, if any.
  [[nodiscard]] virtual std::optional<pod_view> get_pod(std::string_view namespace_,
                                                        std::string_view name) const = 0;
};

/// Identifies the pod an eviction or event is for. The UID pins the exact pod object: an
/// eviction made for one pod never deletes a re-created pod with the same name.
struct pod_ref {
  std::string namespace_;
  std::string name;
  std::string uid;

  friend bool operator==(const pod_ref&, const pod_ref&) = default;
};

enum class event_kind : std::uint8_t {
  marking_for_deletion,  ///< Normal TaintManagerEviction "Marking for deletion Pod <ns>/<name>"
  cancelling_deletion,   ///< Normal TaintManagerEviction "Cancelling deletion of Pod <ns>/<name>"
  /// Warning TaintEvictionFailed: an eviction keeps failing; the detail is the API's message.
  eviction_failed,
  /// Normal TaintEvictionScheduled: an eviction was scheduled for a later time (a toleration
  /// with tolerationSeconds); the detail is scheduled_event_detail().
  eviction_scheduled,
  /// Warning TaintEvictionBlocked: the Eviction API refused the eviction (a disruption
  /// budget); the detail is the API's message and what happens next.
  eviction_blocked,
  /// Warning TaintEvictionFallback: an eviction refused for fallbackAfter is done by DELETE;
  /// the detail says for how long it was refused.
  eviction_fallback,
  /// Warning TaintEvictionHoldIgnored: a hold-until annotation (on a pod, or on a node with
  /// eviction_sink::record_node_event) is malformed or already past; the detail says which.
  hold_ignored,
  /// Normal TaintEvictionHeld: a hold-until annotation keeps the pod's eviction waiting; the
  /// detail says until when and whose annotation it is.
  eviction_held,
};

/// The Event fields the sink writes (core/v1 Event). The first two kinds are upstream's, so
/// operators' filters keep working: type `Normal`, reason `TaintManagerEviction`,
/// involvedObject {apiVersion v1, kind Pod, namespace, name, uid} and the messages below.
inline constexpr std::string_view event_type = "Normal";
inline constexpr std::string_view event_reason = "TaintManagerEviction";

/// The Event type of `kind`: "Normal" or "Warning".
[[nodiscard]] std::string_view event_type_of(event_kind kind);

/// The Event reason of `kind`: event_reason, or TaintEvictionFailed, TaintEvictionScheduled,
/// TaintEvictionBlocked, TaintEvictionFallback.
[[nodiscard]] std::string_view event_reason_of(event_kind kind);

/// "Marking for deletion Pod <ns>/<name>", "Cancelling deletion of Pod <ns>/<name>",
/// "Cannot delete Pod <ns>/<name>: <detail>" (eviction_failed; `detail` is the last error), or
/// "Pod <ns>/<name> will be evicted at <detail>" (eviction_scheduled; `detail` is
/// scheduled_event_detail()), "Pod <ns>/<name> not evicted yet: <detail>" (eviction_blocked)
/// or "Deleting Pod <ns>/<name> <detail>" (eviction_fallback), "Ignoring the hold-until
/// annotation of <ns>/<name>: <detail>" (hold_ignored; just "<name>" for a node, whose
/// namespace is empty), "Eviction of Pod <ns>/<name> held: <detail>" (eviction_held).
[[nodiscard]] std::string event_message(const pod_ref& pod, event_kind kind,
                                        std::string_view detail = {});

/// The detail of an eviction_scheduled event: "<due>: taint <key>[=<value>]:NoExecute,
/// tolerationSeconds <seconds>", with `due` in RFC 3339 UTC to the second
/// ("2026-11-23T15:40:00Z"). `t` is the taint whose toleration set the time.
[[nodiscard]] std::string scheduled_event_detail(std::chrono::system_clock::time_point due,
                                                 const taint& t, std::int64_t seconds);

/// A taint as "key=value:NoExecute" ("key:NoExecute" without a value; ":Other" for another
/// effect).
[[nodiscard]] std::string describe_taint(const taint& t);

/// The result of one eviction attempt.
enum class eviction_status : std::uint8_t {
  deleted,  ///< The DELETE was accepted (2xx): the pod is terminating or gone.
  gone,     ///< Nothing to delete: the pod is already gone (404) or the name belongs to
            ///< another pod now (409 / UID mismatch). Done, but no deletion of ours.
  failed,   ///< The attempt failed; the timed queue retries with backoff.
  /// eviction_method::evict only: the Eviction API refused (429, a disruption budget says no;
  /// `error` is its message). Retried with backoff as `failed`, and counted as blocked.
  blocked,
  /// The sink's fresh read of the node (k8s_eviction_sink, --fresh-node-check) found none of
  /// eviction_request::causes on it: the cache the decision came from is behind (k/k#119862).
  /// Nothing was written. Not a failure: retried soon (the watch event that removed the taint
  /// will usually cancel the eviction first), without counting towards "stuck".
  stale,
};

/// How the sink removes the pod.
enum class eviction_method : std::uint8_t {
  delete_pod,  ///< DisruptionTarget condition + DELETE with preconditions.uid (upstream's).
  /// POST pods/{name}/eviction (policy/v1, or v1beta1 where only that is served) with
  /// preconditions.uid: the API server checks the pod's disruption budgets. No condition of
  /// ours (the API server adds its own, 1.26+, when it evicts).
  evict,
};

struct eviction_result {
  eviction_status status = eviction_status::deleted;
  std::string error;  ///< For failed: why.
};

/// One eviction attempt as the sink receives it.
struct eviction_request {
  pod_ref pod;
  /// True once the eviction was cancelled (taint removed, pod gone) or the controller stops.
  /// The sink checks it before every request it sends (after any wait for the rate limiter
  /// or a connection): a cancelled eviction sends nothing more. Empty means never cancelled.
  /// Callable from any thread.
  std::function<bool()> cancelled;
  /// This eviction has already been reported as stuck (controller_options::stuck_after failed
  /// attempts in a row: a Warning event and a log line, repeated at most every
  /// stuck_event_interval). The sink logs this attempt's failure at debug level instead of as
  /// a warning, so a pod retried for hours does not fill the log.
  bool stuck = false;
  eviction_method method = eviction_method::delete_pod;
  /// The pod's node (spec.nodeName) and the NoExecute taints the cache shows there that make
  /// this eviction right (evicting_taints(): not ignored by a rule, not tolerated forever). A
  /// sink may confirm on a fresh read that the node still carries at least one of them
  /// (same key, value and effect) before it writes, and answer `stale` when it does not.
  /// Empty `causes` (the cache shows no such taint): nothing to confirm.
  std::string node{};
  std::vector<taint> causes{};
};

/// Where the controller's decisions go. Called from the controller's worker threads and from
/// the timed queue's executor, concurrently; implementations must be thread-safe and must not
/// block (queue the request and return).
class eviction_sink {
public:
  virtual ~eviction_sink() = default;
  /// Evict (status condition + DELETE with preconditions.uid) the pod; call `done` once, from
  /// any thread, when the attempt finished.
  virtual void evict(eviction_request request, std::function<void(eviction_result)> done) = 0;
  /// Record a core/v1 Event for the pod (see event_kind; `detail` feeds eviction_failed's
  /// message and is empty otherwise).
  virtual void record_event(const pod_ref& pod, event_kind kind, std::string_view detail) = 0;
  /// An eviction of `pod` that had started (announced with "Marking for deletion") was
  /// cancelled and deleted nothing: the pod stays. The sink withdraws what it wrote for it (the
  /// DisruptionTarget condition). Any thread; must not block. The default does nothing.
  virtual void eviction_cancelled(const pod_ref& pod) { static_cast<void>(pod); }
  /// Record a core/v1 Event about the node `node` (hold_ignored only). The default records
  /// nothing (a sink that writes no node events).
  virtual void record_node_event(std::string_view node, event_kind kind, std::string_view detail) {
    static_cast<void>(node);
    static_cast<void>(kind);
    static_cast<void>(detail);
  }
};

}  // namespace tec::controller

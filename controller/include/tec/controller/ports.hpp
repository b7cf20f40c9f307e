#pragma once

// The controller's two seams to the outside world. The informers implement pod_index; the
// daemon implements eviction_sink on top of the API client. Tests substitute fakes.

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
  marking_for_deletion,  ///< "Marking for deletion Pod <ns>/<name>"
  cancelling_deletion,   ///< "Cancelling deletion of Pod <ns>/<name>"
};

/// The Event fields the sink writes (core/v1 Event, compatible with upstream's): type
/// `Normal`, reason `TaintManagerEviction`, involvedObject {apiVersion v1, kind Pod,
/// namespace, name, uid} and the message below.
inline constexpr std::string_view event_type = "Normal";
inline constexpr std::string_view event_reason = "TaintManagerEviction";

/// "Marking for deletion Pod <ns>/<name>" or "Cancelling deletion of Pod <ns>/<name>".
[[nodiscard]] inline std::string event_message(const pod_ref& pod, event_kind kind) {
  std::string msg(kind == event_kind::marking_for_deletion ? "Marking for deletion Pod "
                                                           : "Cancelling deletion of Pod ");
  msg.append(pod.namespace_).push_back('/');
  msg.append(pod.name);
  return msg;
}

/// The result of one eviction attempt.
enum class eviction_status : std::uint8_t {
  deleted,  ///< The DELETE was accepted (or the pod was already gone: 404, or UID mismatch: 409).
  failed,   ///< Transient failure; the timed queue retries with backoff.
};

struct eviction_result {
  eviction_status status = eviction_status::deleted;
  std::string error;  ///< For failed: why.
};

/// Where the controller's decisions go. Called from the controller's worker threads and from
/// the timed queue's executor, concurrently; implementations must be thread-safe and must not
/// block (queue the request and return).
class eviction_sink {
public:
  virtual ~eviction_sink() = default;
  /// Evict (status condition + DELETE with preconditions.uid) the pod; call `done` once, from
  /// any thread, when the attempt finished.
  virtual void evict(const pod_ref& pod, std::function<void(eviction_result)> done) = 0;
  /// Record a core/v1 Event (type Normal, reason TaintManagerEviction) for the pod.
  virtual void record_event(const pod_ref& pod, event_kind kind) = 0;
};

}  // namespace tec::controller

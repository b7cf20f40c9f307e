#pragma once

// The two pod writes an eviction makes: the DisruptionTarget status condition and the DELETE
// with a UID precondition (docs/behaviour.md §8). Plus the
// small helpers every writer in k8sclient shares: API error values from a non-2xx response,
// RFC 3339 timestamps and path-segment escaping.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "tec/k8s/client.hpp"
#include "tec/k8s/result.hpp"

namespace tec::k8s {

/// The error value for a non-2xx response: errc from the status (401, 403, 404, 409, 410, 429,
/// 5xx, else http_status), http_status set, and a message "<what>: <status> <reason>: <the
/// Status object's message>" (the body, truncated, when it is not a Status). `what` names the
/// request, e.g. "DELETE pod ns/name"; it must not contain secrets.
error api_error(std::string_view what, const response& resp);

/// The errc a non-2xx HTTP status maps to.
errc errc_for_status(unsigned status) noexcept;

/// A short, stable label for an error (for metrics labels and logs), e.g. "forbidden",
/// "timeout", "http_422".
std::string error_reason(const error& err);

/// RFC 3339 in UTC: "2024-05-01T12:00:00Z" (metav1.Time) or, with `microseconds`,
/// "2024-05-01T12:00:00.123456Z" (metav1.MicroTime).
std::string format_rfc3339(std::chrono::system_clock::time_point t, bool microseconds = false);

/// Percent-encodes everything but RFC 3986 unreserved characters, so a name can be put in a
/// URL path. Kubernetes names never need it; it keeps a bad name from changing the path.
std::string escape_path_segment(std::string_view segment);

/// How a DELETE with a UID precondition ended when it did not fail.
enum class delete_outcome : std::uint8_t {
  deleted,       ///< 2xx: accepted; the pod now has a deletionTimestamp (or is gone).
  not_found,     ///< 404: the pod is already gone.
  uid_mismatch,  ///< 409: a pod of that name exists, but it is another object (re-created).
};

/// How the DisruptionTarget condition patch ended when it did not fail.
enum class patch_outcome : std::uint8_t {
  patched,       ///< 2xx: the condition is on the pod.
  not_found,     ///< 404: the pod is gone; there is nothing left to delete.
  uid_mismatch,  ///< 422/409 naming metadata.uid: the name now belongs to another pod.
};

/// The DELETE request: `/api/v1/namespaces/{ns}/pods/{name}` with DeleteOptions carrying
/// preconditions.uid; idempotent (a resend after a network error cannot hit another pod).
request make_delete_pod_request(std::string_view ns, std::string_view name, std::string_view uid);

/// The status patch adding DisruptionTarget=True (reason DeletionByTaintManager), as a strategic
/// merge patch on `pods/{name}/status`. Conditions merge by `type`, so no GET is needed to
/// build it and other conditions are kept. The patch also carries `metadata.uid`: the
/// apiserver treats uid as immutable, so when the name now belongs to a re-created pod the
/// patch is rejected (422 Invalid, cause field "metadata.uid") instead of marking the wrong
/// pod. This is what upstream's PatchPodStatus relies on too.
///
/// `transition_time` is the condition's lastTransitionTime; nullopt leaves it out, so the
/// merge keeps the pod's own: for a condition already True (set by another component, with
/// another reason or message), where upstream's UpdatePodCondition keeps the old time and
/// its two-way patch does not mention it.
request make_disruption_condition_request(
    std::string_view ns, std::string_view name, std::string_view uid,
    std::optional<std::chrono::system_clock::time_point> transition_time);

/// Issues pod writes through a client.
///
/// Thread/ownership: holds a reference to `client`, which must outlive every coroutine started
/// from this object. Stateless otherwise: the coroutines may run concurrently, on the client's
/// executor (co_spawn them there).
class pod_writer {
public:
  using wall_clock = std::function<std::chrono::system_clock::time_point()>;

  explicit pod_writer(
      client& c, wall_clock now = [] { return std::chrono::system_clock::now(); });

  /// DELETE with preconditions.uid. 2xx, 404 and 409 are outcomes; any other status or a
  /// transport failure is an error value (status, and the server's Status message).
  /// `cancelled` (optional) withdraws the request while it waits (see request::cancelled).
  boost::asio::awaitable<result<delete_outcome>> delete_pod(std::string ns, std::string name,
                                                            std::string uid,
                                                            std::function<bool()> cancelled = {});

  /// Adds the DisruptionTarget condition (see make_disruption_condition_request) with
  /// lastTransitionTime now, or, with `keep_transition_time`, without one (the pod's own is
  /// kept: its condition is already True). Whether to patch at all is the caller's decision
  /// (k8s_eviction_sink reads the cached pod instead of GETting it as upstream does).
  /// `cancelled` (optional) withdraws the request while it waits (see request::cancelled).
  boost::asio::awaitable<result<patch_outcome>> add_disruption_condition(
      std::string ns, std::string name, std::string uid, std::function<bool()> cancelled = {},
      bool keep_transition_time = false);

private:
  client& client_;
  wall_clock now_;
};

}  // namespace tec::k8s

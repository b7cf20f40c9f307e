#pragma once

// The pod writes an eviction makes: the DisruptionTarget status condition, then the DELETE
// with a UID precondition or the Eviction API's POST (docs/behaviour.md §8).

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "tec/base/clock.hpp"
#include "tec/base/result.hpp"
#include "tec/k8sclient/client.hpp"

namespace tec::writers {

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

/// How a POST to the Eviction API ended when it did not fail.
enum class evict_outcome : std::uint8_t {
  evicted,       ///< 2xx: the API server deleted the pod (it has a deletionTimestamp, or is gone).
  blocked,       ///< 429: a disruption budget (or its not yet observed status) refuses it.
  not_found,     ///< 404: the pod is already gone.
  uid_mismatch,  ///< 409 naming the UID precondition: the name belongs to another pod now.
};

struct evict_answer {
  evict_outcome outcome = evict_outcome::evicted;
  std::string message;  ///< blocked: the API server's message (clipped, printable).
};

/// The POST `/api/v1/namespaces/{ns}/pods/{name}/eviction` of an Eviction in `api_version`
/// whose deleteOptions carry preconditions.uid. Not idempotent for the client (a resent
/// eviction may be refused where the first passed, so it is not resent after a network error;
/// the timed queue retries the attempt).
k8sclient::request make_evict_pod_request(std::string_view ns, std::string_view name,
                                          std::string_view uid, std::string_view api_version);

/// The group/version of the `pods/eviction` subresource in the `GET /api/v1` discovery
/// document `body` ("policy/v1", "policy/v1beta1"), or nullopt when it is not listed or the
/// body is not a discovery document.
std::optional<std::string> eviction_version_in_discovery(std::string_view body);

/// What a DELETE accepts: the deleted pod's metadata only (PartialObjectMetadata, which the API
/// server has served on every endpoint since 1.15), JSON otherwise. The answer's body is read
/// only for an error (a Status, never transformed): a whole pod is several times the bytes to
/// encode, send and receive, on the API server's CPU, for nothing.
inline constexpr const char* delete_accept =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// The DELETE request: `/api/v1/namespaces/{ns}/pods/{name}` with DeleteOptions carrying
/// preconditions.uid; idempotent (a resend after a network error cannot hit another pod);
/// accepting delete_accept.
k8sclient::request make_delete_pod_request(std::string_view ns, std::string_view name,
                                           std::string_view uid);

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
///
/// `observed_generation`: the condition's observedGeneration (the pod's metadata.generation),
/// as upstream sets it since 1.33 (k/k#130650); nullopt leaves it out (servers whose schema
/// has no such field: condition_schema_has_observed_generation()).
k8sclient::request make_disruption_condition_request(
    std::string_view ns, std::string_view name, std::string_view uid,
    std::optional<std::chrono::system_clock::time_point> transition_time,
    std::optional<std::int64_t> observed_generation = std::nullopt);

/// The strategic merge patch of pod `ns/name`'s status that withdraws our DisruptionTarget
/// condition from a pod that stays (its eviction was cancelled after the condition went on):
/// status False, lastTransitionTime `transition_time`, reason and message removed (null), as
/// upstream's disruption controller (1.26+) leaves a stale one. metadata.uid makes the API
/// refuse it for a re-created pod of that name.
k8sclient::request make_disruption_withdrawal_request(
    std::string_view ns, std::string_view name, std::string_view uid,
    std::chrono::system_clock::time_point transition_time);

/// Where the core group's OpenAPI v3 document is (1.24+; 404 before, and where the server
/// does not serve OpenAPI v3).
inline constexpr std::string_view openapi_v3_core_path = "/openapi/v3/api/v1";

/// Whether the PodCondition schema (components.schemas["io.k8s.api.core.v1.PodCondition"]) of
/// the OpenAPI v3 document `body` has an observedGeneration property; nullopt when `body` is
/// not such a document (no PodCondition schema, or not JSON). Streams the document (SAX, no
/// tree: the core group's is about 1 MB) and stops at the answer.
std::optional<bool> condition_schema_has_observed_generation(std::string_view body);

/// Issues pod writes through a client.
///
/// Thread/ownership: holds a reference to `client`, which must outlive every coroutine started
/// from this object. Stateless otherwise: the coroutines may run concurrently, on the client's
/// executor (co_spawn them there). A write's `cancelled` (optional) withdraws its request
/// while it waits (see request::cancelled).
class pod_writer {
public:
  /// `clock`'s wall() stamps the conditions written; it must outlive the writer.
  explicit pod_writer(k8sclient::client& c, base::clock& clock = *base::real_clock());

  /// DELETE with preconditions.uid. 2xx, 404 and 409 are outcomes; any other status or a
  /// transport failure is an error value (status, and the server's Status message).
  boost::asio::awaitable<base::result<delete_outcome>> delete_pod(
      std::string ns, std::string name, std::string uid, std::function<bool()> cancelled = {});

  /// Adds the DisruptionTarget condition (see make_disruption_condition_request) with
  /// lastTransitionTime now, or, with `keep_transition_time`, without one (the pod's own is
  /// kept: its condition is already True). Whether to patch at all is the caller's decision
  /// (k8s_eviction_sink reads the cached pod instead of GETting it as upstream does).
  boost::asio::awaitable<base::result<patch_outcome>> add_disruption_condition(
      std::string ns, std::string name, std::string uid, std::function<bool()> cancelled = {},
      bool keep_transition_time = false, std::optional<std::int64_t> observed_generation = {});

  /// Withdraws our DisruptionTarget condition (make_disruption_withdrawal_request), with
  /// lastTransitionTime now. Outcomes and errors as add_disruption_condition's.
  boost::asio::awaitable<base::result<patch_outcome>> withdraw_disruption_condition(
      std::string ns, std::string name, std::string uid);

  /// POSTs an Eviction (make_evict_pod_request). 2xx, 429, 404 and a UID conflict are
  /// outcomes; any other status (403, another 409, 500 for a pod with several budgets) or a
  /// transport failure is an error value.
  boost::asio::awaitable<base::result<evict_answer>> evict_pod(
      std::string ns, std::string name, std::string uid, std::string api_version,
      std::function<bool()> cancelled = {});

  /// GET /api/v1 and the Eviction API's group/version in it (eviction_version_in_discovery).
  boost::asio::awaitable<base::result<std::string>> discover_eviction_version();

  /// Whether the server's pod conditions have observedGeneration: GET openapi_v3_core_path
  /// (404: no OpenAPI v3, so no such field: false) and
  /// condition_schema_has_observed_generation(). Discovered from the schema the server serves,
  /// not from its version: the field exists from 1.33 whatever the feature gate (a server
  /// whose gate is off drops it). Another status or an unreadable document is an error.
  boost::asio::awaitable<base::result<bool>> discover_condition_observed_generation();

private:
  k8sclient::client& client_;
  base::clock& clock_;
};

}  // namespace tec::writers

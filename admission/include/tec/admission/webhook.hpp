#pragma once

// The validating admission webhook's decision (issue 32 item 2): a Node CREATE or UPDATE that
// adds a NoExecute taint, or changes the value of one, gets one warning per such taint, the
// controller's own preview of it (controller::preview(), controller::summary()) on what the
// daemon's caches hold, with the hold-until annotations (the node's as the request leaves it,
// the pods' from the cache) judged at cluster_reader::now_unix(). It always allows, unless the
// policy's deny mode (admission_policy) is on: then a taint that would evict more pods than
// allowed, or open the storm breaker, is refused (403) unless the Node carries the acknowledgement
// annotation. Never refused: a taint removal, the node lifecycle controller's not-ready and
// unreachable taints, and any request of the node-controller service account (a partition must
// taint nodes unhindered).
//
// What the node carried before the request is read from the daemon's cache, and from the
// request's oldObject only for a node the cache does not hold yet: kube-apiserver 1.20 sends a
// Node UPDATE's oldObject equal to its object.
//
// No I/O: serve() is bytes in, an HTTP answer out. Any thread (it reads the caches through a
// cluster_reader, whose implementation must be safe for that).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/admission/review.hpp"
#include "tec/controller/model.hpp"
#include "tec/controller/policy.hpp"

namespace tec::admission {

/// The node lifecycle controller's user when kube-controller-manager runs with
/// --use-service-account-credentials (the default of kubeadm and most installers).
inline constexpr std::string_view node_controller_user =
    "system:serviceaccount:kube-system:node-controller";

/// At most this many warnings per answer (one per added taint), then one that counts the
/// rest: the API server keeps 4 KiB of warnings per request.
inline constexpr std::size_t max_warnings = 8;
/// Each warning is clipped to this many bytes (the API server truncates at 256 characters).
inline constexpr std::size_t max_warning_bytes = 250;
/// A refusal's message is clipped to this many bytes.
inline constexpr std::size_t max_message_bytes = 1024;
/// A Node carrying more NoExecute taints than this is not previewed: the answer allows it with
/// one warning saying so. Real nodes carry a handful; the bound keeps a review's cost linear in
/// the node's pods whatever a request holds (an unauthenticated caller can send 10,000).
inline constexpr std::size_t max_review_taints = 64;

/// What the decision reads of the cluster: the daemon's informer caches and the policy in
/// force. Called on the HTTP server's strand while the informers write: implementations return
/// copies taken under the caches' own short locks.
class cluster_reader {
public:
  virtual ~cluster_reader() = default;
  /// Why no preview can be made now (the caches are not synced yet), or nullopt.
  [[nodiscard]] virtual std::optional<std::string> not_ready() const = 0;
  /// The pods bound to `node`.
  [[nodiscard]] virtual std::vector<controller::pod_view> pods_on_node(
      std::string_view node) const = 0;
  /// Every node of the cluster.
  [[nodiscard]] virtual std::vector<controller::node_view> nodes() const = 0;
  /// Namespaces with the opt-out annotation.
  [[nodiscard]] virtual std::vector<std::string> opted_out_namespaces() const = 0;
  /// The policy in force (a default-constructed one: none).
  [[nodiscard]] virtual controller::eviction_policy policy() const = 0;
  /// The wall time now, seconds since the Unix epoch: the hold-until annotations (the node's,
  /// as the request leaves it, and its pods') are judged against it, as the controller does.
  [[nodiscard]] virtual std::int64_t now_unix() const = 0;
};

/// The NoExecute taints `now` carries that `before` did not carry with the same key, effect
/// and value (a changed value counts as added), each (key, value) once, in `now`'s order.
/// `before` null: a CREATE, every one of them. O(n log n) in the taints.
[[nodiscard]] std::vector<controller::taint> added_no_execute_taints(
    const controller::node_view* before, const controller::node_view& now);

/// How a review ended, for the daemon's counter.
enum class review_outcome : std::uint8_t {
  allowed,          ///< Nothing to warn about (no NoExecute taint added, or not a CREATE/UPDATE).
  warned,           ///< Allowed with the preview's warnings.
  refused,          ///< Deny mode refused it (403).
  not_ready,        ///< Allowed: the caches are not synced yet (a warning says so).
  too_many_taints,  ///< Allowed without a preview: more than max_review_taints (one warning).
  over_budget,      ///< Allowed without a warning: the budget ran out before the answer.
  malformed,        ///< 400: the body is not an AdmissionReview of a Node.
};

/// The outcome's name as the metric's label ("too_many_taints").
[[nodiscard]] std::string_view to_string(review_outcome o) noexcept;

/// Whether a review has run out of its time (checked between the previews of added taints, each
/// bounded by the node's pods). Empty: never.
using review_budget = std::function<bool()>;

/// The answer to a decoded request (see the file comment), and how it ended.
struct decision {
  review_response response;
  review_outcome outcome = review_outcome::allowed;
};
[[nodiscard]] decision decide(const review_request& request, const cluster_reader& cluster,
                              const review_budget& out_of_time = {});

/// An HTTP answer (the server adds the headers).
struct http_answer {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  review_outcome outcome = review_outcome::allowed;
};

/// An AdmissionReview body in, the answer out: 200 with the AdmissionReview, or 400 with one
/// escaped line (text/plain) saying what is wrong with the body. A review whose budget runs out
/// is answered "allowed" without warnings (the webhook's failurePolicy is Ignore anyway).
[[nodiscard]] http_answer serve(std::string_view body, const cluster_reader& cluster,
                                const review_budget& out_of_time = {});

}  // namespace tec::admission

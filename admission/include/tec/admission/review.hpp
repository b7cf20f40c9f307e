#pragma once

// AdmissionReview (admission.k8s.io/v1, and v1beta1 whose shape is the same) in and out, for
// Node requests. The API server posts a review of every Node CREATE and UPDATE the webhook
// configuration names; decode_review() keeps what the decision needs and is strict about it:
// request.uid, request.kind (a core/v1 Node), request.operation, request.object for CREATE and
// UPDATE and request.oldObject for UPDATE. The Node objects are decoded by the informers' own
// node decoder (its taints), plus the acknowledgement annotation.
//
// Bounded by the input: a body over max_review_bytes or nested deeper than max_review_depth is
// refused before anything is built from it; every error is one line, escaped
// (base::printable), at most max_error_bytes. Pure; any thread; never throws for bad input.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/controller/model.hpp"

namespace tec::admission {

/// Bodies larger than this are refused (413, before they are read). A real Node is a few KB to
/// a few tens of KB (its status lists at most 50 images; managedFields add a few KB), and an
/// UPDATE's review carries two of them: 512 KiB leaves room for ten times the largest seen,
/// while a body an attacker sends costs at most that much to read and decode.
inline constexpr std::size_t max_review_bytes = std::size_t{512} << 10U;
/// JSON nested deeper than this is refused (a Node is about 8 levels deep).
inline constexpr std::size_t max_review_depth = 64;
/// Decode errors are clipped to about this many bytes.
inline constexpr std::size_t max_error_bytes = 512;

/// The annotation by which whoever taints a node acknowledges the evictions in deny mode.
inline constexpr std::string_view acknowledge_annotation =
    "taint-eviction-controller/acknowledge-eviction";
inline constexpr std::string_view acknowledge_value = "true";

inline constexpr std::string_view api_version_v1 = "admission.k8s.io/v1";
inline constexpr std::string_view api_version_v1beta1 = "admission.k8s.io/v1beta1";

enum class operation : std::uint8_t { create, update, delete_, connect };

/// A Node of the request: its name and taints, and whether it carries the acknowledgement.
struct node_object {
  controller::node_view node;
  bool acknowledged = false;  ///< acknowledge_annotation is acknowledge_value.
};

/// What decode_review() keeps of a request.
struct review_request {
  std::string api_version;  ///< api_version_v1 or api_version_v1beta1: the answer's too.
  std::string uid;
  operation op = operation::create;
  std::string user;                       ///< request.userInfo.username; empty when absent.
  std::optional<node_object> object;      ///< CREATE and UPDATE.
  std::optional<node_object> old_object;  ///< UPDATE.
};

/// What the webhook answers.
struct review_response {
  std::string api_version{api_version_v1};
  std::string uid;
  bool allowed = true;
  /// Shown by kubectl as "Warning: ..." (the API server keeps 256 characters of each and 4 KiB
  /// in all).
  std::vector<std::string> warnings;
  /// When refused: the HTTP code (403) and the message kubectl prints.
  unsigned code = 0;
  std::string message;
};

/// The request of an AdmissionReview body, or an error (errc::malformed_json,
/// errc::unexpected_shape, errc::response_too_large) with one escaped line naming the field.
base::result<review_request> decode_review(std::string_view body);

/// The AdmissionReview answering a request (its apiVersion and uid).
std::string encode_review(const review_response& response);

}  // namespace tec::admission

#pragma once

// Delegated authentication and authorization of the secure port, as kube-controller-manager
// and controller-runtime do it: the bearer token of a request goes to the API server in a
// TokenReview (authentication.k8s.io/v1), the user it names in a SubjectAccessReview
// (authorization.k8s.io/v1) for the non-resource path and verb "get". The answers are cached
// for a short time, keyed by a SHA-256 of the token and the path (the token itself is never
// kept), and the cache has a bound (a client sending a new token with every request only
// evicts its own entries).
//
// The controller's own identity needs create on tokenreviews and subjectaccessreviews (the
// system:auth-delegator ClusterRole); a reader needs get on the non-resource URLs (deploy/
// metrics-reader ClusterRole).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/clock.hpp"
#include "tec/base/result.hpp"
#include "tec/ops/request_authorizer.hpp"

namespace tec::k8sclient {
class client;
}  // namespace tec::k8sclient

namespace tec::ops {

struct review_cache_options {
  /// How long an allowed request's decision is reused.
  std::chrono::milliseconds allowed_ttl{10'000};
  /// How long a 401 or 403 decision is reused (short: RBAC granted a moment ago soon works).
  std::chrono::milliseconds denied_ttl{2'000};
  /// Entries at most; a new one beyond evicts the oldest.
  std::size_t max_entries = 1024;
};

/// The decisions of recent (token, path) pairs. unavailable is never cached.
///
/// Thread-safety: none; its owner (delegated_authorizer) uses it on the HTTP server's strand.
/// The clock is borrowed and must outlive the cache.
class review_cache {
public:
  using key = std::string;  ///< 64 hex digits

  review_cache(base::clock& clock, review_cache_options options);

  /// SHA-256 of the token, a NUL and the path (ops::sha256_hex).
  static key key_of(std::string_view token, std::string_view path);

  /// The decision stored for `k` if it has not expired (an expired one is dropped).
  std::optional<auth_decision> find(const key& k);
  /// Stores `d` for `k` (replacing one there), with the TTL of its outcome; drops the oldest
  /// entry when full. An unavailable decision is not stored.
  void insert(const key& k, auth_decision d);
  [[nodiscard]] std::size_t size() const { return entries_.size(); }

private:
  struct entry {
    auth_decision decision;
    base::clock::time_point expires;
    std::list<key>::iterator order;
  };
  base::clock& clock_;
  const review_cache_options options_;
  std::map<key, entry> entries_;
  std::list<key> order_;  // insertion order, oldest first
};

/// The user a TokenReview names, as the SubjectAccessReview wants it.
struct reviewed_user {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
};

/// A SubjectAccessReview's answer.
struct access_verdict {
  bool allowed = false;
  std::string reason;  ///< status.reason (or evaluationError), may be empty
};

/// The API server's reviews: the seam between delegated_authorizer and the cluster.
/// Thread: called from the coroutine of delegated_authorizer::authorize (the HTTP server's
/// strand); the awaitables resume there.
class review_backend {
public:
  virtual ~review_backend() = default;
  /// TokenReview: the user, nullopt when the API server does not authenticate the token, or an
  /// error when it could not be asked.
  virtual boost::asio::awaitable<base::result<std::optional<reviewed_user>>> token_review(
      std::string token) = 0;
  /// SubjectAccessReview of `user` for verb "get" on the non-resource `path`.
  virtual boost::asio::awaitable<base::result<access_verdict>> access_review(reviewed_user user,
                                                                             std::string path) = 0;
};

/// The review bodies and answers (the JSON of authentication.k8s.io/v1 and
/// authorization.k8s.io/v1), apart from the transport.
namespace review_json {
std::string token_review_request(std::string_view token);
/// The user of an authenticated answer, nullopt when status.authenticated is false; an error
/// when the JSON is not a TokenReview.
base::result<std::optional<reviewed_user>> parse_token_review(std::string_view body);
std::string access_review_request(const reviewed_user& user, std::string_view path);
base::result<access_verdict> parse_access_review(std::string_view body);
}  // namespace review_json

/// The reviews through the daemon's API client: POST tokenreviews and subjectaccessreviews.
/// The client (borrowed, must outlive the backend) runs on `client_executor`; each review is
/// co_spawned there and awaited.
std::shared_ptr<review_backend> make_api_review_backend(
    k8sclient::client& api, boost::asio::any_io_executor client_executor);

/// request_authorizer over a review_backend and a review_cache: no token -> 401 without asking
/// anyone; otherwise the cached decision, else a TokenReview (not authenticated -> 401), then a
/// SubjectAccessReview (denied -> 403); a review that fails -> 503, not cached. At most
/// max_in_flight requests are being reviewed at once; one beyond gets 503 at once (a flood of
/// unknown tokens neither queues reviews without bound nor holds their coroutines).
///
/// Thread: authorize() on the HTTP server's strand only (the cache is not locked). Owns the
/// backend; borrows the clock, which must outlive it.
class delegated_authorizer final : public request_authorizer {
public:
  delegated_authorizer(std::shared_ptr<review_backend> backend, base::clock& clock,
                       review_cache_options options = {}, std::size_t max_in_flight = 8);
  boost::asio::awaitable<auth_decision> authorize(std::string bearer, std::string path) override;

  /// Tests: entries in the cache.
  [[nodiscard]] std::size_t cached_for_test() const { return cache_.size(); }

private:
  std::shared_ptr<review_backend> backend_;
  review_cache cache_;
  const std::size_t max_in_flight_;
  std::size_t in_flight_ = 0;
};

}  // namespace tec::ops

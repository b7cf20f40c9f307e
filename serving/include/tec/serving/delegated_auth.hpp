#pragma once

// Delegated authentication and authorization of the secure port, as kube-controller-manager
// and controller-runtime do it: the bearer token of a request goes to the API server in a
// TokenReview (authentication.k8s.io/v1), the user it names in a SubjectAccessReview
// (authorization.k8s.io/v1) for the non-resource path and verb "get". The answers are cached
// for a short time: the TokenReview's by a SHA-256 of the token, the SubjectAccessReview's by
// one of the token and the path (the token itself is never kept); every cache has a bound (a
// client sending a new token with every request only evicts its own entries).
//
// Strangers cannot crowd out the readers (a flood of random tokens once left a scraper 3
// answers out of 59): a token the API server authenticated before (within known_ttl) is
// reviewed in slots of its own when its decision has expired, while tokens never seen are
// limited per client address (a token bucket) and by their own slots; a token that is not
// visible ASCII is refused (401) without a review.
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
#include "tec/base/token_bucket.hpp"
#include "tec/serving/request_authorizer.hpp"

namespace tec::k8sclient {
class client;
}  // namespace tec::k8sclient

namespace tec::serving {

struct review_cache_options {
  /// How long an allowed request's decision (and a TokenReview's user) is reused.
  std::chrono::milliseconds allowed_ttl{10'000};
  /// How long a 401 or 403 decision is reused (short: RBAC granted a moment ago soon works).
  std::chrono::milliseconds denied_ttl{2'000};
  /// Entries at most, in each cache; a new one beyond evicts the oldest.
  std::size_t max_entries = 1024;
  /// How long a token the API server authenticated counts as known (reviewed in the known
  /// tokens' slots, not limited per address).
  std::chrono::milliseconds known_ttl{3'600'000};
  /// Reviews of tokens never seen, per client address: per second, and saved up.
  double unknown_per_second = 2;
  double unknown_burst = 10;
};

/// Values by key that expire, at most `max_entries` of them (a new key beyond drops the one
/// inserted longest ago). Thread-safety: none. The clock is borrowed and must outlive it.
template <class V>
class expiring_map {
public:
  expiring_map(base::clock& clock, std::size_t max_entries);

  /// The value stored for `k` if it has not expired (an expired one is dropped); the pointer is
  /// valid until the next insert or find.
  V* find(const std::string& k);
  /// Stores `v` for `k` until now + `ttl` (replacing one there, which then counts as new).
  V& insert(const std::string& k, V v, std::chrono::milliseconds ttl);
  [[nodiscard]] std::size_t size() const { return entries_.size(); }

private:
  struct entry {
    V value;
    base::clock::time_point expires;
    std::list<std::string>::iterator order;
  };
  void erase(typename std::map<std::string, entry>::iterator it);
  base::clock& clock_;
  std::size_t max_entries_;
  std::map<std::string, entry> entries_;
  std::list<std::string> order_;  // insertion order, oldest first
};

/// The decisions of recent (token, path) pairs. unavailable is never cached.
///
/// Thread-safety: none; its owner (delegated_authorizer) uses it on the HTTP server's strand.
/// The clock is borrowed and must outlive the cache.
class review_cache {
public:
  using key = std::string;  ///< 64 hex digits

  review_cache(base::clock& clock, review_cache_options options);

  /// SHA-256 of the token, a NUL and the path (sha256_hex).
  static key key_of(std::string_view token, std::string_view path);

  /// The decision stored for `k` if it has not expired (an expired one is dropped).
  std::optional<auth_decision> find(const key& k);
  /// Stores `d` for `k` (replacing one there), with the TTL of its outcome; drops the oldest
  /// entry when full. An unavailable decision is not stored.
  void insert(const key& k, auth_decision d);
  [[nodiscard]] std::size_t size() const { return entries_.size(); }

private:
  const review_cache_options options_;
  expiring_map<auth_decision> entries_;
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

/// request_authorizer over a review_backend and its caches: no token, or one with a byte that
/// is not visible ASCII -> 401 without asking anyone; otherwise the cached decision, else a
/// TokenReview (its user cached by token; not authenticated -> 401), then a
/// SubjectAccessReview (denied -> 403); a review that fails -> 503, not cached. Tokens
/// authenticated before (known) and tokens never seen are reviewed in separate slots, at most
/// max_in_flight each at once; one beyond gets 503 at once (a flood of unknown tokens neither
/// queues reviews without bound nor holds their coroutines, nor takes a known reader's slot),
/// and so does an unknown token from an address over its rate (unknown_per_second).
///
/// Thread: authorize() on the HTTP server's strand only (the cache is not locked). Owns the
/// backend; borrows the clock, which must outlive it.
class delegated_authorizer final : public request_authorizer {
public:
  delegated_authorizer(std::shared_ptr<review_backend> backend, base::clock& clock,
                       review_cache_options options = {}, std::size_t max_in_flight = 8);
  boost::asio::awaitable<auth_decision> authorize(std::string bearer, std::string path,
                                                  std::string peer) override;

  /// Tests: entries in the decision cache.
  [[nodiscard]] std::size_t cached_for_test() const { return cache_.size(); }

private:
  std::shared_ptr<review_backend> backend_;
  base::clock& clock_;
  const review_cache_options options_;
  review_cache cache_;
  expiring_map<reviewed_user> users_;           // by SHA-256 of the token
  expiring_map<char> known_;                    // tokens authenticated before, by SHA-256
  expiring_map<base::token_bucket> strangers_;  // unknown tokens' reviews, by client address
  const std::size_t max_in_flight_;
  std::size_t in_flight_ = 0;        // reviews of unknown tokens
  std::size_t known_in_flight_ = 0;  // reviews of known tokens
};

}  // namespace tec::serving
